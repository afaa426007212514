package daemon

import (
	"context"
	"time"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// handleHeight is the follower's handler: it records what one block's
// events mean for this provider in one store transaction, each event at
// most once, and only then acts (bids, starts and stops trainers) on what
// it recorded. Acting is idempotent and rebuilt from the store at start, so
// a crash between the two loses nothing.
func (d *Daemon) handleHeight(ctx context.Context, height int64, events []chain.Event) error {
	var actions []func()
	err := d.db.Update(func(tx *db.Tx) error {
		actions = actions[:0]
		for _, ev := range events {
			first, err := tx.MarkHandled(ev.Key(), height)
			if err != nil {
				return err
			}
			if !first {
				continue
			}
			act, err := d.apply(ctx, tx, height, ev)
			if err != nil {
				return err
			}
			if act != nil {
				actions = append(actions, act)
			}
		}
		// Keys of heights the cursor is long past can never be replayed.
		if height%1000 == 0 {
			if _, err := tx.PruneHandled(height - 1000); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, act := range actions {
		act()
	}
	if d.storageRole != nil {
		// The role queues its own work and ignores replays.
		for _, ev := range events {
			if err := d.storageRole.HandleEvent(ctx, height, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply records one event and returns what to do once it is committed.
func (d *Daemon) apply(ctx context.Context, tx *db.Tx, height int64, ev chain.Event) (func(), error) {
	switch e := ev.Message.(type) {
	case *markettypes.EventJobCreated:
		d.metrics.JobSeen()
		if err := tx.PutJob(db.JobRecord{JobID: e.JobId, SeenHeight: height, BiddingDeadline: e.BiddingDeadline}); err != nil {
			return nil, err
		}
		return func() { d.enqueueBid(e.JobId) }, nil

	case *markettypes.EventJobReopened:
		rec, _, err := tx.Job(e.JobId)
		if err != nil {
			return nil, err
		}
		rec.JobID, rec.SeenHeight, rec.BiddingDeadline, rec.Decision = e.JobId, height, e.BiddingDeadline, ""
		if err := tx.PutJob(rec); err != nil {
			return nil, err
		}
		// A bid from an earlier round is spent; the new round needs a new one.
		if bid, ok, err := tx.Bid(e.JobId); err != nil {
			return nil, err
		} else if ok && bid.Status != db.BidPlaced {
			if err := tx.DeleteBid(e.JobId); err != nil {
				return nil, err
			}
		}
		return func() { d.enqueueBid(e.JobId) }, nil

	case *markettypes.EventJobClosed:
		return func() { d.catalog.ReleaseJob(e.JobId) }, nil

	case *markettypes.EventBidPlaced:
		if e.Provider != d.operator {
			return nil, nil
		}
		bid, ok, err := tx.Bid(e.JobId)
		if err != nil || !ok || bid.Height != 0 {
			return nil, err
		}
		bid.Height, bid.TxHash = height, ev.Source
		return nil, tx.PutBid(bid)

	case *markettypes.EventBidWithdrawn:
		if e.Provider != d.operator {
			return nil, nil
		}
		return nil, d.setBidStatus(tx, e.JobId, db.BidWithdrawn)

	case *markettypes.EventBidLost:
		if e.Provider != d.operator {
			return nil, nil
		}
		d.metrics.Bid(metrics.BidLost)
		d.log.Info("bid lost", "job", e.JobId)
		return nil, d.setBidStatus(tx, e.JobId, db.BidLost)

	case *markettypes.EventLeaseCreated:
		if e.Provider != d.operator {
			return nil, nil
		}
		if err := d.setBidStatus(tx, e.JobId, db.BidWon); err != nil {
			return nil, err
		}
		rec, err := d.newLeaseRecord(tx, e.LeaseId, e.JobId, e.Worker, e.Gpus, e.ResumeStep, e.CheckpointDeadline, height)
		if err != nil {
			return nil, err
		}
		if err := tx.PutLease(rec); err != nil {
			return nil, err
		}
		d.metrics.LeaseWon()
		d.log.Info("lease won", "lease", e.LeaseId, "job", e.JobId, "worker", e.Worker, "gpus", rec.GPUs,
			"price_per_gpu_hour", e.PricePerGpuHour.String(), "resume_step", e.ResumeStep, "checkpoint_deadline", e.CheckpointDeadline)
		return func() { d.startLease(ctx, e.LeaseId) }, nil

	case *markettypes.EventLeaseClosed:
		rec, ok, err := tx.Lease(e.LeaseId)
		if err != nil || !ok {
			return nil, err
		}
		rec.Status, rec.CloseReason, rec.UpdatedHeight = db.LeaseClosed, e.Reason.String(), height
		if err := tx.PutLease(rec); err != nil {
			return nil, err
		}
		d.metrics.LeaseClosed(e.LeaseId)
		d.log.Info("lease closed", "lease", e.LeaseId, "job", e.JobId, "reason", e.Reason.String(), "refunded", e.Refunded.String())
		return func() { d.stopLease(e.LeaseId) }, nil

	case *markettypes.EventEarningsWithdrawn:
		if e.Provider == d.operator {
			d.metrics.EarningsWithdrawn(e.Amount.Amount.Uint64())
			d.log.Info("earnings withdrawn", "leases", e.LeaseIds, "amount", e.Amount.String())
		}
		return nil, nil

	case *verifytypes.EventCheckpointSubmitted:
		if e.Provider != d.operator {
			if d.cfg.Verifier.Enabled {
				return func() { d.enqueueVerification(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}) }, nil
			}
			return nil, nil
		}
		cp, ok, err := tx.Checkpoint(e.LeaseId, e.Index)
		if err != nil || !ok || cp.Height != 0 {
			return nil, err
		}
		cp.Height, cp.TxHash = height, ev.Source
		return nil, tx.PutCheckpoint(cp)

	case *verifytypes.EventCheckpointFinalized:
		ok, err := d.setCheckpointStatus(tx, e.LeaseId, e.Index, db.CheckpointFinalized)
		if err != nil || !ok {
			return nil, err
		}
		d.metrics.Checkpoint(metrics.CheckpointFinalized)
		d.log.Info("checkpoint final", "lease", e.LeaseId, "index", e.Index, "end_step", e.EndStep, "released", e.Released.String())
		return func() {
			d.catalog.MarkFinal(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}, time.Now()) //nolint:errcheck // unknown only if its folder is gone
			d.requestWithdrawal()
		}, nil

	case *verifytypes.EventCheckpointRejected:
		ok, err := d.setCheckpointStatus(tx, e.LeaseId, e.Index, db.CheckpointRejected)
		if err != nil || !ok {
			return nil, err
		}
		d.metrics.Checkpoint(metrics.CheckpointRejected)
		d.log.Warn("checkpoint rejected", "lease", e.LeaseId, "index", e.Index, "reason", e.Reason)
		return func() { d.catalog.Discard(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}) }, nil //nolint:errcheck // kept if a dispute needs it

	case *verifytypes.EventGameTurn:
		return func() { d.enqueueDispute(e.ChallengeId) }, nil

	case *verifytypes.EventChallengeOpened:
		if e.Provider != d.operator {
			return nil, nil
		}
		if _, err := d.setCheckpointStatus(tx, e.LeaseId, e.CheckpointIndex, db.CheckpointChallenged); err != nil {
			return nil, err
		}
		d.log.Warn("checkpoint challenged", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex, "challenger", e.Challenger)
		return func() {
			d.catalog.MarkDisputed(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.CheckpointIndex}, e.ChallengeId) //nolint:errcheck // unknown only if its folder is gone
			d.enqueueDispute(e.ChallengeId)
		}, nil

	case *verifytypes.EventChallengeResolved:
		if e.Challenger == d.operator {
			d.log.Info("our challenge resolved", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex,
				"outcome", e.Outcome.String(), "reason", e.Reason, "reward", e.Reward.String(), "slashed", e.Slashed.String())
			rec, ok, err := tx.Verification(e.LeaseId, e.CheckpointIndex)
			if err != nil {
				return nil, err
			}
			if ok {
				rec.Outcome = e.Outcome.String()
				if err := tx.PutVerification(rec); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		if e.Provider != d.operator {
			return nil, nil
		}
		d.log.Info("challenge resolved", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex,
			"outcome", e.Outcome.String(), "reason", e.Reason)
		return func() {
			ref := checkpoint.Ref{LeaseID: e.LeaseId, Index: e.CheckpointIndex}
			d.catalog.MarkResolved(ref, e.ChallengeId) //nolint:errcheck // unknown only if its folder is gone
			d.catalog.MarkResolved(ref, 0)             //nolint:errcheck // the placeholder restore uses
		}, nil
	}
	return nil, nil
}

func (d *Daemon) setBidStatus(tx *db.Tx, jobID uint64, status db.BidStatus) error {
	bid, ok, err := tx.Bid(jobID)
	if err != nil || !ok {
		return err
	}
	bid.Status = status
	return tx.PutBid(bid)
}

// setCheckpointStatus updates one of the provider's checkpoint records; ok is
// false for checkpoints of other providers.
func (d *Daemon) setCheckpointStatus(tx *db.Tx, leaseID, index uint64, status db.CheckpointStatus) (ok bool, err error) {
	cp, ok, err := tx.Checkpoint(leaseID, index)
	if err != nil || !ok {
		return false, err
	}
	cp.Status = status
	return true, tx.PutCheckpoint(cp)
}
