package leases

import (
	"context"
	"fmt"
	"slices"

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
