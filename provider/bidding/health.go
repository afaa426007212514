package bidding

import (
	"context"
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// watchGPUs checks the GPUs of open bids every HealthInterval: a bid whose
// GPUs failed is withdrawn, since a won lease could not be served.
func (r *Role) watchGPUs(ctx context.Context) {
	rolekit.Every(ctx, r.opts.HealthInterval, func() { r.checkBids(ctx) })
}

func (r *Role) checkBids(ctx context.Context) {
	var bids []db.BidRecord
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		bids, err = tx.Bids()
		return err
	}); err != nil {
		r.log.Error("reading the database failed", "err", err)
		return
	}
	for _, b := range bids {
		if b.Status != db.BidPlaced || b.Height == 0 {
			continue
		}
		if bad := r.opts.GPUs.UnhealthyLeased(b.GPUs); len(bad) > 0 {
			r.withdrawBid(ctx, b.JobID, fmt.Sprintf("GPU %s: %s", bad[0].UUID, bad[0].Reason))
		}
	}
}

// withdrawBid takes a bid back from the chain and frees what it reserved.
func (r *Role) withdrawBid(ctx context.Context, jobID uint64, why string) {
	_, err := r.opts.Submit(ctx, &markettypes.MsgWithdrawBid{Provider: r.opts.Operator, JobId: jobID})
	var txErr *chain.TxError
	if err != nil && !errors.As(err, &txErr) {
		r.log.Warn("withdrawing a stale bid failed", "job", jobID, "err", err)
		return
	}
	// A refused withdrawal means the auction already closed: the bid is no
	// longer open either way, and the follower records how it ended.
	err = r.opts.DB.Update(func(tx *db.Tx) error {
		// The follower may have recorded the withdrawal's event already.
		if bid, ok, err := tx.Bid(jobID); err != nil || !ok || (bid.Status != db.BidPlaced && bid.Status != db.BidWithdrawn) {
			return err
		}
		if err := setBidStatus(tx, jobID, db.BidWithdrawn); err != nil {
			return err
		}
		rec, _, err := tx.Job(jobID)
		if err != nil {
			return err
		}
		rec.Decision = "bid withdrawn: " + why
		return tx.PutJob(rec)
	})
	if err != nil {
		r.log.Error("recording a withdrawn bid failed", "job", jobID, "err", err)
		return
	}
	r.opts.Metrics.Bid(metrics.BidWithdrawn)
	r.log.Warn("stale bid withdrawn", "job", jobID, "why", why)
}
