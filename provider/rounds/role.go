// Package rounds is the provider sidecar's training-together role (issue 18,
// docs/training-together.md): it serves the leases of sync jobs round by round.
//
// In round r a worker starts from G_r (its own aggregate of round r−1, round 0's from the
// job seed, or — a joiner — fetched from custody, always checked against the chain's
// global_root), trains `every` exact steps on its assigned data (the trainer contract's
// round run), writes its pseudo-gradient and its custody pieces, and commits
// MsgCommitRound with its round-end MsgSubmitCheckpoint in one transaction. When the
// round closes, every worker checks the other entered workers' start states and
// pseudo-gradients against their round-end checkpoints and proves a wrong one (check.go;
// the chain excludes that worker), fetches the entered pseudo-gradients from their
// custody holders, checks each against its commitment, and aggregates; the lowest
// entered slot commits G_{r+1} (MsgCommitGlobal, with the global's custody pieces), a
// later one if it does not, and the others check the committed root against their own.
package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/datasets"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Chain is what the role reads from the chain; chain.Queries satisfies it.
type Chain interface {
	chain.JobQuerier
	chain.LeaseQuerier
	chain.LeasesQuerier
	chain.CheckpointsQuerier
	Round(ctx context.Context, in *markettypes.QueryRoundRequest, opts ...grpc.CallOption) (*markettypes.QueryRoundResponse, error)
	RoundCommits(ctx context.Context, in *markettypes.QueryRoundCommitsRequest, opts ...grpc.CallOption) (*markettypes.QueryRoundCommitsResponse, error)
	FileQuery(ctx context.Context, in *verifytypes.QueryFileQueryRequest, opts ...grpc.CallOption) (*verifytypes.QueryFileQueryResponse, error)
}

// SubmitFunc sends msgs in one transaction signed for the operator.
type SubmitFunc func(ctx context.Context, msgs ...sdk.Msg) (*chain.TxResult, error)

// Metrics counts what the role does; *metrics.Metrics satisfies it.
type Metrics interface {
	// RoundGlobalMismatch counts committed globals that are not this sidecar's aggregate.
	RoundGlobalMismatch()
	// RoundBarrierWait adds the seconds a worker waited for a round to close.
	RoundBarrierWait(seconds float64)
}

// Options configure a Role.
type Options struct {
	Operator string
	Submit   SubmitFunc
	Chain    Chain
	// WorkDir holds the round files, a folder per job.
	WorkDir string
	// CustodyDir is where the custody pieces of the round files are written for the
	// storage holders (the public server's /pieces/).
	CustodyDir string
	// Custody fetches the other workers' pseudo-gradients and a joiner's global state.
	Custody *fetch.Source
	// Datasets fetches a dataset-backed job's round data (the slot's shards of each
	// round); without it such jobs are not served.
	Datasets Datasets
	// PollInterval is how often a waiting worker reads its round (default 1s); round
	// events wake it sooner.
	PollInterval time.Duration
	// AggregatorGrace is how long the n-th entered slot waits for the ones before it to
	// commit the global before committing it itself (default 20s).
	AggregatorGrace time.Duration
	// CheckWait is how long a worker waits for another worker's round files to be held
	// in custody before it aggregates without having checked that worker (default 2m).
	CheckWait time.Duration
	Metrics   Metrics
	Logger    *slog.Logger
	// CheatAggregate (tests only) makes this sidecar a lying aggregator while it serves
	// slot 0, the first aggregator of every round: the global state it commits has its
	// first weight off by one. (Bound to the slot so that a test can start every trainer
	// with it, before the auction says who gets slot 0, instead of restarting one.)
	CheatAggregate bool
	// CheatPseudoGradient (tests only) makes this sidecar a worker that fabricates its
	// pseudo-gradient: the committed one has one element off by one (dense: the first;
	// compressed: the first sent, its error_out root left honest), while its round-end
	// checkpoint is honest.
	CheatPseudoGradient bool
	// CheatErrorOut (tests only) makes this sidecar a top-k worker that keeps, and names
	// in its compressed pseudo-gradients' headers, error buffers with one element off
	// (its records honest): only a file query can prove it.
	CheatErrorOut bool
	// CheatTrainOnSlot (tests only), when set, makes this sidecar a worker that trains
	// every round on that slot's data of the round instead of its own, and commits
	// honestly what it trained: a trace that does not verify against its assignment.
	CheatTrainOnSlot *uint32
	// cheatPseudoGradientFrom (this package's tests only) is the first round
	// CheatPseudoGradient fabricates.
	cheatPseudoGradientFrom uint64
	// cheatStart (this package's tests only) makes the worker start every round from
	// WorkerStart(nil), forgetting its carry.
	cheatStart bool
	// cheatStaleCarry (this package's tests only) makes the worker start a round from the
	// carry before its carry (a start no checker can rebuild) and answer file queries with it.
	cheatStaleCarry bool
	// errorBufferReplay (this package's tests only) is how many rounds one check
	// replays to rebuild a worker's error buffer (default maxErrorBufferReplay).
	errorBufferReplay int
}

