package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
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
	id := types.CustodyDatasetID(info.LeaseId, info.CheckpointIndex)
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
