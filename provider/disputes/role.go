// Package disputes is the provider sidecar's disputes role: it plays
// x/verify's verification game wherever the operator is a party, and in
// verifier mode re-executes other providers' reference checkpoints and
// challenges those it finds wrong: the earliest wrong checkpoint of a lease,
// one game per lease (verify.go), as a conviction rejects the later ones too.
//
// As a defender, the role opens the hashes of the trace the operator
// committed for a challenged checkpoint; as a challenger, those of its own
// honest re-execution, and it makes the one-step proof, or, for a step
// larger than the one-step referee takes (max_step_macs), plays phases 2–3:
// both sides re-execute the disputed step from the agreed pre-state, commit
// its operator records and descend to one operator and one tile (tiles.go).
// Every move is built by pkg/dispute from the game's state on chain and the
// party's evidence, as soon as the chain waits on the operator, and a move
// that fails is retried until the game's deadline: losing by silence is the
// one way an honest party loses. Nothing about a game is remembered but what
// the chain and the database hold (the phase 2–3 execution of the disputed
// step is an in-memory cache, rebuilt from them), so after a start Resume
// picks up every open game.
package disputes

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// VerifierGrants are the messages a verifier sends on the operator's behalf,
// besides chain.RequiredGrants.
var VerifierGrants = []string{
	sdk.MsgTypeURL(&verifytypes.MsgChallenge{}),
	sdk.MsgTypeURL(&verifytypes.MsgRespond{}),
	sdk.MsgTypeURL(&verifytypes.MsgStep{}),
	sdk.MsgTypeURL(&verifytypes.MsgClaimTimeout{}),
	sdk.MsgTypeURL(&verifytypes.MsgCommitRecords{}),
	sdk.MsgTypeURL(&verifytypes.MsgRevealNode{}),
	sdk.MsgTypeURL(&verifytypes.MsgOpenRecord{}),
	sdk.MsgTypeURL(&verifytypes.MsgProveTile{}),
}

// Sizes of the work queues; past them work waits for the next start.
const (
	disputeQueueSize = 1024
	verifyQueueSize  = 4096
)

// maxStartStateBytes bounds a start state downloaded from another provider.
const maxStartStateBytes = 64 << 30

// Chain is what the role reads from the chain; chain.Queries satisfies it.
type Chain interface {
	chain.VerifyParamsQuerier
	chain.JobQuerier
	chain.LeaseQuerier
	chain.CheckpointQuerier
	chain.ChallengeQuerier
	chain.ChallengesQuerier
	// Round reads a training round: a sync worker's round checkpoint starts from its
	// global state (rounds.go).
	Round(ctx context.Context, in *markettypes.QueryRoundRequest, opts ...grpc.CallOption) (*markettypes.QueryRoundResponse, error)
}

// Checkpoints are the checkpoint folders the provider retains;
// *checkpoint.Catalog satisfies it.
type Checkpoints interface {
	Lookup(ref checkpoint.Ref) (checkpoint.Entry, bool)
}

// Metrics counts what the role does; *metrics.Metrics satisfies it.
type Metrics interface {
	DisputeMove(role string, blocksToSpare int64)
	Verification(result string)
	SetDisputesOpen(role string, n int)
	DisputeOpened(role string)
	DisputeResolved(role, result string)
}

// Hooks change what the role does, for tests only; production sets none.
type Hooks struct {
	// BeforeMove is called before each move of a game is sent. It may
	// block until ctx ends (a test's pause point, to kill the sidecar at a
	// known move).
	BeforeMove func(ctx context.Context, challengeID uint64, msg sdk.Msg)
	// StepExec replaces the honest execution of the steps the operator
	// re-executes (its own in a defence, another provider's as a verifier):
	// a cheater wrong in one element of one step, or a lying verifier.
	StepExec StepExec
}

// Options configure a Role.
type Options struct {
	// Operator is the address whose games the role plays.
	Operator string
	Submit   chain.SubmitFunc
	Chain    Chain
	// Height is the chain's latest height as the daemon last saw it.
	Height func() int64
	DB     *db.DB
	// Checkpoints hold the operator's checkpoint folders, whose traces a
	// defence opens.
	Checkpoints Checkpoints
	// Verifier turns on verifier mode and says which checkpoints to check.
	Verifier config.Verifier
	// WorkDir holds downloads in progress.
	WorkDir string
	// Custody rebuilds a start state from its custody holders (jobs with a custody
	// section), so a checkpoint that starts where a departed trainer's state ends can
	// still be checked; nil fetches start states from their URIs only.
	Custody *fetch.Source
	// Datasets fetches the training data of dataset-backed jobs, which the verifier
	// re-executes and both sides of a game on one prove steps with; nil skips those
	// jobs' checkpoints.
	Datasets Datasets
	// Authorize signs requests to other providers' checkpoint servers (pkg/reqauth),
	// which serve states only to the job's owner and the bonded; nil sends them unsigned.
	Authorize func(*http.Request) error
	Metrics   Metrics
	// Logger receives the role's logs; nil discards them.
	Logger *slog.Logger
	Hooks  Hooks
	// Priority, when set, goes before verifier-mode sampling: the audits role holds
	// it while it has assignments, and a sampled check waits until it is free.
	Priority *rolekit.Priority
}

