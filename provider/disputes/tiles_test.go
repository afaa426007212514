package disputes

import (
	"bytes"
	"context"
	"testing"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	"github.com/depinchain/depinchain/provider/trainer"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// addCheckpointFolder writes exec's steps 0..8 as the operator's checkpoint
// folder of lease 1 and retains it in the catalog, as the leases role does.
func (h *harness) addCheckpointFolder(t *testing.T, exec *Execution) {
	t.Helper()
	state, err := exec.StateAt(8)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := trainer.WriteCheckpoint(t.TempDir(), 8, state, exec.Trace.Hashes)
	if err != nil {
		t.Fatal(err)
	}
	folder, err := trainer.ReadCheckpoint(dir, 8)
	if err != nil {
		t.Fatal(err)
	}
	commitment, err := checkpoint.Commit(folder, checkpoint.HashOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cat.Add(checkpoint.Entry{Ref: checkpoint.Ref{LeaseID: 1}, JobID: 1, Dir: dir, Commitment: commitment}); err != nil {
		t.Fatal(err)
	}
}

// The defender plays phases 2–3 from its checkpoint folder: it rebuilds the
// state at the disputed step from the job's start, executes that step once
// and keeps it for the later moves of the game; a restarted sidecar rebuilds
// the same commitment from the chain's game state; a decided game is
// forgotten.
func TestDefenderPlaysTheTilePhasesFromTheDisputedStep(t *testing.T) {
	h := newHarness(t, false)
	cp, exec := honestCheckpoint(t, operator)
	h.addCheckpointFolder(t, exec)
	h.chain.Jobs[1] = referenceJob()
	h.chain.Cps[[2]uint64{1, 0}] = cp
	h.chain.ChallengeBy[4] = verifytypes.Challenge{Id: 4, LeaseId: 1, Provider: operator, Challenger: other,
		Lo: 5, Hi: 6, Turn: verifytypes.GAME_TURN_TILE_PROVIDER, Deadline: 50}
	h.chain.TileGames[4] = verifytypes.TileGame{ChallengeId: 4, Phase: verifytypes.TILE_PHASE_RECORDS}

	// What an honest party commits for step 5 (pkg/dispute, from the state at 5).
	g := dispute.Game{Challenge: h.chain.ChallengeBy[4], Job: referenceJob()}
	want, err := dispute.StepParty(g, exec.StateAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.role.play(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	commits := roletest.SentOf[*verifytypes.MsgCommitRecords](h.chain)
	if len(commits) != 1 || !bytes.Equal(commits[0].RecordRoot, want.C.Root[:]) || len(commits[0].StoreProof) == 0 {
		t.Fatalf("commitments %+v, want the record root %s with the store proof", commits, want.C.Root)
	}
	party := h.role.parties[4]
	if party == nil || party.Pre.Step != 5 {
		t.Fatal("the disputed step's execution is not kept for the game's later moves")
	}

	// The descent: the children of the current node, from the same execution.
	h.chain.TileGames[4] = verifytypes.TileGame{ChallengeId: 4, Phase: verifytypes.TILE_PHASE_OPERATORS, Lo: 0, Hi: uint64(want.Step.Len())}
	if err := h.role.play(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	nodes := roletest.SentOf[*verifytypes.MsgRevealNode](h.chain)
	if len(nodes) != 1 || merkle.NodeHash(merkle.Hash(nodes[0].Left), merkle.Hash(nodes[0].Right)) != want.C.Root {
		t.Fatalf("reveals %+v do not open the record root", nodes)
	}
	if h.role.parties[4] != party {
		t.Fatal("the second move executed the step again")
	}

	// A restarted sidecar (a new role, nothing in memory) commits the same.
	h.chain.TileGames[4] = verifytypes.TileGame{ChallengeId: 4, Phase: verifytypes.TILE_PHASE_RECORDS}
	restarted := newHarness(t, false)
	restarted.chain, restarted.cat = h.chain, h.cat
	restarted.role.opts.Chain, restarted.role.opts.Submit, restarted.role.opts.Checkpoints = h.chain, h.chain.Submit, h.cat
	if err := restarted.role.play(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if commits := roletest.SentOf[*verifytypes.MsgCommitRecords](h.chain); len(commits) != 2 || !bytes.Equal(commits[1].RecordRoot, want.C.Root[:]) {
		t.Fatalf("after a restart: %+v", commits)
	}

	// Decided: nothing is sent and the execution is dropped.
	ch := h.chain.ChallengeBy[4]
	ch.Outcome = verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON
	h.chain.ChallengeBy[4] = ch
	sent := len(h.chain.Sent())
	if err := h.role.play(context.Background(), 4); err != nil || len(h.chain.Sent()) != sent || h.role.parties[4] != nil {
		t.Fatalf("a decided game: %v, sent %d → %d, kept %v", err, sent, len(h.chain.Sent()), h.role.parties[4] != nil)
	}
}

// A challenger at the one-step turn proves the step (MsgStep) when the
// referee can re-execute it, and starts phase 2 (MsgCommitRecords) when the
// step is above max_step_macs. A cheater's hook changes its records.
func TestChallengerStartsPhase2AboveMaxStepMacs(t *testing.T) {
	h := newHarness(t, true)
	h.chain.Jobs[1] = referenceJob()
	cp, exec := honestCheckpoint(t, other)
	h.chain.Cps[[2]uint64{1, 0}] = cp
	h.chain.ChallengeBy[1] = verifytypes.Challenge{Id: 1, LeaseId: 1, Provider: other, Challenger: operator,
		Lo: 3, Hi: 4, Turn: verifytypes.GAME_TURN_ONE_STEP, Deadline: 50}
	if err := h.role.play(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if steps := roletest.SentOf[*verifytypes.MsgStep](h.chain); len(steps) != 1 {
		t.Fatalf("within max_step_macs: sent %v, want one MsgStep", h.chain.Sent())
	}

	h.chain.VerifyParamsValue.MaxStepMacs = uint64(exact.ReferenceConfig().MACsPerStep()) - 1
	if err := h.role.play(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	want, err := dispute.StepParty(dispute.Game{Challenge: h.chain.ChallengeBy[1], Job: referenceJob()}, exec.StateAt)
	if err != nil {
		t.Fatal(err)
	}
	commits := roletest.SentOf[*verifytypes.MsgCommitRecords](h.chain)
	if len(commits) != 1 || !bytes.Equal(commits[0].RecordRoot, want.C.Root[:]) || len(commits[0].StoreProof) != 0 {
		t.Fatalf("above max_step_macs: %+v, want the record root %s", commits, want.C.Root)
	}

	// One element wrong in step 3: the same state at 3, another record root.
	h.role.forget(1)
	h.role.opts.Hooks.StepExec = func(step uint64, batch [][]byte) (exact.Executor, [][]byte) {
		return exact.Executor{Observer: func(_ *exact.Op, out *exact.Tensor) {
			if step == 3 && out.Spec.Name == "mb0.l0.probs" {
				out.Data[0] ^= 1 << 12
			}
		}}, batch
	}
	if err := h.role.play(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	commits = roletest.SentOf[*verifytypes.MsgCommitRecords](h.chain)
	if len(commits) != 2 || bytes.Equal(commits[1].RecordRoot, want.C.Root[:]) {
		t.Fatal("a tampered execution committed the honest records")
	}
}
