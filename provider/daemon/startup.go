package daemon

import (
	"context"
	"fmt"
	"time"

	rpchttp "github.com/cometbft/cometbft/rpc/client/http"

	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// checkRPC makes sure the CometBFT RPC endpoint answers and runs the
// configured chain.
func checkRPC(ctx context.Context, addr, chainID string) error {
	client, err := rpchttp.New(addr, "/websocket")
	if err != nil {
		return fmt.Errorf("chain.rpc %s: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, err := client.Status(ctx)
	if err != nil {
		return fmt.Errorf("chain.rpc %s does not answer: %w", addr, err)
	}
	if status.NodeInfo.Network != chainID {
		return fmt.Errorf("chain.rpc %s runs chain %q, but chain.chain_id is %q", addr, status.NodeInfo.Network, chainID)
	}
	return nil
}

// restore rebuilds what lives only in memory from the store: the retained
// checkpoints the server offers (their folders are re-hashed, so a corrupted
// one is noticed) and a trainer for every lease still active.
func (d *Daemon) restore(ctx context.Context) error {
	var leases []db.LeaseRecord
	checkpoints := map[uint64][]db.CheckpointRecord{}
	err := d.db.View(func(tx *db.Tx) error {
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
			if cp.Status == db.CheckpointRejected {
				continue
			}
			if err := d.retain(l, cp.EndStep, cp.Index); err != nil {
				d.log.Warn("a submitted checkpoint's folder is gone; it cannot be served", "lease", l.LeaseID, "index", cp.Index, "err", err)
				continue
			}
			ref := checkpoint.Ref{LeaseID: l.LeaseID, Index: cp.Index}
			switch cp.Status {
			case db.CheckpointFinalized:
				d.catalog.MarkFinal(ref, time.Now()) //nolint:errcheck // just added
			case db.CheckpointChallenged:
				d.catalog.MarkDisputed(ref, 0) //nolint:errcheck // just added; the follower replays the resolution
			}
		}
		if l.Status == db.LeaseActive {
			d.startLease(ctx, l.LeaseID)
		}
	}
	return nil
}

// retain (re-)adds a lease's local checkpoint folder to the catalog.
func (d *Daemon) retain(l db.LeaseRecord, endStep, index uint64) error {
	cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(outputDir(l.Dir), endStep), endStep)
	if err != nil {
		return err
	}
	commitment, err := checkpoint.Commit(cp, checkpoint.HashOptions{})
	if err != nil {
		return err
	}
	return d.catalog.Add(checkpoint.Entry{
		Ref: checkpoint.Ref{LeaseID: l.LeaseID, Index: index}, JobID: l.JobID, Dir: cp.Dir, Commitment: commitment,
	})
}

// reconcile compares the store with the chain after a start: jobs open for
// bids are considered, leases the chain gave the operator are served and
// leases the chain closed while the sidecar was away are closed here too.
// The follower then replays every block from the saved cursor, so this is a
// safety net, not the source of truth for events.
func (d *Daemon) reconcile(ctx context.Context) error {
	snap, err := d.querier.Reconcile(ctx, d.operator)
	if err != nil {
		return err
	}
	onChain := map[uint64]markettypes.Lease{}
	for _, l := range snap.ActiveLeases {
		onChain[l.Id] = l
	}
	var toStart, toStop []uint64
	err = d.db.Update(func(tx *db.Tx) error {
		local, err := tx.Leases()
		if err != nil {
			return err
		}
		known := map[uint64]bool{}
		for _, l := range local {
			known[l.LeaseID] = true
			if _, active := onChain[l.LeaseID]; l.Status == db.LeaseActive && !active {
				res, err := d.market.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: l.LeaseID})
				if err != nil || res.Lease.State == markettypes.LEASE_STATE_ACTIVE {
					continue
				}
				l.Status, l.CloseReason = db.LeaseClosed, res.Lease.CloseReason.String()
				if err := tx.PutLease(l); err != nil {
					return err
				}
				toStop = append(toStop, l.LeaseID)
			}
		}
		for _, l := range snap.ActiveLeases {
			if known[l.Id] {
				continue
			}
			rec, err := d.newLeaseRecord(tx, l.Id, l.JobId, l.Worker, l.Gpus, l.ResumeStep, l.CheckpointDeadline, snap.Height)
			if err != nil {
				return err
			}
			if err := tx.PutLease(rec); err != nil {
				return err
			}
			toStart = append(toStart, l.Id)
		}
		for _, j := range snap.OpenJobs {
			if _, ok, err := tx.Job(j.Id); err != nil {
				return err
			} else if !ok {
				if err := tx.PutJob(db.JobRecord{JobID: j.Id, SeenHeight: snap.Height, BiddingDeadline: j.BiddingDeadline}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range toStop {
		d.stopLease(id)
	}
	for _, id := range toStart {
		d.startLease(ctx, id)
	}
	for _, j := range snap.OpenJobs {
		d.enqueueBid(j.Id)
	}
	d.log.Info("reconciled with the chain", "height", snap.Height, "open_jobs", len(snap.OpenJobs), "active_leases", len(snap.ActiveLeases))
	return nil
}
