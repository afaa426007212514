// Package dispute plays x/verify's bisection game for the sidecar, on either
// side: a provider defending its checkpoint reveals its committed hash at each
// midpoint; a challenger answers each midpoint with its own hash and, once
// the game narrows to one step, proves that step with the agreed pre-state
// and the data the step reads, for the chain to re-execute.
//
// Moves are computed from what a party holds (its trace and, for the
// challenger, a way to rebuild the state at a step) and from the game's
// state on chain, never from memory of earlier moves, so a restarted
// sidecar continues a game wherever it stands.
package dispute

import (
	"errors"
	"fmt"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Side is the party the sidecar plays in a challenge.
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

// Evidence is what a party holds about the disputed checkpoint's steps.
type Evidence struct {
	// Trace is h_start..h_end as this party computed (challenger) or
	// committed (defender) it.
	Trace trace.Trace
	// StateAt returns the encoded reference state at a step of the
	// checkpoint; only the challenger needs it, for the one-step proof.
	StateAt func(step uint64) ([]byte, error)
}

// NextMove returns the message side should send now in ch, seen at height,
// or nil when the game does not wait on side. It returns ErrTooLate when it
// does but the deadline has passed.
func NextMove(sender string, side Side, ch verifytypes.Challenge, height int64, ev Evidence, job markettypes.Job) (sdk.Msg, error) {
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED || !waitsOn(ch.Turn, side) {
		return nil, nil
	}
	if height > ch.Deadline {
		return nil, fmt.Errorf("%w: challenge %d waited on the %s until height %d, now %d", ErrTooLate, ch.Id, side, ch.Deadline, height)
	}
	switch ch.Turn {
	case verifytypes.GAME_TURN_PROVIDER:
		h, proof, err := ev.Trace.Open(ch.Mid)
		if err != nil {
			return nil, err
		}
		return &verifytypes.MsgRevealHash{Provider: sender, LeaseId: ch.LeaseId, CheckpointIndex: ch.CheckpointIndex, Step: ch.Mid, Hash: h[:], Proof: proof}, nil
	case verifytypes.GAME_TURN_CHALLENGER:
		h, proof, err := ev.Trace.Open(ch.Mid)
		if err != nil {
			return nil, err
		}
		return &verifytypes.MsgRespond{Challenger: sender, ChallengeId: ch.Id, Hash: h[:], Proof: proof}, nil
	case verifytypes.GAME_TURN_ONE_STEP:
		if ev.StateAt == nil {
			return nil, fmt.Errorf("dispute: challenge %d needs the state at step %d and this party cannot rebuild it", ch.Id, ch.Lo)
		}
		pre, err := ev.StateAt(ch.Lo)
		if err != nil {
			return nil, err
		}
		data, err := verifytypes.JobTrainingData(job)
		if err != nil {
			return nil, err
		}
		chunks, err := verifytypes.StepData(data, verifytypes.ReferenceConfig(job.Seed), job.Seed, ch.Lo)
		if err != nil {
			return nil, err
		}
		return &verifytypes.MsgStep{Sender: sender, ChallengeId: ch.Id, PreState: pre, Data: chunks}, nil
	}
	return nil, nil
}

// waitsOn reports whether a game at turn waits on side. The one-step proof
// is the challenger's burden: a challenger who cannot prove the step loses.
func waitsOn(turn verifytypes.GameTurn, side Side) bool {
	switch turn {
	case verifytypes.GAME_TURN_PROVIDER:
		return side == Defender
	case verifytypes.GAME_TURN_CHALLENGER, verifytypes.GAME_TURN_ONE_STEP:
		return side == Challenger
	default:
		return false
	}
}

// Execution is an honest re-execution of a range of a reference job.
type Execution struct {
	// Trace is h_start..h_end.
	Trace trace.Trace
	// End is the state at the range's end.
	End *reftrainer.State

	start     *reftrainer.State
	startStep uint64
	data      []byte
	seed      []byte
}

// Reexecute trains job's reference workload from start (the state at
// startStep) to endStep with the same package the chain's referee uses.
func Reexecute(job markettypes.Job, start *reftrainer.State, startStep, endStep uint64) (*Execution, error) {
	if endStep < startStep {
		return nil, fmt.Errorf("dispute: range %d..%d is empty", startStep, endStep)
	}
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		return nil, err
	}
	hashes := make([]merkle.Hash, 0, endStep-startStep+1)
	hashes = append(hashes, start.Hash())
	end, err := reftrainer.Run(start, data.Bytes, job.Seed, endStep-startStep, func(_ uint64, h [32]byte, _ reftrainer.StepMetrics) error {
		hashes = append(hashes, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Execution{
		Trace: trace.New(startStep, hashes), End: end,
		start: start, startStep: startStep, data: data.Bytes, seed: job.Seed,
	}, nil
}

// StateAt rebuilds the encoded state at step by training from the range's
// start again: states are not kept, as only the one-step proof needs one.
func (e *Execution) StateAt(step uint64) ([]byte, error) {
	if step < e.startStep || step > e.Trace.End() {
		return nil, fmt.Errorf("dispute: step %d is outside %d..%d", step, e.startStep, e.Trace.End())
	}
	s, err := reftrainer.Run(e.start, e.data, e.seed, step-e.startStep, nil)
	if err != nil {
		return nil, err
	}
	return s.Encode(), nil
}

// Evidence returns the execution as a challenger's evidence.
func (e *Execution) Evidence() Evidence { return Evidence{Trace: e.Trace, StateAt: e.StateAt} }

// InitialState is the reference state of job at step 0.
func InitialState(job markettypes.Job) (*reftrainer.State, error) {
	return reftrainer.Init(verifytypes.ReferenceConfig(job.Seed))
}
