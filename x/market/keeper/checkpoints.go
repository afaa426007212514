package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// This file is the market's side of verified training. x/verify calls these when a
// checkpoint is submitted, becomes final, or is proven wrong; payment follows the rule
// that a provider can withdraw only what a final checkpoint covers.

// OnCheckpointSubmitted claims, for a new checkpoint ending at endStep, the pay for the
// steps it covers that no claim covers yet (types.PayForSteps at the lease's price and
// committed rate), from the job's escrow. It also moves the lease's checkpoint deadline
// forward. The returned claim is released if the checkpoint becomes final and refunded if
// it is rejected. When the escrow cannot cover the claim, or the next one, the job fails
// for escrow exhaustion at this block's end.
func (k Keeper) OnCheckpointSubmitted(ctx context.Context, leaseID, endStep uint64) (sdk.Coin, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return sdk.Coin{}, err
	}
	if lease.State != types.LEASE_STATE_ACTIVE {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrLeaseNotActive, "lease %d is %s", leaseID, lease.CloseReason)
	}
	// EndBlock closes a lease that missed its deadline, but at most max_deadlines_per_block
	// entries per block: a lease still waiting for its turn is lost all the same, and a late
	// checkpoint must not move its deadline and rescue it.
	if sdkCtx.BlockHeight() > lease.CheckpointDeadline {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrCheckpointDeadlinePassed, "lease %d had to checkpoint by height %d", leaseID, lease.CheckpointDeadline)
	}
	job, err := k.GetJob(ctx, lease.JobId)
	if err != nil {
		return sdk.Coin{}, err
	}
	if endStep > job.Spec.TotalSteps {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrInvalidAmount, "checkpoint of lease %d ends at step %d, past the job's %d steps", leaseID, endStep, job.Spec.TotalSteps)
	}
	var commit *types.RoundCommit
	if job.Spec.Sync != nil {
		c, err := k.roundOfCheckpoint(sdkCtx, job, lease, endStep)
		if err != nil {
			return sdk.Coin{}, err
		}
		commit = &c
		from := endStep - uint64(job.Spec.Sync.Every)
		lease.ClaimedStep = max(lease.ClaimedStep, from)
		setClaimedStep(&job, lease.Worker, max(claimedStepOf(job, lease.Worker), from))
	}
	claim, err := k.claimSteps(sdkCtx, &job, &lease, endStep)
	if err != nil {
		return sdk.Coin{}, err
	}
	if commit != nil {
		// Released when the round's global is final and the worker entered it (payRound).
		commit.Claim = claim
		if err := k.RoundCommits.Set(ctx, collections.Join3(commit.JobId, commit.Round, commit.Worker), *commit); err != nil {
			return sdk.Coin{}, err
		}
	}

	params, err := k.Params.Get(ctx)
	if err != nil {
		return sdk.Coin{}, err
	}
	if err := k.CheckpointDeadlines.Remove(ctx, collections.Join(lease.CheckpointDeadline, lease.Id)); err != nil {
		return sdk.Coin{}, err
	}
	lease.CheckpointDeadline = sdkCtx.BlockHeight() + int64(job.Spec.EffectiveCheckpointDeadline(params))
	if err := k.CheckpointDeadlines.Set(ctx, collections.Join(lease.CheckpointDeadline, lease.Id)); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.Leases.Set(ctx, lease.Id, lease); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.scheduleTimeDeadline(sdkCtx, &job); err != nil {
		return sdk.Coin{}, err
	}
	return claim, k.Jobs.Set(ctx, job.Id, job)
}

