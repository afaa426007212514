package dispute_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	"github.com/depinchain/depinchain/provider/dispute"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

func testJob() markettypes.Job {
	return markettypes.Job{Id: 7, Seed: bytes.Repeat([]byte{3}, 32)}
}

func execution(t *testing.T, start, end uint64) *dispute.Execution {
	t.Helper()
	job := testJob()
	s, err := dispute.InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	if start > 0 {
		pre, err := dispute.Reexecute(job, s, 0, start)
		if err != nil {
			t.Fatal(err)
		}
		s = pre.End
	}
	e, err := dispute.Reexecute(job, s, start, end)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The re-executed trace is the chain's: h_i hashes the state StateAt(i)
// rebuilds, and a range started midway continues the trace from step 0.
func TestReexecuteMatchesStates(t *testing.T) {
	whole := execution(t, 0, 12)
	tail := execution(t, 5, 12)
	for step := uint64(5); step <= 12; step++ {
		if whole.Trace.Hashes[step] != tail.Trace.Hashes[step-5] {
			t.Fatalf("h_%d differs between a run from 0 and one from 5", step)
		}
		enc, err := tail.StateAt(step)
		if err != nil {
			t.Fatal(err)
		}
		if merkle.Hash(sha256.Sum256(enc)) != tail.Trace.Hashes[step-5] {
			t.Fatalf("StateAt(%d) does not hash to h_%d", step, step)
		}
	}
	if _, err := tail.StateAt(4); err == nil {
		t.Fatal("StateAt outside the range succeeded")
	}
}

func challenge(turn verifytypes.GameTurn, lo, mid, hi uint64, deadline int64) verifytypes.Challenge {
	return verifytypes.Challenge{Id: 3, LeaseId: 1, CheckpointIndex: 0, Provider: "prov", Challenger: "chal",
		Lo: lo, Mid: mid, Hi: hi, Turn: turn, Deadline: deadline}
}

func TestNextMoveByTurn(t *testing.T) {
	e := execution(t, 0, 16)
	job := testJob()
	root := e.Trace.Root()

	// The defender reveals its committed hash at the midpoint, provably.
	msg, err := dispute.NextMove("prov", dispute.Defender, challenge(verifytypes.GAME_TURN_PROVIDER, 0, 8, 16, 100), 90, e.Evidence(), job)
	if err != nil {
		t.Fatal(err)
	}
	reveal := msg.(*verifytypes.MsgRevealHash)
	if reveal.Step != 8 || !bytes.Equal(reveal.Hash, e.Trace.Hashes[8][:]) {
		t.Fatalf("reveal %+v", reveal)
	}
	proof := make([]merkle.Hash, len(reveal.Proof))
	for i, p := range reveal.Proof {
		copy(proof[i][:], p)
	}
	if err := merkle.VerifyInclusion(root, 8, 17, merkle.LeafHash(reveal.Hash), proof); err != nil {
		t.Fatalf("the revealed hash's proof does not verify: %v", err)
	}

	// Not the defender's turn: nothing to do.
	for _, turn := range []verifytypes.GameTurn{verifytypes.GAME_TURN_CHALLENGER, verifytypes.GAME_TURN_ONE_STEP, verifytypes.GAME_TURN_DONE} {
		if msg, err := dispute.NextMove("prov", dispute.Defender, challenge(turn, 0, 8, 16, 100), 90, e.Evidence(), job); msg != nil || err != nil {
			t.Fatalf("defender at %s: %v %v", turn, msg, err)
		}
	}

	// The challenger answers the midpoint, then proves the last step.
	msg, err = dispute.NextMove("chal", dispute.Challenger, challenge(verifytypes.GAME_TURN_CHALLENGER, 0, 8, 16, 100), 100, e.Evidence(), job)
	if err != nil || msg.(*verifytypes.MsgRespond).ChallengeId != 3 || !bytes.Equal(msg.(*verifytypes.MsgRespond).Hash, e.Trace.Hashes[8][:]) {
		t.Fatalf("respond: %+v %v", msg, err)
	}
	msg, err = dispute.NextMove("chal", dispute.Challenger, challenge(verifytypes.GAME_TURN_ONE_STEP, 11, 0, 12, 100), 95, e.Evidence(), job)
	if err != nil {
		t.Fatal(err)
	}
	step := msg.(*verifytypes.MsgStep)
	if merkle.Hash(sha256.Sum256(step.PreState)) != e.Trace.Hashes[11] || len(step.Data) == 0 {
		t.Fatalf("one-step proof: pre-state does not hash to h_11 or no data (%d chunks)", len(step.Data))
	}
	if _, err := reftrainer.Decode(step.PreState); err != nil {
		t.Fatal(err)
	}
}

// Timing: a move is made up to and including the deadline height, never after.
func TestNextMoveDeadline(t *testing.T) {
	e := execution(t, 0, 4)
	ch := challenge(verifytypes.GAME_TURN_PROVIDER, 0, 2, 4, 50)
	if msg, err := dispute.NextMove("prov", dispute.Defender, ch, 50, e.Evidence(), testJob()); err != nil || msg == nil {
		t.Fatalf("at the deadline: %v %v", msg, err)
	}
	if _, err := dispute.NextMove("prov", dispute.Defender, ch, 51, e.Evidence(), testJob()); !errors.Is(err, dispute.ErrTooLate) {
		t.Fatalf("after the deadline: %v", err)
	}
	ch.Outcome = verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON
	if msg, err := dispute.NextMove("prov", dispute.Defender, ch, 51, e.Evidence(), testJob()); msg != nil || err != nil {
		t.Fatalf("a decided game: %v %v", msg, err)
	}
}

func TestSideOf(t *testing.T) {
	ch := challenge(verifytypes.GAME_TURN_PROVIDER, 0, 1, 2, 9)
	if dispute.SideOf(ch, "prov") != dispute.Defender || dispute.SideOf(ch, "chal") != dispute.Challenger || dispute.SideOf(ch, "x") != 0 {
		t.Fatal("SideOf")
	}
}
