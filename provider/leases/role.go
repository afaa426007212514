// Package leases is the provider sidecar's leases role: it trains the
// leases the operator wins, commits and serves their checkpoints, and
// withdraws what they earn.
//
// For each active lease the role starts the job's trainer on a runtime
// (the in-process reference trainer, an operator-installed process, or the
// job's container), watches the trainer's output for completed checkpoint
// folders, hashes each into its commitment, retains it in the catalog the
// checkpoint server serves, and submits MsgSubmitCheckpoint. A run that
// fails is retried from its last checkpoint a bounded number of times; a
// lease whose GPUs fail, or whose trainer breaks the contract, is flagged.
// Whenever a checkpoint becomes final, the released earnings are withdrawn.
//
// Everything the role must not forget is in the database. After a start,
// Resume re-adds the retained checkpoints to the catalog (re-hashing each
// folder), restarts every active lease from its newest local checkpoint
// (or the job's last final checkpoint, downloaded from the provider that
// trained it), and reconciles the database with the leases on chain.
package leases

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/datasets"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/provider/rounds"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// maxResumeStateBytes bounds a resume checkpoint downloaded from another provider.
const maxResumeStateBytes = 64 << 30

// Chain is what the role reads from the chain; chain.Queries satisfies it.
type Chain interface {
	chain.JobQuerier
	chain.LeaseQuerier
	chain.LeasesQuerier
	chain.CheckpointQuerier
	chain.CheckpointsQuerier
}

// Metrics counts what the role does; *metrics.Metrics satisfies it.
type Metrics interface {
	LeaseWon()
	LeaseClosed(leaseID uint64)
	SetLeasesActive(n int)
	SetTrainingStep(leaseID, step uint64)
	SetCheckpointDeadline(leaseID uint64, height int64)
	Checkpoint(status metrics.CheckpointStatus)
	CheckpointHashed(bytes uint64)
	EarningsWithdrawn(udepin uint64)
}

// DataPreparer writes the training data of a dataset-backed job's worker into
// a lease's data folder; the datasets fetcher satisfies it.
type DataPreparer interface {
	Prepare(ctx context.Context, job markettypes.Job, worker uint32, dir string) (datasets.Result, error)
	// PrepareWhole writes a whole dataset (a fine-tuning job's initial weights).
	PrepareWhole(ctx context.Context, datasetID, dir string) (datasets.Result, error)
}

// Hooks change what the role does, for tests and the fraud demo only;
// production sets none.
type Hooks struct {
	// CommitTrace returns the trace to commit for a completed checkpoint
	// instead of its trainer's (a cheater's fabricated hashes). A trace
	// that is not the trainer's is kept in the checkpoint folder
	// (checkpoint.WriteCommittedTrace), so the defence opens what was
	// committed. It runs before the state file is hashed, so it may also
	// replace the state (a cheater of an exact workload, whose final hash
	// must be the state's root). job is the lease's job, as the chain has it.
	CommitTrace func(job markettypes.Job, cp trainer.Checkpoint) (trace.Trace, error)
	// BeforeCheckpoint is called before checkpoint index of a lease is
	// submitted. It may block until ctx ends (a test's pause point).
	BeforeCheckpoint func(ctx context.Context, leaseID, index uint64)
	// RoundStepDelay slows every step of a training-together lease by this much: a
	// deliberately slow worker (the round barrier's benchmark).
	RoundStepDelay time.Duration
	// CustodyPieces is called once the custody pieces of a committed state are
	// written under dir (dir/manifest.PieceFile(0, piece)) with their roots,
	// before they are served and committed; it returns the roots to commit (a
	// cheater that rewrites a piece commits its root).
	CustodyPieces pieces.RewritePieces
}

// Options configure a Role.
type Options struct {
	// Operator is the provider address leases are served for.
	Operator string
	Submit   chain.SubmitFunc
	Chain    Chain
	DB       *db.DB
	// Catalog holds the checkpoints the checkpoint server serves.
	Catalog *checkpoint.Catalog
	GPUs    gpu.Host
	// SimulatedGPUs says the GPUs are simulated: they have no device nodes
	// to hand a container.
	SimulatedGPUs bool
	// Runtimes are the runtimes the operator enabled.
	Runtimes config.Runtimes
	// Data fetches the training data of dataset-backed jobs; without it such
	// a lease fails with a permanent error.
	Data DataPreparer
	// WorkDir holds a folder per lease and downloads in progress.
	WorkDir string
	// PublicURL is the checkpoint server's base URL as others reach it.
	PublicURL string
	// CustodyDir is where the pieces of the states it commits for jobs with a custody
	// section are written (<CustodyDir>/<custody object>/pieces/...), for the storage
	// holders to fetch from the public server's /pieces/.
	CustodyDir string
	// Custody reads custody objects on chain and rebuilds a resume state from their
	// holders; nil leaves jobs with custody unresumable by this sidecar.
	Custody *fetch.Source
	// Rounds serves the leases of training-together (sync) jobs round by round; without
	// it such a lease fails with a permanent error.
	Rounds *rounds.Role
	// SubmitTx sends several messages in one transaction (a round's MsgCommitRound with
	// its checkpoint); needed with Rounds.
	SubmitTx rounds.SubmitFunc
	// Authorize signs requests to other providers' checkpoint servers (pkg/reqauth),
	// which serve states only to the job's owner and the bonded; nil sends them unsigned.
	Authorize func(*http.Request) error
	// HealthInterval is how often the GPUs of active leases are checked,
	// and their checkpoint deadlines re-read from the chain (default 30s).
	HealthInterval time.Duration
	Metrics        Metrics
	// Logger receives the role's logs; nil discards them.
	Logger *slog.Logger
	Hooks  Hooks
}