// OnCheckpointFinal releases a final checkpoint's claim to the provider's withdrawable
// balance and records the worker's progress (the point a replacement lease resumes from).
// A checkpoint at total_steps completes the lease, and the job once every worker is done.
func (k Keeper) OnCheckpointFinal(ctx context.Context, leaseID uint64, claim sdk.Coin, step uint64, stateHash []byte, uri string) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return err
	}
	job, err := k.GetJob(ctx, lease.JobId)
	if err != nil {
		return err
	}
	if job.Spec.Sync != nil {
		// A sync job's round-end checkpoint is one input of the round: its claim is paid
		// when the round's global is final (payRound), and the job completes with its
		// last global; the checkpoint only records the worker's progress.
		return k.recordProgress(sdkCtx, &job, lease.Worker, step, stateHash, uri)
	}
	if claim.IsNegative() || claim.Amount.GT(lease.Committed.Amount) {
		return errorsmod.Wrapf(types.ErrInsufficientCommit, "lease %d: release %s but only %s committed", leaseID, claim, lease.Committed)
	}
	lease.Committed = lease.Committed.Sub(claim)
	lease.Pending = lease.Pending.Sub(claim)
	lease.Withdrawable = lease.Withdrawable.Add(claim)
	if err := k.Leases.Set(ctx, lease.Id, lease); err != nil {
		return err
	}
	if err := keeperutil.Emit(sdkCtx, &types.EventPaymentReleased{
		LeaseId: lease.Id, Provider: lease.Provider, Amount: claim, Withdrawable: lease.Withdrawable,
	}); err != nil {
		return err
	}

	if err := k.recordProgress(sdkCtx, &job, lease.Worker, step, stateHash, uri); err != nil {
		return err
	}
	if job.State.IsTerminal() || step < job.Spec.TotalSteps {
		return nil
	}
	if lease.State == types.LEASE_STATE_ACTIVE {
		if err := k.closeLease(sdkCtx, &job, &lease, types.LEASE_CLOSE_REASON_COMPLETED); err != nil {
			return err
		}
	}
	if !allWorkersDone(job) {
		if err := k.scheduleTimeDeadline(sdkCtx, &job); err != nil {
			return err
		}
		return k.Jobs.Set(ctx, job.Id, job)
	}
	_, err = k.closeJob(sdkCtx, &job, types.JOB_STATE_COMPLETED, types.LEASE_CLOSE_REASON_COMPLETED, "training completed")
	return err
}

// recordProgress records a worker's final checkpoint as its slot's progress (where a
// replacement resumes) when it is ahead of it, and saves the job.
func (k Keeper) recordProgress(ctx sdk.Context, job *types.Job, worker uint32, step uint64, stateHash []byte, uri string) error {
	if step > progressOf(*job, worker).Step {
		setProgress(job, types.WorkerProgress{Worker: worker, Step: step, StateHash: stateHash, Uri: uri})
		if err := keeperutil.Emit(ctx, &types.EventWorkerProgress{
			JobId: job.Id, Worker: worker, Step: step, StateHash: stateHash,
		}); err != nil {
			return err
		}
	}
	return k.Jobs.Set(ctx, job.Id, *job)
}

func allWorkersDone(job types.Job) bool {
	for w := uint32(0); w < job.Spec.Workers; w++ {
		if progressOf(job, w).Step < job.Spec.TotalSteps {
			return false
		}
	}
	return true
}

// OnCheckpointRejected handles a checkpoint proven wrong: the lease is closed for fraud,
// everything it has pending (claimed or not) goes back to the job (or to the owner once
// the job is over), and a live job returns to auction from its last final checkpoint.
// It returns that refund: x/verify compensates the owner in proportion to it. Slashing
// is the caller's business (it knows the challenger to reward).
func (k Keeper) OnCheckpointRejected(ctx context.Context, leaseID uint64) (sdk.Coin, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return sdk.Coin{}, err
	}
	job, err := k.GetJob(ctx, lease.JobId)
	if err != nil {
		return sdk.Coin{}, err
	}
	if lease.State == types.LEASE_STATE_ACTIVE {
		if err := k.closeLease(sdkCtx, &job, &lease, types.LEASE_CLOSE_REASON_FRAUD); err != nil {
			return sdk.Coin{}, err
		}
	}
	refund, err := k.refundPending(sdkCtx, &job, &lease)
	if err != nil {
		return sdk.Coin{}, err
	}
	return refund, k.reopenAfterLeaseLoss(sdkCtx, &job)
}

