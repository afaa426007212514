package keeper

import (
	"context"
	"sort"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// InitGenesis loads the registry. The deadline index, the custody release index (from
// each custody object's release_at_unix_nanos) and the durability bookkeeping
// (shard holders, piece holder counts, open slots, under-replicated shards) are derived
// data: they are rebuilt from the datasets and active replicas, not imported.
func (k Keeper) InitGenesis(ctx context.Context, gs *types.GenesisState) error {
	if err := k.Params.Set(ctx, gs.Params); err != nil {
		return err
	}
	datasets := make(map[string]types.Dataset, len(gs.Datasets))
	for _, d := range gs.Datasets {
		if err := k.Datasets.Set(ctx, d.Id, d); err != nil {
			return err
		}
		datasets[d.Id] = d
		if d.Custody != nil && d.Custody.ReleaseAtUnixNanos != 0 {
			if err := k.CustodyReleases.Set(ctx, collections.Join(d.Custody.ReleaseAtUnixNanos, d.Id)); err != nil {
				return err
			}
		}
	}
	// collections.Triple holds pointers, so the map is keyed by a plain struct.
	type pieceRef struct {
		dataset      string
		shard, piece uint32
	}
	pieceCounts := map[pieceRef]uint32{}
	for _, s := range gs.Shards {
		if err := k.Shards.Set(ctx, collections.Join(s.DatasetId, s.Index), s); err != nil {
			return err
		}
	}
	for _, r := range gs.Replicas {
		if err := k.Replicas.Set(ctx, r.Id, r); err != nil {
			return err
		}
		if r.Status != types.REPLICA_STATUS_ACTIVE {
			continue
		}
		holder, err := k.addressCodec.StringToBytes(r.Holder)
		if err != nil {
			return err
		}
		if err := k.ShardHolders.Set(ctx, collections.Join3(r.DatasetId, r.Shard, holder)); err != nil {
			return err
		}
		if err := k.Deadlines.Set(ctx, collections.Join(r.NextDeadline, r.Id)); err != nil {
			return err
		}
		pieceCounts[pieceRef{r.DatasetId, r.Shard, r.Piece}]++
	}
	// Sorted writes keep the import deterministic whatever the map order.
	keys := make([]pieceRef, 0, len(pieceCounts))
	for key := range pieceCounts {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.dataset != b.dataset {
			return a.dataset < b.dataset
		}
		if a.shard != b.shard {
			return a.shard < b.shard
		}
		return a.piece < b.piece
	})
	for _, key := range keys {
		if err := k.PieceHolders.Set(ctx, collections.Join3(key.dataset, key.shard, key.piece), pieceCounts[key]); err != nil {
			return err
		}
	}
	for _, s := range gs.Shards {
		d := datasets[s.DatasetId]
		var live uint32
		for _, pc := range s.Pieces {
			n := pieceCounts[pieceRef{s.DatasetId, s.Index, pc.Index}]
			if n < d.Encoding.HoldersPerPiece() {
				if err := k.OpenSlots.Set(ctx, collections.Join3(s.DatasetId, s.Index, pc.Index)); err != nil {
					return err
				}
			}
			if d.Encoding.IsReedSolomon() {
				if n > 0 {
					live++
				}
			} else {
				live += n
			}
		}
		if live < d.Encoding.Target() {
			if err := k.UnderReplicated.Set(ctx, collections.Join(s.DatasetId, s.Index)); err != nil {
				return err
			}
		}
	}
	return k.NextReplicaID.Set(ctx, gs.NextReplicaId)
}

// ExportGenesis writes out the registry: params, datasets, shards, replicas and the
// replica id counter.
func (k Keeper) ExportGenesis(ctx context.Context) (*types.GenesisState, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	gs := &types.GenesisState{Params: params}
	if err := k.Datasets.Walk(ctx, nil, func(_ string, d types.Dataset) (bool, error) {
		gs.Datasets = append(gs.Datasets, d)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Shards.Walk(ctx, nil, func(_ collections.Pair[string, uint32], s types.Shard) (bool, error) {
		gs.Shards = append(gs.Shards, s)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Replicas.Walk(ctx, nil, func(_ uint64, r types.Replica) (bool, error) {
		gs.Replicas = append(gs.Replicas, r)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if gs.NextReplicaId, err = k.NextReplicaID.Peek(ctx); err != nil {
		return nil, err
	}
	return gs, nil
}
