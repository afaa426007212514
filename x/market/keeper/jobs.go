package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// submitJob escrows a new job's deposit, stores the job and opens its first auction
// (MsgSubmitJob).
func (k Keeper) submitJob(ctx sdk.Context, owner sdk.AccAddress, msg *types.MsgSubmitJob) (types.Job, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Job{}, err
	}
	if err := msg.Spec.ValidateWithParams(params); err != nil {
		return types.Job{}, err
	}
	if err := k.checkAdjudicable(ctx, msg.Spec); err != nil {
		return types.Job{}, err
	}
	if err := k.checkRoundDataset(ctx, msg.Spec); err != nil {
		return types.Job{}, err
	}
	spec := withCustodyDefault(msg.Spec.WithAuditDefault(), params)
	storageBudget := math.ZeroInt()
	if spec.Custody != nil && k.custody.keeper != nil {
		if err := k.custody.keeper.CheckCustodySpec(ctx, *spec.Custody); err != nil {
			return types.Job{}, err
		}
		if storageBudget, err = k.custody.keeper.CustodyStorageBudget(ctx, *spec.Custody); err != nil {
			return types.Job{}, err
		}
	}
	if err := validateDeposit(msg.Deposit, params); err != nil {
		return types.Job{}, err
	}
	zero := sdk.NewCoin(params.Denom, math.ZeroInt())
	job := types.Job{
		Owner:              msg.Owner,
		Spec:               spec,
		CreatedHeight:      ctx.BlockHeight(),
		Escrow:             msg.Deposit,
		Deposited:          msg.Deposit,
		AuditFees:          zero,
		Compensation:       zero,
		CapPricePerGpuHour: zero,
		StorageEscrow:      zero,
		StorageFees:        zero,
	}
	// Checked before any coin moves, so a refused job changes nothing.
	if err := reserveStorage(&job, storageBudget); err != nil {
		return types.Job{}, err
	}
	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, owner, types.ModuleName, sdk.NewCoins(msg.Deposit)); err != nil {
		return types.Job{}, errorsmod.Wrapf(err, "escrowing deposit %s", msg.Deposit)
	}
	id, err := k.NextJobID.Next(ctx)
	if err != nil {
		return types.Job{}, err
	}
	job.Id = id
	job.Seed = k.jobSeed(ctx, id)
	if err := k.openAuction(ctx, &job, nil); err != nil {
		return types.Job{}, err
	}
	return job, nil
}

// withCustodyDefault gives an adjudicable job without a custody section the params'
// default_custody (unless it is off): every checkpoint state of such a job is then
// erasure-coded and held by storage holders. A spec cannot opt out while the default is on;
// it may state its own piece counts and retention within x/shardregistry's bounds. Other
// workloads (containers) have no state the chain can bind to pieces and stay without.
func withCustodyDefault(spec types.JobSpec, params types.Params) types.JobSpec {
	if spec.Custody != nil || !spec.Workload.Kind.Adjudicable() || params.DefaultCustody.CustodyOff() {
		return spec
	}
	c := params.DefaultCustody
	spec.Custody = &c
	return spec
}

// checkAdjudicable refuses an adjudicable job whose step the referee could not re-execute:
// its checkpoints could never be disputed, so the owner would pay for unverifiable work.
func (k Keeper) checkAdjudicable(ctx sdk.Context, spec types.JobSpec) error {
	if !spec.Workload.Kind.Adjudicable() || k.referee.source == nil {
		return nil
	}
	cfg, err := spec.ExactConfig()
	if err != nil {
		return err
	}
	if err := k.referee.source.CheckAdjudicable(ctx, cfg); err != nil {
		return errorsmod.Wrap(types.ErrInvalidSpec, err.Error())
	}
	return nil
}

// checkRoundDataset refuses a sync job on a dataset that is not registered or has fewer
// shards than the job has workers: every round assigns the dataset's shards among the
// slots (x/shardregistry AssignRoundShards), and a slot a round gives no shard sits that
// round out, so fewer shards than slots would idle a slot in every round. (A job without
// rounds is not checked here: its bidders check its data is fetchable.)
func (k Keeper) checkRoundDataset(ctx context.Context, spec types.JobSpec) error {
	if spec.Sync == nil || spec.DatasetId == "" {
		return nil
	}
	if k.custody.keeper == nil {
		return errorsmod.Wrap(types.ErrInvalidSpec, "dataset: no shard registry to read the dataset's shards from")
	}
	n, err := k.custody.keeper.DatasetShardCount(ctx, spec.DatasetId)
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return err
		}
		return errorsmod.Wrapf(types.ErrInvalidSpec, "dataset: %v", err)
	}
	if n < spec.Workers {
		return errorsmod.Wrapf(types.ErrInvalidSpec, "dataset: %q has %d shards and a sync job assigns them among its %d workers every round: it needs at least one shard per worker", spec.DatasetId, n, spec.Workers)
	}
	return nil
}