// Role is the leases role. Create it with New.
type Role struct {
	opts     Options
	log      *slog.Logger
	runtimes runtimes
	fetcher  checkpoint.Fetcher
	// withdraw coalesces requests to withdraw earnings.
	withdraw rolekit.Queue[struct{}]
	lastErr  rolekit.LastError

	mu       sync.Mutex
	runs     map[uint64]*leaseRun
	progress map[uint64]uint64 // lease → step the trainer last reported
	// unrecorded are the statuses the follower saw for the operator's
	// checkpoints before their record was written (a challenge a block after
	// the submission can reach the follower before the submitter records it);
	// recordCheckpoint applies them. Both sides run in database write
	// transactions, which bbolt serializes, so none is lost between them.
	unrecordedMu sync.Mutex
	unrecorded   map[checkpoint.Ref]db.CheckpointStatus
}

// New checks opts and prepares a Role (and its runtimes); no trainer runs
// until Resume or a won lease.
func New(opts Options) (*Role, error) {
	switch {
	case opts.Operator == "" || opts.PublicURL == "" || opts.WorkDir == "":
		return nil, errors.New("leases role: needs an operator, a public URL and a work folder")
	case opts.Submit == nil || opts.Chain == nil || opts.DB == nil || opts.Catalog == nil:
		return nil, errors.New("leases role: needs a submitter, a chain, a database and a catalog")
	case opts.GPUs == nil || opts.Metrics == nil:
		return nil, errors.New("leases role: needs GPUs and metrics")
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Role{
		opts: opts, log: opts.Logger,
		fetcher:  checkpoint.Fetcher{Chain: opts.Chain, WorkDir: opts.WorkDir, MaxStateBytes: maxResumeStateBytes, Authorize: opts.Authorize},
		withdraw: rolekit.NewQueue[struct{}](1),
		runs:     map[uint64]*leaseRun{}, progress: map[uint64]uint64{},
		unrecorded: map[checkpoint.Ref]db.CheckpointStatus{},
	}
	var err error
	if r.runtimes, err = newRuntimes(opts.Runtimes, opts.WorkDir, r.onTrainingProgress); err != nil {
		return nil, err
	}
	return r, nil
}

// Name implements the daemon's Role.
func (*Role) Name() string { return "leases" }

// Status is what the role reports to the status API.
type Status struct {
	// Runtimes names the enabled runtimes.
	Runtimes []string
	// Progress is the step each running trainer last reported, by lease.
	Progress  map[uint64]uint64
	LastError string
	ErrorAt   time.Time
}

// Status reports the role's state.
func (r *Role) Status() Status {
	r.mu.Lock()
	progress := make(map[uint64]uint64, len(r.progress))
	for id, step := range r.progress {
		progress[id] = step
	}
	r.mu.Unlock()
	msg, at := r.lastErr.Get()
	return Status{Runtimes: r.runtimes.names(), Progress: progress, LastError: msg, ErrorAt: at}
}

// RuntimeFor names the runtime that would train job, or says why none can.
func (r *Role) RuntimeFor(ctx context.Context, job markettypes.Job) (string, error) {
	rt, err := r.runtimes.forJob(ctx, job)
	if err != nil {
		return "", err
	}
	return rt.Name(), nil
}

// Run withdraws earnings whenever a checkpoint becomes final (and once at
// start), flags leases whose GPUs fail, follows their checkpoint deadlines,
// and prunes checkpoints the catalog no longer needs, until ctx ends; then it stops every trainer and waits
// until they have stopped, their completed checkpoints safe on disk.
func (r *Role) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){r.watchGPUs, r.watchDeadlines, r.pruneCatalog} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	r.requestWithdrawal()
	r.withdraw.Serve(ctx, func(ctx context.Context, _ struct{}) {
		if err := r.withdrawEarnings(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("withdrawing earnings failed; retrying with the next final checkpoint", "err", err)
			r.lastErr.Note(err)
		}
	})
	wg.Wait()
	r.stopAll()
	return nil
}

// Close releases the runtimes (the container engine's client).
func (r *Role) Close() error { return r.runtimes.close() }

// pruneCatalog prunes checkpoints the catalog no longer needs to keep.
func (r *Role) pruneCatalog(ctx context.Context) {
	ticker := time.NewTicker(time.Minute)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		pruned, err := r.opts.Catalog.Prune(time.Now())
		for _, ref := range pruned {
			r.log.Info("checkpoint pruned", "checkpoint", ref.String())
		}
		if err != nil {
			r.log.Warn("pruning checkpoints failed", "err", err)
		}
	}
}
