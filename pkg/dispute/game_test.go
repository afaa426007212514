package dispute_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

func testJob() markettypes.Job {
	return markettypes.Job{Id: 7, Seed: bytes.Repeat([]byte{3}, 32),
		Spec: markettypes.JobSpec{Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
}

// honest trains the test job's reference workload for steps steps and
// returns its trace with a StateAt that rebuilds any of its states, as a
// challenger's evidence does.
func honest(t *testing.T, steps uint64) dispute.Evidence {
	t.Helper()
	job := testJob()
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		t.Fatal(err)
	}
	start, err := exact.Init(exact.ReferenceConfig(), job.Seed)
	if err != nil {
		t.Fatal(err)
	}
	hashes := []merkle.Hash{start.Root()}
	if _, err := exact.Run(start, data.Bytes, job.Seed, steps, func(_ uint64, info exact.StepInfo) error {
		hashes = append(hashes, info.Root)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return dispute.Evidence{Trace: trace.New(0, hashes), StateAt: func(step uint64) ([]byte, error) {
		s, err := exact.Run(start, data.Bytes, job.Seed, step, nil)
		if err != nil {
			return nil, err
		}
		return s.Encode(), nil
	}}
}

func game(turn verifytypes.GameTurn, lo, mid, hi uint64, deadline int64) dispute.Game {
	return dispute.Game{
		Challenge: verifytypes.Challenge{Id: 3, LeaseId: 1, CheckpointIndex: 0, Provider: "prov", Challenger: "chal",
			Lo: lo, Mid: mid, Hi: hi, Turn: turn, Deadline: deadline},
		Checkpoint: verifytypes.Checkpoint{LeaseId: 1, Index: 0, JobId: 7, StartStep: 0, EndStep: hi},
		Job:        testJob(),
	}
}

func TestNextMoveByTurn(t *testing.T) {
	ev := honest(t, 16)
	root := ev.Trace.Root()

	// The defender reveals its committed hash at the midpoint, provably.
	msg, err := dispute.NextMove("prov", dispute.Defender, game(verifytypes.GAME_TURN_PROVIDER, 0, 8, 16, 100), 90, ev)
	if err != nil {
		t.Fatal(err)
	}
	reveal := msg.(*verifytypes.MsgRevealHash)
	if reveal.Step != 8 || !bytes.Equal(reveal.Hash, ev.Trace.Hashes[8][:]) {
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
		if msg, err := dispute.NextMove("prov", dispute.Defender, game(turn, 0, 8, 16, 100), 90, ev); msg != nil || err != nil {
			t.Fatalf("defender at %s: %v %v", turn, msg, err)
		}
	}
	// Not the challenger's turn either.
	if msg, err := dispute.NextMove("chal", dispute.Challenger, game(verifytypes.GAME_TURN_PROVIDER, 0, 8, 16, 100), 90, ev); msg != nil || err != nil {
		t.Fatalf("challenger at the provider's turn: %v %v", msg, err)
	}

	// The challenger answers the midpoint, then proves the last step.
	msg, err = dispute.NextMove("chal", dispute.Challenger, game(verifytypes.GAME_TURN_CHALLENGER, 0, 8, 16, 100), 100, ev)
	if err != nil || msg.(*verifytypes.MsgRespond).ChallengeId != 3 || !bytes.Equal(msg.(*verifytypes.MsgRespond).Hash, ev.Trace.Hashes[8][:]) {
		t.Fatalf("respond: %+v %v", msg, err)
	}
	msg, err = dispute.NextMove("chal", dispute.Challenger, game(verifytypes.GAME_TURN_ONE_STEP, 11, 0, 12, 100), 95, ev)
	if err != nil {
		t.Fatal(err)
	}
	step := msg.(*verifytypes.MsgStep)
	if exact.StateRoot(step.PreState) != ev.Trace.Hashes[11] || len(step.Data) == 0 {
		t.Fatalf("one-step proof: pre-state root is not h_11 or no data (%d chunks)", len(step.Data))
	}
	if _, err := exact.Decode(step.PreState); err != nil {
		t.Fatal(err)
	}

	// A party that cannot rebuild states cannot make the one-step proof.
	if _, err := dispute.NextMove("chal", dispute.Challenger, game(verifytypes.GAME_TURN_ONE_STEP, 11, 0, 12, 100), 95,
		dispute.Evidence{Trace: ev.Trace}); err == nil || !strings.Contains(err.Error(), "state at step 11") {
		t.Fatalf("one-step proof without states: %v", err)
	}
}

// Timing: a move is made up to and including the deadline height, never after.
func TestNextMoveDeadline(t *testing.T) {
	ev := honest(t, 4)
	g := game(verifytypes.GAME_TURN_PROVIDER, 0, 2, 4, 50)
	if msg, err := dispute.NextMove("prov", dispute.Defender, g, 50, ev); err != nil || msg == nil {
		t.Fatalf("at the deadline: %v %v", msg, err)
	}
	if _, err := dispute.NextMove("prov", dispute.Defender, g, 51, ev); !errors.Is(err, dispute.ErrTooLate) {
		t.Fatalf("after the deadline: %v", err)
	}
	g.Challenge.Outcome = verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON
	if msg, err := dispute.NextMove("prov", dispute.Defender, g, 51, ev); msg != nil || err != nil {
		t.Fatalf("a decided game: %v %v", msg, err)
	}
}

func TestSideOf(t *testing.T) {
	ch := game(verifytypes.GAME_TURN_PROVIDER, 0, 1, 2, 9).Challenge
	if dispute.SideOf(ch, "prov") != dispute.Defender || dispute.SideOf(ch, "chal") != dispute.Challenger || dispute.SideOf(ch, "x") != 0 {
		t.Fatal("SideOf")
	}
}

// The opening move commits the challenger's whole trace; a trace of other
// steps than the checkpoint's is refused before anything is sent.
func TestChallengeCoversTheCheckpoint(t *testing.T) {
	ev := honest(t, 8)
	cp := verifytypes.Checkpoint{LeaseId: 4, Index: 2, StartStep: 0, EndStep: 8}
	msg, err := dispute.Challenge("chal", cp, ev.Trace)
	if err != nil {
		t.Fatal(err)
	}
	root := ev.Trace.Root()
	if msg.LeaseId != 4 || msg.CheckpointIndex != 2 || !bytes.Equal(msg.TraceRoot, root[:]) || !bytes.Equal(msg.FinalHash, ev.Trace.Hashes[8][:]) {
		t.Fatalf("challenge %+v", msg)
	}
	_, proof, _ := ev.Trace.Open(8)
	if len(msg.FinalHashProof) != len(proof) {
		t.Fatalf("final hash proof has %d nodes, want %d", len(msg.FinalHashProof), len(proof))
	}
	for _, other := range []verifytypes.Checkpoint{{StartStep: 0, EndStep: 7}, {StartStep: 1, EndStep: 8}} {
		if _, err := dispute.Challenge("chal", other, ev.Trace); err == nil {
			t.Fatalf("a trace of 0..8 challenged checkpoint %d..%d", other.StartStep, other.EndStep)
		}
	}
}

type fakeChain struct {
	challenges  map[uint64]verifytypes.Challenge
	checkpoints map[[2]uint64]verifytypes.Checkpoint
	jobs        map[uint64]markettypes.Job
}

func (f fakeChain) Challenge(_ context.Context, in *verifytypes.QueryChallengeRequest, _ ...grpc.CallOption) (*verifytypes.QueryChallengeResponse, error) {
	ch, ok := f.challenges[in.ChallengeId]
	if !ok {
		return nil, errors.New("not found")
	}
	return &verifytypes.QueryChallengeResponse{Challenge: ch}, nil
}

func (f fakeChain) Checkpoint(_ context.Context, in *verifytypes.QueryCheckpointRequest, _ ...grpc.CallOption) (*verifytypes.QueryCheckpointResponse, error) {
	cp, ok := f.checkpoints[[2]uint64{in.LeaseId, in.Index}]
	if !ok {
		return nil, errors.New("not found")
	}
	return &verifytypes.QueryCheckpointResponse{Checkpoint: cp}, nil
}

func (f fakeChain) Job(_ context.Context, in *markettypes.QueryJobRequest, _ ...grpc.CallOption) (*markettypes.QueryJobResponse, error) {
	j, ok := f.jobs[in.JobId]
	if !ok {
		return nil, errors.New("not found")
	}
	return &markettypes.QueryJobResponse{Job: j}, nil
}

// Read follows the challenge to its checkpoint and the checkpoint to its
// job, and names what it could not read.
func TestReadFollowsTheChallenge(t *testing.T) {
	want := game(verifytypes.GAME_TURN_CHALLENGER, 0, 8, 16, 100)
	chain := fakeChain{
		challenges:  map[uint64]verifytypes.Challenge{3: want.Challenge},
		checkpoints: map[[2]uint64]verifytypes.Checkpoint{{1, 0}: want.Checkpoint},
		jobs:        map[uint64]markettypes.Job{7: want.Job},
	}
	got, err := dispute.Read(context.Background(), chain, chain, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Challenge.Id != 3 || got.Checkpoint.EndStep != 16 || got.Job.Id != 7 {
		t.Fatalf("read %+v", got)
	}
	if _, err := dispute.Read(context.Background(), chain, chain, 4); err == nil || !strings.Contains(err.Error(), "challenge 4") {
		t.Fatalf("an unknown challenge: %v", err)
	}
	delete(chain.jobs, 7)
	if _, err := dispute.Read(context.Background(), chain, chain, 3); err == nil || !strings.Contains(err.Error(), "job 7") {
		t.Fatalf("an unknown job: %v", err)
	}
}
