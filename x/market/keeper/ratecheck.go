package keeper

import (
	"fmt"
	"time"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// A lease commits to a throughput (steps_per_hour). The RateChecks index holds one entry
// per active lease: rate_check_interval after its start, and every interval after, its
// checkpointed progress is held against what its rate promises for the time since its
// start; a lease below rate_tolerance of that is closed for non-performance, and the job
// reopens from its last final checkpoint. Checkpoints themselves are still due by the
// checkpoint deadline (CheckpointDeadlines); the rate check catches a lease that meets
// every deadline with a step or two.

// requiredSteps is how many steps past its resume step a lease must have checkpointed by
// now: tolerance × rate × (now − start), never more than the steps its worker has left.
func requiredSteps(job types.Job, lease types.Lease, tolerance math.LegacyDec, now time.Time) uint64 {
	promised := types.StepsWithin(lease.StepsPerHour, now.Sub(lease.StartTime))
	required := tolerance.MulInt(promised).TruncateInt()
	left := job.Spec.TotalSteps - min(lease.ResumeStep, job.Spec.TotalSteps)
	if !required.IsUint64() || required.Uint64() > left {
		return left
	}
	return required.Uint64()
}

// scheduleRateCheck (re)places the lease's entry in RateChecks at the given time. The
// caller saves the lease.
func (k Keeper) scheduleRateCheck(ctx sdk.Context, lease *types.Lease, at time.Time) error {
	if err := k.clearRateCheck(ctx, lease); err != nil {
		return err
	}
	lease.RateCheckAt = at
	return k.RateChecks.Set(ctx, collections.Join(at.UnixNano(), lease.Id))
}

// clearRateCheck removes the lease's entry, if any. The caller saves the lease.
func (k Keeper) clearRateCheck(ctx sdk.Context, lease *types.Lease) error {
	if lease.RateCheckAt.IsZero() {
		return nil
	}
	if err := k.RateChecks.Remove(ctx, collections.Join(lease.RateCheckAt.UnixNano(), lease.Id)); err != nil {
		return err
	}
	lease.RateCheckAt = time.Time{}
	return nil
}

// processRateCheck runs at a lease's rate check (its entry already removed by EndBlock):
// a lease that checkpointed at least rate_tolerance of its committed steps gets its next
// check; one below is closed for non-performance.
func (k Keeper) processRateCheck(ctx sdk.Context, leaseID uint64) error {
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return err
	}
	lease.RateCheckAt = time.Time{}
	if lease.State != types.LEASE_STATE_ACTIVE {
		return k.Leases.Set(ctx, lease.Id, lease)
	}
	job, err := k.GetJob(ctx, lease.JobId)
	if err != nil {
		return err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	now := ctx.BlockTime()
	done := lease.ClaimedStep - min(lease.ResumeStep, lease.ClaimedStep)
	required := requiredSteps(job, lease, params.RateTolerance, now)
	if done >= required {
		if err := k.scheduleRateCheck(ctx, &lease, now.Add(params.RateCheckInterval)); err != nil {
			return err
		}
		return k.Leases.Set(ctx, lease.Id, lease)
	}
	if err := k.Leases.Set(ctx, lease.Id, lease); err != nil {
		return err
	}
	reason := fmt.Sprintf("lease %d checkpointed %d steps in %s; its committed %d steps per hour at tolerance %s require %d",
		lease.Id, done, now.Sub(lease.StartTime), lease.StepsPerHour, params.RateTolerance, required)
	return k.closeLeaseForNonPerformance(ctx, lease.Id, reason)
}
