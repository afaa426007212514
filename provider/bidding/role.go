// Package bidding is the provider sidecar's bidding role: it decides
// whether and at what price to bid on each open job, places the bids, and
// takes back a bid whose GPUs fail before the auction closes.
//
// A bid matches the job's GPU requirement against the host's free, healthy
// GPUs (Match: neither serving a lease nor reserved by another open bid),
// needs a runtime that can serve the job, and is priced from the operator's
// price table or an external pricing command (Pricer). Deciding and
// reserving happen in one database transaction, and jobs are decided one at
// a time, so two bids never offer the same GPU.
//
// The daemon feeds the role every block's events (HandleEvent, inside the
// block's database transaction) and runs its worker (Run). After a start,
// Resume queues every job open for bids, so a job created while the sidecar
// was away is decided too.
package bidding

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// queueSize bounds the jobs waiting for a decision; past it a job waits for
// the next start's reconciliation.
const queueSize = 4096

// Chain is what the role reads from the chain; chain.Queries satisfies it.
type Chain interface {
	chain.JobQuerier
	chain.LeasesQuerier
}

// Metrics counts what the role does; *metrics.Metrics satisfies it.
type Metrics interface {
	JobSeen()
	Bid(result metrics.BidResult)
	BidLatency(jobCreatedHeight, bidHeight int64)
	SetBond(bonded, locked, required float64)
}

// DataChecker says why a dataset-backed job's training data cannot be
// fetched, or nil when it can.
type DataChecker interface {
	Fetchable(ctx context.Context, job markettypes.Job) error
}

// Options configure a Role.
type Options struct {
	// Operator is the provider address bids are placed for.
	Operator string
	// Passive records the jobs it sees but never bids: a verifier that is
	// not a registered provider.
	Passive bool
	Submit  chain.SubmitFunc
	Chain   Chain
	DB      *db.DB
	GPUs    gpu.Host
	// ModelName maps an NVML product name to the chain's model name.
	ModelName func(nvmlName string) string
	Pricer    Pricer
	// Runtime names the runtime that would train job, or says why none can.
	// The name goes into the bid; the chain records it on the lease.
	Runtime func(ctx context.Context, job markettypes.Job) (string, error)
	// Rate is the throughput (steps per hour) a bid on job commits when runtime serves
	// it on gpus, or why none can be committed (Rater.StepsPerHour). A rate that cannot
	// finish the job within its max_duration gets no bid. A passive role needs none.
	Rate func(ctx context.Context, job markettypes.Job, runtime string, gpus []GPU) (uint64, error)
	// Data says whether a dataset-backed job's training data can be fetched
	// (a cheap chain check; the datasets fetcher satisfies it). Nil: such
	// jobs get no bid.
	Data DataChecker
	// Custody reads the custody objects a resumed job's start state is rebuilt from; nil
	// skips every job that resumes from custody.
	Custody fetch.ShardQuerier
	// Region is the provider's registered region; jobs whose regions list
	// leaves it out get no bid (the chain would refuse it).
	Region string
	// Bond reads the operator's bond, which every bid's collateral comes
	// from; it is exported as metrics every HealthInterval. It also says
	// whether the chain refuses every bid of the provider (jailed,
	// tombstoned, bond below the minimum), in which case none is placed.
	// Nil (and a passive role) reads none.
	Bond BondQuerier
	// HealthInterval is how often the GPUs of open bids are checked
	// (default 30s).
	HealthInterval time.Duration
	Metrics        Metrics
	// Logger receives the role's logs; nil discards them.
	Logger *slog.Logger
}

// Role is the bidding role. Create it with New.
type Role struct {
	opts     Options
	log      *slog.Logger
	queue    rolekit.Queue[uint64]
	lastErr  rolekit.LastError
	standing standing
}

