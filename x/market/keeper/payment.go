package keeper

import (
	"context"
	"time"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// Payment settles lazily: nothing runs per lease per block. A lease's debt is
// price × GPUs × (time since its start), and settlement moves the unpaid part of
// that debt from the job's escrow into the lease's pending balance. It runs at the
// moments that matter — checkpoints, withdrawals, top-ups, closes — and at the one
// scheduled moment per job when its escrow would run dry or a lease reaches its
// max duration (the TimeDeadlines index).

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

// leaseEnd is when a lease's paid time stops: its start plus the job's max duration.
func leaseEnd(job types.Job, lease types.Lease) time.Time {
	return lease.StartTime.Add(job.Spec.MaxDuration)
}

// settleJob settles every active lease of the job up to block time, saving the leases.
// The caller saves the job (its escrow changed). It reports whether the escrow could not
// cover everything owed, in which case the leases got what was left.
func (k Keeper) settleJob(ctx sdk.Context, job *types.Job) (exhausted bool, err error) {
	leases, err := k.ActiveLeases(ctx, job.Id)
	if err != nil {
		return false, err
	}
	for i := range leases {
		short, err := k.settleLease(ctx, job, &leases[i])
		if err != nil {
			return false, err
		}
		exhausted = exhausted || short
	}
	return exhausted, nil
}

func (k Keeper) settleLease(ctx sdk.Context, job *types.Job, lease *types.Lease) (short bool, err error) {
	now := ctx.BlockTime()
	paidUntil := now
	if end := leaseEnd(*job, *lease); paidUntil.After(end) {
		paidUntil = end
	}
	owedTotal := types.AmountOwed(lease.PricePerGpuHour.Amount, lease.Gpus, paidUntil.Sub(lease.StartTime))
	owed := owedTotal.Sub(lease.Accrued.Amount)
	if owed.IsPositive() {
		pay := math.MinInt(owed, job.Escrow.Amount)
		short = pay.LT(owed)
		payCoin := sdk.NewCoin(job.Escrow.Denom, pay)
		job.Escrow = job.Escrow.Sub(payCoin)
		lease.Accrued = lease.Accrued.Add(payCoin)
		lease.Pending = lease.Pending.Add(payCoin)
		if pay.IsPositive() {
			if err := keeperutil.Emit(ctx, &types.EventPaymentSettled{
				LeaseId: lease.Id, JobId: job.Id, Amount: payCoin, Pending: lease.Pending, EscrowLeft: job.Escrow,
			}); err != nil {
				return false, err
			}
		}
	}
	if now.After(lease.SettledAt) {
		lease.SettledAt = now
	}
	return short, k.Leases.Set(ctx, lease.Id, *lease)
}

// scheduleTimeDeadline replaces the job's entry in TimeDeadlines with the moment its
// escrow runs dry at the current burn rate or its first lease reaches max duration.
// A job with no active lease has no entry.
func (k Keeper) scheduleTimeDeadline(ctx sdk.Context, job *types.Job) error {
	if err := k.clearTimeDeadline(ctx, job); err != nil {
		return err
	}
	leases, err := k.ActiveLeases(ctx, job.Id)
	if err != nil || len(leases) == 0 {
		return err
	}
	now := ctx.BlockTime()
	ratePerHour := math.ZeroInt()
	deadline := leaseEnd(*job, leases[0])
	for _, l := range leases {
		ratePerHour = ratePerHour.Add(l.PricePerGpuHour.Amount.MulRaw(int64(l.Gpus)))
		if end := leaseEnd(*job, l); end.Before(deadline) {
			deadline = end
		}
	}
	if ratePerHour.IsPositive() {
		// Nanoseconds until the escrow is spent, rounded up so settlement at that moment finds it empty.
		untilDry := job.Escrow.Amount.MulRaw(int64(time.Hour)).Add(ratePerHour.SubRaw(1)).Quo(ratePerHour)
		if untilDry.LT(math.NewInt(int64(deadline.Sub(now)))) {
			deadline = now.Add(time.Duration(untilDry.Int64()))
		}
	}
	if !deadline.After(now) {
		deadline = now.Add(time.Nanosecond)
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

// canPayAnotherSecond reports whether the escrow still covers one more second at the
// job's burn rate; below that, rounding would keep a dry job alive on dust.
func canPayAnotherSecond(job types.Job, leases []types.Lease) bool {
	rate := math.ZeroInt()
	for _, l := range leases {
		rate = rate.Add(l.PricePerGpuHour.Amount.MulRaw(int64(l.Gpus)))
	}
	return job.Escrow.Amount.MulRaw(3600).GTE(rate) && job.Escrow.IsPositive()
}

// processTimeDeadline runs when a job's escrow is due to run dry or a lease reaches its
// max duration: it settles, and either fails the job or schedules the next moment.
func (k Keeper) processTimeDeadline(ctx sdk.Context, jobID uint64) error {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	job.TimeDeadline = time.Time{} // the entry being processed is removed by the caller
	if job.State.IsTerminal() {
		return k.Jobs.Set(ctx, job.Id, job)
	}
	exhausted, err := k.settleJob(ctx, &job)
	if err != nil {
		return err
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
	if exhausted || !canPayAnotherSecond(job, leases) {
		_, err := k.closeJob(ctx, &job, types.JOB_STATE_FAILED, types.LEASE_CLOSE_REASON_ESCROW_EXHAUSTED, "escrow exhausted")
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