// Datasets fetches and checks the data pieces of a worker's shards of a round of a
// dataset-backed job into a folder; *datasets.Fetcher satisfies it. A round that gives
// the slot no shard is datasets.ErrNoShardInRound.
type Datasets interface {
	PrepareRound(ctx context.Context, job markettypes.Job, worker uint32, round uint64, dir string) (datasets.Result, error)
}

// Role is the rounds role. Create it with New.
type Role struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	status map[uint64]JobStatus     // by lease
	wake   map[uint64]chan struct{} // by lease
	// ended holds the jobs closed on chain: their round folder goes once no lease of
	// theirs is served (jobEnded).
	ended map[uint64]bool
	// answers are the file queries on this operator's round files to answer (queries.go).
	answers *queryAnswers
}

// New checks opts and prepares a Role.
func New(opts Options) (*Role, error) {
	switch {
	case opts.Operator == "" || opts.Submit == nil || opts.Chain == nil || opts.WorkDir == "":
		return nil, errors.New("rounds role: needs an operator, a submitter, a chain and a work folder")
	case opts.Metrics == nil:
		return nil, errors.New("rounds role: needs metrics")
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.AggregatorGrace <= 0 {
		opts.AggregatorGrace = 20 * time.Second
	}
	if opts.CheckWait <= 0 {
		opts.CheckWait = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.errorBufferReplay <= 0 {
		opts.errorBufferReplay = maxErrorBufferReplay
	}
	return &Role{opts: opts, log: opts.Logger, status: map[uint64]JobStatus{}, wake: map[uint64]chan struct{}{}, ended: map[uint64]bool{}, answers: newQueryAnswers()}, nil
}

// Name implements the daemon's Role.
func (*Role) Name() string { return "rounds" }

// Run implements the daemon's Role: the rounds are served by the leases role's runs
// (Serve); on its own it removes, at start, the round folders of the jobs that ended
// while the sidecar was stopped (sweepEndedJobs), then answers the file queries on this
// operator's round files.
func (r *Role) Run(ctx context.Context) error {
	r.sweepEndedJobs(ctx)
	r.answerQueries(ctx)
	return nil
}

// HandleEvent wakes the runs of a job whose round moved, so they need not wait for
// their next poll, removes the round files of a job that ended, and queues the file
// queries that may wait for this operator's answer.
func (r *Role) HandleEvent(_ context.Context, _ *db.Tx, ev chain.Event) (func(), error) {
	var jobID uint64
	switch e := ev.Message.(type) {
	case *verifytypes.EventFileQueryOpened:
		if e.Provider != r.opts.Operator {
			return nil, nil
		}
		return func() { r.answers.ask(e.QueryId) }, nil
	case *verifytypes.EventFileQueryDescended:
		return func() { r.answers.ask(e.QueryId) }, nil // fileQueryAnswer skips others' queries
	case *verifytypes.EventFileQueryEnded:
		return func() { r.answers.forget(e.QueryId) }, nil
	case *markettypes.EventJobClosed:
		return func() { r.jobEnded(e.JobId) }, nil
	case *markettypes.EventRoundOpened:
		jobID = e.JobId
	case *markettypes.EventRoundClosed:
		jobID = e.JobId
	case *markettypes.EventGlobalCommitted:
		jobID = e.JobId
	case *markettypes.EventGlobalRejected:
		jobID = e.JobId
	default:
		return nil, nil
	}
	return func() { r.wakeJob(jobID) }, nil
}

func (r *Role) wakeJob(jobID uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for lease, ch := range r.wake {
		if r.status[lease].JobID != jobID {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Phase is where a lease stands in its round.
type Phase string

// Phases of a round, in order.
const (
	PhaseFetchingGlobal Phase = "fetching-global"
	PhaseTraining       Phase = "training"
	PhaseCommitted      Phase = "committed"
	PhaseAggregating    Phase = "aggregating"
	PhaseWaitingGlobal  Phase = "waiting-global"
	PhaseWaitingRound   Phase = "waiting-round"
	PhaseDone           Phase = "done"
)

// JobStatus is one sync lease's round status.
type JobStatus struct {
	JobID   uint64 `json:"job_id"`
	LeaseID uint64 `json:"lease_id"`
	Slot    uint32 `json:"slot"`
	Round   uint64 `json:"round"`
	Phase   Phase  `json:"phase"`
	// Aggregator is set while this sidecar commits the round's global.
	Aggregator bool `json:"aggregator,omitempty"`
	// GlobalMismatch names the last round whose committed global was not this
	// sidecar's aggregate (the fraud proof is x/verify's).
	GlobalMismatch string `json:"global_mismatch,omitempty"`
	// TrainSeconds and WaitSeconds add up the time the lease trained and waited on
	// round barriers.
	TrainSeconds float64 `json:"train_seconds"`
	WaitSeconds  float64 `json:"wait_seconds"`
}

// Status is the round status of every sync lease served, by lease.
func (r *Role) Status() []JobStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]JobStatus, 0, len(r.status))
	for _, s := range r.status {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b JobStatus) int { return int(a.LeaseID) - int(b.LeaseID) })
	return out
}

func (r *Role) setStatus(leaseID uint64, edit func(*JobStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status[leaseID]
	edit(&s)
	r.status[leaseID] = s
}

// Supported says why this sidecar cannot serve a sync job, or nil.
func Supported(job markettypes.Job) error {
	if job.Spec.Sync == nil {
		return nil
	}
	if job.Spec.Custody == nil {
		return fmt.Errorf("training-together job %d keeps no custody: its round files cannot be exchanged", job.Id)
	}
	return nil
}

// Lease is a sync job's lease as the leases role serves it.
type Lease struct {
	ID     uint64
	Worker uint32
	Job    markettypes.Job
	// Trainer trains its rounds (nil: the Go exact trainer) on GPUs (the leased GPUs'
	// UUIDs); OutputDir receives the round-end checkpoints, DataDir the training stream,
	// LogDir the trainer's logs.
	Trainer                    Trainer
	GPUs                       []string
	OutputDir, DataDir, LogDir string
	// SubmitCheckpoint commits round-end checkpoint cp in x/verify as the lease's next
	// checkpoint, in one transaction after commit (MsgCommitRound).
	SubmitCheckpoint func(ctx context.Context, cp trainer.Checkpoint, commit sdk.Msg) error
	// OnStep sees every trained step (progress).
	OnStep func(trainer.StepMetric)
}

// Serve trains l's slot round after round until the job's last round is committed or
// ctx ends (the lease closed).
func (r *Role) Serve(ctx context.Context, l Lease) error {
	if err := Supported(l.Job); err != nil {
		return err
	}
	if l.Job.Spec.DatasetId != "" && r.opts.Datasets == nil {
		return fmt.Errorf("job %d trains in rounds on dataset %q and this sidecar has no dataset fetcher", l.Job.Id, l.Job.Spec.DatasetId)
	}
	j, err := r.jobOf(l)
	if err != nil {
		return err
	}
	rounds := l.Job.Spec.Rounds()
	wake := make(chan struct{}, 1)
	r.mu.Lock()
	r.wake[l.ID] = wake
	r.status[l.ID] = JobStatus{JobID: l.Job.Id, LeaseID: l.ID, Slot: l.Worker}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.wake, l.ID)
		remove := r.ended[l.Job.Id] && !r.servingLocked(l.Job.Id)
		r.mu.Unlock()
		if remove {
			r.removeJobDir(l.Job.Id)
		}
	}()
	w := Worker{Job: j, Index: l.Worker, Trainer: l.Trainer, LeaseID: l.ID, GPUs: l.GPUs, OutputDir: l.OutputDir, LogDir: l.LogDir}
	// carries[q] is the carry the lease trained round q with: a redone round trains
	// with it again.
	carries := map[uint64]*uint64{}
	for {
		rd, err := r.openRound(ctx, l, wake)
		if err != nil {
			return err
		}
		if rd.Round >= rounds {
			r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseDone })
			r.pruneAllData(l, w)
			return nil
		}
		if err := r.carryFromChain(ctx, l, &w, rd.Round); err != nil {
			return err
		}
		if _, seen := carries[rd.Round]; !seen {
			carries[rd.Round] = w.Carry
		}
		err = r.deletedOr(ctx, l, rd.Round, r.serveRound(ctx, l, &w, rd, wake))
		if errors.Is(err, errRoundReopened) {
			continue
		}
		redone := false
		for deleted := (roundDeleted{}); errors.As(err, &deleted); {
			redone = true
			err = r.redo(ctx, l, &w, deleted.round, carries, wake)
		}
		if err != nil {
			return err
		}
		if redone {
			continue
		}
		r.pruneRounds(ctx, l, &w, rd.Round, carries)
		if rd.Round+1 >= rounds {
			r.pruneAllData(l, w)
			r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseDone })
			r.log.Info("every round of the lease is committed", "lease", l.ID, "job", l.Job.Id, "rounds", rounds)
			return nil
		}
	}
}

