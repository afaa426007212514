package keeper

import (
	"sort"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// closeLease ends a lease: its collateral is unlocked, its rate check is dropped, pending
// payment that no checkpoint claims goes back to the job, and committed payment stays until
// x/verify finalizes or rejects the checkpoints that claim it. The caller saves the job.
func (k Keeper) closeLease(ctx sdk.Context, job *types.Job, lease *types.Lease, reason types.LeaseCloseReason) error {
	unclaimed := lease.Pending.Sub(lease.Committed)
	lease.Pending = lease.Committed
	if err := k.refundToJob(ctx, job, unclaimed); err != nil {
		return err
	}
	lease.State = types.LEASE_STATE_CLOSED
	lease.CloseReason = reason
	lease.ClosedAt = ctx.BlockTime()
	if err := k.clearRateCheck(ctx, lease); err != nil {
		return err
	}
	if err := k.CheckpointDeadlines.Remove(ctx, collections.Join(lease.CheckpointDeadline, lease.Id)); err != nil {
		return err
	}
	provider, err := k.addressCodec.StringToBytes(lease.Provider)
	if err != nil {
		return err
	}
	if _, err := k.providerKeeper.UnlockCollateral(ctx, provider, types.LeaseCollateralRef(lease.Id)); err != nil {
		return err
	}
	switch reason {
	case types.LEASE_CLOSE_REASON_COMPLETED:
		err = k.providerKeeper.RecordLeaseOutcome(ctx, provider, true)
	case types.LEASE_CLOSE_REASON_NON_PERFORMANCE, types.LEASE_CLOSE_REASON_FRAUD:
		err = k.providerKeeper.RecordLeaseOutcome(ctx, provider, false)
	}
	if err != nil {
		return err
	}
	if err := k.Leases.Set(ctx, lease.Id, *lease); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventLeaseClosed{
		LeaseId: lease.Id, JobId: lease.JobId, Provider: lease.Provider, Reason: reason, Refunded: unclaimed,
	})
}

// closeJob ends a job for good: every active lease is closed with
// leaseReason, open bids are dropped, deadlines are cleared and the unspent escrow goes
// back to the owner. Each worker's last final checkpoint is kept retain_checkpoints from
// now, and the storage escrow is refunded at once if no custody object is held. It saves
// the job.
func (k Keeper) closeJob(ctx sdk.Context, job *types.Job, state types.JobState, leaseReason types.LeaseCloseReason, reason string) (sdk.Coin, error) {
	leases, err := k.ActiveLeases(ctx, job.Id)
	if err != nil {
		return sdk.Coin{}, err
	}
	for i := range leases {
		if err := k.closeLease(ctx, job, &leases[i], leaseReason); err != nil {
			return sdk.Coin{}, err
		}
	}
	if err := k.dropBids(ctx, job.Id, false); err != nil {
		return sdk.Coin{}, err
	}
	if job.State == types.JOB_STATE_OPEN {
		if err := k.BiddingDeadlines.Remove(ctx, collections.Join(job.BiddingDeadline, job.Id)); err != nil {
			return sdk.Coin{}, err
		}
	}
	if err := k.clearTimeDeadline(ctx, job); err != nil {
		return sdk.Coin{}, err
	}
	refund := job.Escrow
	job.Escrow = sdk.NewInt64Coin(refund.Denom, 0)
	job.State = state
	job.CloseReason = reason
	if err := k.retainFinalCustody(ctx, *job); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.refundStorageIfDone(ctx, job); err != nil {
		return sdk.Coin{}, err
	}
	if refund.IsPositive() {
		owner, err := k.addressCodec.StringToBytes(job.Owner)
		if err != nil {
			return sdk.Coin{}, err
		}
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, owner, sdk.NewCoins(refund)); err != nil {
			return sdk.Coin{}, err
		}
	}
	if err := k.Jobs.Set(ctx, job.Id, *job); err != nil {
		return sdk.Coin{}, err
	}
	return refund, keeperutil.Emit(ctx, &types.EventJobClosed{JobId: job.Id, State: state, Reason: reason, Refunded: refund})
}

