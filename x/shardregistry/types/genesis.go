package types

import (
	"fmt"
	"sort"
)

// DefaultGenesis is an empty registry with default params.
func DefaultGenesis() *GenesisState {
	return &GenesisState{Params: DefaultParams(), NextReplicaId: 1}
}

// Validate checks the genesis for internal consistency: params; datasets with valid,
// unique ids whose shards are all present and whose manifest root matches them; replicas
// with unique ids below next_replica_id that point at existing pieces, at most one active
// replica per (shard, holder) and no more active holders per piece than it needs.
func (gs GenesisState) Validate() error {
	if err := gs.Params.Validate(); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	datasets := make(map[string]Dataset, len(gs.Datasets))
	for _, d := range gs.Datasets {
		if err := ValidateDatasetID(d.Id); err != nil {
			return err
		}
		if _, dup := datasets[d.Id]; dup {
			return fmt.Errorf("dataset %q: duplicate id", d.Id)
		}
		if d.Owner == "" {
			return fmt.Errorf("dataset %q: owner must be set", d.Id)
		}
		datasets[d.Id] = d
	}
	shardsOf := make(map[string][]Shard, len(datasets))
	for _, s := range gs.Shards {
		if _, ok := datasets[s.DatasetId]; !ok {
			return fmt.Errorf("shard %d: unknown dataset %q", s.Index, s.DatasetId)
		}
		shardsOf[s.DatasetId] = append(shardsOf[s.DatasetId], s)
	}
	pieceSlots := map[pieceRef]uint32{}
	for id, d := range datasets {
		shards := shardsOf[id]
		sort.Slice(shards, func(i, j int) bool { return shards[i].Index < shards[j].Index })
		if uint32(len(shards)) != d.ShardCount {
			return fmt.Errorf("dataset %q: has %d shards, shard_count says %d", id, len(shards), d.ShardCount)
		}
		var stats ManifestStats
		if d.Custody != nil {
			if err := ValidateCustody(gs.Params, d, shards); err != nil {
				return err
			}
			stats.SampleCount = 1
		} else {
			var err error
			if stats, err = ValidateManifest(gs.Params, id, d.Encoding, d.ChunkSize, d.TotalSize, shards, d.ManifestRoot); err != nil {
				return fmt.Errorf("dataset %q: %w", id, err)
			}
		}
		if stats.SampleCount != d.SampleCount {
			return fmt.Errorf("dataset %q: sample_count is %d, its shards hold %d samples", id, d.SampleCount, stats.SampleCount)
		}
		for _, s := range shards {
			for _, pc := range s.Pieces {
				pieceSlots[pieceRef{id, s.Index, pc.Index}] = d.Encoding.HoldersPerPiece()
			}
		}
	}
	seen := map[uint64]bool{}
	type shardHolder struct {
		dataset string
		shard   uint32
		holder  string
	}
	activeHolders := map[shardHolder]uint64{}
	activePerPiece := map[pieceRef]uint32{}
	for _, r := range gs.Replicas {
		if r.Id == 0 || r.Id >= gs.NextReplicaId {
			return fmt.Errorf("replica %d: id must be in [1, next_replica_id=%d)", r.Id, gs.NextReplicaId)
		}
		if seen[r.Id] {
			return fmt.Errorf("replica %d: duplicate id", r.Id)
		}
		seen[r.Id] = true
		ref := pieceRef{r.DatasetId, r.Shard, r.Piece}
		need, ok := pieceSlots[ref]
		if !ok {
			return fmt.Errorf("replica %d: no piece %d of shard %d of dataset %q", r.Id, r.Piece, r.Shard, r.DatasetId)
		}
		if r.Holder == "" {
			return fmt.Errorf("replica %d: holder must be set", r.Id)
		}
		switch r.Status {
		case REPLICA_STATUS_ACTIVE:
			if r.NextDeadline <= 0 || r.NextSeedHeight <= 0 || r.NextDeadline < r.NextSeedHeight {
				return fmt.Errorf("replica %d: an active replica needs a next seed height and a deadline after it", r.Id)
			}
			if !r.Collateral.IsValid() {
				return fmt.Errorf("replica %d: invalid collateral %s", r.Id, r.Collateral)
			}
			key := shardHolder{r.DatasetId, r.Shard, r.Holder}
			if other, dup := activeHolders[key]; dup {
				return fmt.Errorf("replica %d: %s already holds replica %d of shard %d of %q", r.Id, r.Holder, other, r.Shard, r.DatasetId)
			}
			activeHolders[key] = r.Id
			activePerPiece[ref]++
			if activePerPiece[ref] > need {
				return fmt.Errorf("replica %d: piece %d of shard %d of %q has more than the %d active holders it needs", r.Id, r.Piece, r.Shard, r.DatasetId, need)
			}
		case REPLICA_STATUS_TERMINATED:
		default:
			return fmt.Errorf("replica %d: status must be ACTIVE or TERMINATED, got %s", r.Id, r.Status)
		}
	}
	return nil
}

type pieceRef struct {
	dataset string
	shard   uint32
	piece   uint32
}
