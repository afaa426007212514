package disputes

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const (
	operator = "depin1operator"
	other    = "depin1other"
)

type harness struct {
	role    *Role
	db      *db.DB
	chain   *roletest.Chain
	cat     *checkpoint.Catalog
	metrics *metrics.Metrics
	moves   []sdk.Msg
}

func newHarness(t *testing.T, verifier bool) *harness {
	t.Helper()
	st := roletest.OpenDB(t)
	h := &harness{db: st, chain: roletest.NewChain(), cat: checkpoint.NewCatalog(time.Hour), metrics: metrics.New("test")}
	var err error
	h.role, err = New(Options{
		Operator: operator, Submit: h.chain.Submit, Chain: h.chain, Height: func() int64 { return h.chain.Height }, DB: st,
		Checkpoints: h.cat, Verifier: config.Verifier{Enabled: verifier, Policy: config.PolicyAll}, WorkDir: t.TempDir(),
		Metrics: h.metrics,
		Hooks:   Hooks{BeforeMove: func(_ context.Context, _ uint64, msg sdk.Msg) { h.moves = append(h.moves, msg) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func referenceJob() markettypes.Job {
	return markettypes.Job{Id: 1, Seed: bytes.Repeat([]byte{3}, 32),
		Spec: markettypes.JobSpec{TotalSteps: 8, CheckpointInterval: 8, Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
}

// honestCheckpoint re-executes steps 0..8 of the job and returns the
// commitment an honest provider makes, with the execution.
func honestCheckpoint(t *testing.T, provider string) (verifytypes.Checkpoint, *Execution) {
	t.Helper()
	job := referenceJob()
	start, err := InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := Reexecute(job, chainData(t, job, 0, 0), start, 0, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := exec.Trace.Root()
	return verifytypes.Checkpoint{LeaseId: 1, Index: 0, JobId: 1, Provider: provider, StartStep: 0, EndStep: 8,
		TraceRoot: root[:], FinalHash: exec.Trace.Hashes[8][:], ChallengeDeadline: 100}, exec
}

// The defender opens what it committed at the game's midpoint, from its
// checkpoint folder; the pause hook sees the move before it is sent.
func TestDefenderRevealsItsCommittedHash(t *testing.T) {
	h := newHarness(t, false)
	cp, exec := honestCheckpoint(t, operator)
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
	h.chain.Jobs[1] = referenceJob()
	h.chain.Cps[[2]uint64{1, 0}] = cp
	h.chain.ChallengeBy[4] = verifytypes.Challenge{Id: 4, LeaseId: 1, Provider: operator, Challenger: other,
		Lo: 0, Mid: 4, Hi: 8, Turn: verifytypes.GAME_TURN_PROVIDER, Deadline: 50}
	if err := h.role.play(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	reveals := roletest.SentOf[*verifytypes.MsgRevealHash](h.chain)
	if len(reveals) != 1 || reveals[0].Step != 4 || !bytes.Equal(reveals[0].Hash, exec.Trace.Hashes[4][:]) || len(h.moves) != 1 {
		t.Fatalf("reveals %+v, moves seen by the hook %d", reveals, len(h.moves))
	}

	// A committed trace that is not the folder's: the defence refuses to
	// open hashes that would not verify, and sends nothing.
	wrong := cp
	wrong.TraceRoot = bytes.Repeat([]byte{9}, 32)
	h.chain.Cps[[2]uint64{1, 0}] = wrong
	if err := h.role.play(context.Background(), 4); err == nil || !strings.Contains(err.Error(), "not the one committed") {
		t.Fatalf("a defence of a trace not committed: %v", err)
	}
	if len(h.chain.Sent()) != 1 {
		t.Fatalf("sent %v after a refused defence", h.chain.Sent())
	}
	// A game not waiting on the operator, or past its deadline, sends nothing.
	h.chain.Cps[[2]uint64{1, 0}] = cp
	h.chain.ChallengeBy[4] = verifytypes.Challenge{Id: 4, LeaseId: 1, Provider: operator, Challenger: other, Turn: verifytypes.GAME_TURN_CHALLENGER, Deadline: 50}
	h.chain.ChallengeBy[5] = verifytypes.Challenge{Id: 5, LeaseId: 1, Provider: operator, Challenger: other, Mid: 4, Turn: verifytypes.GAME_TURN_PROVIDER, Deadline: 5}
	if err := h.role.play(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if err := h.role.play(context.Background(), 5); err == nil {
		t.Fatal("a move past its deadline was made")
	}
	if len(h.chain.Sent()) != 1 {
		t.Fatalf("sent %v", h.chain.Sent())
	}
}

// The verifier re-executes another provider's checkpoint: an honest one
// matches; a fabricated one is challenged with the verifier's own trace,
// and the challenge is played from the recorded execution.
func TestVerifierChallengesOnlyAWrongCheckpoint(t *testing.T) {
	h := newHarness(t, true)
	h.chain.Jobs[1] = referenceJob()
	cp, exec := honestCheckpoint(t, other)
	h.chain.Cps[[2]uint64{1, 0}] = cp
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 1}); err != nil {
		t.Fatal(err)
	}
	rec := h.verification(t, 1, 0)
	if rec.Result != db.VerificationMatched || len(h.chain.Sent()) != 0 {
		t.Fatalf("an honest checkpoint: %+v, sent %v", rec, h.chain.Sent())
	}

	lie := merkle.Hash{0xab}
	cp.Index, cp.FinalHash = 1, lie[:]
	h.chain.Cps[[2]uint64{1, 1}] = cp
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 1, Index: 1}); err != nil {
		t.Fatal(err)
	}
	rec = h.verification(t, 1, 1)
	challenges := roletest.SentOf[*verifytypes.MsgChallenge](h.chain)
	root := exec.Trace.Root()
	if rec.Result != db.VerificationMismatched || rec.ChallengeID != 1 || len(challenges) != 1 || !bytes.Equal(challenges[0].TraceRoot, root[:]) {
		t.Fatalf("a fabricated checkpoint: %+v, challenges %+v", rec, challenges)
	}
	if h.role.Status().Games != 1 {
		t.Fatal("the new challenge was not queued for play")
	}
	// The verifier answers the game's midpoint from what it re-executed.
	ch := h.chain.ChallengeBy[1]
	ch.Mid, ch.Turn, ch.Deadline = 4, verifytypes.GAME_TURN_CHALLENGER, 50
	h.chain.ChallengeBy[1] = ch
	if err := h.role.play(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if rs := roletest.SentOf[*verifytypes.MsgRespond](h.chain); len(rs) != 1 || !bytes.Equal(rs[0].Hash, exec.Trace.Hashes[4][:]) {
		t.Fatalf("responses %+v", rs)
	}
	// Checked once: a second look sends nothing.
	if err := h.role.verifyCheckpoint(context.Background(), checkpoint.Ref{LeaseID: 1, Index: 1}); err != nil || len(roletest.SentOf[*verifytypes.MsgChallenge](h.chain)) != 1 {
		t.Fatalf("a second look: %v", err)
	}
}

// chainData is the stream the chain gives worker's steps of job at step.
func chainData(t *testing.T, job markettypes.Job, worker uint32, step uint64) traindata.Stream {
	t.Helper()
	data, err := verifytypes.WorkerTrainingData(job, worker, step)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (h *harness) verification(t *testing.T, lease, index uint64) db.VerificationRecord {
	t.Helper()
	var rec db.VerificationRecord
	if err := h.db.View(func(tx *db.Tx) (err error) { rec, _, err = tx.Verification(lease, index); return err }); err != nil {
		t.Fatal(err)
	}
	return rec
}

// Events: turns of any game are queued (the worker reads whether it is the
// operator's); other providers' checkpoints are queued only in verifier
// mode; the end of the verifier's challenge is recorded.
func TestHandleEventQueuesGamesAndChecks(t *testing.T) {
	for _, verifier := range []bool{false, true} {
		h := newHarness(t, verifier)
		run := func(ev chain.Event) {
			t.Helper()
			for _, act := range roletest.Deliver(t, h.db, h.role, ev) {
				act()
			}
		}
		run(chain.Event{Message: &verifytypes.EventGameTurn{ChallengeId: 3}})
		run(chain.Event{Message: &verifytypes.EventChallengeOpened{ChallengeId: 4, Provider: other}})
		run(chain.Event{Message: &verifytypes.EventCheckpointSubmitted{LeaseId: 2, Provider: other}})
		run(chain.Event{Message: &verifytypes.EventCheckpointSubmitted{LeaseId: 3, Provider: operator}})
		st := h.role.Status()
		wantChecks := 0
		if verifier {
			wantChecks = 1
		}
		if st.Games != 1 || st.Checks != wantChecks {
			t.Fatalf("verifier %v: %d games and %d checks queued, want 1 and %d", verifier, st.Games, st.Checks, wantChecks)
		}
		if err := h.db.Update(func(tx *db.Tx) error {
			return tx.PutVerification(db.VerificationRecord{LeaseID: 2, Index: 0, Result: db.VerificationMismatched, ChallengeID: 9})
		}); err != nil {
			t.Fatal(err)
		}
		run(chain.Event{Message: &verifytypes.EventChallengeResolved{ChallengeId: 9, LeaseId: 2, Challenger: operator, Provider: other,
			Outcome: verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON}})
		if rec := h.verification(t, 2, 0); rec.Outcome != "CHALLENGE_OUTCOME_CHALLENGER_WON" {
			t.Fatalf("the verifier's challenge ended %q", rec.Outcome)
		}
	}
}

// disputeSeries returns the values of a dispute metric by its labels
// ("role" or "role/result").
func (h *harness) disputeSeries(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := h.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			key := labels["role"]
			if r, ok := labels["result"]; ok {
				key += "/" + r
			}
			out[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// The dispute metrics an operator is alerted on: games against the operator
// (defender) and its own (challenger) are counted open from the event that
// opens them to the one that resolves them, with the result from the
// operator's side; other providers' games are not counted; after a start the
// open games are rebuilt from the database and the chain.
func TestDisputeMetrics(t *testing.T) {
	h := newHarness(t, true)
	run := func(evs ...chain.Event) {
		t.Helper()
		for _, act := range roletest.Deliver(t, h.db, h.role, evs...) {
			act()
		}
	}
	open := func(want map[string]float64) {
		t.Helper()
		if got := h.disputeSeries(t, "depinprovider_disputes_open"); got["defender"] != want["defender"] || got["challenger"] != want["challenger"] {
			t.Fatalf("disputes_open = %v, want %v", got, want)
		}
	}
	open(map[string]float64{})
	run(chain.Event{Height: 5, Message: &verifytypes.EventChallengeOpened{ChallengeId: 1, Provider: operator, Challenger: other}},
		chain.Event{Height: 5, Message: &verifytypes.EventChallengeOpened{ChallengeId: 2, Provider: operator, Challenger: other, LeaseId: 2}},
		chain.Event{Height: 5, Message: &verifytypes.EventChallengeOpened{ChallengeId: 3, Provider: other, Challenger: operator}},
		chain.Event{Height: 5, Message: &verifytypes.EventChallengeOpened{ChallengeId: 4, Provider: other, Challenger: "depin1third"}})
	open(map[string]float64{"defender": 2, "challenger": 1})

	run(chain.Event{Height: 9, Message: &verifytypes.EventChallengeResolved{ChallengeId: 1, Provider: operator, Challenger: other,
		Outcome: verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON}},
		chain.Event{Height: 9, Message: &verifytypes.EventChallengeResolved{ChallengeId: 2, Provider: operator, Challenger: other, LeaseId: 2,
			Outcome: verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON}},
		chain.Event{Height: 9, Message: &verifytypes.EventChallengeResolved{ChallengeId: 4, Provider: other, Challenger: "depin1third",
			Outcome: verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON}})
	open(map[string]float64{"challenger": 1})
	opened := h.disputeSeries(t, "depinprovider_disputes_opened_total")
	if opened["defender"] != 2 || opened["challenger"] != 1 {
		t.Errorf("disputes_opened_total = %v, want 2 as defender and 1 as challenger", opened)
	}
	resolved := h.disputeSeries(t, "depinprovider_disputes_resolved_total")
	for key, want := range map[string]float64{"defender/won": 1, "defender/lost": 1, "defender/moot": 0, "challenger/won": 0, "challenger/lost": 0} {
		if resolved[key] != want {
			t.Errorf("disputes_resolved_total{%s} = %v, want %v (all: %v)", key, resolved[key], want, resolved)
		}
	}

	// A restart: a challenged checkpoint of the operator's and an open
	// verifier challenge in the database, the challenge open on chain.
	h2 := newHarness(t, true)
	if err := h2.db.Update(func(tx *db.Tx) error {
		if err := tx.PutLease(db.LeaseRecord{LeaseID: 1, JobID: 1, Status: db.LeaseActive}); err != nil {
			return err
		}
		if err := tx.PutCheckpoint(db.CheckpointRecord{LeaseID: 1, Index: 0, Status: db.CheckpointChallenged}); err != nil {
			return err
		}
		// Challenged so soon after its submission that the follower saw the
		// challenge before the checkpoint was recorded: still "submitted".
		if err := tx.PutCheckpoint(db.CheckpointRecord{LeaseID: 1, Index: 1, Status: db.CheckpointSubmitted}); err != nil {
			return err
		}
		if err := tx.PutCheckpoint(db.CheckpointRecord{LeaseID: 1, Index: 2, Status: db.CheckpointFinalized}); err != nil {
			return err
		}
		return tx.PutVerification(db.VerificationRecord{LeaseID: 5, Index: 0, Result: db.VerificationMismatched, ChallengeID: 8})
	}); err != nil {
		t.Fatal(err)
	}
	h2.chain.ChallengeBy[7] = verifytypes.Challenge{Id: 7, LeaseId: 1, CheckpointIndex: 0, Provider: operator, Challenger: other}
	h2.chain.ChallengeBy[9] = verifytypes.Challenge{Id: 9, LeaseId: 1, CheckpointIndex: 1, Provider: operator, Challenger: other}
	if err := h2.role.Resume(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := h2.disputeSeries(t, "depinprovider_disputes_open"); got["defender"] != 2 || got["challenger"] != 1 {
		t.Fatalf("disputes_open after a restart = %v, want 2 as defender and 1 as challenger", got)
	}
	if n := h2.role.Status().Games; n != 3 {
		t.Fatalf("%d games queued after a restart, want 3", n)
	}
}

// An audit checks a checkpoint whatever the verifier's sample and answers with what it
// found: a match (with the committed root), a challenge, or an unavailable start state
// when the provider does not serve it.
func TestAuditOfACheckpoint(t *testing.T) {
	h := newHarness(t, false) // verifier mode off: audits run all the same
	h.chain.Jobs[1] = referenceJob()
	cp, _ := honestCheckpoint(t, other)
	h.chain.Cps[[2]uint64{1, 0}] = cp
	res, err := h.role.Audit(context.Background(), checkpoint.Ref{LeaseID: 1})
	if err != nil || res.Outcome != AuditMatched || !bytes.Equal(res.TraceRoot, cp.TraceRoot) {
		t.Fatalf("honest checkpoint: %+v, %v", res, err)
	}

	wrong := cp
	wrong.TraceRoot = bytes.Repeat([]byte{9}, 32)
	wrong.FinalHash = bytes.Repeat([]byte{9}, 32)
	wrong.Index = 2
	h.chain.Cps[[2]uint64{1, 2}] = wrong
	res, err = h.role.Audit(context.Background(), checkpoint.Ref{LeaseID: 1, Index: 2})
	if err != nil || res.Outcome != AuditChallenged || res.ChallengeID != 1 {
		t.Fatalf("wrong checkpoint: %+v, %v", res, err)
	}

	// Checkpoint 3 starts where checkpoint 2 ended, served at a URL nobody answers.
	later := cp
	later.Index, later.StartStep, later.EndStep = 3, 8, 16
	later.StartHash = bytes.Repeat([]byte{5}, 32)
	h.chain.Cps[[2]uint64{1, 2}] = func() verifytypes.Checkpoint { c := wrong; c.Uri = "http://127.0.0.1:1/ckpt/1/2"; return c }()
	h.chain.Cps[[2]uint64{1, 3}] = later
	res, err = h.role.Audit(context.Background(), checkpoint.Ref{LeaseID: 1, Index: 3})
	if err != nil || res.Outcome != AuditUnavailable {
		t.Fatalf("withheld start state: %+v, %v", res, err)
	}
	if rec := h.verification(t, 1, 3); rec.Result != db.VerificationUnavailable {
		t.Fatalf("recorded %+v", rec)
	}
}

// Several wrong checkpoints of one lease make one game, on the earliest: its
// conviction closes the lease and rejects the later ones, and a second game
// would only race it (whichever ends first leaves the other moot). A later
// mismatch waits behind the open game and is checked again if that game does
// not convict; another lease's wrong checkpoint gets its own game.
func TestVerifierChallengesOnlyTheEarliestWrongCheckpointOfALease(t *testing.T) {
	h := newHarness(t, true)
	h.chain.Jobs[1] = referenceJob()
	cp, _ := honestCheckpoint(t, other)
	lie := merkle.Hash{0xab}
	cp.FinalHash = lie[:]
	wrong := func(lease, index uint64) checkpoint.Ref {
		c := cp
		c.LeaseId, c.Index = lease, index
		h.chain.Cps[[2]uint64{lease, index}] = c
		return checkpoint.Ref{LeaseID: lease, Index: index}
	}
	check := func(ref checkpoint.Ref) db.VerificationRecord {
		t.Helper()
		if err := h.role.verifyCheckpoint(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		return h.verification(t, ref.LeaseID, ref.Index)
	}
	challenges := func() int { return len(roletest.SentOf[*verifytypes.MsgChallenge](h.chain)) }

	if rec := check(wrong(1, 1)); rec.ChallengeID != 1 || challenges() != 1 {
		t.Fatalf("the first wrong checkpoint: %+v, %d challenges", rec, challenges())
	}
	later := wrong(1, 2)
	rec := check(later)
	if rec.Result != db.VerificationMismatched || rec.ChallengeID != 0 || rec.DeferredBehind != 1 || challenges() != 1 || h.role.Status().Games != 1 {
		t.Fatalf("a later wrong checkpoint of the lease: %+v, %d challenges, %d games queued", rec, challenges(), h.role.Status().Games)
	}
	if rec := check(wrong(2, 0)); rec.ChallengeID != 2 || challenges() != 2 {
		t.Fatalf("another lease's wrong checkpoint: %+v, %d challenges", rec, challenges())
	}

	// The first game ends without a conviction (the verifier lost it): the
	// checkpoint that waited is queued and, checked again, challenged.
	ch := h.chain.ChallengeBy[1]
	ch.Outcome = verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON
	h.chain.ChallengeBy[1] = ch
	checksBefore := h.role.Status().Checks
	for _, act := range roletest.Deliver(t, h.db, h.role, chain.Event{Message: &verifytypes.EventChallengeResolved{
		ChallengeId: 1, LeaseId: 1, CheckpointIndex: 1, Challenger: operator, Provider: other, Outcome: ch.Outcome}}) {
		act()
	}
	if got := h.role.Status().Checks; got != checksBefore+1 {
		t.Fatalf("%d checks queued after the first game was lost, want %d", got, checksBefore+1)
	}
	if rec := check(later); rec.ChallengeID != 3 || rec.DeferredBehind != 0 || challenges() != 3 {
		t.Fatalf("the checkpoint that waited, checked again: %+v, %d challenges", rec, challenges())
	}
}
