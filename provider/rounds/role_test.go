package rounds

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// fakeChain is x/market's round state machine as the role sees it: a round closes when
// the slots it expects have committed (all, unless the test says otherwise), a committed
// global opens the next round. Custody objects are registered in net as their messages
// arrive, held by the one test holder.
type fakeChain struct {
	mu      sync.Mutex
	job     markettypes.Job
	leases  map[uint64]markettypes.Lease
	rounds  map[uint64]*markettypes.Round
	commits map[uint64][]markettypes.RoundCommit
	expect  map[uint64][]uint32
	net     *custodyNet
	// proofs are the aggregation faults the chain took, convicted their aggregators.
	proofs    []*verifytypes.MsgProveRoundFault
	convicted []string
}

// proveRoundFault takes an aggregation proof of a global in its challenge window whose
// claimed chunk opens against the committed root and whose pseudo-gradient chunks open
// against the entered workers' commitments, as x/verify's checks (the chunk's
// recomputation is x/verify's own test): the global is rejected, the later rounds that
// started from it are dropped, and the round is aggregated again.
func (c *fakeChain) proveRoundFault(m *verifytypes.MsgProveRoundFault) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := c.rounds[m.Round]
	if rd == nil || rd.State != markettypes.ROUND_STATE_CHALLENGE || m.Kind != verifytypes.ROUND_FAULT_AGGREGATION || len(m.Claimed) != 1 {
		return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: "no global in its challenge window"}}
	}
	root, err := merkle.HashFromBytes(rd.NextGlobalRoot)
	if err != nil {
		return err
	}
	chunks := diloco.NewLayout(tinyConfig()).GlobalFileChunks()
	if err := merkle.VerifyInclusion(root, m.Claimed[0].Index, chunks, merkle.LeafHash(m.Claimed[0].Data), rootsOf(m.Claimed[0].Proof)); err != nil {
		return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: "claimed chunk does not open against the committed global: " + err.Error()}}
	}
	for _, w := range m.PseudoGradients {
		i := slices.IndexFunc(c.commits[m.Round], func(cm markettypes.RoundCommit) bool { return cm.Worker == w.Worker })
		if i < 0 || !slices.Contains(rd.Entered, w.Worker) {
			return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: fmt.Sprintf("worker %d did not enter round %d", w.Worker, m.Round)}}
		}
		cm := c.commits[m.Round][i]
		pgRoot, err := merkle.HashFromBytes(cm.PseudoGradientRoot)
		if err != nil {
			return err
		}
		for _, ch := range w.Chunks {
			if err := merkle.VerifyInclusion(pgRoot, ch.Index, merkle.ChunkCount(int64(cm.PseudoGradientSize), diloco.ChunkSize), merkle.LeafHash(ch.Data), rootsOf(ch.Proof)); err != nil {
				return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: fmt.Sprintf("worker %d's chunk %d does not open against its pseudo-gradient: %v", w.Worker, ch.Index, err)}}
			}
		}
	}
	c.proofs = append(c.proofs, m)
	c.convicted = append(c.convicted, rd.Aggregator)
	for q := c.job.Round; q > m.Round; q-- {
		delete(c.rounds, q)
		delete(c.commits, q)
	}
	c.job.Round = m.Round
	rd.State, rd.NextGlobalRoot, rd.NextGlobalSize, rd.Aggregator = markettypes.ROUND_STATE_AGGREGATING, nil, 0, ""
	return nil
}

func newFakeChain(t *testing.T, spec diloco.SyncSpec, workers int, rounds uint64) *fakeChain {
	t.Helper()
	s, err := spec.Sync()
	if err != nil {
		t.Fatal(err)
	}
	g0, err := diloco.InitGlobal(tinyConfig(), s, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	job := markettypes.Job{Id: 7, Seed: testSeed, Spec: markettypes.JobSpec{
		Workers: uint32(workers), TotalSteps: rounds * uint64(spec.Every), CheckpointInterval: uint64(spec.Every),
		Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_TRANSFORMER, Transformer: markettypes.NewTransformerConfig(tinyConfig())},
		Sync:     &markettypes.SyncSpec{Every: uint32(s.Every), OuterLrQ30: uint64(s.OuterLR), OuterMomentumQ30: uint64(s.OuterMomentum), TopK: uint32(s.TopK)},
		Custody:  &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1},
	}}
	c := &fakeChain{job: job, leases: map[uint64]markettypes.Lease{}, rounds: map[uint64]*markettypes.Round{},
		commits: map[uint64][]markettypes.RoundCommit{}, expect: map[uint64][]uint32{}, net: newCustodyNet(t)}
	root := g0.Root()
	c.open(0, root[:])
	return c
}

