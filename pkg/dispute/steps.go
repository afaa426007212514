package dispute

import (
	"fmt"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/trace"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Challenge is the opening move against checkpoint cp: the challenger's own
// trace of the same steps, its root and its final hash with a proof. The
// trace must cover exactly the checkpoint's steps.
func Challenge(sender string, cp verifytypes.Checkpoint, tr trace.Trace) (*verifytypes.MsgChallenge, error) {
	if tr.Start != cp.StartStep || tr.End() != cp.EndStep {
		return nil, fmt.Errorf("the trace covers steps %d..%d but the checkpoint covers %d..%d", tr.Start, tr.End(), cp.StartStep, cp.EndStep)
	}
	final, proof, err := tr.Open(tr.End())
	if err != nil {
		return nil, err
	}
	root := tr.Root()
	return &verifytypes.MsgChallenge{
		Challenger: sender, LeaseId: cp.LeaseId, CheckpointIndex: cp.Index,
		TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
	}, nil
}

// Reveal is the defender's move in the step phase: its committed hash at
// step of checkpoint index of the lease, with the proof against its trace
// root. A hash is revealed per checkpoint, not per game: every game on the
// checkpoint reuses it.
func Reveal(sender string, leaseID, index, step uint64, tr trace.Trace) (*verifytypes.MsgRevealHash, error) {
	h, proof, err := tr.Open(step)
	if err != nil {
		return nil, err
	}
	return &verifytypes.MsgRevealHash{Provider: sender, LeaseId: leaseID, CheckpointIndex: index, Step: step, Hash: h[:], Proof: proof}, nil
}

// Respond is the challenger's move in the step phase: its own hash at the
// game's midpoint, with the proof against its trace root.
func Respond(sender string, ch verifytypes.Challenge, tr trace.Trace) (*verifytypes.MsgRespond, error) {
	h, proof, err := tr.Open(ch.Mid)
	if err != nil {
		return nil, err
	}
	return &verifytypes.MsgRespond{Challenger: sender, ChallengeId: ch.Id, Hash: h[:], Proof: proof}, nil
}

func revealMove(sender string, g Game, ev Evidence) (sdk.Msg, error) {
	return Reveal(sender, g.Challenge.LeaseId, g.Challenge.CheckpointIndex, g.Challenge.Mid, ev.Trace)
}

func respondMove(sender string, g Game, ev Evidence) (sdk.Msg, error) {
	return Respond(sender, g.Challenge, ev.Trace)
}
