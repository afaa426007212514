package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// submit sends one message through the submitter and counts the outcome.
func (d *Daemon) submit(ctx context.Context, msg sdk.Msg) (*chain.TxResult, error) {
	res, err := d.submitter.Submit(ctx, msg)
	d.metrics.Transaction(sdk.MsgTypeURL(msg), err == nil)
	return res, err
}

// requestWithdrawal asks the earnings worker to withdraw; requests made
// while one is pending are one withdrawal.
func (d *Daemon) requestWithdrawal() {
	select {
	case d.withdrawQueue <- struct{}{}:
	default:
	}
}

// runWithdrawals withdraws the operator's released earnings whenever a
// checkpoint becomes final, and once at start for anything released while
// the sidecar was away.
func (d *Daemon) runWithdrawals(ctx context.Context) error {
	d.requestWithdrawal()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.withdrawQueue:
		}
		if err := d.withdrawEarnings(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("withdrawing earnings failed; retrying with the next final checkpoint", "err", err)
			d.noteError(err)
		}
	}
}

func (d *Daemon) withdrawEarnings(ctx context.Context) error {
	var ids []uint64
	req := &markettypes.QueryLeasesRequest{Provider: d.operator}
	for {
		res, err := d.market.Leases(ctx, req)
		if err != nil {
			return err
		}
		for _, l := range res.Leases {
			if l.Withdrawable.IsPositive() {
				ids = append(ids, l.Id)
			}
		}
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			break
		}
		req.Pagination = &query.PageRequest{Key: res.Pagination.NextKey}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := d.submit(ctx, &markettypes.MsgWithdrawEarnings{Provider: d.operator, LeaseIds: ids})
	return err
}

// runHealth re-reads GPU telemetry and health. A GPU that fails stops being
// offered at once; the lease it serves is flagged and open bids that
// reserved it are withdrawn, since a won lease could not be served.
func (d *Daemon) runHealth(ctx context.Context) error {
	ticker := time.NewTicker(d.cfg.GPUs.RefreshInterval.Duration)
	defer ticker.Stop()
	for {
		d.checkHealth(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (d *Daemon) checkHealth(ctx context.Context) {
	if err := d.inventory.Refresh(); err != nil {
		d.log.Warn("reading GPUs failed", "err", err)
	}
	var leases []db.LeaseRecord
	var bids []db.BidRecord
	taken := map[string]uint64{}
	err := d.db.View(func(tx *db.Tx) error {
		var err error
		if leases, err = tx.Leases(); err != nil {
			return err
		}
		if bids, err = tx.Bids(); err != nil {
			return err
		}
		taken, err = takenGPUs(tx)
		return err
	})
	if err != nil {
		d.log.Error("reading the store failed", "err", err)
		return
	}
	d.metrics.ObserveGPUs(d.inventory.GPUs(), d.modelName, func(uuid string) uint64 { return taken[uuid] })
	active := 0
	for _, l := range leases {
		if l.Status == db.LeaseActive {
			active++
		}
	}
	d.metrics.SetLeasesActive(active)
	for _, l := range leases {
		if l.Status != db.LeaseActive {
			continue
		}
		for _, bad := range d.inventory.UnhealthyLeased(l.GPUs) {
			problem := fmt.Sprintf("GPU %s: %s", bad.UUID, bad.Reason)
			if !slices.Contains(l.Problems, problem) {
				d.log.Error("a GPU serving a lease failed", "lease", l.LeaseID, "gpu", bad.UUID, "reason", bad.Reason)
				d.flagLease(l.LeaseID, problem)
			}
		}
	}
	for _, b := range bids {
		if b.Status != db.BidPlaced || b.Height == 0 {
			continue
		}
		if bad := d.inventory.UnhealthyLeased(b.GPUs); len(bad) > 0 {
			d.withdrawBid(ctx, b.JobID, fmt.Sprintf("GPU %s: %s", bad[0].UUID, bad[0].Reason))
		}
	}
}

// withdrawBid takes a bid back from the chain and frees what it reserved.
func (d *Daemon) withdrawBid(ctx context.Context, jobID uint64, why string) {
	_, err := d.submit(ctx, &markettypes.MsgWithdrawBid{Provider: d.operator, JobId: jobID})
	var txErr *chain.TxError
	if err != nil && !errors.As(err, &txErr) {
		d.log.Warn("withdrawing a stale bid failed", "job", jobID, "err", err)
		return
	}
	// A refused withdrawal means the auction already closed: the bid is no
	// longer open either way, and the follower records how it ended.
	err = d.db.Update(func(tx *db.Tx) error {
		// The follower may have recorded the withdrawal's event already.
		if bid, ok, err := tx.Bid(jobID); err != nil || !ok || (bid.Status != db.BidPlaced && bid.Status != db.BidWithdrawn) {
			return err
		}
		if err := d.setBidStatus(tx, jobID, db.BidWithdrawn); err != nil {
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
		d.log.Error("recording a withdrawn bid failed", "job", jobID, "err", err)
		return
	}
	d.metrics.Bid(metrics.BidWithdrawn)
	d.log.Warn("stale bid withdrawn", "job", jobID, "why", why)
}

// runRetention prunes checkpoints the catalog no longer needs to keep.
func (d *Daemon) runRetention(ctx context.Context) error {
	ticker := time.NewTicker(time.Minute)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		pruned, err := d.catalog.Prune(time.Now())
		for _, ref := range pruned {
			d.log.Info("checkpoint pruned", "checkpoint", ref.String())
		}
		if err != nil {
			d.log.Warn("pruning checkpoints failed", "err", err)
		}
	}
}

// runChainMetrics exports the follower's progress.
func (d *Daemon) runChainMetrics(ctx context.Context) error {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		st := d.follower.Status()
		d.metrics.SetCursorHeight(st.CursorHeight)
		d.metrics.SetChainHeight(st.ChainHeight)
		d.metrics.SetWebsocketConnected(st.WebsocketConnected)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// notReady lists why the daemon should not be sent traffic yet.
func (d *Daemon) notReady() []string {
	var reasons []string
	d.mu.Lock()
	if !d.ready {
		reasons = append(reasons, "starting or stopping")
	}
	d.mu.Unlock()
	if st := d.follower.Status(); st.ChainHeight == 0 {
		reasons = append(reasons, "chain height unknown yet")
	} else if st.Lag > maxReadyLag {
		reasons = append(reasons, fmt.Sprintf("catching up: %d blocks behind", st.Lag))
	}
	return reasons
}

// maxReadyLag is how far behind the chain the follower may be while ready.
const maxReadyLag = 5