func (c *fakeChain) open(round uint64, root []byte) {
	var slots []uint32
	for w := range c.job.Spec.Workers {
		slots = append(slots, w)
	}
	c.rounds[round] = &markettypes.Round{JobId: c.job.Id, Round: round, State: markettypes.ROUND_STATE_OPEN, GlobalRoot: root, Workers: slots}
	c.job.Round = round
}

func (c *fakeChain) Job(context.Context, *markettypes.QueryJobRequest, ...grpc.CallOption) (*markettypes.QueryJobResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &markettypes.QueryJobResponse{Job: c.job}, nil
}

func (c *fakeChain) Lease(_ context.Context, in *markettypes.QueryLeaseRequest, _ ...grpc.CallOption) (*markettypes.QueryLeaseResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &markettypes.QueryLeaseResponse{Lease: c.leases[in.LeaseId]}, nil
}

func (c *fakeChain) Round(_ context.Context, in *markettypes.QueryRoundRequest, _ ...grpc.CallOption) (*markettypes.QueryRoundResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd, ok := c.rounds[in.Round]
	if !ok {
		return nil, errors.New("no such round")
	}
	return &markettypes.QueryRoundResponse{Round: *rd}, nil
}

func (c *fakeChain) RoundCommits(_ context.Context, in *markettypes.QueryRoundCommitsRequest, _ ...grpc.CallOption) (*markettypes.QueryRoundCommitsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &markettypes.QueryRoundCommitsResponse{Commits: slices.Clone(c.commits[in.Round])}, nil
}

func rootsOf(b [][]byte) []merkle.Hash {
	out := make([]merkle.Hash, len(b))
	for i := range b {
		copy(out[i][:], b[i])
	}
	return out
}

func (c *fakeChain) commitRound(custodyDir string, m *markettypes.MsgCommitRound) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := c.rounds[m.Round]
	lease := c.leases[m.LeaseId]
	if expect := c.expect[m.Round]; expect != nil && !slices.Contains(expect, lease.Worker) {
		// A slow worker: its commit arrives once the round closed without it.
		for rd != nil && c.rounds[m.Round] == rd && rd.State == markettypes.ROUND_STATE_OPEN {
			c.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			c.mu.Lock()
		}
		return fmt.Errorf("round %d is closed", m.Round)
	}
	if rd == nil || rd.State != markettypes.ROUND_STATE_OPEN || !slices.Contains(rd.Workers, lease.Worker) {
		return fmt.Errorf("round %d is not open for slot %d", m.Round, lease.Worker)
	}
	c.commits[m.Round] = append(c.commits[m.Round], markettypes.RoundCommit{JobId: c.job.Id, Round: m.Round, Worker: lease.Worker,
		LeaseId: m.LeaseId, StartRoot: m.StartRoot, EndRoot: m.EndRoot, PseudoGradientRoot: m.PseudoGradientRoot, PseudoGradientSize: m.PseudoGradientSize})
	c.net.register(custodyDir, Pieces{ObjectID: markettypes.PseudoGradientCustodyID(c.job.Id, m.Round, lease.Worker), Size: m.PseudoGradientSize, Roots: rootsOf(m.PieceRoots)})
	expect := c.expect[m.Round]
	if expect == nil {
		expect = rd.Workers
	}
	var committed []uint32
	for _, cm := range c.commits[m.Round] {
		committed = append(committed, cm.Worker)
	}
	slices.Sort(committed)
	if len(committed) == len(expect) { // every expected slot (no other may commit)
		rd.State, rd.Entered = markettypes.ROUND_STATE_AGGREGATING, committed
	}
	return nil
}

func (c *fakeChain) commitGlobal(custodyDir string, m *markettypes.MsgCommitGlobal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := c.rounds[m.Round]
	if rd == nil || rd.State != markettypes.ROUND_STATE_AGGREGATING || !slices.Equal(rd.Entered, m.Entered) || slices.Contains(c.convicted, m.Provider) {
		return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: "global already committed or round not aggregating"}}
	}
	root := slices.Clone(m.GlobalRoot)
	rd.State, rd.NextGlobalRoot, rd.NextGlobalSize, rd.Aggregator = markettypes.ROUND_STATE_CHALLENGE, root, m.GlobalSize, m.Provider
	c.net.register(custodyDir, Pieces{ObjectID: markettypes.GlobalCustodyID(c.job.Id, m.Round+1), Size: m.GlobalSize, Roots: rootsOf(m.PieceRoots)})
	if m.Round+1 < c.job.Spec.TotalSteps/uint64(c.job.Spec.Sync.Every) {
		c.open(m.Round+1, root)
	} else {
		c.job.Round = m.Round + 1
	}
	return nil
}

