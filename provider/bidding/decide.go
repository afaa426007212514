package bidding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// skipAlreadyBid is the decision on a job the operator has an open bid on.
const skipAlreadyBid = "already bid"

// offer is a decision to bid: the price, the committed rate, the GPUs it
// reserves and the runtime that would train the job.
type offer struct {
	price   sdk.Coin
	rate    uint64
	gpus    []GPU
	runtime string
}

// considerJob bids on an open job when a free, healthy set of GPUs and a
// runtime can serve it at a price under its ceiling, and records the
// decision either way.
func (r *Role) considerJob(ctx context.Context, jobID uint64) error {
	if r.opts.Passive {
		return nil
	}
	// Logged once when it began (noteStanding), not for every job it blocks.
	if refused, err := r.refusal(ctx); err != nil || refused != "" {
		return err
	}
	res, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
	if err != nil {
		return fmt.Errorf("reading job: %w", err)
	}
	job := res.Job
	if job.State != markettypes.JOB_STATE_OPEN {
		return nil
	}
	// A job reopened for one of its slots (a training-together worker convicted or
	// dropped) while this operator serves another: the chain refuses a provider a
	// second slot of a job, and a bid would fail on every reopening.
	if serving, err := r.servesJob(ctx, job.Id); err != nil || serving {
		return err
	}
	o, skip := r.decide(ctx, job)
	var reserved []string
	err = r.opts.DB.Update(func(tx *db.Tx) (err error) {
		reserved, skip, err = r.reserve(tx, job, o, skip)
		return err
	})
	if err != nil {
		return err
	}
	if skip != "" {
		if skip != skipAlreadyBid {
			r.opts.Metrics.Bid(metrics.BidSkipped)
			r.log.Info("not bidding", "job", jobID, "why", skip)
		}
		return nil
	}
	return r.placeBid(ctx, job, o, reserved)
}

// servesJob reports whether the operator holds an active lease of job: x/market's
// PlaceBid refuses it then ("already serves worker N of job J").
func (r *Role) servesJob(ctx context.Context, jobID uint64) (bool, error) {
	res, err := r.opts.Chain.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil {
		return false, fmt.Errorf("reading job %d's leases: %w", jobID, err)
	}
	return slices.ContainsFunc(res.Leases, func(l markettypes.Lease) bool {
		return l.State == markettypes.LEASE_STATE_ACTIVE && l.Provider == r.opts.Operator
	}), nil
}

// decide returns the bid to place on job, or why there is none.
func (r *Role) decide(ctx context.Context, job markettypes.Job) (o offer, skip string) {
	if job.Spec.DatasetId != "" {
		if r.opts.Data == nil {
			return o, "dataset-backed jobs need the shard data, which this sidecar cannot fetch"
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := r.opts.Data.Fetchable(dctx, job)
		cancel()
		if err != nil {
			return o, err.Error()
		}
	}
	if skip := r.resumable(ctx, job); skip != "" {
		return o, skip
	}
	if !job.Spec.AcceptsRegion(r.opts.Region) {
		return o, fmt.Sprintf("the job accepts regions %v and this provider is registered in %q", job.Spec.Regions, r.opts.Region)
	}
	name, err := r.opts.Runtime(ctx, job)
	if err != nil {
		return o, err.Error()
	}
	var free []GPU
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		free, err = r.freeGPUs(tx)
		return err
	}); err != nil {
		return o, err.Error()
	}
	gpus, err := Match(job.Spec, free)
	if err != nil {
		return o, err.Error()
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	price, err := r.opts.Pricer.Price(pctx, job.Spec, gpus)
	if err != nil {
		return o, err.Error()
	}
	rate, err := r.opts.Rate(ctx, job, name, gpus)
	if err != nil {
		return o, err.Error()
	}
	if why := meetsDuration(job, rate); why != "" {
		return o, why
	}
	if job.CapStepsPerHour != 0 && markettypes.CheaperPerStep(job.CapPricePerGpuHour.Amount, job.CapStepsPerHour, price.Amount, rate) {
		return o, fmt.Sprintf("%s per GPU-hour at %d steps per hour is dearer per step than the job's cap (%s at %d steps per hour)",
			price, rate, job.CapPricePerGpuHour, job.CapStepsPerHour)
	}
	return offer{price: price, rate: rate, gpus: gpus, runtime: name}, ""
}

// reserve records the decision on job in tx and, for a bid, reserves its
// GPUs: inside the transaction that checks they are still free.
func (r *Role) reserve(tx *db.Tx, job markettypes.Job, o offer, skip string) (reserved []string, _ string, _ error) {
	if bid, ok, err := tx.Bid(job.Id); err != nil || (ok && bid.Status == db.BidPlaced) {
		return nil, skipAlreadyBid, err
	}
	if skip == "" {
		free, err := r.freeGPUs(tx)
		if err != nil {
			return nil, "", err
		}
		for _, g := range o.gpus {
			if !slices.ContainsFunc(free, func(f GPU) bool { return f.UUID == g.UUID }) {
				skip = "its GPUs were taken meanwhile"
				break
			}
			reserved = append(reserved, g.UUID)
		}
	}
	rec, _, err := tx.Job(job.Id)
	if err != nil {
		return nil, "", err
	}
	rec.JobID, rec.BiddingDeadline = job.Id, job.BiddingDeadline
	if rec.SeenHeight == 0 {
		rec.SeenHeight = job.CreatedHeight
	}
	if skip != "" {
		rec.Decision = "skip: " + skip
		return nil, skip, tx.PutJob(rec)
	}
	rec.Decision = fmt.Sprintf("bid %s per GPU-hour at %d steps per hour on %d×%s (%s runtime)", o.price, o.rate, len(o.gpus), o.gpus[0].Model, o.runtime)
	if err := tx.PutBid(db.BidRecord{JobID: job.Id, Price: o.price.String(), Status: db.BidPlaced, GPUs: reserved}); err != nil {
		return nil, "", err
	}
	return reserved, "", tx.PutJob(rec)
}

