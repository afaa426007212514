package disputes

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// roundsJob is referenceJob trained by two workers in rounds of 8 steps, its states and
// round files kept in custody.
func roundsJob(t *testing.T) markettypes.Job {
	t.Helper()
	job := referenceJob()
	job.Spec.Workers, job.Spec.TotalSteps = 2, 16
	sync, err := diloco.SyncSpec{Every: 8, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.Sync = &markettypes.SyncSpec{Every: 8, OuterLrQ30: uint64(sync.OuterLR), OuterMomentumQ30: uint64(sync.OuterMomentum)}
	job.Spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1}
	return job
}

// roundCheckpoint is worker's round-0 checkpoint (lease lease) of a worker that trained
// on slot dataSlot's shards: its trace and commitment are otherwise consistent.
func roundCheckpoint(t *testing.T, job markettypes.Job, lease uint64, worker, dataSlot uint32) (verifytypes.Checkpoint, *Execution) {
	t.Helper()
	start, err := InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := Reexecute(job, chainData(t, job, dataSlot, 0), start, 0, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, h0 := exec.Trace.Root(), exec.Trace.Hashes[0]
	return verifytypes.Checkpoint{LeaseId: lease, Index: 0, JobId: job.Id, Worker: worker, Provider: other, StartStep: 0, EndStep: 8,
		StartHash: h0[:], TraceRoot: root[:], FinalHash: exec.Trace.Hashes[8][:], ChallengeDeadline: 100}, exec
}

// A verifier re-executes a sync worker's round checkpoint on that worker's own shards of
// the round (WorkerTrainingData), not on one stream of the job: an honest worker's
// matches; a worker that trained on the other slot's shards is challenged with the
// verifier's trace, whose first step already differs, and the one-step move carries the
// batch of the accused worker's own shards.
func TestVerifierChallengesARoundTrainedOnAnotherSlotsShards(t *testing.T) {
	h := newHarness(t, true)
	job := roundsJob(t)
	h.chain.Jobs[job.Id] = job
	honest, _ := roundCheckpoint(t, job, 1, 0, 0)
	h.chain.Cps[[2]uint64{1, 0}] = honest
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 1}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 1, 0); rec.Result != db.VerificationMatched || len(h.chain.Sent()) != 0 {
		t.Fatalf("worker 0 trained on its own shards: %+v, sent %v", rec, h.chain.Sent())
	}

	cheat, cheated := roundCheckpoint(t, job, 2, 1, 0)
	_, own := roundCheckpoint(t, job, 2, 1, 1)
	h.chain.Cps[[2]uint64{2, 0}] = cheat
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2}); err != nil {
		t.Fatal(err)
	}
	rec := h.verification(t, 2, 0)
	challenges := roletest.SentOf[*verifytypes.MsgChallenge](h.chain)
	root := own.Trace.Root()
	if rec.Result != db.VerificationMismatched || len(challenges) != 1 || challenges[0].LeaseId != 2 || !bytes.Equal(challenges[0].TraceRoot, root[:]) {
		t.Fatalf("worker 1 trained on slot 0's shards: %+v, challenges %+v", rec, challenges)
	}
	if own.Trace.Hashes[1] == cheated.Trace.Hashes[1] {
		t.Fatal("the first step does not depend on the worker's shards")
	}

	// The game reaches the first step: the verifier's MsgStep runs it on worker 1's data.
	ch := h.chain.ChallengeBy[rec.ChallengeID]
	ch.Lo, ch.Hi, ch.Turn, ch.Deadline = 0, 1, verifytypes.GAME_TURN_ONE_STEP, 50
	h.chain.ChallengeBy[rec.ChallengeID] = ch
	if err := h.role.play(context.Background(), rec.ChallengeID); err != nil {
		t.Fatal(err)
	}
	steps := roletest.SentOf[*verifytypes.MsgStep](h.chain)
	if len(steps) != 1 || len(steps[0].Data) == 0 {
		t.Fatalf("one-step moves %+v", steps)
	}
	data, err := verifytypes.WorkerTrainingData(job, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range steps[0].Data {
		lo := c.Index * verifytypes.DataChunkSize
		if !bytes.Equal(c.Data, data.Bytes[lo:lo+uint64(len(c.Data))]) {
			t.Fatalf("data chunk %d of the one-step move is not worker 1's round data", c.Index)
		}
	}
}