// dropBids deletes every bid on a job, announcing each as lost when the auction closed over it.
func (k Keeper) dropBids(ctx sdk.Context, jobID uint64, announceLost bool) error {
	bids, err := k.bidsOfJob(ctx, jobID)
	if err != nil {
		return err
	}
	for _, b := range bids {
		provider, err := k.addressCodec.StringToBytes(b.Provider)
		if err != nil {
			return err
		}
		if err := k.Bids.Remove(ctx, collections.Join(jobID, provider)); err != nil {
			return err
		}
		if announceLost {
			if err := keeperutil.Emit(ctx, &types.EventBidLost{JobId: jobID, Provider: b.Provider}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k Keeper) bidsOfJob(ctx sdk.Context, jobID uint64) ([]types.Bid, error) {
	iter, err := k.Bids.Iterate(ctx, collections.NewPrefixedPairRange[uint64, []byte](jobID))
	if err != nil {
		return nil, err
	}
	return iter.Values()
}

// vacantWorkers lists the worker slots of a job that have no active lease, in order.
func vacantWorkers(job types.Job, active []types.Lease) []uint32 {
	taken := make(map[uint32]bool, len(active))
	for _, l := range active {
		taken[l.Worker] = true
	}
	var vacant []uint32
	for w := uint32(0); w < job.Spec.Workers; w++ {
		if !taken[w] {
			vacant = append(vacant, w)
		}
	}
	return vacant
}

// openAuction (re)starts bidding for the job's vacant worker slots. It saves the job.
func (k Keeper) openAuction(ctx sdk.Context, job *types.Job, vacant []uint32) error {
	job.State = types.JOB_STATE_OPEN
	job.BiddingDeadline = ctx.BlockHeight() + int64(job.Spec.BiddingWindowBlocks)
	job.AuctionRound++
	if err := k.BiddingDeadlines.Set(ctx, collections.Join(job.BiddingDeadline, job.Id)); err != nil {
		return err
	}
	if err := k.Jobs.Set(ctx, job.Id, *job); err != nil {
		return err
	}
	if job.AuctionRound == 1 {
		return nil // the first auction is announced by EventJobCreated
	}
	return keeperutil.Emit(ctx, &types.EventJobReopened{
		JobId: job.Id, BiddingDeadline: job.BiddingDeadline, VacantWorkers: vacant, AuctionRound: job.AuctionRound,
	})
}

// reopenAfterLeaseLoss sends a live job back to auction for the slot a failed lease left,
// resuming from the job's last final checkpoint for that worker. It saves the job.
func (k Keeper) reopenAfterLeaseLoss(ctx sdk.Context, job *types.Job) error {
	if job.State.IsTerminal() {
		return k.Jobs.Set(ctx, job.Id, *job)
	}
	active, err := k.ActiveLeases(ctx, job.Id)
	if err != nil {
		return err
	}
	if err := k.scheduleTimeDeadline(ctx, job); err != nil {
		return err
	}
	vacant := vacantWorkers(*job, active)
	if job.State == types.JOB_STATE_OPEN || len(vacant) == 0 {
		// An auction is already running (it fills every vacant slot when it closes), or the
		// lost lease had already been replaced: nothing to auction.
		return k.Jobs.Set(ctx, job.Id, *job)
	}
	return k.openAuction(ctx, job, vacant)
}

// progressOf returns the last final checkpoint of a worker slot (zero if none yet).
func progressOf(job types.Job, worker uint32) types.WorkerProgress {
	for _, p := range job.Progress {
		if p.Worker == worker {
			return p
		}
	}
	return types.WorkerProgress{Worker: worker}
}

// setProgress records a worker's final checkpoint, keeping Progress sorted by worker.
func setProgress(job *types.Job, p types.WorkerProgress) {
	for i := range job.Progress {
		if job.Progress[i].Worker == p.Worker {
			job.Progress[i] = p
			return
		}
	}
	job.Progress = append(job.Progress, p)
	sort.Slice(job.Progress, func(i, j int) bool { return job.Progress[i].Worker < job.Progress[j].Worker })
}
