package keeper

import (
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// checkCustodyFields checks a checkpoint's custody fields against its job before
// anything is written: a job with a custody section (adjudicable only) needs the state's
// size and one root per piece of pkg/custody's layout, the data pieces' roots making
// state_root; any other job must send neither.
func checkCustodyFields(job markettypes.Job, msg *types.MsgSubmitCheckpoint) error {
	spec := job.Spec.Custody
	if spec == nil || !job.Spec.Workload.Kind.Adjudicable() {
		if msg.StateSize != 0 || len(msg.PieceRoots) != 0 {
			return errorsmod.Wrapf(types.ErrInvalidCheckpoint, "job %d has no custody section (or is not adjudicable): state_size and piece_roots must be empty", job.Id)
		}
		return nil
	}
	l, err := custody.NewLayout(msg.StateSize, spec.DataPieces, spec.ParityPieces)
	if err != nil {
		return errorsmod.Wrapf(types.ErrInvalidCheckpoint, "custody: state_size %d: %v", msg.StateSize, err)
	}
	if err := custody.CheckRoots(l, msg.StateRoot, msg.PieceRoots); err != nil {
		return errorsmod.Wrapf(types.ErrInvalidCheckpoint, "custody: %v", err)
	}
	return nil
}

// registerCustody hands a checked checkpoint's pieces to x/shardregistry and sets the
// checkpoint's custody fields: finality will wait for the pieces' holders until
// custody_deadline.
func (k Keeper) registerCustody(ctx sdk.Context, params types.Params, job markettypes.Job, msg *types.MsgSubmitCheckpoint, cp *types.Checkpoint) error {
	spec := job.Spec.Custody
	if spec == nil || !job.Spec.Workload.Kind.Adjudicable() {
		return nil
	}
	d, err := k.shardKeeper.RegisterCustody(ctx, job.Owner, shardtypes.CustodyInfo{
		JobId: job.Id, LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, Trainer: cp.Provider, StateRoot: cp.StateRoot,
		RetainSeconds: uint64(spec.RetainCheckpoints.Seconds()),
	}, msg.StateSize, spec.DataPieces, spec.ParityPieces, msg.PieceRoots)
	if err != nil {
		return err
	}
	cp.CustodyId = d.Id
	cp.StateSize = msg.StateSize
	cp.CustodyDeadline = cp.ChallengeDeadline + int64(params.CustodyGraceBlocks)
	return nil
}

// custodyReady says whether a checkpoint's state is held well enough to be final: always
// for a checkpoint without custody, else once as many pieces as the state's data pieces
// have an active holder that proved its piece. A checkpoint short of them past its
// custody_deadline is withheld (its trainer did not hand out the state); before it, it is
// looked at again custody_recheck_blocks later.
func (k Keeper) custodyReady(ctx sdk.Context, params types.Params, cp types.Checkpoint) (ready bool, err error) {
	if cp.CustodyId == "" {
		return true, nil
	}
	live, needed, err := k.shardKeeper.CustodyHolders(ctx, cp.CustodyId)
	if err != nil {
		return false, err
	}
	if live >= needed {
		return true, nil
	}
	if ctx.BlockHeight() >= cp.CustodyDeadline {
		return false, k.withhold(ctx, cp, fmt.Sprintf("only %d of the %d pieces checkpoint %d/%d needs were claimed and proven by storage holders by its custody deadline %d",
			live, needed, cp.LeaseId, cp.Index, cp.CustodyDeadline))
	}
	next := min(ctx.BlockHeight()+int64(params.CustodyRecheckBlocks), cp.CustodyDeadline)
	return false, k.CustodyQueue.Set(ctx, collections.Join3(next, cp.LeaseId, cp.Index))
}
