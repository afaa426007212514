package audits

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	"github.com/depinchain/depinchain/provider/metrics"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const (
	operator = "depin1auditor"
	provider = "depin1provider"
)

// fakeChain adds the queries the audits role makes to roletest's chain.
type fakeChain struct {
	*roletest.Chain
	mu       sync.Mutex
	open     []verifytypes.Audit
	verifier *stakingexttypes.Verifier
}

func (c *fakeChain) Audits(_ context.Context, in *verifytypes.QueryAuditsRequest, _ ...grpc.CallOption) (*verifytypes.QueryAuditsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in.Auditor != operator || !in.OpenOnly {
		return nil, errors.New("unexpected audits query")
	}
	return &verifytypes.QueryAuditsResponse{Audits: c.open}, nil
}

func (c *fakeChain) Verifier(_ context.Context, in *stakingexttypes.QueryVerifierRequest, _ ...grpc.CallOption) (*stakingexttypes.QueryVerifierResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verifier == nil || in.Operator != operator {
		return nil, status.Error(codes.NotFound, "no verifier")
	}
	return &stakingexttypes.QueryVerifierResponse{Verifier: *c.verifier}, nil
}

// fakeChecker answers audits with what the test set per checkpoint.
type fakeChecker struct {
	mu      sync.Mutex
	results map[checkpoint.Ref]disputes.AuditResult
	errs    map[checkpoint.Ref]error
	calls   int
}

func (f *fakeChecker) Audit(_ context.Context, ref checkpoint.Ref) (disputes.AuditResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if err := f.errs[ref]; err != nil {
		return disputes.AuditResult{}, err
	}
	return f.results[ref], nil
}

type harness struct {
	role     *Role
	db       *db.DB
	chain    *fakeChain
	checker  *fakeChecker
	priority *rolekit.Priority
	metrics  *metrics.Metrics
}