// jobOf is the lease's job in round terms: every round the worker trains on its own
// shards (diloco.WorkerData, as x/verify's referee reads them) of the built-in corpus or
// of the job's dataset, fetched round by round.
func (r *Role) jobOf(l Lease) (Job, error) {
	sync := l.Job.Spec.Sync.Diloco()
	cfg, err := l.Job.Spec.ExactConfig()
	if err != nil {
		return Job{}, err
	}
	if l.DataDir != "" {
		if err := os.MkdirAll(l.DataDir, 0o755); err != nil {
			return Job{}, err
		}
	}
	data := CorpusData(l.Job.Seed, l.Job.Spec.Workers)
	if l.Job.Spec.DatasetId != "" {
		data = r.datasetData(l.Job)
	}
	if slot := r.opts.CheatTrainOnSlot; slot != nil {
		honest := data
		data = func(ctx context.Context, round uint64, _ uint32, dir string) error {
			return honest(ctx, round, *slot, dir)
		}
	}
	return Job{ID: l.Job.Id, Seed: l.Job.Seed, Config: cfg, Sync: sync, Workers: l.Job.Spec.Workers,
		Dir: r.jobDir(l.Job.Id), DataDir: l.DataDir, Data: data}, nil
}

// jobDir is the folder of a job's round files (Job.Dir).
func (r *Role) jobDir(jobID uint64) string {
	return filepath.Join(r.opts.WorkDir, "rounds", "job-"+strconv.FormatUint(jobID, 10))
}

