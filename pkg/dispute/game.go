// Package dispute builds the moves of x/verify's verification game, for
// every client that plays it: the provider sidecar's disputes role (which
// plays on its own) and `depinchaind tx verify` (whose commands read the
// party's files and broadcast what this package builds).
//
// A move is computed from two things only: the game's state on chain (a
// Game, read with Read) and what the party holds about the disputed steps
// (its Evidence). Nothing is remembered between moves, so a restarted party
// continues a game wherever it stands.
//
// The game is a sequence of phases, each owning some of the chain's turns:
//   - the opening (Challenge): a challenger commits its own trace of the
//     checkpoint's steps;
//   - the step phase (Reveal, Respond): both sides open their hash at the
//     midpoint of the disputed range, halving it until two adjacent steps
//     remain;
//   - the one-step phase (OneStep): the challenger proves the agreed
//     pre-state and the data the step reads, and the chain re-executes it.
//
// NextMove dispatches on the turn through one table (moves); a later phase
// (operators of the disputed step, tiles of the disputed operator) adds its
// turns there and its evidence to Evidence.
package dispute

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Side is the party one plays in a challenge.
type Side int

// Sides of a challenge.
const (
	Defender Side = iota + 1
	Challenger
)

func (s Side) String() string {
	switch s {
	case Defender:
		return "defender"
	case Challenger:
		return "challenger"
	default:
		return "none"
	}
}

// SideOf returns the side address plays in ch, or 0 when it plays none.
func SideOf(ch verifytypes.Challenge, address string) Side {
	switch address {
	case ch.Provider:
		return Defender
	case ch.Challenger:
		return Challenger
	default:
		return 0
	}
}

// ErrTooLate: the party's deadline has passed; a move now would be refused.
var ErrTooLate = errors.New("dispute: the move's deadline has passed")

// Game is one challenge as the chain has it, with the commitment it
// disputes and the job whose steps it is about.
type Game struct {
	Challenge  verifytypes.Challenge
	Checkpoint verifytypes.Checkpoint
	Job        markettypes.Job
	// Tile is the phase 2–3 state (nil before phase 2).
	Tile *verifytypes.TileGame
	// Data, when set, gives the worker's training stream over the checkpoint's steps: a
	// dataset-backed job's, whose bytes the chain does not have (the data pieces of the
	// worker's shards, fetched from their holders), called only by the moves that read
	// the data. Nil: the stream the chain gives (verifytypes.WorkerTrainingData).
	Data func() (traindata.Stream, error)
}

// TrainingData is the stream the disputed step (Challenge.Lo) reads, which the one-step
// proof and a phase 3 window load prove chunks of.
func (g Game) TrainingData() (traindata.Stream, error) {
	if g.Data != nil {
		return g.Data()
	}
	return verifytypes.WorkerTrainingData(g.Job, g.Checkpoint.Worker, g.Challenge.Lo)
}

// Queriers are the chain queries a game is read with; the generated
// x/verify and x/market query clients satisfy them.
type (
	VerifyQuerier interface {
		Challenge(ctx context.Context, in *verifytypes.QueryChallengeRequest, opts ...grpc.CallOption) (*verifytypes.QueryChallengeResponse, error)
		Checkpoint(ctx context.Context, in *verifytypes.QueryCheckpointRequest, opts ...grpc.CallOption) (*verifytypes.QueryCheckpointResponse, error)
	}
	MarketQuerier interface {
		Job(ctx context.Context, in *markettypes.QueryJobRequest, opts ...grpc.CallOption) (*markettypes.QueryJobResponse, error)
	}
)

// Read reads challenge id from the chain, with its checkpoint and its job.
func Read(ctx context.Context, verify VerifyQuerier, market MarketQuerier, id uint64) (Game, error) {
	res, err := verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: id})
	if err != nil {
		return Game{}, fmt.Errorf("reading challenge %d: %w", id, err)
	}
	g, err := Load(ctx, verify, market, res.Challenge)
	g.Tile = res.TileGame
	return g, err
}

// Load completes the game of a challenge already read: its checkpoint and
// its job.
func Load(ctx context.Context, verify VerifyQuerier, market MarketQuerier, ch verifytypes.Challenge) (Game, error) {
	cp, err := verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: ch.LeaseId, Index: ch.CheckpointIndex})
	if err != nil {
		return Game{}, fmt.Errorf("reading checkpoint %d of lease %d: %w", ch.CheckpointIndex, ch.LeaseId, err)
	}
	job, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: cp.Checkpoint.JobId})
	if err != nil {
		return Game{}, fmt.Errorf("reading job %d: %w", cp.Checkpoint.JobId, err)
	}
	return Game{Challenge: ch, Checkpoint: cp.Checkpoint, Job: job.Job}, nil
}

// Evidence is what a party holds about the disputed checkpoint's steps.
type Evidence struct {
	// Trace is h_start..h_end as this party computed (challenger) or
	// committed (defender) it.
	Trace trace.Trace
	// StateAt returns the encoded reference state at a step of the
	// checkpoint; only the challenger needs it, for the one-step proof.
	StateAt func(step uint64) ([]byte, error)
	// Tiles re-executes the disputed step (g.Challenge.Lo) for phases 2–3
	// (StepParty, usually); nil for a party that plays phase 1 only.
	Tiles func(g Game) (*tiles.Party, error)
	// PreferTiles has the challenger start phase 2 at the one-step turn
	// instead of proving the whole step (MsgStep), which only configs within
	// max_step_macs allow.
	PreferTiles bool
}

// move is one turn of the game: who must move and how the move is built.
type move struct {
	by    Side
	build func(sender string, g Game, ev Evidence) (sdk.Msg, error)
}

// moves are the game's turns by phase. The one-step proof is the
// challenger's burden: a challenger who cannot prove the step loses.
var moves = map[verifytypes.GameTurn]move{
	// The step phase.
	verifytypes.GAME_TURN_PROVIDER:   {by: Defender, build: revealMove},
	verifytypes.GAME_TURN_CHALLENGER: {by: Challenger, build: respondMove},
	// The one-step phase.
	verifytypes.GAME_TURN_ONE_STEP: {by: Challenger, build: oneStepMove},
	// Phases 2–3 (tiles.go).
	verifytypes.GAME_TURN_TILE_PROVIDER:   {by: Defender, build: tileMove},
	verifytypes.GAME_TURN_TILE_CHALLENGER: {by: Challenger, build: tileMove},
}

// WaitsOn reports whether a game at turn waits on side.
func WaitsOn(turn verifytypes.GameTurn, side Side) bool {
	m, ok := moves[turn]
	return ok && m.by == side
}

// NextMove returns the message side should send now in g, seen at height,
// or nil when the game is decided or does not wait on side. It returns
// ErrTooLate when it does but the deadline has passed. When the game waits on
// the other side past its deadline, the move is to claim the timeout
// (MsgClaimTimeout): the game ends now instead of when the end blocker, which
// processes a capped number of deadlines per block, reaches it.
func NextMove(sender string, side Side, g Game, height int64, ev Evidence) (sdk.Msg, error) {
	ch := g.Challenge
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
		return nil, nil
	}
	if !WaitsOn(ch.Turn, side) {
		if _, ok := moves[ch.Turn]; ok && height > ch.Deadline {
			return ClaimTimeout(sender, ch.Id), nil
		}
		return nil, nil
	}
	if height > ch.Deadline {
		return nil, fmt.Errorf("%w: challenge %d waited on the %s until height %d, now %d", ErrTooLate, ch.Id, side, ch.Deadline, height)
	}
	return moves[ch.Turn].build(sender, g, ev)
}
