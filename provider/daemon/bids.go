package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/bidder"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// enqueueBid asks the bidder to decide on a job. Jobs are re-read from the
// chain when their turn comes, so a duplicate costs one query.
func (d *Daemon) enqueueBid(jobID uint64) {
	select {
	case d.bidQueue <- jobID:
	default:
		// A full queue means the bidder is far behind; the next start-up
		// reconciliation reconsiders every open job.
		d.log.Warn("bid queue full; job left for the next reconciliation", "job", jobID)
	}
}

// runBidder decides on queued jobs one at a time, so two decisions never
// offer the same GPU.
func (d *Daemon) runBidder(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case jobID := <-d.bidQueue:
			if err := d.considerJob(ctx, jobID); err != nil && ctx.Err() == nil {
				d.log.Warn("bidding failed", "job", jobID, "err", err)
				d.noteError(err)
			}
		}
	}
}

// considerJob bids on an open job when a free, healthy set of GPUs and a
// runtime can serve it at a price under its ceiling, and records the
// decision either way.
func (d *Daemon) considerJob(ctx context.Context, jobID uint64) error {
	if !d.bidding {
		return nil
	}
	res, err := d.market.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
	if err != nil {
		return fmt.Errorf("reading job: %w", err)
	}
	job := res.Job
	if job.State != markettypes.JOB_STATE_OPEN {
		return nil
	}
	var gpus []string
	var decision string
	price, chosen, runtimeName, skip := d.decide(ctx, job)
	err = d.db.Update(func(tx *db.Tx) error {
		if bid, ok, err := tx.Bid(jobID); err != nil || (ok && bid.Status == db.BidPlaced) {
			skip = "already bid"
			return err
		}
		if skip == "" {
			// Reserve inside the transaction that checks what is free.
			free, err := d.freeGPUs(tx)
			if err != nil {
				return err
			}
			for _, g := range chosen {
				if !slices.ContainsFunc(free, func(f bidder.GPU) bool { return f.UUID == g.UUID }) {
					skip = "its GPUs were taken meanwhile"
					break
				}
				gpus = append(gpus, g.UUID)
			}
		}
		rec, _, err := tx.Job(jobID)
		if err != nil {
			return err
		}
		rec.JobID = jobID
		if rec.SeenHeight == 0 {
			rec.SeenHeight = job.CreatedHeight
		}
		rec.BiddingDeadline = job.BiddingDeadline
		if skip != "" {
			decision = "skip: " + skip
		} else {
			decision = fmt.Sprintf("bid %s per GPU-hour on %d×%s (%s runtime)", price, len(chosen), chosen[0].Model, runtimeName)
			if err := tx.PutBid(db.BidRecord{JobID: jobID, Price: price.String(), Status: db.BidPlaced, GPUs: gpus}); err != nil {
				return err
			}
		}
		rec.Decision = decision
		return tx.PutJob(rec)
	})
	if err != nil {
		return err
	}
	if skip != "" {
		if skip != "already bid" {
			d.metrics.Bid(metrics.BidSkipped)
			d.log.Info("not bidding", "job", jobID, "why", skip)
		}
		return nil
	}

	result, err := d.submit(ctx, &markettypes.MsgPlaceBid{Provider: d.operator, JobId: jobID, PricePerGpuHour: price})
	if err != nil {
		d.metrics.Bid(metrics.BidFailed)
		// The bid is not on chain: release the GPUs it reserved.
		return errors.Join(fmt.Errorf("placing bid: %w", err), d.db.Update(func(tx *db.Tx) error {
			rec, _, _ := tx.Job(jobID)
			rec.Decision = "bid failed: " + err.Error()
			return errors.Join(tx.DeleteBid(jobID), tx.PutJob(rec))
		}))
	}
	err = d.db.Update(func(tx *db.Tx) error {
		bid, ok, err := tx.Bid(jobID)
		if err != nil || !ok {
			return err
		}
		bid.Height, bid.TxHash = result.Height, result.Hash
		return tx.PutBid(bid)
	})
	d.metrics.Bid(metrics.BidPlaced)
	d.metrics.BidLatency(job.CreatedHeight, result.Height)
	d.log.Info("bid placed", "job", jobID, "price_per_gpu_hour", price.String(), "gpus", gpus,
		"job_height", job.CreatedHeight, "bid_height", result.Height, "tx", result.Hash)
	return err
}