func validateDeposit(c sdk.Coin, params types.Params) error {
	if !c.IsValid() || !c.IsPositive() {
		return errorsmod.Wrapf(types.ErrInvalidDeposit, "deposit must be a positive coin, got %s", c)
	}
	if c.Denom != params.Denom {
		return errorsmod.Wrapf(types.ErrInvalidDeposit, "deposit must be in %s, got %s", params.Denom, c.Denom)
	}
	if c.IsLT(params.MinDeposit) {
		return errorsmod.Wrapf(types.ErrInvalidDeposit, "deposit %s is below the minimum %s", c, params.MinDeposit)
	}
	return nil
}

// cancelJob closes a job at its owner's request, refunding what is left of its escrow
// (MsgCancelJob).
func (k Keeper) cancelJob(ctx sdk.Context, msg *types.MsgCancelJob) (sdk.Coin, error) {
	job, err := k.GetJob(ctx, msg.JobId)
	if err != nil {
		return sdk.Coin{}, err
	}
	if job.Owner != msg.Owner {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrNotJobOwner, "job %d belongs to %s, not %s", job.Id, job.Owner, msg.Owner)
	}
	if job.State.IsTerminal() {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrJobClosed, "job %d is already %s", job.Id, job.State)
	}
	return k.closeJob(ctx, &job, types.JOB_STATE_CANCELLED, types.LEASE_CLOSE_REASON_CANCELLED, "cancelled by owner")
}

// topUpDeposit adds to a live job's escrow (MsgTopUpDeposit) and returns the job as it is
// now.
func (k Keeper) topUpDeposit(ctx sdk.Context, depositor sdk.AccAddress, msg *types.MsgTopUpDeposit) (types.Job, error) {
	job, err := k.GetJob(ctx, msg.JobId)
	if err != nil {
		return types.Job{}, err
	}
	if job.State.IsTerminal() {
		return types.Job{}, errorsmod.Wrapf(types.ErrJobClosed, "job %d is %s", job.Id, job.State)
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Job{}, err
	}
	if !msg.Amount.IsValid() || !msg.Amount.IsPositive() || msg.Amount.Denom != params.Denom {
		return types.Job{}, errorsmod.Wrapf(types.ErrInvalidDeposit, "amount must be a positive amount of %s, got %s", params.Denom, msg.Amount)
	}
	// The transfer is the last check that can fail, so it comes before the first write.
	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, depositor, types.ModuleName, sdk.NewCoins(msg.Amount)); err != nil {
		return types.Job{}, errorsmod.Wrapf(err, "topping up job %d with %s", job.Id, msg.Amount)
	}
	// A job the escrow could not carry to its next checkpoint fails at this block's end
	// unless the top-up covers it: the deadline is recomputed from the new balance.
	job.Escrow = job.Escrow.Add(msg.Amount)
	job.Deposited = job.Deposited.Add(msg.Amount)
	if err := k.scheduleTimeDeadline(ctx, &job); err != nil {
		return types.Job{}, err
	}
	if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
		return types.Job{}, err
	}
	return job, nil
}

// updateParams replaces the params; only the authority may (MsgUpdateParams).
func (k Keeper) updateParams(ctx context.Context, msg *types.MsgUpdateParams) error {
	if msg.Authority != k.authority {
		return errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", k.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return keeperutil.WrapCause(types.ErrInvalidParams, err, "")
	}
	// A default every submit would refuse (beyond x/shardregistry's piece or retention
	// bounds) is refused here instead.
	if c := msg.Params.DefaultCustody; !c.CustodyOff() && k.custody.keeper != nil {
		if err := k.custody.keeper.CheckCustodySpec(ctx, c); err != nil {
			return keeperutil.WrapCause(types.ErrInvalidParams, err, "default_custody")
		}
	}
	return k.Params.Set(ctx, msg.Params)
}
