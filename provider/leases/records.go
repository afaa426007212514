package leases

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// newLeaseRecord starts the record of a lease the provider won. Its GPUs are
// the ones the job's bid reserved; if those already serve another worker of
// the same job, free ones that fit are taken instead.
func (r *Role) newLeaseRecord(tx *db.Tx, leaseID, jobID uint64, worker, want uint32, resumeStep uint64, deadline, height int64) (db.LeaseRecord, error) {
	rec := db.LeaseRecord{
		LeaseID: leaseID, JobID: jobID, Worker: worker, Status: db.LeaseActive,
		Dir:        filepath.Join(r.opts.WorkDir, fmt.Sprintf("lease-%d", leaseID)),
		ResumeStep: resumeStep, LastCheckpointStep: resumeStep, CheckpointDeadline: deadline, UpdatedHeight: height,
	}
	taken, err := tx.TakenGPUs()
	if err != nil {
		return rec, err
	}
	if bid, ok, err := tx.Bid(jobID); err != nil {
		return rec, err
	} else if ok && !slices.ContainsFunc(bid.GPUs, func(u string) bool { l := taken[u]; return l != 0 && l != leaseID }) {
		rec.GPUs = bid.GPUs
		return rec, nil
	}
	// No reservation to use (a second worker of one job, or a bid placed
	// before this database existed): the lease still needs GPUs. The
	// runtime decides later whether the job can be served without them.
	for _, g := range r.opts.GPUs.Healthy() {
		if _, used := taken[g.UUID]; !used {
			rec.GPUs = append(rec.GPUs, g.UUID)
		}
	}
	if uint32(len(rec.GPUs)) > want {
		rec.GPUs = rec.GPUs[:want]
	}
	if uint32(len(rec.GPUs)) < want {
		rec.Problems = append(rec.Problems, fmt.Sprintf("won needing %d GPUs but only %d are free", want, len(rec.GPUs)))
	}
	return rec, nil
}

// recordCheckpoint stores a checkpoint record and the lease's newest
// checkpoint step.
func (r *Role) recordCheckpoint(cp db.CheckpointRecord) error {
	ref := checkpoint.Ref{LeaseID: cp.LeaseID, Index: cp.Index}
	err := r.opts.DB.Update(func(tx *db.Tx) error {
		if prev, ok, err := tx.Checkpoint(cp.LeaseID, cp.Index); err != nil {
			return err
		} else if ok && prev.Status != db.CheckpointSubmitted {
			// The follower got there first (e.g. finalized during a restart).
			cp.Status = prev.Status
		}
		r.unrecordedMu.Lock()
		status, seen := r.unrecorded[ref]
		r.unrecordedMu.Unlock()
		if seen {
			// The follower got there before the record: challenged, or rejected.
			cp.Status = status
		}
		if err := tx.PutCheckpoint(cp); err != nil {
			return err
		}
		l, ok, err := tx.Lease(cp.LeaseID)
		if err != nil || !ok {
			return err
		}
		l.LastCheckpointStep = max(l.LastCheckpointStep, cp.EndStep)
		return tx.PutLease(l)
	})
	if err == nil {
		r.unrecordedMu.Lock()
		delete(r.unrecorded, ref)
		r.unrecordedMu.Unlock()
	}
	return err
}

func checkpointStatus(s verifytypes.CheckpointStatus) db.CheckpointStatus {
	switch s {
	case verifytypes.CHECKPOINT_STATUS_FINAL:
		return db.CheckpointFinalized
	case verifytypes.CHECKPOINT_STATUS_REJECTED:
		return db.CheckpointRejected
	default:
		return db.CheckpointSubmitted
	}
}

func (r *Role) updateLease(leaseID uint64, change func(*db.LeaseRecord)) error {
	return r.opts.DB.Update(func(tx *db.Tx) error {
		l, ok, err := tx.Lease(leaseID)
		if err != nil || !ok {
			return err
		}
		change(&l)
		return tx.PutLease(l)
	})
}

// flagLease records a problem with a lease, shown by the status API.
func (r *Role) flagLease(leaseID uint64, problem string) {
	err := r.updateLease(leaseID, func(l *db.LeaseRecord) {
		if !slices.Contains(l.Problems, problem) {
			l.Problems = append(l.Problems, problem)
		}
	})
	if err != nil {
		r.log.Error("recording a lease problem failed", "lease", leaseID, "problem", problem, "err", err)
	}
}