// Role is the disputes role. Create it with New.
type Role struct {
	opts    Options
	log     *slog.Logger
	fetcher checkpoint.Fetcher
	games   rolekit.Queue[uint64]
	checks  rolekit.Queue[checkpoint.Ref]
	lastErr rolekit.LastError

	mu sync.Mutex
	// executions are the verifier's re-executions of challenged checkpoints,
	// by challenge; verified its latest computed state per lease.
	executions map[uint64]*Execution
	verified   map[uint64]*exact.State
	// global is the last round global state a round checkpoint started from.
	global roundGlobalCache
	// stream is the last dataset training stream fetched (data.go).
	stream streamCache
	// parties are the operator's executions of disputed steps in phases
	// 2–3, by challenge: built at the first phase 2–3 move, rebuilt after a
	// restart (tiles.go).
	parties map[uint64]*tiles.Party
	// open are the open games the operator is a party to, by challenge,
	// with its side: what depinprovider_disputes_open counts.
	open map[uint64]dispute.Side
}

// New checks opts and prepares a Role; nothing is sent until Run.
func New(opts Options) (*Role, error) {
	switch {
	case opts.Operator == "" || opts.WorkDir == "":
		return nil, errors.New("disputes role: needs an operator and a work folder")
	case opts.Submit == nil || opts.Chain == nil || opts.Height == nil || opts.DB == nil:
		return nil, errors.New("disputes role: needs a submitter, a chain, its height and a database")
	case opts.Checkpoints == nil || opts.Metrics == nil:
		return nil, errors.New("disputes role: needs the checkpoints and metrics")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Role{
		opts: opts, log: opts.Logger,
		fetcher:    checkpoint.Fetcher{Chain: opts.Chain, WorkDir: opts.WorkDir, MaxStateBytes: maxStartStateBytes, Authorize: opts.Authorize},
		games:      rolekit.NewQueue[uint64](disputeQueueSize),
		checks:     rolekit.NewQueue[checkpoint.Ref](verifyQueueSize),
		executions: map[uint64]*Execution{}, verified: map[uint64]*exact.State{}, parties: map[uint64]*tiles.Party{},
		open: map[uint64]dispute.Side{},
	}, nil
}

// Name implements the daemon's Role.
func (*Role) Name() string { return "disputes" }

// Status is what the role reports to the status API.
type Status struct {
	// Verifier says verifier mode is on.
	Verifier bool
	// Games and Checks are how many challenges and checkpoints wait.
	Games, Checks int
	LastError     string
	ErrorAt       time.Time
}

// Status reports the role's state.
func (r *Role) Status() Status {
	msg, at := r.lastErr.Get()
	return Status{Verifier: r.opts.Verifier.Enabled, Games: r.games.Len(), Checks: r.checks.Len(), LastError: msg, ErrorAt: at}
}

// Resume queues every open game the operator is in, after a start: its own
// checkpoints' challenges and the ones its verifier opened.
func (r *Role) Resume(ctx context.Context, _ *chain.Snapshot) error {
	ids, verifications, err := r.challengesOf(ctx, true)
	if err != nil {
		r.log.Warn("looking up open disputes failed; their next turns will bring them", "err", err)
		return nil
	}
	for _, id := range ids {
		r.setOpen(id, dispute.Defender)
		r.enqueueGame(id)
	}
	challenged := 0
	for _, v := range verifications {
		if v.ChallengeID != 0 && v.Outcome == "" {
			r.setOpen(v.ChallengeID, dispute.Challenger)
			r.enqueueGame(v.ChallengeID)
			challenged++
		}
	}
	r.log.Info("open disputes resumed", "defending", len(ids), "challenging", challenged)
	r.publishOpen()
	return nil
}

// setOpen records an open game the operator plays on side, or with side 0
// that it ended.
func (r *Role) setOpen(challengeID uint64, side dispute.Side) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if side == 0 {
		delete(r.open, challengeID)
	} else {
		r.open[challengeID] = side
	}
}

// publishOpen exports how many open games the operator plays on each side.
func (r *Role) publishOpen() {
	r.mu.Lock()
	n := map[dispute.Side]int{}
	for _, side := range r.open {
		n[side]++
	}
	r.mu.Unlock()
	for _, side := range []dispute.Side{dispute.Defender, dispute.Challenger} {
		r.opts.Metrics.SetDisputesOpen(side.String(), n[side])
	}
}

// Run plays queued games and, in verifier mode, checks queued checkpoints,
// until ctx ends.
func (r *Role) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if r.opts.Verifier.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.checks.Serve(ctx, r.checkQueued)
		}()
	}
	r.games.Serve(ctx, r.playQueued)
	wg.Wait()
	return nil
}

// enqueueGame asks the worker to look at a challenge.
func (r *Role) enqueueGame(challengeID uint64) {
	if !r.games.Push(challengeID) {
		r.log.Error("dispute queue full; the challenge is picked up at the next start", "challenge", challengeID)
	}
}

// enqueueCheck asks the verifier to check another provider's checkpoint.
func (r *Role) enqueueCheck(ref checkpoint.Ref) {
	if !r.checks.Push(ref) {
		r.log.Warn("verification queue full; checkpoint not checked", "checkpoint", ref.String())
	}
}