// datasetData is the RoundData of a job on a dataset: the slot's shards of the round,
// their data pieces fetched from the holders and checked against their roots. A shard
// with too few active holders is waited for (up to CheckWait): a replica that missed a
// storage proof is dropped and its piece repaired by another holder within a few
// storage periods, while failing the lease run would give the lease up within seconds.
func (r *Role) datasetData(job markettypes.Job) RoundData {
	return func(ctx context.Context, round uint64, worker uint32, dir string) error {
		deadline := time.Now().Add(r.opts.CheckWait)
		res, err := r.opts.Datasets.PrepareRound(ctx, job, worker, round, dir)
		if errors.Is(err, datasets.ErrNotFetchable) {
			r.log.Warn("the round's data cannot be had yet; waiting for its shards' holders", "job", job.Id, "round", round, "slot", worker, "err", err)
		}
		for errors.Is(err, datasets.ErrNotFetchable) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.opts.PollInterval):
			}
			res, err = r.opts.Datasets.PrepareRound(ctx, job, worker, round, dir)
		}
		if errors.Is(err, datasets.ErrNoShardInRound) {
			return fmt.Errorf("%w: %v", ErrNoData, err)
		}
		if err == nil {
			r.log.Info("round data ready", "job", job.Id, "round", round, "slot", worker, "files", len(res.Files), "bytes", res.Size, "reused", res.Reused,
				"pieces", strings.Join(res.Files, ","))
		}
		return err
	}
}

// openRound waits until the job's current round is open with l's slot among its
// workers (a replacement joins at the next round), and returns it; a job past its last
// round returns a round numbered past it.
func (r *Role) openRound(ctx context.Context, l Lease, wake chan struct{}) (markettypes.Round, error) {
	for {
		job, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: l.Job.Id})
		if err == nil {
			if job.Job.Spec.TotalSteps <= uint64(job.Job.Spec.Sync.Every)*job.Job.Round && job.Job.Round > 0 {
				return markettypes.Round{Round: job.Job.Round}, nil
			}
			res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: l.Job.Id, Round: job.Job.Round})
			if err == nil && res.Round.State == markettypes.ROUND_STATE_OPEN && slices.Contains(res.Round.Workers, l.Worker) {
				return res.Round, nil
			}
			if err == nil && job.Job.Round+1 >= job.Job.Spec.Rounds() && len(res.Round.NextGlobalRoot) > 0 {
				return markettypes.Round{Round: job.Job.Round + 1}, nil // the last global is committed
			}
		}
		r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseWaitingRound })
		if err := r.sleep(ctx, wake); err != nil {
			return markettypes.Round{}, err
		}
	}
}

func (r *Role) sleep(ctx context.Context, wake chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-time.After(r.opts.PollInterval):
	}
	return nil
}

// serveRound trains and commits l's slot in round rd, then takes part in its
// aggregation until G_{r+1} is committed.
func (r *Role) serveRound(ctx context.Context, l Lease, w *Worker, rd markettypes.Round, wake chan struct{}) error {
	round := rd.Round
	r.setStatus(l.ID, func(s *JobStatus) { s.Round, s.Phase, s.Aggregator = round, PhaseFetchingGlobal, false })
	if err := r.ensureGlobal(ctx, w.Job, rd); err != nil {
		return err
	}
	committed, err := r.committed(ctx, l, round)
	if err != nil {
		return err
	}
	if !committed {
		r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseTraining })
		started := time.Now()
		trainee := *w
		if r.opts.cheatStart {
			trainee.Carry = nil
		}
		if r.opts.cheatStaleCarry && w.Carry != nil {
			older, err := r.previousEntered(ctx, w.Job, markettypes.RoundCommit{Round: *w.Carry, Worker: l.Worker, LeaseId: l.ID})
			if err != nil {
				return err
			}
			if older != nil {
				trainee.Carry = &older.Round
			}
		}
		trainee.skewErrorOut = r.opts.CheatErrorOut
		con, err := trainee.Train(ctx, round, l.OnStep)
		if errors.Is(err, ErrNoData) {
			// Nothing to train on (x/market opens a dataset job's round only for the
			// slots with shards, so this is a safety net): the slot misses the round
			// (its carry stays) and follows its aggregation to train the next one.
			r.log.Warn("the round gives this slot no data; it sits the round out", "lease", l.ID, "job", l.Job.Id, "round", round, "err", err)
			return r.aggregate(ctx, l, w, round, wake)
		}
		if err != nil {
			return err
		}
		if r.opts.CheatPseudoGradient && round >= r.opts.cheatPseudoGradientFrom {
			if err := fabricatePseudoGradient(&con); err != nil {
				return err
			}
		}
		r.setStatus(l.ID, func(s *JobStatus) { s.TrainSeconds += time.Since(started).Seconds() })
		spec := l.Job.Spec.Custody
		p, err := WritePieces(r.opts.CustodyDir, markettypes.PseudoGradientCustodyID(l.Job.Id, round, l.Worker), con.PseudoGradientPath, spec.DataPieces, spec.ParityPieces)
		if err != nil {
			return fmt.Errorf("custody pieces of the pseudo-gradient of round %d: %w", round, err)
		}
		msg := &markettypes.MsgCommitRound{
			Provider: r.opts.Operator, LeaseId: l.ID, Round: round, StartRoot: con.StartRoot[:], EndRoot: con.EndRoot[:],
			PseudoGradientRoot: con.PseudoGradientRoot[:], PseudoGradientSize: con.PseudoGradientSize, PieceRoots: merkle.HashesToBytes(p.Roots),
			GlobalRoot: rd.GlobalRoot,
		}
		if err := l.SubmitCheckpoint(ctx, con.Checkpoint, msg); err != nil {
			res, rerr := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: l.Job.Id, Round: round})
			switch {
			case rerr == nil && !bytes.Equal(res.Round.GlobalRoot, rd.GlobalRoot):
				// The round's start global was voided while this slot trained, and the round
				// opened again on a new one: what it trained is from the old one.
				r.log.Warn("the round was opened again on a new global state while this slot trained it; training it again",
					"lease", l.ID, "job", l.Job.Id, "round", round, "err", err)
				if err := os.RemoveAll(trainer.CheckpointDir(w.OutputDir, w.Job.Sync.RoundStart(round+1))); err != nil {
					return err
				}
				return errRoundReopened
			case rerr == nil && res.Round.State != markettypes.ROUND_STATE_OPEN && !slices.Contains(res.Round.Entered, l.Worker):
				// Too late: the round closed without this slot, which misses it (its carry
				// stays that of the last round it entered) and trains the next one.
				r.log.Warn("the round closed before this slot's commit; it misses the round", "lease", l.ID, "job", l.Job.Id, "round", round, "err", err)
				return nil
			}
			return fmt.Errorf("committing round %d: %w", round, err)
		}
		r.log.Info("round committed", "lease", l.ID, "job", l.Job.Id, "round", round, "slot", l.Worker,
			"pseudo_gradient_root", con.PseudoGradientRoot.String(), "pseudo_gradient_bytes", con.PseudoGradientSize)
	}
	r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseCommitted })
	return r.aggregate(ctx, l, w, round, wake)
}

