package keeper

import (
	"context"
	"time"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/x/internal/deadline"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// CheckCustodySpec checks a job spec's custody section against the params (x/market
// asks before it stores a job).
func (k Keeper) CheckCustodySpec(ctx context.Context, spec markettypes.CustodySpec) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	return params.CheckCustodySpec(spec)
}

// CustodyStorageBudget is what a job with this custody section reserves from its deposit
// for its holders (x/market asks at MsgSubmitJob; see Params.CustodyStorageBudget).
func (k Keeper) CustodyStorageBudget(ctx context.Context, spec markettypes.CustodySpec) (math.Int, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return math.Int{}, err
	}
	return params.CustodyStorageBudget(spec), nil
}

// payCustodyHolder pays a custody piece's holder for a period it just proved: the fee per
// piece and period, from the job's storage escrow through x/market. A holder that misses a
// period is never here, so it gets nothing for it. A storage escrow that has run out pays
// what is left (the owner's bound holds); the proof still counts.
func (k Keeper) payCustodyHolder(ctx context.Context, params types.Params, d types.Dataset, holder string) error {
	if d.Custody == nil || params.CustodyStorageFeePerPiecePeriod == 0 {
		return nil
	}
	addr, err := k.addressCodec.StringToBytes(holder)
	if err != nil {
		return err
	}
	_, err = k.marketKeeper.PayStorage(ctx, d.Custody.JobId, addr, math.NewIntFromUint64(params.CustodyStorageFeePerPiecePeriod))
	return err
}

// RegisterCustody registers a checkpoint's state as a custody object (x/verify, on
// MsgSubmitCheckpoint of a job with a custody section): a dataset named
// CustodyDatasetID(lease, index), owned by the job's owner, with one shard cut by
// pkg/custody's layout of stateSize bytes into (at most) dataPieces + parityPieces pieces
// whose roots are pieceRoots. The data pieces' roots must make info.StateRoot. Every piece
// starts with an open slot, which any bonded provider but the trainer may claim. It
// returns the dataset. Nothing is written unless everything checks.
func (k Keeper) RegisterCustody(ctx context.Context, owner string, info types.CustodyInfo, stateSize uint64, dataPieces, parityPieces uint32, pieceRoots [][]byte) (types.Dataset, error) {
	return k.registerCustodyObject(ctx, types.CustodyDatasetID(info.LeaseId, info.CheckpointIndex), owner, info, stateSize, dataPieces, parityPieces, pieceRoots)
}

// RegisterRoundCustody registers a sync job's round file (a pseudo-gradient or a global
// state, x/market names it id) as a custody object exactly as a checkpoint's state:
// lease and round stand in the checkpoint's lease and index, and trainer (the worker or
// aggregator that made the file) may not hold a piece.
func (k Keeper) RegisterRoundCustody(ctx context.Context, id, owner, trainer string, jobID, leaseID, round uint64, root []byte, size uint64, dataPieces, parityPieces uint32, retainSeconds uint64, pieceRoots [][]byte) error {
	_, err := k.registerCustodyObject(ctx, id, owner, types.CustodyInfo{
		JobId: jobID, LeaseId: leaseID, CheckpointIndex: round, Trainer: trainer, StateRoot: root, RetainSeconds: retainSeconds,
	}, size, dataPieces, parityPieces, pieceRoots)
	return err
}