// refundPending returns everything a lease has pending, claimed by checkpoints or not,
// to its job: none of it is covered by a checkpoint that will ever be final. The steps it
// claimed are unpaid again, so the worker's claimed high-water mark falls back to what
// its final checkpoints and other leases' live claims still cover.
func (k Keeper) refundPending(ctx sdk.Context, job *types.Job, lease *types.Lease) (sdk.Coin, error) {
	refund := lease.Pending
	lease.Pending = sdk.NewCoin(refund.Denom, math.ZeroInt())
	lease.Committed = lease.Pending
	if err := k.Leases.Set(ctx, lease.Id, *lease); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.recomputeClaimedStep(ctx, job, lease.Worker); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.refundToJob(ctx, job, refund); err != nil {
		return sdk.Coin{}, err
	}
	if refund.IsPositive() {
		if err := keeperutil.Emit(ctx, &types.EventPaymentRefunded{LeaseId: lease.Id, JobId: job.Id, Amount: refund}); err != nil {
			return sdk.Coin{}, err
		}
	}
	return refund, nil
}

// closeForNonPerformance runs when a lease reaches its checkpoint deadline without a
// checkpoint.
func (k Keeper) closeForNonPerformance(ctx sdk.Context, leaseID uint64) error {
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return err
	}
	return k.closeLeaseForNonPerformance(ctx, leaseID,
		fmt.Sprintf("lease %d missed its checkpoint deadline at height %d", lease.Id, lease.CheckpointDeadline))
}

// closeLeaseForNonPerformance closes a lease that did not deliver (a missed checkpoint
// deadline, or progress below its committed rate): the provider is slashed a little and
// jailed for a while, and the job goes back to auction to resume from its last final
// checkpoint. Checkpoints it already submitted keep their claims until x/verify decides them.
func (k Keeper) closeLeaseForNonPerformance(ctx sdk.Context, leaseID uint64, reason string) error {
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return err
	}
	if lease.State != types.LEASE_STATE_ACTIVE {
		return nil
	}
	job, err := k.GetJob(ctx, lease.JobId)
	if err != nil {
		return err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := k.closeLease(ctx, &job, &lease, types.LEASE_CLOSE_REASON_NON_PERFORMANCE); err != nil {
		return err
	}
	if err := k.penalizeNonPerformance(ctx, params, lease, reason); err != nil {
		return err
	}
	return k.reopenAfterLeaseLoss(ctx, &job)
}

// recomputeClaimedStep sets a worker's claimed high-water mark to the highest step its
// last final checkpoint or a live claim (a lease of the job with pending pay) covers.
func (k Keeper) recomputeClaimedStep(ctx sdk.Context, job *types.Job, worker uint32) error {
	mark := progressOf(*job, worker).Step
	iter, err := k.Leases.Indexes.Job.MatchExact(ctx, job.Id)
	if err != nil {
		return err
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return err
	}
	for _, id := range ids {
		l, err := k.Leases.Get(ctx, id)
		if err != nil {
			return err
		}
		if l.Worker == worker && l.Pending.IsPositive() {
			mark = max(mark, l.ClaimedStep)
		}
	}
	setClaimedStep(job, worker, mark)
	return nil
}

// penalizeNonPerformance slashes a provider that did not deliver a lease's checkpoints
// (non_performance_slash_fraction, to the community pool), jails it and counts the
// failed lease (closeLease did).
func (k Keeper) penalizeNonPerformance(ctx sdk.Context, params types.Params, lease types.Lease, reason string) error {
	provider, err := k.addressCodec.StringToBytes(lease.Provider)
	if err != nil {
		return err
	}
	if params.NonPerformanceSlashFraction.IsPositive() {
		if _, err := k.providerKeeper.Slash(ctx, provider, params.NonPerformanceSlashFraction, reason, nil, math.LegacyZeroDec()); err != nil {
			return err
		}
	}
	if params.NonPerformanceJailDuration > 0 {
		if err := k.providerKeeper.Jail(ctx, provider, ctx.BlockTime().Add(params.NonPerformanceJailDuration), reason); err != nil {
			return err
		}
	}
	return nil
}
