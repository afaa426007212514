package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// placeBid places (or replaces) provider's sealed bid on an open job (MsgPlaceBid):
// the provider must be able to bid in x/stakingext with the job's collateral, have a GPU
// class that satisfies the spec and not already serve the job.
func (k Keeper) placeBid(ctx sdk.Context, provider sdk.AccAddress, msg *types.MsgPlaceBid) (types.Bid, error) {
	job, err := k.GetJob(ctx, msg.JobId)
	if err != nil {
		return types.Bid{}, err
	}
	if job.State != types.JOB_STATE_OPEN {
		return types.Bid{}, errorsmod.Wrapf(types.ErrJobNotOpen, "job %d is %s", job.Id, job.State)
	}
	if ctx.BlockHeight() > job.BiddingDeadline {
		return types.Bid{}, errorsmod.Wrapf(types.ErrBiddingClosed, "job %d closed bidding at height %d", job.Id, job.BiddingDeadline)
	}
	price := msg.PricePerGpuHour
	if !price.IsValid() || !price.IsPositive() || price.Denom != job.Spec.MaxPricePerGpuHour.Denom {
		return types.Bid{}, errorsmod.Wrapf(types.ErrInvalidPrice, "price must be a positive amount of %s, got %s", job.Spec.MaxPricePerGpuHour.Denom, price)
	}
	if job.Spec.MaxPricePerGpuHour.IsLT(price) {
		return types.Bid{}, errorsmod.Wrapf(types.ErrBidAboveMax, "bid %s per GPU-hour exceeds job %d's maximum %s", price, job.Id, job.Spec.MaxPricePerGpuHour)
	}
	if err := checkRate(job, msg); err != nil {
		return types.Bid{}, err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Bid{}, err
	}
	collateral := sdk.NewCoin(params.Denom, job.Spec.RequiredCollateral(params))
	p, err := k.providerKeeper.CheckCanBid(ctx, provider, collateral)
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return types.Bid{}, err
		}
		return types.Bid{}, keeperutil.WrapCause(types.ErrProviderIneligible, err, "")
	}
	if !p.Satisfies(job.Spec.Gpu.Models, job.Spec.MinVRAMMiB(), job.Spec.Gpu.PerWorker) {
		return types.Bid{}, errorsmod.Wrapf(types.ErrProviderIneligible,
			"provider %s has no GPU class with %d GPUs of models %v and at least %d GiB VRAM",
			msg.Provider, job.Spec.Gpu.PerWorker, job.Spec.Gpu.Models, job.Spec.Gpu.MinVramGib)
	}
	if err := checkHostFit(job, p.Region, msg); err != nil {
		return types.Bid{}, err
	}
	active, err := k.ActiveLeases(ctx, job.Id)
	if err != nil {
		return types.Bid{}, err
	}
	for _, l := range active {
		if l.Provider == msg.Provider {
			return types.Bid{}, errorsmod.Wrapf(types.ErrProviderIneligible, "provider %s already serves worker %d of job %d", msg.Provider, l.Worker, job.Id)
		}
	}
	key := collections.Join(job.Id, []byte(provider))
	existing, err := k.Bids.Has(ctx, key)
	if err != nil {
		return types.Bid{}, err
	}
	if !existing {
		bids, err := k.bidsOfJob(ctx, job.Id)
		if err != nil {
			return types.Bid{}, err
		}
		if len(bids) >= int(params.MaxBidsPerJob) {
			return types.Bid{}, errorsmod.Wrapf(types.ErrTooManyBids, "job %d already has %d bids", job.Id, len(bids))
		}
	}
	seq, err := k.NextBidSequence.Next(ctx)
	if err != nil {
		return types.Bid{}, err
	}
	bid := types.Bid{JobId: job.Id, Provider: msg.Provider, PricePerGpuHour: price, CreatedHeight: ctx.BlockHeight(), Sequence: seq, Runtime: msg.Runtime, StepsPerHour: msg.StepsPerHour}
	if err := k.Bids.Set(ctx, key, bid); err != nil {
		return types.Bid{}, err
	}
	return bid, nil
}

// withdrawBid removes provider's bid on a job (MsgWithdrawBid).
func (k Keeper) withdrawBid(ctx context.Context, provider sdk.AccAddress, msg *types.MsgWithdrawBid) error {
	key := collections.Join(msg.JobId, []byte(provider))
	has, err := k.Bids.Has(ctx, key)
	if err != nil {
		return err
	}
	if !has {
		return errorsmod.Wrapf(types.ErrBidNotFound, "provider %s has no bid on job %d", msg.Provider, msg.JobId)
	}
	return k.Bids.Remove(ctx, key)
}

// checkRate refuses a bid that commits no throughput, an impossible one, one that cannot
// finish the steps its worker slot has left within max_duration (the slot furthest
// behind: the bid may win any vacant slot), or, in a replacement round, one that asks
// more per step than the job's cap.
func checkRate(job types.Job, msg *types.MsgPlaceBid) error {
	remaining := job.Spec.TotalSteps
	if job.Spec.Workers > 0 {
		least := job.Spec.TotalSteps
		for w := uint32(0); w < job.Spec.Workers; w++ {
			least = min(least, progressOf(job, w).Step)
		}
		remaining -= least
	}
	if err := types.ValidateRate(msg.StepsPerHour, remaining, job.Spec.MaxDuration); err != nil {
		return errorsmod.Wrapf(err, "bid of %s on job %d", msg.Provider, job.Id)
	}
	if job.CapStepsPerHour != 0 && types.CheaperPerStep(job.CapPricePerGpuHour.Amount, job.CapStepsPerHour, msg.PricePerGpuHour.Amount, msg.StepsPerHour) {
		return errorsmod.Wrapf(types.ErrPricePerStepAboveCap, "bid %s per GPU-hour at %d steps per hour costs %s per step; job %d accepts at most %s (%s at %d steps per hour)",
			msg.PricePerGpuHour, msg.StepsPerHour, types.PricePerStep(msg.PricePerGpuHour.Amount, job.Spec.Gpu.PerWorker, msg.StepsPerHour),
			job.Id, types.PricePerStep(job.CapPricePerGpuHour.Amount, job.Spec.Gpu.PerWorker, job.CapStepsPerHour), job.CapPricePerGpuHour, job.CapStepsPerHour)
	}
	return nil
}

// checkHostFit refuses a bid from outside the job's regions, or naming a runtime
// that may not serve the job (a container job runs the owner's image unless its
// workload allows an operator-installed trainer). A bid without a runtime (a
// sidecar from before runtimes were recorded) is accepted, and its lease
// records no runtime.
func checkHostFit(job types.Job, region string, msg *types.MsgPlaceBid) error {
	if !job.Spec.AcceptsRegion(region) {
		return errorsmod.Wrapf(types.ErrWrongRegion, "provider %s is registered in region %q; job %d accepts regions %v",
			msg.Provider, region, job.Id, job.Spec.Regions)
	}
	if msg.Runtime == "" {
		return nil
	}
	if why := job.Spec.AcceptsRuntime(msg.Runtime); why != "" {
		return errorsmod.Wrapf(types.ErrRuntimeNotAllowed, "job %d: %s", job.Id, why)
	}
	return nil
}
