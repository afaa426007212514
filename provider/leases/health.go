package leases

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/depinchain/depinchain/provider/db"
)

// watchGPUs checks the GPUs of active leases every HealthInterval: a lease
// whose GPU failed is flagged with the reason, shown by the status API.
func (r *Role) watchGPUs(ctx context.Context) {
	ticker := time.NewTicker(r.opts.HealthInterval)
	defer ticker.Stop()
	for {
		r.checkLeases()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
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