// committed reports whether l's slot has its commit of round on chain already.
func (r *Role) committed(ctx context.Context, l Lease, round uint64) (bool, error) {
	res, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: l.Job.Id, Round: round})
	if err != nil {
		return false, fmt.Errorf("reading the commits of round %d: %w", round, err)
	}
	return slices.ContainsFunc(res.Commits, func(c markettypes.RoundCommit) bool { return c.Worker == l.Worker && c.LeaseId == l.ID }), nil
}

// errGlobalUnheld is wrapped when a global state could not be had from custody (yet).
var errGlobalUnheld = errors.New("rounds: the global state is not held in custody")

// ensureGlobal puts G_r at its path (putGlobal), waiting for its custody as long as it
// takes: a worker cannot train the round without it.
func (r *Role) ensureGlobal(ctx context.Context, j Job, rd markettypes.Round) error {
	for {
		err := r.putGlobal(ctx, j, rd)
		if !errors.Is(err, errGlobalUnheld) {
			return err
		}
		r.log.Info("waiting for the global state's custody", "job", j.ID, "round", rd.Round, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.PollInterval):
		}
	}
}

// putGlobal puts G_r at its path: the local file when its root is the chain's, round 0's
// from the job seed, else from custody (a joiner, an aggregate that was not the committed
// one, or a checker replaying a worker's earlier rounds); one try, a failed fetch is
// errGlobalUnheld.
func (r *Role) putGlobal(ctx context.Context, j Job, rd markettypes.Round) error {
	want, err := merkle.HashFromBytes(rd.GlobalRoot)
	if err != nil {
		return fmt.Errorf("round %d of job %d: global root: %w", rd.Round, j.ID, err)
	}
	if g, err := j.Global(rd.Round); err == nil && g.Root() == want {
		return nil
	}
	if rd.Round == 0 {
		g, err := diloco.InitGlobal(j.Config, j.Sync, j.Seed)
		if err != nil {
			return err
		}
		if root, _, err := j.PutGlobal(g); err != nil || root != want {
			return errors.Join(err, fmt.Errorf("round 0 of job %d starts from %s on chain, the seed gives %s", j.ID, want, root))
		}
		return nil
	}
	if r.opts.Custody == nil {
		return fmt.Errorf("the global state of round %d of job %d is in custody and this sidecar cannot fetch from custody", rd.Round, j.ID)
	}
	if err := FetchGlobal(ctx, r.opts.Custody, j.ID, rd.Round, j.GlobalPath(rd.Round)); err != nil {
		return fmt.Errorf("%w: %w", errGlobalUnheld, err)
	}
	if g, err := j.Global(rd.Round); err != nil || g.Root() != want {
		return errors.Join(errGlobalUnheld, err, fmt.Errorf("custody object %s is not the global with root %s", markettypes.GlobalCustodyID(j.ID, rd.Round), want))
	}
	r.log.Info("global state fetched from custody", "job", j.ID, "round", rd.Round, "root", want.String())
	return nil
}