func newHarness(t *testing.T, cfg config.Audits) *harness {
	t.Helper()
	h := &harness{db: roletest.OpenDB(t), chain: &fakeChain{Chain: roletest.NewChain()},
		checker:  &fakeChecker{results: map[checkpoint.Ref]disputes.AuditResult{}, errs: map[checkpoint.Ref]error{}},
		priority: &rolekit.Priority{}, metrics: metrics.New("test")}
	h.metrics.RegisterAudits()
	var err error
	h.role, err = New(Options{
		Operator: operator, Submit: h.chain.Submit, Chain: h.chain, Height: func() int64 { return h.chain.Height }, DB: h.db,
		Config: cfg, Checker: h.checker, Priority: h.priority, Metrics: h.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func assigned(lease, index uint64, auditor string, deadline int64) chain.Event {
	return chain.Event{Height: 5, Message: &verifytypes.EventAuditAssigned{
		LeaseId: lease, CheckpointIndex: index, JobId: 1, Provider: provider, Auditor: auditor,
		Fee: sdk.NewInt64Coin("udepin", 16000), Deadline: deadline, StartStep: 0, EndStep: 16,
	}}
}

// run starts the role and stops it when the test ends.
func (h *harness) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.role.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (h *harness) record(t *testing.T, lease, index uint64) db.AuditRecord {
	t.Helper()
	var rec db.AuditRecord
	var ok bool
	if err := h.db.View(func(tx *db.Tx) (err error) {
		rec, ok, err = tx.Audit(lease, index)
		return err
	}); err != nil || !ok {
		t.Fatalf("audit %d/%d: %v (found %t)", lease, index, err, ok)
	}
	return rec
}

// waitFor polls until cond holds, failing after five seconds with what did not happen.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An assignment is recorded from its event and answered with the re-execution's
// result: an attestation of a match, a report of an unavailable start state, nothing
// more for a challenge (which answered it on chain). Other auditors' events are not
// the role's business.
func TestAnswersItsAssignments(t *testing.T) {
	h := newHarness(t, config.Audits{Enabled: true, ReportUnavailable: true})
	root := bytes.Repeat([]byte{7}, 32)
	h.checker.results[checkpoint.Ref{LeaseID: 1, Index: 0}] = disputes.AuditResult{Outcome: disputes.AuditMatched, TraceRoot: root}
	h.checker.results[checkpoint.Ref{LeaseID: 1, Index: 1}] = disputes.AuditResult{Outcome: disputes.AuditUnavailable, Detail: "refused"}
	h.checker.results[checkpoint.Ref{LeaseID: 2, Index: 0}] = disputes.AuditResult{Outcome: disputes.AuditChallenged, ChallengeID: 9}
	h.chain.verifier = &stakingexttypes.Verifier{Operator: operator, Status: stakingexttypes.VERIFIER_STATUS_ACTIVE}
	after := roletest.Deliver(t, h.db, h.role, assigned(1, 0, operator, 50), assigned(1, 1, operator, 50),
		assigned(2, 0, operator, 50), assigned(3, 0, "depin1someoneelse", 50))
	if len(after) != 3 {
		t.Fatalf("%d actions, want one per own assignment", len(after))
	}
	for _, act := range after {
		act()
	}
	if h.priority.Held() != 3 {
		t.Fatalf("priority held %d times while 3 assignments wait", h.priority.Held())
	}
	h.run(t)
	waitFor(t, "every assignment answered", func() bool { return h.priority.Held() == 0 })

	attests := roletest.SentOf[*verifytypes.MsgAttest](h.chain.Chain)
	if len(attests) != 1 || attests[0].LeaseId != 1 || attests[0].CheckpointIndex != 0 || !bytes.Equal(attests[0].TraceRoot, root) || attests[0].Auditor != operator {
		t.Fatalf("attestations %+v", attests)
	}
	reports := roletest.SentOf[*verifytypes.MsgReportUnavailable](h.chain.Chain)
	if len(reports) != 1 || reports[0].CheckpointIndex != 1 {
		t.Fatalf("reports %+v", reports)
	}
	for _, c := range []struct {
		lease, index uint64
		want         db.AuditStatus
	}{{1, 0, db.AuditAttested}, {1, 1, db.AuditReported}, {2, 0, db.AuditChallenged}} {
		if rec := h.record(t, c.lease, c.index); rec.Status != c.want || rec.Fee != "16000udepin" {
			t.Errorf("audit %d/%d: %+v, want %s", c.lease, c.index, rec, c.want)
		}
	}
	if rec := h.record(t, 2, 0); rec.ChallengeID != 9 {
		t.Errorf("the challenge is recorded: %+v", rec)
	}

	// Settlement comes from the chain's event.
	roletest.Deliver(t, h.db, h.role, chain.Event{Height: 60, Message: &verifytypes.EventAuditSettled{
		LeaseId: 1, CheckpointIndex: 0, Auditor: operator, Status: verifytypes.AUDIT_STATUS_ATTESTED,
		Paid: sdk.NewInt64Coin("udepin", 16000), Refunded: sdk.NewInt64Coin("udepin", 0), Slashed: sdk.NewInt64Coin("udepin", 0),
	}})
	if rec := h.record(t, 1, 0); !rec.Settled || rec.Paid != "16000udepin" {
		t.Errorf("settled record %+v", rec)
	}
}

// An assignment past its deadline is recorded missed and not answered; a checker
// failure is retried; a lease's first checkpoint is never reported (the chain refuses).
func TestLateFailingAndUnreportable(t *testing.T) {
	h := newHarness(t, config.Audits{Enabled: true, ReportUnavailable: true})
	h.chain.verifier = &stakingexttypes.Verifier{Operator: operator, Status: stakingexttypes.VERIFIER_STATUS_ACTIVE}
	h.chain.Height = 100
	flaky := checkpoint.Ref{LeaseID: 4, Index: 2}
	h.checker.errs[flaky] = errors.New("node unreachable")
	h.checker.results[flaky] = disputes.AuditResult{Outcome: disputes.AuditMatched, TraceRoot: bytes.Repeat([]byte{1}, 32)}
	h.checker.results[checkpoint.Ref{LeaseID: 5, Index: 0}] = disputes.AuditResult{Outcome: disputes.AuditUnavailable}
	for _, act := range roletest.Deliver(t, h.db, h.role, assigned(3, 1, operator, 90), assigned(4, 2, operator, 200), assigned(5, 0, operator, 200)) {
		act()
	}
	h.run(t)
	waitFor(t, "the late assignment recorded missed", func() bool { return h.record(t, 3, 1).Status == db.AuditMissed })
	waitFor(t, "the flaky one failed once", func() bool { return h.record(t, 4, 2).Status == db.AuditFailed })
	h.checker.mu.Lock()
	delete(h.checker.errs, flaky)
	h.checker.mu.Unlock()
	waitFor(t, "the flaky one retried and attested", func() bool { return h.record(t, 4, 2).Status == db.AuditAttested })
	if rec := h.record(t, 5, 0); rec.Status != db.AuditFailed {
		t.Errorf("checkpoint 0 reported anyway: %+v", rec)
	}
	if n := len(roletest.SentOf[*verifytypes.MsgReportUnavailable](h.chain.Chain)); n != 0 {
		t.Errorf("%d reports on a lease's first checkpoint", n)
	}
	if n := len(roletest.SentOf[*verifytypes.MsgAttest](h.chain.Chain)); n != 1 {
		t.Errorf("%d attestations, want the retried one only", n)
	}
}

// At start the role registers the operator (register_bond) or puts it back into the
// audit set (reactivate); a deactivation event makes it rejoin.
func TestJoinsTheAuditSet(t *testing.T) {
	t.Run("registers", func(t *testing.T) {
		h := newHarness(t, config.Audits{Enabled: true, RegisterBond: "100000000udepin"})
		h.run(t)
		waitFor(t, "MsgRegisterVerifier", func() bool {
			return len(roletest.SentOf[*stakingexttypes.MsgRegisterVerifier](h.chain.Chain)) == 1
		})
		m := roletest.SentOf[*stakingexttypes.MsgRegisterVerifier](h.chain.Chain)[0]
		if m.Operator != operator || m.Bond.String() != "100000000udepin" {
			t.Fatalf("registration %+v", m)
		}
	})
	t.Run("reactivates", func(t *testing.T) {
		h := newHarness(t, config.Audits{Enabled: true, Reactivate: true})
		h.chain.verifier = &stakingexttypes.Verifier{Operator: operator, Status: stakingexttypes.VERIFIER_STATUS_INACTIVE, StatusReason: "missed"}
		h.run(t)
		waitFor(t, "MsgActivateVerifier at start", func() bool {
			return len(roletest.SentOf[*stakingexttypes.MsgActivateVerifier](h.chain.Chain)) == 1
		})
		for _, act := range roletest.Deliver(t, h.db, h.role, chain.Event{Height: 20, Message: &stakingexttypes.EventVerifierDeactivated{Operator: operator, Reason: "missed again"}}) {
			act()
		}
		waitFor(t, "MsgActivateVerifier after the deactivation", func() bool {
			return len(roletest.SentOf[*stakingexttypes.MsgActivateVerifier](h.chain.Chain)) == 2
		})
	})
}

// After a restart the open assignments come back from the chain.
func TestResumeQueuesOpenAssignments(t *testing.T) {
	h := newHarness(t, config.Audits{Enabled: true})
	h.chain.verifier = &stakingexttypes.Verifier{Operator: operator, Status: stakingexttypes.VERIFIER_STATUS_ACTIVE}
	h.chain.open = []verifytypes.Audit{{LeaseId: 7, CheckpointIndex: 3, Auditor: operator, JobId: 2, Provider: provider,
		Status: verifytypes.AUDIT_STATUS_ASSIGNED, Fee: sdk.NewInt64Coin("udepin", 5), Deadline: 40, AssignedHeight: 8}}
	h.checker.results[checkpoint.Ref{LeaseID: 7, Index: 3}] = disputes.AuditResult{Outcome: disputes.AuditMatched, TraceRoot: bytes.Repeat([]byte{2}, 32)}
	if err := h.role.Resume(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if rec := h.record(t, 7, 3); rec.Status != db.AuditAssigned || rec.Deadline != 40 {
		t.Fatalf("resumed record %+v", rec)
	}
	h.run(t)
	waitFor(t, "the resumed assignment attested", func() bool { return h.record(t, 7, 3).Status == db.AuditAttested })
}
