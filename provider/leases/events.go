package leases

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

// HandleEvent records what an event means for the operator's leases and
// checkpoints in tx and returns what to do once tx commits: start or stop
// a trainer, change what the catalog keeps, withdraw earnings.
func (r *Role) HandleEvent(ctx context.Context, tx *db.Tx, ev chain.Event) (func(), error) {
	switch e := ev.Message.(type) {
	case *markettypes.EventLeaseCreated:
		return r.leaseCreated(ctx, tx, ev.Height, e)
	case *markettypes.EventLeaseClosed:
		return r.leaseClosed(tx, ev.Height, e)
	case *markettypes.EventJobClosed:
		return func() { r.opts.Catalog.ReleaseJob(e.JobId) }, nil
	case *markettypes.EventEarningsWithdrawn:
		if e.Provider == r.opts.Operator {
			r.opts.Metrics.EarningsWithdrawn(e.Amount.Amount.Uint64())
			r.log.Info("earnings withdrawn", "leases", e.LeaseIds, "amount", e.Amount.String())
		}
		return nil, nil
	case *verifytypes.EventCheckpointSubmitted:
		if e.Provider != r.opts.Operator {
			return nil, nil
		}
		cp, ok, err := tx.Checkpoint(e.LeaseId, e.Index)
		if err != nil || !ok || cp.Height != 0 {
			return nil, err
		}
		cp.Height, cp.TxHash = ev.Height, ev.Source
		return nil, tx.PutCheckpoint(cp)
	case *verifytypes.EventCheckpointFinalized:
		return r.checkpointFinalized(tx, e)
	case *verifytypes.EventCheckpointRejected:
		return r.checkpointRejected(tx, e)
	case *verifytypes.EventChallengeOpened:
		return r.challengeOpened(tx, e)
	case *verifytypes.EventChallengeResolved:
		if e.Provider != r.opts.Operator {
			return nil, nil
		}
		return func() {
			ref := checkpoint.Ref{LeaseID: e.LeaseId, Index: e.CheckpointIndex}
			r.opts.Catalog.MarkResolved(ref, e.ChallengeId) //nolint:errcheck // unknown only if its folder is gone
			r.opts.Catalog.MarkResolved(ref, 0)             //nolint:errcheck // the placeholder Resume uses
		}, nil
	}
	return nil, nil
}

func (r *Role) leaseCreated(ctx context.Context, tx *db.Tx, height int64, e *markettypes.EventLeaseCreated) (func(), error) {
	if e.Provider != r.opts.Operator {
		return nil, nil
	}
	rec, err := r.newLeaseRecord(tx, e.LeaseId, e.JobId, e.Worker, e.Gpus, e.ResumeStep, e.CheckpointDeadline, height)
	if err != nil {
		return nil, err
	}
	if err := tx.PutLease(rec); err != nil {
		return nil, err
	}
	r.opts.Metrics.LeaseWon()
	r.opts.Metrics.SetCheckpointDeadline(e.LeaseId, e.CheckpointDeadline)
	r.log.Info("lease won", "lease", e.LeaseId, "job", e.JobId, "worker", e.Worker, "gpus", rec.GPUs,
		"price_per_gpu_hour", e.PricePerGpuHour.String(), "resume_step", e.ResumeStep, "checkpoint_deadline", e.CheckpointDeadline)
	return func() { r.startLease(ctx, e.LeaseId) }, nil
}

func (r *Role) leaseClosed(tx *db.Tx, height int64, e *markettypes.EventLeaseClosed) (func(), error) {
	rec, ok, err := tx.Lease(e.LeaseId)
	if err != nil || !ok {
		return nil, err
	}
	rec.Status, rec.CloseReason, rec.UpdatedHeight = db.LeaseClosed, e.Reason.String(), height
	if err := tx.PutLease(rec); err != nil {
		return nil, err
	}
	r.opts.Metrics.LeaseClosed(e.LeaseId)
	r.log.Info("lease closed", "lease", e.LeaseId, "job", e.JobId, "reason", e.Reason.String(), "refunded", e.Refunded.String())
	return func() { r.stopLease(e.LeaseId) }, nil
}

func (r *Role) checkpointFinalized(tx *db.Tx, e *verifytypes.EventCheckpointFinalized) (func(), error) {
	ok, err := r.setCheckpointStatus(tx, e.LeaseId, e.Index, db.CheckpointFinalized)
	if err != nil || !ok {
		return nil, err
	}
	r.opts.Metrics.Checkpoint(metrics.CheckpointFinalized)
	r.log.Info("checkpoint final", "lease", e.LeaseId, "index", e.Index, "end_step", e.EndStep, "released", e.Released.String())
	return func() {
		r.opts.Catalog.MarkFinal(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}, time.Now()) //nolint:errcheck // unknown only if its folder is gone
		r.requestWithdrawal()
	}, nil
}

func (r *Role) checkpointRejected(tx *db.Tx, e *verifytypes.EventCheckpointRejected) (func(), error) {
	ok, err := r.setCheckpointStatus(tx, e.LeaseId, e.Index, db.CheckpointRejected)
	if err != nil || !ok {
		return nil, err
	}
	r.opts.Metrics.Checkpoint(metrics.CheckpointRejected)
	r.log.Warn("checkpoint rejected", "lease", e.LeaseId, "index", e.Index, "reason", e.Reason)
	return func() { r.opts.Catalog.Discard(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}) }, nil //nolint:errcheck // kept if a dispute needs it
}

// challengeOpened marks a challenged checkpoint of the operator's, which the
// catalog then keeps until the challenge is resolved.
func (r *Role) challengeOpened(tx *db.Tx, e *verifytypes.EventChallengeOpened) (func(), error) {
	if e.Provider != r.opts.Operator {
		return nil, nil
	}
	if _, err := r.setCheckpointStatus(tx, e.LeaseId, e.CheckpointIndex, db.CheckpointChallenged); err != nil {
		return nil, err
	}
	r.log.Warn("checkpoint challenged", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex, "challenger", e.Challenger)
	return func() {
		r.opts.Catalog.MarkDisputed(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.CheckpointIndex}, e.ChallengeId) //nolint:errcheck // unknown only if its folder is gone
	}, nil
}

// setCheckpointStatus updates one of the provider's checkpoint records; ok is
// false when there is none: a checkpoint of another provider, or one of the
// operator's not recorded yet, whose status recordCheckpoint applies.
func (r *Role) setCheckpointStatus(tx *db.Tx, leaseID, index uint64, status db.CheckpointStatus) (ok bool, err error) {
	cp, ok, err := tx.Checkpoint(leaseID, index)
	if err != nil {
		return false, err
	}
	if !ok {
		// Only the operator's leases have records.
		if _, ours, err := tx.Lease(leaseID); err != nil || !ours {
			return false, err
		}
		r.unrecordedMu.Lock()
		r.unrecorded[checkpoint.Ref{LeaseID: leaseID, Index: index}] = status
		r.unrecordedMu.Unlock()
		return false, nil
	}
	cp.Status = status
	return true, tx.PutCheckpoint(cp)
}