// aggregate waits for round to close, aggregates its entered pseudo-gradients, commits
// G_{round+1} when it is this slot's turn, and checks the committed one.
func (r *Role) aggregate(ctx context.Context, l Lease, w *Worker, round uint64, wake chan struct{}) error {
	waitStart := time.Now()
	defer func() {
		waited := time.Since(waitStart).Seconds()
		r.opts.Metrics.RoundBarrierWait(waited)
		r.setStatus(l.ID, func(s *JobStatus) { s.WaitSeconds += waited })
	}()
	rd, err := r.waitRound(ctx, l, round, wake, func(rd markettypes.Round) bool { return rd.State != markettypes.ROUND_STATE_OPEN })
	if err != nil {
		return err
	}
	if slices.Contains(rd.Entered, l.Worker) {
		carry := round
		w.Carry = &carry
	}
	for {
		r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseAggregating })
		if rd, err = r.checkRound(ctx, l, w.Job, rd, wake); err != nil {
			return err
		}
		g, err := r.aggregateEntered(ctx, l, w, rd, wake)
		if err != nil {
			return err
		}
		again := false
		if rd, again, err = r.commitAndDefend(ctx, l, w, rd, g.Root(), wake); err != nil || !again {
			return err
		}
		// The chain left a worker out since (convicted by another's proof or game): the
		// round is aggregated again without it.
		r.log.Info("the round's entered workers changed: aggregating again", "job", l.Job.Id, "round", round, "entered", rd.Entered)
	}
}

// aggregateEntered computes G_{round+1} of rd's entered workers' pseudo-gradients,
// fetched from custody and checked against their commitments.
func (r *Role) aggregateEntered(ctx context.Context, l Lease, w *Worker, rd markettypes.Round, wake chan struct{}) (*diloco.GlobalState, error) {
	round := rd.Round
	commits, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: l.Job.Id, Round: round})
	if err != nil {
		return nil, err
	}
	var entered []Entered
	for _, slot := range rd.Entered {
		c, ok := commitOf(commits.Commits, slot)
		if !ok {
			return nil, fmt.Errorf("round %d of job %d: slot %d entered without a commit", round, l.Job.Id, slot)
		}
		root, err := merkle.HashFromBytes(c.PseudoGradientRoot)
		if err != nil {
			return nil, err
		}
		entered = append(entered, Entered{Worker: slot, Root: root})
	}
	var g *diloco.GlobalState
	for g == nil {
		if g, err = w.Job.Aggregate(ctx, round, entered, CustodyFetch(r.opts.Custody, l.Job.Id)); err != nil {
			if errors.Is(err, ErrBadPseudoGradient) || ctx.Err() != nil {
				return nil, err
			}
			if r.gone(ctx, l, round) {
				return nil, roundDeleted{round}
			}
			r.log.Info("waiting for the entered pseudo-gradients' custody", "job", l.Job.Id, "round", round, "err", err)
			if err := r.sleep(ctx, wake); err != nil {
				return nil, err
			}
		}
	}
	if r.opts.CheatAggregate && l.Worker == 0 {
		g.Weights[0]++
		if _, _, err := w.Job.PutGlobal(g); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// commitAndDefend commits G_{round+1} (root mine, aggregated over rd.Entered) when it is
// this slot's turn, checks the committed one and proves it wrong if it is not mine,
// until the round's global is mine or final. It returns again (with the round as it
// stands) when the chain's entered list is no longer the one mine was aggregated over.
func (r *Role) commitAndDefend(ctx context.Context, l Lease, w *Worker, rd markettypes.Round, mine merkle.Hash, wake chan struct{}) (_ markettypes.Round, again bool, err error) {
	round, entered := rd.Round, rd.Entered
	// The n-th entered slot commits after n grace periods without a committed global.
	turn := slices.Index(rd.Entered, l.Worker)
	deadline := time.Now().Add(time.Duration(max(turn, 0)) * r.opts.AggregatorGrace)
	r.setStatus(l.ID, func(s *JobStatus) { s.Phase = PhaseWaitingGlobal })
	// seen is the last committed global that is not mine; refused is the one whose proof
	// the chain refused (proven by another worker first, or too late). published is set
	// once a committed global is seen, so that its rejection restarts the turns.
	var seen, refused []byte
	var published bool
	for {
		rd, err = r.waitRound(ctx, l, round, wake, func(rd markettypes.Round) bool {
			if !slices.Equal(rd.Entered, entered) {
				return true
			}
			if len(rd.NextGlobalRoot) > 0 {
				return !published || !bytes.Equal(rd.NextGlobalRoot, refused) || rd.State != markettypes.ROUND_STATE_CHALLENGE
			}
			return published || (turn >= 0 && !time.Now().Before(deadline) && rd.State == markettypes.ROUND_STATE_AGGREGATING)
		})
		if err != nil {
			return rd, false, err
		}
		if !slices.Equal(rd.Entered, entered) {
			return rd, true, nil
		}
		if len(rd.NextGlobalRoot) == 0 && published {
			// The committed global was rejected, its aggregator convicted and its lease
			// closed. The turns start again from now among the slots still served: were
			// they kept from when this slot started waiting, every slot whose turn had
			// come during the challenge window would commit at once.
			published = false
			turn = r.turnAmongActive(ctx, l, entered, turn)
			deadline = time.Now().Add(time.Duration(max(turn, 0)) * r.opts.AggregatorGrace)
			continue
		}
		if len(rd.NextGlobalRoot) == 0 {
			// This slot's turn: commit, and again after a while if the chain refused it
			// (e.g. an entered pseudo-gradient not yet held by enough holders).
			if err := r.commitGlobal(ctx, l, w.Job, round, rd.Entered, mine); err != nil {
				return rd, false, err
			}
			deadline = time.Now().Add(3 * r.opts.PollInterval)
			continue
		}
		published = true
		if committed, err := merkle.HashFromBytes(rd.NextGlobalRoot); err == nil && committed == mine {
			return rd, false, nil
		}
		if !bytes.Equal(rd.NextGlobalRoot, seen) {
			seen = rd.NextGlobalRoot
			msg := fmt.Sprintf("round %d: %s committed global %x, this sidecar aggregates to %s", round, rd.Aggregator, rd.NextGlobalRoot, mine)
			r.log.Error("the committed global state is not this sidecar's aggregate", "job", l.Job.Id, "round", round,
				"aggregator", rd.Aggregator, "committed", fmt.Sprintf("%x", rd.NextGlobalRoot), "mine", mine.String())
			r.opts.Metrics.RoundGlobalMismatch()
			r.setStatus(l.ID, func(s *JobStatus) { s.GlobalMismatch = msg })
		}
		if rd.State != markettypes.ROUND_STATE_CHALLENGE {
			return rd, false, nil // final: too late to prove it wrong
		}
		// Prove it wrong while its challenge window lasts; the chain rejects it and the
		// round is aggregated again (this loop waits for that global).
		proven, err := r.proveAggregation(ctx, w.Job, round, rd.Entered, rd.NextGlobalRoot)
		switch {
		case err != nil:
			r.log.Warn("cannot prove the committed global state wrong yet", "job", l.Job.Id, "round", round, "err", err)
			if err := r.sleep(ctx, wake); err != nil {
				return rd, false, err
			}
		case proven:
			r.setStatus(l.ID, func(s *JobStatus) { s.GlobalMismatch += " (proven wrong)" })
		default:
			refused = rd.NextGlobalRoot
		}
	}
}

// turnAmongActive is the place of l's slot among the entered slots whose leases are
// still active (a convicted aggregator's is closed): how many grace periods it waits
// before committing the global itself. Without the chain's answer the turn stays as it
// was.
func (r *Role) turnAmongActive(ctx context.Context, l Lease, entered []uint32, was int) int {
	res, err := r.opts.Chain.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: l.Job.Id})
	if err != nil {
		r.log.Warn("cannot read the job's leases to order the aggregators; keeping this slot's turn", "job", l.Job.Id, "err", err)
		return was
	}
	active := map[uint32]bool{}
	for _, ls := range res.Leases {
		if ls.JobId == l.Job.Id && ls.State == markettypes.LEASE_STATE_ACTIVE {
			active[ls.Worker] = true
		}
	}
	turn := 0
	for _, w := range entered {
		if w == l.Worker {
			return turn
		}
		if active[w] {
			turn++
		}
	}
	return -1
}

