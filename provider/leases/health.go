package leases

import (
	"context"
	"fmt"
	"slices"

	markettypes "github.com/depinchain/depinchain/x/market/types"

	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
)

// watchGPUs checks the GPUs of active leases every HealthInterval: a lease
// whose GPU failed is flagged with the reason, shown by the status API.
func (r *Role) watchGPUs(ctx context.Context) {
	rolekit.Every(ctx, r.opts.HealthInterval, r.checkLeases)
}

func (r *Role) checkLeases() {
	var leases []db.LeaseRecord
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		leases, err = tx.Leases()
		return err
	}); err != nil {
		r.log.Error("reading the database failed", "err", err)
		return
	}
	active := 0
	for _, l := range leases {
		if l.Status != db.LeaseActive {
			continue
		}
		active++
		for _, bad := range r.opts.GPUs.UnhealthyLeased(l.GPUs) {
			problem := fmt.Sprintf("GPU %s: %s", bad.UUID, bad.Reason)
			if !slices.Contains(l.Problems, problem) {
				r.log.Error("a GPU serving a lease failed", "lease", l.LeaseID, "gpu", bad.UUID, "reason", bad.Reason)
				r.flagLease(l.LeaseID, problem)
			}
		}
	}
	r.opts.Metrics.SetLeasesActive(active)
}

// watchDeadlines re-reads the checkpoint deadline of every active lease from
// the chain every HealthInterval. The chain moves a lease's deadline on with
// each checkpoint it accepts and says so in no event, so the database's
// deadline (the one the lease was created with) is brought up to date here,
// and the metric an operator's alert watches follows it.
func (r *Role) watchDeadlines(ctx context.Context) {
	rolekit.Every(ctx, r.opts.HealthInterval, func() { r.refreshDeadlines(ctx) })
}

func (r *Role) refreshDeadlines(ctx context.Context) {
	var leases []db.LeaseRecord
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		leases, err = tx.Leases()
		return err
	}); err != nil {
		r.log.Error("reading the database failed", "err", err)
		return
	}
	for _, l := range leases {
		if l.Status != db.LeaseActive || ctx.Err() != nil {
			continue
		}
		res, err := r.opts.Chain.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: l.LeaseID})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("reading a lease's checkpoint deadline failed", "lease", l.LeaseID, "err", err)
			}
			continue
		}
		if res.Lease.State != markettypes.LEASE_STATE_ACTIVE {
			continue // closed; the follower brings the event
		}
		deadline := res.Lease.CheckpointDeadline
		r.opts.Metrics.SetCheckpointDeadline(l.LeaseID, deadline)
		if deadline != l.CheckpointDeadline {
			if err := r.updateLease(l.LeaseID, func(rec *db.LeaseRecord) {
				if rec.Status == db.LeaseActive {
					rec.CheckpointDeadline = deadline
				}
			}); err != nil {
				r.log.Error("recording a lease's checkpoint deadline failed", "lease", l.LeaseID, "err", err)
			}
		}
	}
}