// decide returns the price, GPUs and runtime of a bid on job, or why there is none.
func (d *Daemon) decide(ctx context.Context, job markettypes.Job) (price sdk.Coin, gpus []bidder.GPU, runtimeName, skip string) {
	if job.Spec.DatasetId != "" {
		return price, nil, "", "dataset-backed jobs need the shard data, which this sidecar does not fetch yet"
	}
	rt, err := d.runtimes.forJob(ctx, job)
	if err != nil {
		return price, nil, "", err.Error()
	}
	var free []bidder.GPU
	if err := d.db.View(func(tx *db.Tx) error {
		free, err = d.freeGPUs(tx)
		return err
	}); err != nil {
		return price, nil, "", err.Error()
	}
	gpus, err = bidder.Match(job.Spec, free)
	if err != nil {
		return price, nil, "", err.Error()
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	price, err = d.pricer.Price(pctx, job.Spec, gpus)
	if err != nil {
		return price, nil, "", err.Error()
	}
	return price, gpus, rt.Name(), ""
}

// freeGPUs are the healthy GPUs that neither serve a lease nor are reserved
// by an open bid.
func (d *Daemon) freeGPUs(tx *db.Tx) ([]bidder.GPU, error) {
	taken, err := takenGPUs(tx)
	if err != nil {
		return nil, err
	}
	var free []bidder.GPU
	for _, g := range d.inventory.Healthy() {
		if _, used := taken[g.UUID]; !used {
			free = append(free, bidder.GPU{UUID: g.UUID, Model: d.modelName(g.Name), VRAMMiB: g.MemoryMiB})
		}
	}
	return free, nil
}

// takenGPUs maps each GPU serving an active lease to the lease, and each
// reserved by an open bid to 0.
func takenGPUs(tx *db.Tx) (map[string]uint64, error) {
	taken := map[string]uint64{}
	bids, err := tx.Bids()
	if err != nil {
		return nil, err
	}
	for _, b := range bids {
		if b.Status == db.BidPlaced {
			for _, u := range b.GPUs {
				taken[u] = 0
			}
		}
	}
	leases, err := tx.Leases()
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		if l.Status == db.LeaseActive {
			for _, u := range l.GPUs {
				taken[u] = l.LeaseID
			}
		}
	}
	return taken, nil
}

func (d *Daemon) modelName(nvmlName string) string {
	if m, ok := d.cfg.GPUs.ModelNames[nvmlName]; ok {
		return m
	}
	return gpu.ModelName(nvmlName)
}

// newLeaseRecord starts the record of a lease the provider won. Its GPUs are
// the ones the job's bid reserved; if those already serve another worker of
// the same job, free ones that fit are taken instead.
func (d *Daemon) newLeaseRecord(tx *db.Tx, leaseID, jobID uint64, worker, want uint32, resumeStep uint64, deadline, height int64) (db.LeaseRecord, error) {
	rec := db.LeaseRecord{
		LeaseID: leaseID, JobID: jobID, Worker: worker, Status: db.LeaseActive,
		Dir:        filepath.Join(d.cfg.Storage.WorkDir, fmt.Sprintf("lease-%d", leaseID)),
		ResumeStep: resumeStep, LastCheckpointStep: resumeStep, CheckpointDeadline: deadline, UpdatedHeight: height,
	}
	taken, err := takenGPUs(tx)
	if err != nil {
		return rec, err
	}
	if bid, ok, err := tx.Bid(jobID); err != nil {
		return rec, err
	} else if ok {
		free := true
		for _, u := range bid.GPUs {
			if l := taken[u]; l != 0 && l != leaseID {
				free = false
			}
		}
		if free {
			rec.GPUs = bid.GPUs
			return rec, nil
		}
	}
	// No reservation to use (a second worker of one job, or a bid placed
	// before this store existed): the lease still needs GPUs. The runtime
	// decides later whether the job can be served without them.
	for _, g := range d.inventory.Healthy() {
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
