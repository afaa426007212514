package keeper

import (
	"sort"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

type rankedBid struct {
	bid        types.Bid
	provider   sdk.AccAddress
	reputation int64
}

// rankBids orders bids for an auction: cheapest per step first (price per GPU-hour ÷
// committed steps per hour, compared exactly; every bid of a job is for the same GPUs per
// worker), then higher reputation, then the earlier bid. The order is total (sequences are
// unique), so every validator agrees.
func rankBids(bids []rankedBid) {
	sort.Slice(bids, func(i, j int) bool {
		a, b := bids[i], bids[j]
		pa, pb := a.bid.PricePerGpuHour.Amount, b.bid.PricePerGpuHour.Amount
		if types.CheaperPerStep(pa, a.bid.StepsPerHour, pb, b.bid.StepsPerHour) {
			return true
		}
		if types.CheaperPerStep(pb, b.bid.StepsPerHour, pa, a.bid.StepsPerHour) {
			return false
		}
		if a.reputation != b.reputation {
			return a.reputation > b.reputation
		}
		return a.bid.Sequence < b.bid.Sequence
	})
}

// closeAuction runs at the end of a job's bidding deadline: the best eligible bids win
// the vacant worker slots (one slot per provider), collateral is locked for each winner,
// and the other bids are released. A job that ends up with no lease at all expires and is
// refunded; one with some slots still vacant goes to another round.
func (k Keeper) closeAuction(ctx sdk.Context, jobID uint64) error {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	if job.State != types.JOB_STATE_OPEN {
		return nil
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	bids, err := k.bidsOfJob(ctx, jobID)
	if err != nil {
		return err
	}
	ranked := make([]rankedBid, 0, len(bids))
	for _, b := range bids {
		provider, err := k.addressCodec.StringToBytes(b.Provider)
		if err != nil {
			return err
		}
		rep, err := k.providerKeeper.ReputationScore(ctx, provider)
		if err != nil {
			return err
		}
		ranked = append(ranked, rankedBid{bid: b, provider: provider, reputation: rep})
	}
	rankBids(ranked)

	active, err := k.ActiveLeases(ctx, jobID)
	if err != nil {
		return err
	}
	serving := make(map[string]bool, len(active))
	for _, l := range active {
		serving[l.Provider] = true
	}
	vacant := vacantWorkers(job, active)
	collateral := sdk.NewCoin(params.Denom, job.Spec.RequiredCollateral(params))

	won := map[string]bool{}
	for _, rb := range ranked {
		if len(vacant) == 0 {
			break
		}
		if serving[rb.bid.Provider] {
			continue
		}
		created, err := k.tryCreateLease(ctx, &job, params, rb, vacant[0], collateral)
		if err != nil {
			return err
		}
		if created {
			won[rb.bid.Provider] = true
			serving[rb.bid.Provider] = true
			vacant = vacant[1:]
		}
	}
	for _, rb := range ranked {
		if err := k.Bids.Remove(ctx, collections.Join(jobID, []byte(rb.provider))); err != nil {
			return err
		}
		if !won[rb.bid.Provider] {
			if err := keeperutil.Emit(ctx, &types.EventBidLost{JobId: jobID, Provider: rb.bid.Provider}); err != nil {
				return err
			}
		}
	}

	if err := k.recordPriceCap(ctx, &job); err != nil {
		return err
	}
	if len(vacant) == int(job.Spec.Workers) {
		// Nobody serves the job: it expired. Whatever its earlier leases' checkpoints still
		// claim follows the finality rule through x/verify.
		_, err := k.closeJob(ctx, &job, types.JOB_STATE_EXPIRED, types.LEASE_CLOSE_REASON_UNSPECIFIED, "no eligible bid before the bidding deadline")
		return err
	}
	if err := k.scheduleTimeDeadline(ctx, &job); err != nil {
		return err
	}
	if len(vacant) > 0 {
		return k.openAuction(ctx, &job, vacant)
	}
	job.State = types.JOB_STATE_LEASED
	if err := k.openFirstRound(ctx, params, &job); err != nil {
		return err
	}
	return k.Jobs.Set(ctx, job.Id, job)
}

// tryCreateLease re-checks a winner's eligibility (its bond, status or GPU inventory may
// have changed since it bid), locks its collateral and creates the lease, all or nothing.
// A winner x/stakingext refuses is skipped; a store failure is returned.
func (k Keeper) tryCreateLease(ctx sdk.Context, job *types.Job, params types.Params, rb rankedBid, worker uint32, collateral sdk.Coin) (bool, error) {
	cacheCtx, write := ctx.CacheContext()
	p, err := k.providerKeeper.CheckCanBid(cacheCtx, rb.provider, collateral)
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return false, err
		}
		k.Logger(ctx).Info("auction winner no longer eligible", "job", job.Id, "provider", rb.bid.Provider, "reason", err.Error())
		return false, nil
	}
	if !p.Satisfies(job.Spec.Gpu.Models, job.Spec.MinVRAMMiB(), job.Spec.Gpu.PerWorker) {
		k.Logger(ctx).Info("auction winner's GPUs no longer satisfy the job", "job", job.Id, "provider", rb.bid.Provider)
		return false, nil
	}
	leaseID, err := k.NextLeaseID.Next(cacheCtx)
	if err != nil {
		return false, err
	}
	if err := k.providerKeeper.LockCollateral(cacheCtx, rb.provider, types.LeaseCollateralRef(leaseID), collateral); err != nil {
		if !keeperutil.IsRefusal(err) {
			return false, err
		}
		k.Logger(ctx).Info("auction winner could not lock collateral", "job", job.Id, "provider", rb.bid.Provider, "reason", err.Error())
		return false, nil
	}
	resume := progressOf(*job, worker)
	now := cacheCtx.BlockTime()
	zero := sdk.NewInt64Coin(params.Denom, 0)
	lease := types.Lease{
		Id:                 leaseID,
		JobId:              job.Id,
		Worker:             worker,
		Provider:           rb.bid.Provider,
		PricePerGpuHour:    rb.bid.PricePerGpuHour,
		Gpus:               job.Spec.Gpu.PerWorker,
		State:              types.LEASE_STATE_ACTIVE,
		StartHeight:        cacheCtx.BlockHeight(),
		StartTime:          now,
		SettledAt:          now,
		Accrued:            zero,
		Pending:            zero,
		Committed:          zero,
		Withdrawable:       zero,
		Withdrawn:          zero,
		Collateral:         collateral,
		CheckpointDeadline: cacheCtx.BlockHeight() + int64(job.Spec.EffectiveCheckpointDeadline(params)),
		ResumeStep:         resume.Step,
		ResumeHash:         resume.StateHash,
		ResumeUri:          resume.Uri,
		Runtime:            rb.bid.Runtime,
		StepsPerHour:       rb.bid.StepsPerHour,
		PricePerStep:       types.PricePerStep(rb.bid.PricePerGpuHour.Amount, job.Spec.Gpu.PerWorker, rb.bid.StepsPerHour),
		ClaimedStep:        resume.Step,
	}
	if err := k.scheduleRateCheck(cacheCtx, &lease, now.Add(params.RateCheckInterval)); err != nil {
		return false, err
	}
	if err := k.Leases.Set(cacheCtx, lease.Id, lease); err != nil {
		return false, err
	}
	if err := k.CheckpointDeadlines.Set(cacheCtx, collections.Join(lease.CheckpointDeadline, lease.Id)); err != nil {
		return false, err
	}
	if err := keeperutil.Emit(cacheCtx, &types.EventLeaseCreated{
		LeaseId: lease.Id, JobId: job.Id, Worker: worker, Provider: lease.Provider, PricePerGpuHour: lease.PricePerGpuHour,
		Gpus: lease.Gpus, Collateral: collateral, CheckpointDeadline: lease.CheckpointDeadline,
		ResumeStep: lease.ResumeStep, ResumeHash: lease.ResumeHash, ResumeUri: lease.ResumeUri,
		StepsPerHour: lease.StepsPerHour,
	}); err != nil {
		return false, err
	}
	write()
	if int(worker) < len(job.MissedRounds) {
		job.MissedRounds[worker] = 0 // a sync job's new lease starts with a clean record
	}
	return true, nil
}

// recordPriceCap fixes, once the job has its first leases, the highest price per step
// among them as the job's cap: replacement bids above it are refused, so whatever happens
// to providers the owner pays at most total_steps × the cap per worker (plus fees).
func (k Keeper) recordPriceCap(ctx sdk.Context, job *types.Job) error {
	if job.CapStepsPerHour != 0 {
		return nil
	}
	leases, err := k.ActiveLeases(ctx, job.Id)
	if err != nil {
		return err
	}
	for _, l := range leases {
		if l.StepsPerHour == 0 {
			continue
		}
		if job.CapStepsPerHour == 0 || types.CheaperPerStep(job.CapPricePerGpuHour.Amount, job.CapStepsPerHour, l.PricePerGpuHour.Amount, l.StepsPerHour) {
			job.CapPricePerGpuHour = l.PricePerGpuHour
			job.CapStepsPerHour = l.StepsPerHour
		}
	}
	return nil
}
