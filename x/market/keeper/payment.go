package keeper

import (
	"context"
	"fmt"
	"time"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// Pay for work: a lease earns per step, at its price per step, for the steps its
// submitted checkpoints cover; nothing accrues with time. A submitted checkpoint claims
// the pay for the steps above the worker's claimed high-water mark from the job's escrow
// into the lease's pending (and committed) balance; x/verify releases it when the
// checkpoint is final and refunds it when it is rejected. The one scheduled moment per
// job (the TimeDeadlines index) is the earliest of its leases' max duration, or "now"
// when the escrow cannot cover the next checkpoint's claim.

// ActiveLeases returns the job's active leases in lease-id order.
func (k Keeper) ActiveLeases(ctx sdk.Context, jobID uint64) ([]types.Lease, error) {
	iter, err := k.Leases.Indexes.Job.MatchExact(ctx, jobID)
	if err != nil {
		return nil, err
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return nil, err
	}
	var leases []types.Lease
	for _, id := range ids {
		lease, err := k.Leases.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if lease.State == types.LEASE_STATE_ACTIVE {
			leases = append(leases, lease)
		}
	}
	return leases, nil
}

// AllActiveLeases returns every active lease, in lease-id order, for the simulation's
// provider and verifier (a node's sidecar pages through the Leases query instead).
func (k Keeper) AllActiveLeases(ctx context.Context) ([]types.Lease, error) {
	var active []types.Lease
	err := k.Leases.Walk(ctx, nil, func(_ uint64, l types.Lease) (bool, error) {
		if l.State == types.LEASE_STATE_ACTIVE {
			active = append(active, l)
		}
		return false, nil
	})
	return active, err
}

// leaseEnd is when a lease's time is up: its start plus the job's max duration.
func leaseEnd(job types.Job, lease types.Lease) time.Time {
	return lease.StartTime.Add(job.Spec.MaxDuration)
}

// payThrough is what a lease earns for its steps from its resume step up to step.
func payThrough(lease types.Lease, step uint64) math.Int {
	if step <= lease.ResumeStep {
		return math.ZeroInt()
	}
	return types.PayForSteps(lease.PricePerGpuHour.Amount, lease.Gpus, lease.StepsPerHour, step-lease.ResumeStep)
}

// claimedStepOf is the worker's claimed high-water mark (zero before any claim).
func claimedStepOf(job types.Job, worker uint32) uint64 {
	if int(worker) < len(job.ClaimedSteps) {
		return job.ClaimedSteps[worker]
	}
	return 0
}

func setClaimedStep(job *types.Job, worker uint32, step uint64) {
	for len(job.ClaimedSteps) < int(job.Spec.Workers) || len(job.ClaimedSteps) <= int(worker) {
		job.ClaimedSteps = append(job.ClaimedSteps, 0)
	}
	job.ClaimedSteps[worker] = step
}

// claimSteps moves the pay for a lease's steps up to endStep from the job's escrow into
// the lease's pending and committed balances, and returns it. Only steps above both the
// lease's last claim and the worker's high-water mark are paid, so a step that an earlier
// lease of the same worker was (or will be) paid for is never paid again. When the escrow
// cannot cover the claim the lease gets what is left. The caller saves both.
func (k Keeper) claimSteps(ctx sdk.Context, job *types.Job, lease *types.Lease, endStep uint64) (sdk.Coin, error) {
	from := max(lease.ClaimedStep, claimedStepOf(*job, lease.Worker), lease.ResumeStep)
	zero := sdk.NewCoin(job.Escrow.Denom, math.ZeroInt())
	if endStep <= from {
		lease.ClaimedStep = max(lease.ClaimedStep, endStep)
		return zero, nil
	}
	owed := payThrough(*lease, endStep).Sub(payThrough(*lease, from))
	pay := sdk.NewCoin(job.Escrow.Denom, math.MinInt(owed, job.Escrow.Amount))
	job.Escrow = job.Escrow.Sub(pay)
	lease.Accrued = lease.Accrued.Add(pay)
	lease.Pending = lease.Pending.Add(pay)
	lease.Committed = lease.Committed.Add(pay)
	lease.ClaimedStep = endStep
	setClaimedStep(job, lease.Worker, endStep)
	if pay.IsPositive() {
		if err := keeperutil.Emit(ctx, &types.EventPaymentSettled{
			LeaseId: lease.Id, JobId: job.Id, Amount: pay, Pending: lease.Pending, EscrowLeft: job.Escrow,
		}); err != nil {
			return sdk.Coin{}, err
		}
	}
	return pay, nil
}

// nextClaims is what the job's active leases claim when each submits its next full
// checkpoint: the escrow must cover it for the job to go on.
func nextClaims(job types.Job, leases []types.Lease) math.Int {
	total := math.ZeroInt()
	for _, l := range leases {
		from := max(l.ClaimedStep, claimedStepOf(job, l.Worker), l.ResumeStep)
		next := min(from+job.Spec.CheckpointInterval, job.Spec.TotalSteps)
		if next > from {
			total = total.Add(payThrough(l, next).Sub(payThrough(l, from)))
		}
	}
	return total
}

// scheduleTimeDeadline replaces the job's entry in TimeDeadlines with the moment its
// first lease reaches max duration, or with now (this block's EndBlock) when the escrow
// cannot cover the leases' next claims. A job with no active lease has no entry.
func (k Keeper) scheduleTimeDeadline(ctx sdk.Context, job *types.Job) error {
	if err := k.clearTimeDeadline(ctx, job); err != nil {
		return err
	}
	leases, err := k.ActiveLeases(ctx, job.Id)
	if err != nil || len(leases) == 0 {
		return err
	}
	now := ctx.BlockTime()
	deadline := leaseEnd(*job, leases[0])
	for _, l := range leases {
		if end := leaseEnd(*job, l); end.Before(deadline) {
			deadline = end
		}
	}
	if job.Escrow.Amount.LT(nextClaims(*job, leases)) || !deadline.After(now) {
		deadline = now
	}
	job.TimeDeadline = deadline
	return k.TimeDeadlines.Set(ctx, collections.Join(deadline.UnixNano(), job.Id))
}

func (k Keeper) clearTimeDeadline(ctx sdk.Context, job *types.Job) error {
	if job.TimeDeadline.IsZero() {
		return nil
	}
	if err := k.TimeDeadlines.Remove(ctx, collections.Join(job.TimeDeadline.UnixNano(), job.Id)); err != nil {
		return err
	}
	job.TimeDeadline = time.Time{}
	return nil
}

// processTimeDeadline runs when a lease of the job reaches its max duration or the
// escrow could not cover the next claims: it fails the job, or (after a top-up, or when
// the entry is stale) schedules the next moment.
func (k Keeper) processTimeDeadline(ctx sdk.Context, jobID uint64) error {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	job.TimeDeadline = time.Time{} // the entry being processed is removed by the caller
	if job.State.IsTerminal() {
		return k.Jobs.Set(ctx, job.Id, job)
	}
	leases, err := k.ActiveLeases(ctx, job.Id)
	if err != nil {
		return err
	}
	now := ctx.BlockTime()
	for _, l := range leases {
		if !now.Before(leaseEnd(job, l)) {
			_, err := k.closeJob(ctx, &job, types.JOB_STATE_FAILED, types.LEASE_CLOSE_REASON_MAX_DURATION, "max duration reached before training completed")
			return err
		}
	}
	if need := nextClaims(job, leases); job.Escrow.Amount.LT(need) {
		_, err := k.closeJob(ctx, &job, types.JOB_STATE_FAILED, types.LEASE_CLOSE_REASON_ESCROW_EXHAUSTED,
			fmt.Sprintf("escrow exhausted: %s cannot cover the next checkpoints' pay %s%s", job.Escrow, need, job.Escrow.Denom))
		return err
	}
	if err := k.scheduleTimeDeadline(ctx, &job); err != nil {
		return err
	}
	return k.Jobs.Set(ctx, job.Id, job)
}

// refundToJob returns coins that leave a lease unearned: into the escrow of a live job,
// or straight to the owner once the job is over (its escrow was already paid out).
func (k Keeper) refundToJob(ctx sdk.Context, job *types.Job, amount sdk.Coin) error {
	if !amount.IsPositive() {
		return nil
	}
	if !job.State.IsTerminal() {
		job.Escrow = job.Escrow.Add(amount)
		return nil
	}
	owner, err := k.addressCodec.StringToBytes(job.Owner)
	if err != nil {
		return err
	}
	return k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, owner, sdk.NewCoins(amount))
}
