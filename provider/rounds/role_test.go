package rounds

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
	// corrupt makes the chain record a flipped root for the first committed global (an
	// aggregator that lies).
	corrupt bool
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
		for rd.State == markettypes.ROUND_STATE_OPEN {
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
	if rd == nil || rd.State != markettypes.ROUND_STATE_AGGREGATING || !slices.Equal(rd.Entered, m.Entered) {
		return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: "global already committed or round not aggregating"}}
	}
	root := slices.Clone(m.GlobalRoot)
	if c.corrupt {
		root[0] ^= 1
		c.corrupt = false
	}
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
			return &chain.TxResult{}, c.commitGlobal(custodyDir, msgs[0].(*markettypes.MsgCommitGlobal))
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

// A committed global that is not the aggregate of the entered pseudo-gradients (here the
// chain records a flipped root for the aggregator's) is flagged by every other worker:
// logged, counted and shown in its status, and nobody trains on from it.
func TestRoleFlagsAWrongGlobal(t *testing.T) {
	c := newFakeChain(t, diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}, 3, 2)
	c.corrupt = true
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan []error)
	go func() { done <- serveAll(t, ctx, ws) }()
	flagged := func() bool {
		for _, w := range ws {
			st := w.role.Status()
			if len(st) != 1 || st[0].GlobalMismatch == "" {
				return false
			}
		}
		return true
	}
	for !flagged() {
		select {
		case errs := <-done:
			t.Fatalf("the workers ended without flagging the wrong global: %v", errs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Nobody starts round 1 from the wrong global: none is fetched whose root is the
	// committed one.
	time.Sleep(200 * time.Millisecond)
	for _, w := range ws {
		if st := w.role.Status()[0]; st.Round != 1 || st.Phase != PhaseFetchingGlobal {
			t.Fatalf("worker %d after the wrong global: %+v", w.lease.Worker, st)
		}
		if w.metrics.count() != 1 {
			t.Fatalf("worker %d counted %d mismatches", w.lease.Worker, w.metrics.count())
		}
	}
	cancel()
	<-done
}
