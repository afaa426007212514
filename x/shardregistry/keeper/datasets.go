package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// registerDataset checks a dataset's manifest against its root and stores the dataset
// and its shards, every piece with an open slot and every shard under its target
// (MsgRegisterDataset).
func (k Keeper) registerDataset(ctx sdk.Context, msg *types.MsgRegisterDataset) (types.Dataset, error) {
	if err := types.ValidateDatasetID(msg.DatasetId); err != nil {
		return types.Dataset{}, err
	}
	if err := types.ValidateName(msg.Name); err != nil {
		return types.Dataset{}, err
	}
	if types.IsCustodyDatasetID(msg.DatasetId) {
		return types.Dataset{}, errorsmod.Wrapf(types.ErrInvalidDataset, "dataset ids beginning with %q, %q or %q are reserved for custody objects, got %q",
			types.CustodyIDPrefix, markettypes.PseudoGradientCustodyPrefix, markettypes.GlobalCustodyPrefix, msg.DatasetId)
	}
	exists, err := k.Datasets.Has(ctx, msg.DatasetId)
	if err != nil {
		return types.Dataset{}, err
	}
	if exists {
		return types.Dataset{}, errorsmod.Wrapf(types.ErrDatasetExists, "dataset %q is already registered; choose another id", msg.DatasetId)
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Dataset{}, err
	}
	// Validate a copy: validation fills in chunk counts, and the message stays as sent.
	shards := make([]types.Shard, len(msg.Shards))
	for i, s := range msg.Shards {
		s.Pieces = append([]types.Piece(nil), s.Pieces...)
		shards[i] = s
	}
	stats, err := types.ValidateManifest(params, msg.DatasetId, msg.Encoding, msg.ChunkSize, msg.TotalSize, shards, msg.ManifestRoot)
	if err != nil {
		return types.Dataset{}, err
	}
	for i := range shards {
		shards[i].DatasetId = msg.DatasetId
	}
	// Recomputing the manifest root hashes every leaf once and about as many nodes.
	ctx.GasMeter().ConsumeGas(params.GasPerHash*2*stats.Leaves+params.GasPerByte*stats.Bytes, "manifest root")

	d := types.Dataset{
		Id: msg.DatasetId, Owner: msg.Owner, Name: msg.Name, ManifestRoot: msg.ManifestRoot, Encoding: msg.Encoding,
		ChunkSize: msg.ChunkSize, TotalSize: msg.TotalSize, ShardCount: uint32(len(shards)), SampleCount: stats.SampleCount,
		CreatedHeight: ctx.BlockHeight(),
	}
	if err := k.Datasets.Set(ctx, d.Id, d); err != nil {
		return types.Dataset{}, err
	}
	for _, s := range shards {
		if err := k.Shards.Set(ctx, collections.Join(d.Id, s.Index), s); err != nil {
			return types.Dataset{}, err
		}
		// Every piece starts with an open slot and every shard under its target.
		for _, pc := range s.Pieces {
			if err := k.OpenSlots.Set(ctx, collections.Join3(d.Id, s.Index, pc.Index)); err != nil {
				return types.Dataset{}, err
			}
		}
		if err := k.UnderReplicated.Set(ctx, collections.Join(d.Id, s.Index)); err != nil {
			return types.Dataset{}, err
		}
	}
	return d, nil
}

// updateParams replaces the params; only the authority may (MsgUpdateParams).
func (k Keeper) updateParams(ctx context.Context, msg *types.MsgUpdateParams) error {
	if msg.Authority != k.authority {
		return errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", k.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return keeperutil.WrapCause(types.ErrInvalidParams, err, "")
	}
	return k.Params.Set(ctx, msg.Params)
}
