package keeper

import (
	"context"
	"errors"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// pieceHolders is the number of active replicas of a piece.
func (k Keeper) pieceHolders(ctx context.Context, datasetID string, shard, piece uint32) (uint32, error) {
	n, err := k.PieceHolders.Get(ctx, collections.Join3(datasetID, shard, piece))
	if errors.Is(err, collections.ErrNotFound) {
		return 0, nil
	}
	return n, err
}

// shardLive is a shard's live count: pieces with at least one holder under Reed-Solomon,
// holders of its single piece under replicas. It reads at most k+m counters.
func (k Keeper) shardLive(ctx context.Context, d types.Dataset, shard uint32) (uint32, error) {
	if !d.Encoding.IsReedSolomon() {
		return k.pieceHolders(ctx, d.Id, shard, 0)
	}
	var live uint32
	for p := uint32(0); p < d.Encoding.PiecesPerShard(); p++ {
		n, err := k.pieceHolders(ctx, d.Id, shard, p)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			live++
		}
	}
	return live, nil
}

// health summarises a shard's live count against its target.
func health(d types.Dataset, shard, live uint32) types.ShardHealth {
	return types.ShardHealth{
		DatasetId: d.Id, Shard: shard, Live: live, Target: d.Encoding.Target(), MinLive: d.Encoding.MinLive(),
		Recoverable: live >= d.Encoding.MinLive(),
	}
}

// addHolder records a new active replica of a piece: the holder now holds a piece of the
// shard, the piece gains a holder (its slot closes when full) and the shard leaves the
// under-replicated set when it reaches its target. It returns the piece's holder count.
func (k Keeper) addHolder(ctx context.Context, d types.Dataset, shard, piece uint32, holder []byte) (uint32, error) {
	if err := k.ShardHolders.Set(ctx, collections.Join3(d.Id, shard, holder)); err != nil {
		return 0, err
	}
	n, err := k.pieceHolders(ctx, d.Id, shard, piece)
	if err != nil {
		return 0, err
	}
	n++
	pieceKey := collections.Join3(d.Id, shard, piece)
	if err := k.PieceHolders.Set(ctx, pieceKey, n); err != nil {
		return 0, err
	}
	if n >= d.Encoding.HoldersPerPiece() {
		if err := k.OpenSlots.Remove(ctx, pieceKey); err != nil {
			return 0, err
		}
	}
	live, err := k.shardLive(ctx, d, shard)
	if err != nil {
		return 0, err
	}
	if live >= d.Encoding.Target() {
		shardKey := collections.Join(d.Id, shard)
		was, err := k.UnderReplicated.Has(ctx, shardKey)
		if err != nil {
			return 0, err
		}
		if was {
			if err := k.UnderReplicated.Remove(ctx, shardKey); err != nil {
				return 0, err
			}
			if err := keeperutil.Emit(ctx, &types.EventShardFullyReplicated{DatasetId: d.Id, Shard: shard, Target: d.Encoding.Target()}); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// removeHolder undoes addHolder when a replica ends (released, terminated). The piece's
// slot reopens (EventRepairSlotOpened) and, if the shard's live count fell below its
// target, EventShardUnderReplicated says how far.
func (k Keeper) removeHolder(ctx context.Context, d types.Dataset, shard types.Shard, piece uint32, holder []byte) error {
	if err := k.ShardHolders.Remove(ctx, collections.Join3(d.Id, shard.Index, holder)); err != nil {
		return err
	}
	liveBefore, err := k.shardLive(ctx, d, shard.Index)
	if err != nil {
		return err
	}
	n, err := k.pieceHolders(ctx, d.Id, shard.Index, piece)
	if err != nil {
		return err
	}
	pieceKey := collections.Join3(d.Id, shard.Index, piece)
	if n <= 1 {
		n = 0
		err = k.PieceHolders.Remove(ctx, pieceKey)
	} else {
		n--
		err = k.PieceHolders.Set(ctx, pieceKey, n)
	}
	if err != nil {
		return err
	}
	if err := k.OpenSlots.Set(ctx, pieceKey); err != nil {
		return err
	}
	pc := shard.Pieces[piece]
	if err := keeperutil.Emit(ctx, &types.EventRepairSlotOpened{
		DatasetId: d.Id, Shard: shard.Index, Piece: piece, PieceRoot: pc.Root, PieceCid: types.PieceCID(pc.Root),
		PieceSize: pc.SizeBytes, LiveHolders: n, RequiredHolders: d.Encoding.HoldersPerPiece(),
	}); err != nil {
		return err
	}
	live, err := k.shardLive(ctx, d, shard.Index)
	if err != nil {
		return err
	}
	if live < d.Encoding.Target() {
		if err := k.UnderReplicated.Set(ctx, collections.Join(d.Id, shard.Index)); err != nil {
			return err
		}
		if live < liveBefore {
			h := health(d, shard.Index, live)
			if err := keeperutil.Emit(ctx, &types.EventShardUnderReplicated{
				DatasetId: d.Id, Shard: shard.Index, Live: h.Live, Target: h.Target, MinLive: h.MinLive, Recoverable: h.Recoverable,
			}); err != nil {
				return err
			}
		}
	}
	return nil
}
