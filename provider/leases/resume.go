package leases

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// Resume rebuilds what lives only in memory from the database, then
// reconciles the database with the chain's snapshot (nil when it could not
// be read: the follower's replay then brings what happened meanwhile).
func (r *Role) Resume(ctx context.Context, snap *chain.Snapshot) error {
	if err := r.restore(ctx); err != nil {
		return err
	}
	if snap == nil {
		return nil
	}
	if err := r.reconcile(ctx, snap); err != nil {
		r.log.Warn("reconciling leases with the chain failed; the chain follower will catch up", "err", err)
	}
	return nil
}

// restore re-adds the retained checkpoints to the catalog (their folders are
// re-hashed, so a corrupted one is noticed) and starts a trainer for every
// lease still active.
func (r *Role) restore(ctx context.Context) error {
	var leases []db.LeaseRecord
	checkpoints := map[uint64][]db.CheckpointRecord{}
	err := r.opts.DB.View(func(tx *db.Tx) error {
		var err error
		if leases, err = tx.Leases(); err != nil {
			return err
		}
		for _, l := range leases {
			if checkpoints[l.LeaseID], err = tx.Checkpoints(l.LeaseID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, l := range leases {
		for _, cp := range checkpoints[l.LeaseID] {
			r.restoreCheckpoint(l, cp)
		}
		if l.Status == db.LeaseActive {
			r.startLease(ctx, l.LeaseID)
		}
	}
	return nil
}

func (r *Role) restoreCheckpoint(l db.LeaseRecord, cp db.CheckpointRecord) {
	if cp.Status == db.CheckpointRejected {
		return
	}
	if err := r.retain(l, cp.EndStep, cp.Index); err != nil {
		r.log.Warn("a submitted checkpoint's folder is gone; it cannot be served", "lease", l.LeaseID, "index", cp.Index, "err", err)
		return
	}
	ref := checkpoint.Ref{LeaseID: l.LeaseID, Index: cp.Index}
	switch cp.Status {
	case db.CheckpointFinalized:
		r.opts.Catalog.MarkFinal(ref, time.Now()) //nolint:errcheck // just added
	case db.CheckpointChallenged:
		r.opts.Catalog.MarkDisputed(ref, 0) //nolint:errcheck // just added; the follower replays the resolution
	}
}

// retain (re-)adds a lease's local checkpoint folder to the catalog.
func (r *Role) retain(l db.LeaseRecord, endStep, index uint64) error {
	cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(l.OutputDir(), endStep), endStep)
	if err != nil {
		return err
	}
	commitment, err := checkpoint.Commit(cp, checkpoint.HashOptions{})
	if err != nil {
		return err
	}
	return r.opts.Catalog.Add(checkpoint.Entry{
		Ref: checkpoint.Ref{LeaseID: l.LeaseID, Index: index}, JobID: l.JobID, Dir: cp.Dir, Commitment: commitment,
	})
}

// reconcile compares the database with the chain after a start: leases the
// chain gave the operator are served and leases the chain closed while the
// sidecar was away are closed here too. The follower then replays every
// block from the saved cursor, so this is a safety net, not the source of
// truth for events.
func (r *Role) reconcile(ctx context.Context, snap *chain.Snapshot) error {
	onChain := map[uint64]bool{}
	for _, l := range snap.ActiveLeases {
		onChain[l.Id] = true
	}
	var toStart, toStop []uint64
	err := r.opts.DB.Update(func(tx *db.Tx) error {
		local, err := tx.Leases()
		if err != nil {
			return err
		}
		known := map[uint64]bool{}
		for _, l := range local {
			known[l.LeaseID] = true
			if l.Status == db.LeaseActive && !onChain[l.LeaseID] {
				if stop, err := r.closeIfClosedOnChain(ctx, tx, l); err != nil {
					return err
				} else if stop {
					toStop = append(toStop, l.LeaseID)
				}
			}
		}
		for _, l := range snap.ActiveLeases {
			if known[l.Id] {
				continue
			}
			rec, err := r.newLeaseRecord(tx, l.Id, l.JobId, l.Worker, l.Gpus, l.ResumeStep, l.CheckpointDeadline, snap.Height)
			if err != nil {
				return err
			}
			if err := tx.PutLease(rec); err != nil {
				return err
			}
			toStart = append(toStart, l.Id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range toStop {
		r.stopLease(id)
	}
	for _, id := range toStart {
		r.startLease(ctx, id)
	}
	r.log.Info("reconciled leases with the chain", "height", snap.Height, "active_leases", len(snap.ActiveLeases))
	return nil
}

// closeIfClosedOnChain records a local active lease as closed when the chain
// closed it; a lease the chain cannot be asked about is left as it is.
func (r *Role) closeIfClosedOnChain(ctx context.Context, tx *db.Tx, l db.LeaseRecord) (bool, error) {
	res, err := r.opts.Chain.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: l.LeaseID})
	if err != nil || res.Lease.State == markettypes.LEASE_STATE_ACTIVE {
		return false, nil
	}
	l.Status, l.CloseReason = db.LeaseClosed, res.Lease.CloseReason.String()
	return true, tx.PutLease(l)
}

// fetchResumeCheckpoint puts the job's last final checkpoint, where a
// re-leased job resumes, into the lease's output as the checkpoint at
// lease.ResumeStep: from this provider's own catalog when it trained that
// part, else downloaded from the provider that did and verified against the
// roots on chain.
func (r *Role) fetchResumeCheckpoint(ctx context.Context, lease markettypes.Lease, job markettypes.Job, out string) error {
	client, ref, onChain, err := r.fetcher.At(ctx, lease.ResumeUri)
	if err != nil {
		return err
	}
	if custodySpecOf(job) != nil {
		if _, own := r.opts.Catalog.Lookup(ref); !own {
			// Never from the old trainer alone: its host may be gone for good.
			return r.resumeFromCustody(ctx, lease, ref, onChain, out)
		}
	}
	// The folder needs h_(step-1) besides h_step: a checkpoint's trace holds
	// at least the step before its state.
	var state []byte
	var before merkle.Hash
	if entry, ok := r.opts.Catalog.Lookup(ref); ok && slices.Equal(entry.Commitment.State.Root[:], onChain.StateRoot) {
		local, err := trainer.ReadCheckpoint(entry.Dir, onChain.EndStep)
		if err != nil {
			return err
		}
		before = local.Trace.Hashes[len(local.Trace.Hashes)-2]
		if state, err = os.ReadFile(local.StatePath()); err != nil {
			return err
		}
	} else {
		if state, err = r.fetcher.State(ctx, client, ref, onChain); err != nil {
			return err
		}
		traceRoot, err := merkle.HashFromBytes(onChain.TraceRoot)
		if err != nil {
			return err
		}
		if before, err = client.TraceHash(ctx, ref, onChain.EndStep-1, traceRoot, onChain.StartStep, onChain.EndStep); err != nil {
			return err
		}
	}
	// The exact workload's h is the state's root, a container job's its SHA-256.
	h, root := trainer.HashStateBytes(state)
	if slices.Equal(root[:], lease.ResumeHash) {
		h = root
	}
	if !slices.Equal(h[:], lease.ResumeHash) {
		return fmt.Errorf("checkpoint %s: its state hashes to %s (root %s), the lease resumes from %x", ref, h, root, lease.ResumeHash)
	}
	if _, err := trainer.WriteCheckpoint(out, lease.ResumeStep, state, []merkle.Hash{before, h}); err != nil {
		return err
	}
	r.log.Info("resume checkpoint fetched", "lease", lease.Id, "step", lease.ResumeStep, "from", lease.ResumeUri, "bytes", len(state))
	return nil
}