// A round checkpoint past round 0 starts from WorkerStart of G_r with the worker's carry.
// A verifier that has re-executed none of the lease rebuilds G_1 from its custody object
// (checked against the round's global_root) and the carry — the lease's round-0 state —
// from that checkpoint's custody object: worker 1's honest round 1 matches; one trained
// on slot 0's shards is challenged; a redo of round 1 behind its discarded (rejected,
// unserved) first checkpoint matches from the round-0 carry; one checked before G_1's
// holders took its pieces waits for them. A G_1 in custody that is not the round's
// global_root is not started from.
func TestVerifierStartsARoundCheckpointFromTheGlobalAndTheCarry(t *testing.T) {
	job := roundsJob(t)
	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		t.Fatal(err)
	}
	g0, err := diloco.InitGlobal(cfg, job.Spec.Sync.Diloco(), job.Seed)
	if err != nil {
		t.Fatal(err)
	}
	var pgs []*diloco.PseudoGradient
	var round0 [2]*Execution
	for w := range uint32(2) {
		_, round0[w] = roundCheckpoint(t, job, uint64(w+1), w, w)
		pg, err := diloco.NewPseudoGradient(g0, w, round0[w].End)
		if err != nil {
			t.Fatal(err)
		}
		pgs = append(pgs, pg)
	}
	g1, err := diloco.Aggregate(g0, pgs)
	if err != nil {
		t.Fatal(err)
	}
	start := g1.WorkerStart(round0[1].End)
	round1 := func(dataSlot uint32) verifytypes.Checkpoint {
		exec, err := Reexecute(job, chainData(t, job, dataSlot, 8), start, 8, 16, nil)
		if err != nil {
			t.Fatal(err)
		}
		root, h := exec.Trace.Root(), exec.Trace.Hashes[0]
		return verifytypes.Checkpoint{LeaseId: 2, Index: 1, JobId: job.Id, Worker: 1, Provider: other, StartStep: 8, EndStep: 16,
			StartHash: h[:], TraceRoot: root[:], FinalHash: exec.Trace.Hashes[8][:], ChallengeDeadline: 100}
	}
	setup := func(g *diloco.GlobalState) (*harness, *roletest.CustodyNet) {
		h := newHarness(t, true)
		net := roletest.NewCustodyNet(t)
		h.role.opts.Custody = net.Source()
		h.chain.Jobs[job.Id] = job
		g1Root := g1.Root()
		h.chain.Rounds[[2]uint64{job.Id, 1}] = markettypes.Round{JobId: job.Id, Round: 1, GlobalRoot: g1Root[:]}
		net.Put(t, markettypes.GlobalCustodyID(job.Id, 1), g.Encode())
		end := round0[1].Trace.Hashes[8]
		h.chain.Cps[[2]uint64{2, 0}] = verifytypes.Checkpoint{LeaseId: 2, Index: 0, JobId: job.Id, Worker: 1, Provider: other,
			StartStep: 0, EndStep: 8, FinalHash: end[:], Uri: "http://trainer.invalid" + checkpoint.PathPrefix + "2/0"}
		net.Put(t, shardtypes.CustodyDatasetID(2, 0), round0[1].End.Encode())
		return h, net
	}

	h, _ := setup(g1)
	h.chain.Cps[[2]uint64{2, 1}] = round1(1)
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2, Index: 1}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 2, 1); rec.Result != db.VerificationMatched || len(h.chain.Sent()) != 0 {
		t.Fatalf("worker 1's honest round 1: %+v, sent %v", rec, h.chain.Sent())
	}

	h, _ = setup(g1)
	h.chain.Cps[[2]uint64{2, 1}] = round1(0)
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2, Index: 1}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 2, 1); rec.Result != db.VerificationMismatched || len(roletest.SentOf[*verifytypes.MsgChallenge](h.chain)) != 1 {
		t.Fatalf("worker 1's round 1 on slot 0's shards: %+v, sent %v", rec, h.chain.Sent())
	}

	// Round 1 redone after the chain deleted it: its first checkpoint (index 1) is
	// REJECTED and served by nobody; the redo (index 2) starts from the round-0 carry.
	h, _ = setup(g1)
	discarded := round1(1)
	discarded.Status, discarded.Uri = verifytypes.CHECKPOINT_STATUS_REJECTED, "http://trainer.invalid"+checkpoint.PathPrefix+"2/1"
	redo := round1(1)
	redo.Index = 2
	h.chain.Cps[[2]uint64{2, 1}], h.chain.Cps[[2]uint64{2, 2}] = discarded, redo
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2, Index: 2}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 2, 2); rec.Result != db.VerificationMatched || len(h.chain.Sent()) != 0 {
		t.Fatalf("worker 1's redone round 1 behind its discarded checkpoint: %+v, sent %v", rec, h.chain.Sent())
	}

	// G_1 is committed before its holders take its pieces: a checkpoint of round 1 that
	// comes first waits for them.
	h, net := setup(g1)
	net.PutUnheld(t, markettypes.GlobalCustodyID(job.Id, 1), g1.Encode())
	h.chain.Cps[[2]uint64{2, 1}] = round1(1)
	held := time.AfterFunc(1500*time.Millisecond, func() { net.Hold(markettypes.GlobalCustodyID(job.Id, 1)) })
	defer held.Stop()
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2, Index: 1}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 2, 1); rec.Result != db.VerificationMatched || len(h.chain.Sent()) != 0 {
		t.Fatalf("worker 1's round 1 checked before G_1 was held: %+v, sent %v", rec, h.chain.Sent())
	}

	h, _ = setup(g0) // custody holds a file that is not G_1
	h.chain.Cps[[2]uint64{2, 1}] = round1(1)
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 2, Index: 1}); err != nil {
		t.Fatal(err)
	}
	if rec := h.verification(t, 2, 1); rec.Result != db.VerificationUnavailable || !strings.Contains(rec.Detail, "global_root") || len(h.chain.Sent()) != 0 {
		t.Fatalf("a G_1 that is not the round's: %+v, sent %v", rec, h.chain.Sent())
	}
}