// commitGlobal writes G_{round+1}'s custody pieces and commits it.
func (r *Role) commitGlobal(ctx context.Context, l Lease, j Job, round uint64, entered []uint32, root merkle.Hash) error {
	r.setStatus(l.ID, func(s *JobStatus) { s.Aggregator = true })
	spec := l.Job.Spec.Custody
	p, err := WritePieces(r.opts.CustodyDir, markettypes.GlobalCustodyID(j.ID, round+1), j.GlobalPath(round+1), spec.DataPieces, spec.ParityPieces)
	if err != nil {
		return fmt.Errorf("custody pieces of the global state of round %d: %w", round+1, err)
	}
	_, err = r.opts.Submit(ctx, &markettypes.MsgCommitGlobal{
		Provider: r.opts.Operator, JobId: j.ID, Round: round, Entered: entered,
		GlobalRoot: root[:], GlobalSize: p.Size, PieceRoots: merkle.HashesToBytes(p.Roots),
	})
	if err != nil && ctx.Err() == nil {
		// Refused (in its block, or already by the simulation): most likely another
		// slot's came first, or an entered pseudo-gradient is not held yet; waiting
		// shows what is on chain, and the caller commits again if it is still this
		// slot's turn. Failing the lease run instead would hand the turn to the next slot.
		r.log.Warn("the chain refused this sidecar's global state", "job", j.ID, "round", round, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("committing the global state of round %d: %w", round+1, err)
	}
	r.log.Info("global state committed", "job", j.ID, "round", round, "entered", entered, "global_root", root.String(), "bytes", p.Size)
	return nil
}

// roundDeleted: the round a lease served is gone: x/market deleted it (and the rounds
// after it) with its voided start global, and the lease's commit and checkpoint of it
// with it. The round may be open again already (the previous round re-aggregated).
type roundDeleted struct{ round uint64 }

// errRoundReopened: the round a lease trained was deleted with its voided start global
// and opened again on a new one before the lease could commit it; it trains it again
// (with the same carry: the carry moves only when a round closes with the slot in it).
var errRoundReopened = errors.New("the round was opened again on a new global state")

func (e roundDeleted) Error() string {
	return fmt.Sprintf("round %d was deleted with its start global", e.round)
}

// redo goes back to round p, the one before the deleted round (or the job's current
// round, if x/market went back further), after x/market deleted the rounds after it
// (their start global G_{p+1} was voided): the lease takes round p+1's carry back and,
// when its slot entered p, takes part in p's aggregation again; Serve then trains round
// p+1 again from the new G_{p+1}.
func (r *Role) redo(ctx context.Context, l Lease, w *Worker, deleted uint64, carries map[uint64]*uint64, wake chan struct{}) error {
	job, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: l.Job.Id})
	if err != nil {
		return err
	}
	// The job's round is the deleted one's again when the round before was aggregated
	// anew before this lease looked.
	p := min(job.Job.Round, max(deleted, 1)-1)
	if carry, ok := carries[p+1]; ok {
		w.Carry = carry
	}
	for q := range carries {
		if q > p+1 {
			delete(carries, q)
		}
	}
	// The deleted rounds' round-end checkpoints started from the voided global: Train
	// must not take them for a restart's.
	for q := p + 1; q < l.Job.Spec.Rounds(); q++ {
		if err := os.RemoveAll(trainer.CheckpointDir(w.OutputDir, w.Job.Sync.RoundStart(q+1))); err != nil {
			return err
		}
	}
	res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: l.Job.Id, Round: p})
	if err != nil {
		return err
	}
	r.log.Warn("the global state a round started from was voided: redoing the round", "lease", l.ID, "job", l.Job.Id, "round", p+1)
	if res.Round.State == markettypes.ROUND_STATE_OPEN || !slices.Contains(res.Round.Entered, l.Worker) {
		return nil
	}
	return r.deletedOr(ctx, l, p, r.aggregate(ctx, l, w, p, wake))
}