// placeBid sends the reserved bid; a bid that is not on chain releases the
// GPUs it reserved.
func (r *Role) placeBid(ctx context.Context, job markettypes.Job, o offer, gpus []string) error {
	result, err := r.opts.Submit(ctx, &markettypes.MsgPlaceBid{Provider: r.opts.Operator, JobId: job.Id, PricePerGpuHour: o.price, Runtime: o.runtime, StepsPerHour: o.rate})
	if err != nil {
		r.opts.Metrics.Bid(metrics.BidFailed)
		return errors.Join(fmt.Errorf("placing bid: %w", err), r.opts.DB.Update(func(tx *db.Tx) error {
			rec, _, _ := tx.Job(job.Id)
			rec.Decision = "bid failed: " + err.Error()
			return errors.Join(tx.DeleteBid(job.Id), tx.PutJob(rec))
		}))
	}
	err = r.opts.DB.Update(func(tx *db.Tx) error {
		bid, ok, err := tx.Bid(job.Id)
		if err != nil || !ok {
			return err
		}
		bid.Height, bid.TxHash = result.Height, result.Hash
		return tx.PutBid(bid)
	})
	r.opts.Metrics.Bid(metrics.BidPlaced)
	r.opts.Metrics.BidLatency(job.CreatedHeight, result.Height)
	r.log.Info("bid placed", "job", job.Id, "price_per_gpu_hour", o.price.String(), "steps_per_hour", o.rate, "gpus", gpus,
		"job_height", job.CreatedHeight, "bid_height", result.Height, "tx", result.Hash)
	return err
}

// freeGPUs are the healthy GPUs that neither serve a lease nor are reserved
// by an open bid.
func (r *Role) freeGPUs(tx *db.Tx) ([]GPU, error) {
	taken, err := tx.TakenGPUs()
	if err != nil {
		return nil, err
	}
	var free []GPU
	for _, g := range r.opts.GPUs.Healthy() {
		if _, used := taken[g.UUID]; !used {
			free = append(free, offered(g, r.opts.ModelName))
		}
	}
	return free, nil
}

// offered is a GPU as the provider registered it: the catalogue's model and
// nominal memory class (memory_gib × 1024), which the chain matches a job's
// min_vram_gib against, not NVML's reading (81,559 MiB for an 80 GiB H100).
// A GPU the inventory has not named (test hosts) keeps its name and reading.
func offered(g gpu.GPU, modelName func(string) string) GPU {
	if g.Model != "" {
		return GPU{UUID: g.UUID, Model: g.Model, VRAMMiB: g.MemoryClassGiB * 1024}
	}
	return GPU{UUID: g.UUID, Model: modelName(g.Name), VRAMMiB: g.MemoryMiB}
}

// resumable says why a job whose checkpoints are kept in custody cannot be resumed, or ""
// when it can: a worker resuming from a checkpoint needs its custody object to have at
// least k pieces with a holder, or nobody can rebuild the state the lease starts from.
func (r *Role) resumable(ctx context.Context, job markettypes.Job) string {
	if job.Spec.Custody == nil || !job.Spec.Workload.Kind.Adjudicable() {
		return ""
	}
	if job.Spec.Sync != nil {
		return r.joinable(ctx, job)
	}
	for _, p := range job.Progress {
		if p.Step == 0 {
			continue
		}
		if r.opts.Custody == nil {
			return "the job resumes from custody, which this sidecar cannot read"
		}
		_, ref, err := checkpoint.ParseURI(p.Uri)
		if err != nil {
			return fmt.Sprintf("worker %d resumes from %q: %v", p.Worker, p.Uri, err)
		}
		qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		obj, err := fetch.Locate(qctx, r.opts.Custody, ref.LeaseID, ref.Index)
		cancel()
		if err != nil {
			return fmt.Sprintf("worker %d's resume state: %v", p.Worker, err)
		}
		if obj.Live() < int(obj.Layout.DataPieces) {
			return fmt.Sprintf("worker %d's resume state (%s) has %d pieces held, %d are needed to rebuild it",
				p.Worker, obj.DatasetID, obj.Live(), obj.Layout.DataPieces)
		}
	}
	return ""
}

// joinable says why a training-together job's next worker could not join it: past
// round 0 it starts from the current round's global state, rebuilt from its custody
// holders.
func (r *Role) joinable(ctx context.Context, job markettypes.Job) string {
	if job.Round == 0 {
		return ""
	}
	if r.opts.Custody == nil {
		return "a worker joins the job from the global state in custody, which this sidecar cannot read"
	}
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	obj, err := fetch.LocateObject(qctx, r.opts.Custody, markettypes.GlobalCustodyID(job.Id, job.Round))
	cancel()
	if err != nil {
		return fmt.Sprintf("the global state of round %d: %v", job.Round, err)
	}
	if obj.Live() < int(obj.Layout.DataPieces) {
		return fmt.Sprintf("the global state of round %d (%s) has %d pieces held, %d are needed to rebuild it",
			job.Round, obj.DatasetID, obj.Live(), obj.Layout.DataPieces)
	}
	return ""
}