func (k Keeper) registerCustodyObject(ctx context.Context, id, owner string, info types.CustodyInfo, stateSize uint64, dataPieces, parityPieces uint32, pieceRoots [][]byte) (types.Dataset, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Dataset{}, err
	}
	if stateSize > params.CustodyMaxStateSize {
		return types.Dataset{}, errorsmod.Wrapf(types.ErrInvalidCustody, "state_size %d is above custody_max_state_size %d", stateSize, params.CustodyMaxStateSize)
	}
	l, err := custody.NewLayout(stateSize, dataPieces, parityPieces)
	if err != nil {
		return types.Dataset{}, keeperutil.WrapCause(types.ErrInvalidCustody, err, "")
	}
	if err := custody.CheckRoots(l, info.StateRoot, pieceRoots); err != nil {
		return types.Dataset{}, keeperutil.WrapCause(types.ErrInvalidCustody, err, "")
	}
	exists, err := k.Datasets.Has(ctx, id)
	if err != nil {
		return types.Dataset{}, err
	}
	if exists {
		return types.Dataset{}, errorsmod.Wrapf(types.ErrDatasetExists, "custody object %q is already registered", id)
	}
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	// Checking the data roots hashes about 2 × data pieces nodes.
	sdkCtx.GasMeter().ConsumeGas(params.GasPerHash*2*uint64(l.DataPieces), "custody roots")

	info.PieceSize = l.PieceSize
	enc := types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: l.DataPieces, ParityPieces: l.ParityPieces}
	shards := types.CustodyShards(id, l, pieceRoots)
	root := types.ManifestRoot(enc, custody.ChunkSize, stateSize, shards)
	d := types.Dataset{
		Id: id, Owner: owner, Name: "checkpoint state", ManifestRoot: root[:], Encoding: enc,
		ChunkSize: custody.ChunkSize, TotalSize: stateSize, ShardCount: 1, SampleCount: 1,
		CreatedHeight: sdkCtx.BlockHeight(), Custody: &info,
	}
	if err := k.Datasets.Set(ctx, id, d); err != nil {
		return types.Dataset{}, err
	}
	if err := k.Shards.Set(ctx, collections.Join(id, uint32(0)), shards[0]); err != nil {
		return types.Dataset{}, err
	}
	for _, pc := range shards[0].Pieces {
		if err := k.OpenSlots.Set(ctx, collections.Join3(id, uint32(0), pc.Index)); err != nil {
			return types.Dataset{}, err
		}
	}
	if err := k.UnderReplicated.Set(ctx, collections.Join(id, uint32(0))); err != nil {
		return types.Dataset{}, err
	}
	err = keeperutil.Emit(ctx, &types.EventCustodyRegistered{
		DatasetId: id, JobId: info.JobId, LeaseId: info.LeaseId, CheckpointIndex: info.CheckpointIndex, Trainer: info.Trainer,
		DataPieces: l.DataPieces, ParityPieces: l.ParityPieces, PieceSize: l.PieceSize, StateSize: stateSize,
	})
	return d, err
}