// deletedOr is roundDeleted when serving round failed because the chain deleted it
// meanwhile (the job's round went back before it), else err.
func (r *Role) deletedOr(ctx context.Context, l Lease, round uint64, err error) error {
	if err == nil || errors.As(err, new(roundDeleted)) || ctx.Err() != nil {
		return err
	}
	if r.wentBack(ctx, l, round) {
		return roundDeleted{round}
	}
	return err
}

// wentBack reports whether the job's round is before round: the chain deleted it.
func (r *Role) wentBack(ctx context.Context, l Lease, round uint64) bool {
	job, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: l.Job.Id})
	return err == nil && job.Job.Round < round
}

// gone reports whether the chain deleted round, which l's slot committed: the job's
// round went back before it, or the round holds no commit of the lease any more (it was
// deleted and opened again).
func (r *Role) gone(ctx context.Context, l Lease, round uint64) bool {
	if r.wentBack(ctx, l, round) {
		return true
	}
	res, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: l.Job.Id, Round: round})
	return err == nil && !slices.ContainsFunc(res.Commits, func(c markettypes.RoundCommit) bool { return c.Worker == l.Worker && c.LeaseId == l.ID })
}

// waitRound polls round, which l's slot committed, until done says so; a round the
// chain deleted meanwhile is roundDeleted.
func (r *Role) waitRound(ctx context.Context, l Lease, round uint64, wake chan struct{}, done func(markettypes.Round) bool) (markettypes.Round, error) {
	for {
		res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: l.Job.Id, Round: round})
		if err == nil && done(res.Round) {
			return res.Round, nil
		}
		// A round still open may be one deleted and opened again.
		if err != nil || res.Round.State == markettypes.ROUND_STATE_OPEN {
			if r.gone(ctx, l, round) {
				return markettypes.Round{}, roundDeleted{round}
			}
		}
		if err := r.sleep(ctx, wake); err != nil {
			return markettypes.Round{}, err
		}
	}
}

// carryFromChain sets w's carry into round to the one x/verify holds its start state to:
// the last round before it that the lease's slot entered (previousEntered), or none.
// It is read from the chain, not kept on disk: a sidecar that stopped between its commit
// landing and the round closing never saw the round close, and one restarted then must
// not train the next round from zero moments (a checker would prove that start wrong).
func (r *Role) carryFromChain(ctx context.Context, l Lease, w *Worker, round uint64) error {
	prev, err := r.previousEntered(ctx, w.Job, markettypes.RoundCommit{Round: round, Worker: l.Worker, LeaseId: l.ID})
	if err != nil {
		return fmt.Errorf("reading the rounds lease %d entered before round %d: %w", l.ID, round, err)
	}
	var carry *uint64
	if prev != nil {
		carry = &prev.Round
	}
	if (carry == nil) == (w.Carry == nil) && (carry == nil || *carry == *w.Carry) {
		return nil
	}
	// Expected after a restart (the carry starts unknown) and after a redo; the chain's is
	// the one a START check holds the worker to.
	r.log.Info("the lease's carry is the chain's", "lease", l.ID, "job", l.Job.Id, "round", round,
		"was", roundOrNone(w.Carry), "chain", roundOrNone(carry))
	w.Carry = carry
	return nil
}

// roundOrNone prints a carry for the log.
func roundOrNone(carry *uint64) string {
	if carry == nil {
		return "none"
	}
	return strconv.FormatUint(*carry, 10)
}