// New checks opts and prepares a Role; nothing is sent until Run.
func New(opts Options) (*Role, error) {
	switch {
	case opts.Operator == "":
		return nil, errors.New("bidding role: no operator")
	case opts.Submit == nil || opts.Chain == nil || opts.DB == nil:
		return nil, errors.New("bidding role: needs a submitter, a chain and a database")
	case opts.GPUs == nil || opts.ModelName == nil || opts.Pricer == nil || opts.Runtime == nil:
		return nil, errors.New("bidding role: needs GPUs, model names, a pricer and runtimes")
	case opts.Rate == nil && !opts.Passive:
		return nil, errors.New("bidding role: a bidding role needs a rate")
	case opts.Metrics == nil:
		return nil, errors.New("bidding role: no metrics")
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Role{opts: opts, log: opts.Logger, queue: rolekit.NewQueue[uint64](queueSize)}, nil
}

// Name implements the daemon's Role.
func (*Role) Name() string { return "bidding" }

// Status is what the role reports to the status API.
type Status struct {
	// Bidding is false for a passive role.
	Bidding bool
	// Queued is how many jobs wait for a decision.
	Queued int
	// Refused says why the chain refuses every bid of this provider (jailed, tombstoned,
	// bond below the minimum), so none is placed; "" when it may bid.
	Refused   string
	LastError string
	ErrorAt   time.Time
}

// Status reports the role's state.
func (r *Role) Status() Status {
	msg, at := r.lastErr.Get()
	r.standing.mu.Lock()
	refused := r.standing.refused
	r.standing.mu.Unlock()
	return Status{Bidding: !r.opts.Passive, Queued: r.queue.Len(), Refused: refused, LastError: msg, ErrorAt: at}
}

// Resume records the jobs open for bids that the database does not know
// and queues every open job for a decision.
func (r *Role) Resume(_ context.Context, snap *chain.Snapshot) error {
	if snap == nil {
		return nil
	}
	err := r.opts.DB.Update(func(tx *db.Tx) error {
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
	for _, j := range snap.OpenJobs {
		r.enqueue(j.Id)
	}
	return nil
}

// Run decides on queued jobs one at a time, so two decisions never offer
// the same GPU, and withdraws open bids whose GPUs fail.
func (r *Role) Run(ctx context.Context) error {
	go r.watchGPUs(ctx)
	if r.opts.Bond != nil && !r.opts.Passive {
		go r.watchBond(ctx)
	}
	r.queue.Serve(ctx, func(ctx context.Context, jobID uint64) {
		if err := r.considerJob(ctx, jobID); err != nil && ctx.Err() == nil {
			r.log.Warn("bidding failed", "job", jobID, "err", err)
			r.lastErr.Note(err)
		}
	})
	return nil
}

// enqueue asks the worker to decide on a job. Jobs are re-read from the
// chain when their turn comes, so a duplicate costs one query.
func (r *Role) enqueue(jobID uint64) {
	if !r.queue.Push(jobID) {
		// A full queue means the worker is far behind; the next start-up
		// reconciliation reconsiders every open job.
		r.log.Warn("bid queue full; job left for the next reconciliation", "job", jobID)
	}
}

// HandleEvent records what an event means for the operator's jobs and bids
// and, for a job that takes bids, queues a decision once tx commits.
func (r *Role) HandleEvent(_ context.Context, tx *db.Tx, ev chain.Event) (func(), error) {
	if !r.opts.Passive && changesStanding(ev, r.opts.Operator) {
		return r.standing.changed, nil
	}
	switch e := ev.Message.(type) {
	case *markettypes.EventJobCreated:
		r.opts.Metrics.JobSeen()
		if err := tx.PutJob(db.JobRecord{JobID: e.JobId, SeenHeight: ev.Height, BiddingDeadline: e.BiddingDeadline}); err != nil {
			return nil, err
		}
		return func() { r.enqueue(e.JobId) }, nil
	case *markettypes.EventJobReopened:
		if err := reopenJob(tx, e, ev.Height); err != nil {
			return nil, err
		}
		return func() { r.enqueue(e.JobId) }, nil
	case *markettypes.EventBidPlaced:
		if e.Provider != r.opts.Operator {
			return nil, nil
		}
		bid, ok, err := tx.Bid(e.JobId)
		if err != nil || !ok || bid.Height != 0 {
			return nil, err
		}
		bid.Height, bid.TxHash = ev.Height, ev.Source
		return nil, tx.PutBid(bid)
	case *markettypes.EventBidWithdrawn:
		return nil, r.setOwnBid(tx, e.Provider, e.JobId, db.BidWithdrawn)
	case *markettypes.EventBidLost:
		if e.Provider == r.opts.Operator {
			r.opts.Metrics.Bid(metrics.BidLost)
			r.log.Info("bid lost", "job", e.JobId)
		}
		return nil, r.setOwnBid(tx, e.Provider, e.JobId, db.BidLost)
	case *markettypes.EventLeaseCreated:
		return nil, r.setOwnBid(tx, e.Provider, e.JobId, db.BidWon)
	}
	return nil, nil
}

// reopenJob records a job's new bidding round: a bid from an earlier round
// is spent, and the new round needs a new one.
func reopenJob(tx *db.Tx, e *markettypes.EventJobReopened, height int64) error {
	rec, _, err := tx.Job(e.JobId)
	if err != nil {
		return err
	}
	rec.JobID, rec.SeenHeight, rec.BiddingDeadline, rec.Decision = e.JobId, height, e.BiddingDeadline, ""
	if err := tx.PutJob(rec); err != nil {
		return err
	}
	if bid, ok, err := tx.Bid(e.JobId); err != nil {
		return err
	} else if ok && bid.Status != db.BidPlaced {
		return tx.DeleteBid(e.JobId)
	}
	return nil
}

// setOwnBid sets the status of the operator's bid on a job; other
// providers' bids are not recorded.
func (r *Role) setOwnBid(tx *db.Tx, provider string, jobID uint64, status db.BidStatus) error {
	if provider != r.opts.Operator {
		return nil
	}
	return setBidStatus(tx, jobID, status)
}

func setBidStatus(tx *db.Tx, jobID uint64, status db.BidStatus) error {
	bid, ok, err := tx.Bid(jobID)
	if err != nil || !ok {
		return err
	}
	bid.Status = status
	return tx.PutBid(bid)
}