// CustodyHolders is how many pieces of a custody object have an active holder (each of
// which proved its piece when it claimed it and keeps proving it every period) and how
// many the state needs to be rebuilt (its data pieces). x/verify finalizes a checkpoint
// only once live ≥ needed.
func (k Keeper) CustodyHolders(ctx context.Context, id string) (live, needed uint32, err error) {
	d, err := k.GetDataset(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	if d.Custody == nil {
		return 0, 0, errorsmod.Wrapf(types.ErrInvalidCustody, "dataset %q is not a custody object", id)
	}
	live, err = k.shardLive(ctx, d, 0)
	return live, d.Encoding.DataPieces, err
}

// ReleaseCustodyNow schedules custody object id's release at this block's time (x/verify,
// for a withheld or rejected checkpoint: nobody resumes from it, so nobody pays to keep
// it). The release runs in EndBlock within the per-block cap.
func (k Keeper) ReleaseCustodyNow(ctx context.Context, id string) error {
	return k.scheduleCustodyRelease(ctx, id, false)
}

// ReleaseCustodyAfterRetention schedules custody object id's release at this block's time
// plus the job's retain_checkpoints (x/verify, for a final checkpoint superseded by a
// later final one of the same lease, or the one that completed its job).
func (k Keeper) ReleaseCustodyAfterRetention(ctx context.Context, id string) error {
	return k.scheduleCustodyRelease(ctx, id, true)
}

// scheduleCustodyRelease sets when custody object id's retention ends, replacing an
// earlier schedule; an unknown (already released) object is left alone.
func (k Keeper) scheduleCustodyRelease(ctx context.Context, id string, retain bool) error {
	d, found, err := keeperutil.Optional(k.Datasets.Get(ctx, id))
	if err != nil || !found || d.Custody == nil {
		return err
	}
	at := sdk.UnwrapSDKContext(ctx).BlockTime()
	if retain {
		at = at.Add(time.Duration(d.Custody.RetainSeconds) * time.Second)
	}
	if d.Custody.ReleaseAtUnixNanos != 0 {
		if err := k.CustodyReleases.Remove(ctx, collections.Join(d.Custody.ReleaseAtUnixNanos, id)); err != nil {
			return err
		}
	}
	d.Custody.ReleaseAtUnixNanos = at.UnixNano()
	if err := k.Datasets.Set(ctx, id, d); err != nil {
		return err
	}
	return k.CustodyReleases.Set(ctx, collections.Join(d.Custody.ReleaseAtUnixNanos, id))
}

// releaseDueCustody releases up to limit custody objects whose retention ended by now,
// oldest first, each in its own cache (one that fails is logged and dropped). It returns
// how many it took off the index.
func (k Keeper) releaseDueCustody(ctx sdk.Context, limit int) (int, error) {
	due, err := deadline.Due(ctx, k.CustodyReleases, collections.Join(ctx.BlockTime().UnixNano(), string(rune(0x10FFFF))), limit)
	if err != nil {
		return 0, err
	}
	for _, key := range due {
		if err := k.CustodyReleases.Remove(ctx, key); err != nil {
			return 0, err
		}
		cacheCtx, write := ctx.CacheContext()
		if err := k.releaseCustody(cacheCtx, key.K2()); err != nil {
			k.Logger(ctx).Error("custody release failed", "dataset", key.K2(), "err", err)
			continue
		}
		write()
	}
	return len(due), nil
}

// releaseCustody ends a custody object: every active replica's collateral is unlocked and
// its challenges stop, and the object's records (dataset, shard, replicas, holder counts,
// open slots) are deleted, so nothing about it stays in state. Its cost is the object's
// replicas: at most max_pieces_per_shard live ones plus those repair replaced.
func (k Keeper) releaseCustody(ctx sdk.Context, id string) error {
	d, err := k.GetDataset(ctx, id)
	if err != nil {
		return err
	}
	if d.Custody == nil {
		return errorsmod.Wrapf(types.ErrInvalidCustody, "dataset %q is not a custody object", id)
	}
	iter, err := k.Replicas.Indexes.Dataset.MatchExact(ctx, id)
	if err != nil {
		return err
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return err
	}
	var released uint32
	for _, rid := range ids {
		r, err := k.GetReplica(ctx, rid)
		if err != nil {
			return err
		}
		if r.Status == types.REPLICA_STATUS_ACTIVE {
			holder, err := k.addressCodec.StringToBytes(r.Holder)
			if err != nil {
				return err
			}
			if _, err := k.providerKeeper.UnlockCollateral(ctx, holder, types.ReplicaCollateralRef(r.Id)); err != nil {
				return err
			}
			if r.NextDeadline != 0 {
				if err := k.Deadlines.Remove(ctx, collections.Join(r.NextDeadline, r.Id)); err != nil {
					return err
				}
			}
			if err := k.ShardHolders.Remove(ctx, collections.Join3(id, r.Shard, holder)); err != nil {
				return err
			}
			released++
		}
		if err := k.Replicas.Remove(ctx, rid); err != nil {
			return err
		}
	}
	shard, err := k.GetShard(ctx, id, 0)
	if err != nil {
		return err
	}
	for _, pc := range shard.Pieces {
		key := collections.Join3(id, uint32(0), pc.Index)
		if err := k.PieceHolders.Remove(ctx, key); err != nil {
			return err
		}
		if err := k.OpenSlots.Remove(ctx, key); err != nil {
			return err
		}
	}
	if err := k.UnderReplicated.Remove(ctx, collections.Join(id, uint32(0))); err != nil {
		return err
	}
	if err := k.Shards.Remove(ctx, collections.Join(id, uint32(0))); err != nil {
		return err
	}
	if err := k.Datasets.Remove(ctx, id); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventCustodyReleased{
		DatasetId: id, JobId: d.Custody.JobId, LeaseId: d.Custody.LeaseId, CheckpointIndex: d.Custody.CheckpointIndex, ReplicasReleased: released,
	})
}