type fakeMetrics struct {
	mu         sync.Mutex
	mismatches int
}

func (m *fakeMetrics) RoundGlobalMismatch()     { m.mu.Lock(); m.mismatches++; m.mu.Unlock() }
func (m *fakeMetrics) RoundBarrierWait(float64) {}

func (m *fakeMetrics) count() int { m.mu.Lock(); defer m.mu.Unlock(); return m.mismatches }

// worker is one test sidecar's rounds role serving one lease.
type worker struct {
	role    *Role
	lease   Lease
	custody string
	metrics *fakeMetrics
}

func (c *fakeChain) newWorker(t *testing.T, leaseID uint64, slot uint32) *worker {
	t.Helper()
	dir := t.TempDir()
	custodyDir := filepath.Join(dir, "custody")
	operator := fmt.Sprintf("provider-%d", slot)
	c.mu.Lock()
	c.leases[leaseID] = markettypes.Lease{Id: leaseID, JobId: c.job.Id, Worker: slot, Provider: operator, State: markettypes.LEASE_STATE_ACTIVE}
	job := c.job
	c.mu.Unlock()
	m := &fakeMetrics{}
	role, err := New(Options{
		Operator: operator, Chain: c, WorkDir: filepath.Join(dir, "work"), CustodyDir: custodyDir, Custody: c.net.source(),
		PollInterval: 20 * time.Millisecond, AggregatorGrace: 5 * time.Second, Metrics: m,
		Submit: func(_ context.Context, msgs ...sdk.Msg) (*chain.TxResult, error) {
			if len(msgs) != 1 {
				return nil, errors.New("one message")
			}
			switch m := msgs[0].(type) {
			case *markettypes.MsgCommitGlobal:
				return &chain.TxResult{}, c.commitGlobal(custodyDir, m)
			case *verifytypes.MsgProveRoundFault:
				return &chain.TxResult{}, c.proveRoundFault(m)
			}
			return nil, fmt.Errorf("unexpected %T", msgs[0])
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{role: role, custody: custodyDir, metrics: m}
	w.lease = Lease{ID: leaseID, Worker: slot, Job: job, OutputDir: filepath.Join(dir, "out"), DataDir: filepath.Join(dir, "data"),
		SubmitCheckpoint: func(_ context.Context, cp trainer.Checkpoint, commit sdk.Msg) error {
			m := commit.(*markettypes.MsgCommitRound)
			if cp.StartStep() != m.Round*uint64(job.Spec.Sync.Every) || !slices.Equal(m.EndRoot, func() []byte { h := cp.FinalHash(); return h[:] }()) {
				return fmt.Errorf("round %d's checkpoint spans %d..%d", m.Round, cp.StartStep(), cp.EndStep())
			}
			return c.commitRound(custodyDir, m)
		}}
	return w
}

// serveAll runs every worker's Serve until all return.
func serveAll(t *testing.T, ctx context.Context, ws []*worker) []error {
	t.Helper()
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.role.Serve(ctx, w.lease)
		}()
	}
	wg.Wait()
	return errs
}

// Three rounds roles on a chain's round state machine give diloco.Simulate's global
// roots: the lowest slot commits each global, the others agree with it; a slot that
// is left out of a round (round 1: slot 2 never commits in time) is left out of the
// average and keeps its carry, as Simulate's dropout.
func TestRoleServesRoundsAsSimulate(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	c := newFakeChain(t, spec, 3, 3)
	c.expect[1] = []uint32{0, 1}
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	// Slot 2 trains round 1 but its commit comes after the round closed: the chain
	// refuses it, and the lease serves on from round 2.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := serveAll(t, ctx, ws)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: spec, Seed: testSeed, Workers: 3, Rounds: 3, Dropouts: map[uint64][]int{1: {2}}})
	if err != nil {
		t.Fatal(err)
	}
	for r := uint64(0); r < 3; r++ {
		rd := c.rounds[r]
		if next := want[r+1].Root(); !slices.Equal(rd.NextGlobalRoot, next[:]) {
			t.Fatalf("round %d: committed global %x, Simulate's %s", r, rd.NextGlobalRoot, next)
		}
		if rd.Aggregator != "provider-0" {
			t.Fatalf("round %d aggregated by %s, want the lowest slot's provider-0", r, rd.Aggregator)
		}
	}
	for _, w := range ws {
		if w.metrics.count() != 0 {
			t.Fatalf("worker %d saw a mismatch", w.lease.Worker)
		}
		st := w.role.Status()
		if len(st) != 1 || st[0].Phase != PhaseDone || st[0].Round != 2 {
			t.Fatalf("worker %d's status: %+v", w.lease.Worker, st)
		}
	}
}

// A lying aggregator (slot 0 commits round 0's global with one weight off) is caught by
// the other workers: each finds the first differing chunk of the committed global
// (fetched from custody) against its own aggregate and proves it (x/verify
// MsgProveRoundFault, AGGREGATION) in the challenge window; the chain rejects the global
// and convicts the aggregator, the next slot commits the honest one, and the job ends at
// diloco.Simulate's global (slot 0, convicted, is out of round 1).
// With top_k the workers prove it from their compressed pseudo-gradients' records.
func TestRoleProvesAWrongAggregation(t *testing.T) {
	for _, topK := range []int{0, 32} {
		t.Run("top_k="+strconv.Itoa(topK), func(t *testing.T) { testRoleProvesAWrongAggregation(t, topK) })
	}
}

func testRoleProvesAWrongAggregation(t *testing.T, topK int) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK}
	c := newFakeChain(t, spec, 3, 2)
	c.expect[1] = []uint32{1, 2}
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	ws[0].role.opts.CheatAggregate = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cheaterCtx, stopCheater := context.WithCancel(ctx)
	cheaterDone := make(chan struct{})
	go func() {
		defer close(cheaterDone)
		_ = ws[0].role.Serve(cheaterCtx, ws[0].lease) // it loses its place: its end is not the test's
	}()
	for i, err := range serveAll(t, ctx, ws[1:]) {
		if err != nil {
			t.Fatalf("worker %d: %v", i+1, err)
		}
	}
	stopCheater()
	<-cheaterDone

	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.convicted, []string{"provider-0"}) || len(c.proofs) != 1 {
		t.Fatalf("convicted %v with %d proofs, want provider-0 with one", c.convicted, len(c.proofs))
	}
	p := c.proofs[0]
	if p.Round != 0 || p.Chunk != 0 || p.Momentum || (p.Prover != "provider-1" && p.Prover != "provider-2") || len(p.PseudoGradients) != 3 {
		t.Fatalf("proof: round %d chunk %d momentum %v by %s with %d pseudo-gradients", p.Round, p.Chunk, p.Momentum, p.Prover, len(p.PseudoGradients))
	}
	want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: spec, Seed: testSeed, Workers: 3, Rounds: 2, Dropouts: map[uint64][]int{1: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	for r := uint64(0); r < 2; r++ {
		rd := c.rounds[r]
		if next := want[r+1].Root(); !slices.Equal(rd.NextGlobalRoot, next[:]) {
			t.Fatalf("round %d: committed global %x, Simulate's %s", r, rd.NextGlobalRoot, next)
		}
		if rd.Aggregator != "provider-1" {
			t.Fatalf("round %d aggregated by %s, want provider-1 (provider-0 is convicted)", r, rd.Aggregator)
		}
	}
	// The prover flagged the global; the other worker did too unless the global was
	// rejected before its own aggregate was ready.
	proven := 0
	for _, w := range ws[1:] {
		st := w.role.Status()[0]
		if st.Phase != PhaseDone || w.metrics.count() > 1 {
			t.Fatalf("worker %d's status: %+v, %d mismatches counted", w.lease.Worker, st, w.metrics.count())
		}
		if strings.HasSuffix(st.GlobalMismatch, "(proven wrong)") {
			proven++
			if w.role.opts.Operator != p.Prover || w.metrics.count() != 1 || !strings.HasPrefix(st.GlobalMismatch, "round 0: provider-0 committed") {
				t.Fatalf("worker %d says it proved %q, the proof is %s's, %d mismatches counted", w.lease.Worker, st.GlobalMismatch, p.Prover, w.metrics.count())
			}
		}
	}
	if proven != 1 {
		t.Fatalf("%d workers' statuses say they proved it, want the one whose proof the chain took", proven)
	}
}
