package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
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
	// checkpoints are the leases' round-end checkpoints, their states in custody.
	checkpoints map[uint64][]verifytypes.Checkpoint
	// proofs are the round faults the chain took; convicted their authors.
	proofs    []*verifytypes.MsgProveRoundFault
	convicted []string
	// holdGlobal refuses the globals of these rounds (a test acts before they are committed).
	holdGlobal map[uint64]bool
	// unheld are leases whose checkpoints' custody pieces no holder ever holds.
	unheld map[uint64]bool
	// late are leases' checkpoints (lease → index) whose custody pieces are held only
	// from when the test says (holdLateWhen); lateHeld registers them then.
	late     map[uint64]uint64
	lateHeld []func()
	// proofLatency is how long an aggregation proof takes to be included (a slow block).
	proofLatency time.Duration
	// finalLag, when set, makes round q's global final once round q+finalLag's global is
	// committed (its challenge window and custody wait over); unset, none is ever final.
	finalLag uint64
	// otherJobs are jobs on chain besides job; one that is neither is not found.
	otherJobs map[uint64]markettypes.Job
	// queries are the open file queries (queries_test.go), by id; listeners the roles
	// whose HandleEvent sees the chain's file query events.
	queries   map[uint64]*verifytypes.FileQuery
	queryLog  []verifytypes.FileQuery
	listeners []*Role
	// answeredBatches counts transactions of several file query answers.
	answeredBatches int
}

// convict records provider as convicted and closes its leases, as x/verify's fraud path.
// The caller holds c.mu.
func (c *fakeChain) convict(provider string) {
	c.convicted = append(c.convicted, provider)
	for id, l := range c.leases {
		if l.Provider == provider {
			l.State = markettypes.LEASE_STATE_CLOSED
			c.leases[id] = l
		}
	}
}

// proveRoundFault takes an aggregation proof of a global in its challenge window whose
// claimed chunk opens against the committed root and whose pseudo-gradient chunks open
// against the entered workers' commitments, as x/verify's checks (the chunk's
// recomputation is x/verify's own test): the global is rejected, the later rounds that
// started from it are dropped, and the round is aggregated again.
func (c *fakeChain) proveRoundFault(m *verifytypes.MsgProveRoundFault) error {
	time.Sleep(c.proofLatency)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Kind != verifytypes.ROUND_FAULT_AGGREGATION {
		return c.proveWorkerFault(m)
	}
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
	c.convict(rd.Aggregator)
	c.voidGlobal(rd)
	return nil
}

// convictSlot2InRound0 is a game convicting slot 2's round-0 checkpoint after G_1 was
// committed: its commit is excluded, its provider convicted, G_1 voided (round 1 goes
// with it) and round 1 expects slots 0 and 1 once it is reopened. The caller holds c.mu.
func (c *fakeChain) convictSlot2InRound0() {
	i := slices.IndexFunc(c.commits[0], func(cm markettypes.RoundCommit) bool { return cm.Worker == 2 })
	c.commits[0][i].Excluded = true
	c.convict("provider-2")
	rd0 := c.rounds[0]
	rd0.Entered = []uint32{0, 1}
	c.voidGlobal(rd0)
	c.expect[1] = []uint32{0, 1}
	delete(c.holdGlobal, 1)
}

// voidGlobal drops rd's committed global and the rounds that started from it: the round
// is aggregated again.
func (c *fakeChain) voidGlobal(rd *markettypes.Round) {
	for q := c.job.Round; q > rd.Round; q-- {
		delete(c.rounds, q)
		delete(c.commits, q)
	}
	c.job.Round = rd.Round
	rd.State, rd.NextGlobalRoot, rd.NextGlobalSize, rd.Aggregator = markettypes.ROUND_STATE_AGGREGATING, nil, 0, ""
}

// proveWorkerFault takes a START or PSEUDO_GRADIENT proof as x/verify does: every opening
// against the roots on chain, the chunk recomputed with pkg/diloco and found different.
// The worker is excluded (a global committed over it is voided) and its provider convicted.
func (c *fakeChain) proveWorkerFault(m *verifytypes.MsgProveRoundFault) error {
	refuse := func(why string, args ...any) error {
		return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: fmt.Sprintf(why, args...)}}
	}
	rd := c.rounds[m.Round]
	i := slices.IndexFunc(c.commits[m.Round], func(cm markettypes.RoundCommit) bool { return cm.Worker == m.Worker })
	if rd == nil || i < 0 || rd.State == markettypes.ROUND_STATE_OPEN {
		return refuse("no commit of worker %d in a closed round %d", m.Worker, m.Round)
	}
	commit := &c.commits[m.Round][i]
	if commit.Excluded {
		return refuse("worker %d was already excluded", m.Worker)
	}
	l := diloco.NewLayout(tinyConfig())
	sync := c.job.Spec.Sync.Diloco()
	open := func(root []byte, size uint64, fc []verifytypes.FileChunk, want uint64) ([]byte, error) {
		h, err := merkle.HashFromBytes(root)
		if err != nil || len(fc) != 1 || fc[0].Index != want {
			return nil, refuse("want one opening of chunk %d", want)
		}
		if err := merkle.VerifyInclusion(h, want, size, merkle.LeafHash(fc[0].Data), rootsOf(fc[0].Proof)); err != nil {
			return nil, refuse("chunk %d does not open: %v", want, err)
		}
		return fc[0].Data, nil
	}
	var want, claimed []byte
	switch m.Kind {
	case verifytypes.ROUND_FAULT_PSEUDO_GRADIENT:
		k := int(m.Chunk)
		sc, err := l.StateWeightsChunk(k)
		if err != nil {
			return refuse("%v", err)
		}
		g, err := open(rd.GlobalRoot, l.GlobalFileChunks(), m.Global, diloco.WeightsChunk(k))
		if err != nil {
			return err
		}
		end, err := open(commit.EndRoot, l.StateChunks(), m.Source, sc)
		if err != nil {
			return err
		}
		if sync.TopK != 0 {
			if want, claimed, err = c.compressedChunk(m, commit, g, end, open); err != nil {
				return err
			}
			break
		}
		if claimed, err = open(commit.PseudoGradientRoot, l.DenseFileChunks(), m.Claimed, diloco.WeightsChunk(k)); err != nil {
			return err
		}
		if want, err = diloco.PseudoGradientChunk(g, end, l.Valid(k)); err != nil {
			return refuse("%v", err)
		}
	case verifytypes.ROUND_FAULT_START:
		src, k, err := l.StartSourceOf(m.Chunk)
		if err != nil {
			return refuse("%v", err)
		}
		var source []byte
		switch src {
		case diloco.StartWeights:
			source, err = open(rd.GlobalRoot, l.GlobalFileChunks(), m.Global, diloco.WeightsChunk(k))
		case diloco.StartMoments:
			// The carry: the worker's end state of the last round it entered before.
			for q := m.Round; q > 0 && source == nil && err == nil; {
				q--
				if !slices.Contains(c.rounds[q].Entered, m.Worker) {
					continue
				}
				j := slices.IndexFunc(c.commits[q], func(cm markettypes.RoundCommit) bool { return cm.Worker == m.Worker })
				source, err = open(c.commits[q][j].EndRoot, l.StateChunks(), m.Source, m.Chunk)
			}
		}
		if err != nil {
			return err
		}
		if claimed, err = open(commit.StartRoot, l.StateChunks(), m.Claimed, m.Chunk); err != nil {
			return err
		}
		if want, err = l.StartChunk(sync, m.Round, m.Chunk, source); err != nil {
			return refuse("%v", err)
		}
	default:
		return refuse("kind %s", m.Kind)
	}
	if slices.Equal(want, claimed) {
		return refuse("chunk %d of worker %d is right", m.Chunk, m.Worker)
	}
	c.proofs = append(c.proofs, m)
	c.convict(commit.Provider)
	commit.Excluded = true
	c.endQueriesOn(*commit)
	if rd.State == markettypes.ROUND_STATE_FINAL {
		return nil
	}
	rd.Entered = slices.DeleteFunc(slices.Clone(rd.Entered), func(w uint32) bool { return w == m.Worker })
	if rd.State == markettypes.ROUND_STATE_CHALLENGE {
		c.voidGlobal(rd)
	}
	return nil
}

// compressedChunk is x/verify's checkCompressedChunk on the fake chain: it opens the
// header (and the previous entered round's under the same lease), and either the two
// error_in roots differ (want and claimed are them) or want is the record and error_out
// chunk diloco.CompressedChunk rebuilds from the opened error_in chunk, claimed the opened
// ones. The caller holds c.mu.
func (c *fakeChain) compressedChunk(m *verifytypes.MsgProveRoundFault, commit *markettypes.RoundCommit, g, end []byte,
	open func(root []byte, size uint64, fc []verifytypes.FileChunk, want uint64) ([]byte, error)) (want, claimed []byte, err error) {
	l := diloco.NewLayout(tinyConfig())
	topK, k := int(c.job.Spec.Sync.TopK), int(m.Chunk)
	files := l.CompressedFileChunks(topK)
	one := func(fc *verifytypes.FileChunk) []verifytypes.FileChunk {
		if fc == nil {
			return nil
		}
		return []verifytypes.FileChunk{*fc}
	}
	header, err := open(commit.PseudoGradientRoot, files, one(m.Header), 0)
	if err != nil {
		return nil, nil, err
	}
	in, out, err := diloco.CompressedErrorRoots(header)
	if err != nil {
		return nil, nil, err
	}
	wantIn := l.ZeroErrorBufferRoot()
	for q := m.Round; q > 0; {
		q--
		if !slices.Contains(c.rounds[q].Entered, m.Worker) {
			continue
		}
		prev := c.commits[q][slices.IndexFunc(c.commits[q], func(cm markettypes.RoundCommit) bool { return cm.Worker == m.Worker })]
		if prev.LeaseId == commit.LeaseId {
			ph, err := open(prev.PseudoGradientRoot, files, one(m.PreviousHeader), 0)
			if err != nil {
				return nil, nil, err
			}
			if _, wantIn, err = diloco.CompressedErrorRoots(ph); err != nil {
				return nil, nil, err
			}
		}
		break
	}
	if in != wantIn {
		return wantIn[:], in[:], nil
	}
	var chunks [][]byte
	for i, at := range diloco.RecordChunks(topK, k) {
		if i >= len(m.Claimed) {
			return nil, nil, fmt.Errorf("claimed: want chunks %v", diloco.RecordChunks(topK, k))
		}
		ch, err := open(commit.PseudoGradientRoot, files, m.Claimed[i:i+1], at)
		if err != nil {
			return nil, nil, err
		}
		chunks = append(chunks, ch)
	}
	record, err := diloco.RecordFromChunks(topK, k, chunks)
	if err != nil {
		return nil, nil, err
	}
	errIn, err := open(in[:], uint64(l.Chunks), one(m.ErrorIn), uint64(k))
	if err != nil {
		return nil, nil, err
	}
	errOut, err := open(out[:], uint64(l.Chunks), one(m.ErrorOut), uint64(k))
	if err != nil {
		return nil, nil, err
	}
	wantRecord, wantOut, err := diloco.CompressedChunk(g, end, errIn, topK, l.Valid(k))
	if err != nil {
		return nil, nil, err
	}
	return append(wantRecord, wantOut...), append(record, errOut...), nil
}

func (c *fakeChain) Checkpoints(_ context.Context, in *verifytypes.QueryCheckpointsRequest, _ ...grpc.CallOption) (*verifytypes.QueryCheckpointsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &verifytypes.QueryCheckpointsResponse{Checkpoints: slices.Clone(c.checkpoints[in.LeaseId])}, nil
}

// submitCheckpoint records a lease's round-end checkpoint and registers its state's
// custody pieces, written under custodyDir (the leases role's part).
func (c *fakeChain) submitCheckpoint(custodyDir string, leaseID uint64, cp trainer.Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	index := uint64(len(c.checkpoints[leaseID]))
	p, err := WritePieces(custodyDir, shardtypes.CustodyDatasetID(leaseID, index), cp.StatePath(), 2, 1)
	if err != nil {
		return err
	}
	switch late, ok := c.late[leaseID]; {
	case c.unheld[leaseID]:
	case ok && late == index:
		c.lateHeld = append(c.lateHeld, func() { c.net.register(custodyDir, p) })
	default:
		c.net.register(custodyDir, p)
	}
	final := cp.FinalHash()
	c.checkpoints[leaseID] = append(c.checkpoints[leaseID], verifytypes.Checkpoint{LeaseId: leaseID, Index: index, StartStep: cp.StartStep(), EndStep: cp.EndStep(), FinalHash: final[:]})
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
		commits: map[uint64][]markettypes.RoundCommit{}, expect: map[uint64][]uint32{}, net: newCustodyNet(t),
		checkpoints: map[uint64][]verifytypes.Checkpoint{}, queries: map[uint64]*verifytypes.FileQuery{}}
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

func (c *fakeChain) Job(_ context.Context, in *markettypes.QueryJobRequest, _ ...grpc.CallOption) (*markettypes.QueryJobResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in.JobId == c.job.Id {
		return &markettypes.QueryJobResponse{Job: c.job}, nil
	}
	if j, ok := c.otherJobs[in.JobId]; ok {
		return &markettypes.QueryJobResponse{Job: j}, nil
	}
	return nil, fmt.Errorf("job %d not found", in.JobId)
}

func (c *fakeChain) Lease(_ context.Context, in *markettypes.QueryLeaseRequest, _ ...grpc.CallOption) (*markettypes.QueryLeaseResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &markettypes.QueryLeaseResponse{Lease: c.leases[in.LeaseId]}, nil
}

func (c *fakeChain) Leases(_ context.Context, in *markettypes.QueryLeasesRequest, _ ...grpc.CallOption) (*markettypes.QueryLeasesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := &markettypes.QueryLeasesResponse{}
	for _, l := range c.leases {
		if l.JobId == in.JobId {
			res.Leases = append(res.Leases, l)
		}
	}
	return res, nil
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
	if !slices.Equal(m.GlobalRoot, rd.GlobalRoot) {
		return fmt.Errorf("round %d starts from global %x, the commit was trained from %x", m.Round, rd.GlobalRoot, m.GlobalRoot)
	}
	c.commits[m.Round] = append(c.commits[m.Round], markettypes.RoundCommit{JobId: c.job.Id, Round: m.Round, Worker: lease.Worker,
		LeaseId: m.LeaseId, Provider: lease.Provider, StartRoot: m.StartRoot, EndRoot: m.EndRoot, PseudoGradientRoot: m.PseudoGradientRoot, PseudoGradientSize: m.PseudoGradientSize})
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
	if rd == nil || rd.State != markettypes.ROUND_STATE_AGGREGATING || !slices.Equal(rd.Entered, m.Entered) || slices.Contains(c.convicted, m.Provider) || c.holdGlobal[m.Round] {
		return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: "global already committed or round not aggregating"}}
	}
	root := slices.Clone(m.GlobalRoot)
	rd.State, rd.NextGlobalRoot, rd.NextGlobalSize, rd.Aggregator = markettypes.ROUND_STATE_CHALLENGE, root, m.GlobalSize, m.Provider
	if c.finalLag > 0 && m.Round >= c.finalLag {
		if old := c.rounds[m.Round-c.finalLag]; old.State == markettypes.ROUND_STATE_CHALLENGE {
			old.State = markettypes.ROUND_STATE_FINAL
		}
	}
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
			if len(msgs) > 1 { // the worker's file query answers, due together
				return &chain.TxResult{}, c.answerFileQueries(msgs)
			}
			if len(msgs) != 1 {
				return nil, errors.New("one message")
			}
			switch m := msgs[0].(type) {
			case *markettypes.MsgCommitGlobal:
				return &chain.TxResult{}, c.commitGlobal(custodyDir, m)
			case *verifytypes.MsgProveRoundFault:
				return &chain.TxResult{}, c.proveRoundFault(m)
			case *verifytypes.MsgOpenFileQuery:
				return c.openFileQuery(m)
			case *verifytypes.MsgAnswerFileQuery:
				return &chain.TxResult{}, c.answerFileQuery(m)
			case *verifytypes.MsgDescendFileQuery:
				return &chain.TxResult{}, c.descendFileQuery(m)
			}
			return nil, fmt.Errorf("unexpected %T", msgs[0])
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{role: role, custody: custodyDir, metrics: m}
	c.mu.Lock()
	c.listeners = append(c.listeners, role)
	c.mu.Unlock()
	w.lease = Lease{ID: leaseID, Worker: slot, Job: job, OutputDir: filepath.Join(dir, "out"), DataDir: filepath.Join(dir, "data"),
		SubmitCheckpoint: func(_ context.Context, cp trainer.Checkpoint, commit sdk.Msg) error {
			m := commit.(*markettypes.MsgCommitRound)
			if cp.StartStep() != m.Round*uint64(job.Spec.Sync.Every) || !slices.Equal(m.EndRoot, func() []byte { h := cp.FinalHash(); return h[:] }()) {
				return fmt.Errorf("round %d's checkpoint spans %d..%d", m.Round, cp.StartStep(), cp.EndStep())
			}
			if err := c.commitRound(custodyDir, m); err != nil {
				return err
			}
			return c.submitCheckpoint(custodyDir, m.LeaseId, cp)
		}}
	return w
}

// requireServed runs every worker's Serve until all return, and fails on any error.
func requireServed(t *testing.T, ctx context.Context, ws []*worker) {
	t.Helper()
	for i, err := range serveAll(t, ctx, ws) {
		if err != nil {
			t.Fatalf("worker %d: %v", ws[i].lease.Worker, err)
		}
	}
}

// requireSimulated fails unless the globals committed for the job's rounds are
// diloco.Simulate's with dropouts. The caller holds c.mu.
func (c *fakeChain) requireSimulated(t *testing.T, spec diloco.SyncSpec, rounds uint64, dropouts map[uint64][]int) {
	t.Helper()
	want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: spec, Seed: testSeed, Workers: int(c.job.Spec.Workers), Rounds: int(rounds), Dropouts: dropouts})
	if err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		if next := want[r+1].Root(); !slices.Equal(c.rounds[r].NextGlobalRoot, next[:]) {
			t.Fatalf("round %d: committed global %x, Simulate's %s", r, c.rounds[r].NextGlobalRoot, next)
		}
	}
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

// serveInBackground runs w's Serve (a cheater's, which loses its place: how it ends is
// not the test's) until stop, which waits for it to return.
func serveInBackground(ctx context.Context, w *worker) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.role.Serve(ctx, w.lease)
	}()
	return func() {
		cancel()
		<-done
	}
}

// await blocks until cond, called holding c.mu, holds, or ctx ends.
func (c *fakeChain) await(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// holdLateWhen has the late checkpoints' custody pieces held once cond (called holding
// c.mu) holds; it returns at once.
func (c *fakeChain) holdLateWhen(ctx context.Context, cond func() bool) {
	go func() {
		if c.await(ctx, cond) != nil {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, register := range c.lateHeld {
			register()
		}
		c.lateHeld = nil
	}()
}

// Three rounds roles on a chain's round state machine give diloco.Simulate's global
// roots: the lowest slot commits each global, the others agree with it; a slot that
// is left out of a round (round 1: slot 2 never commits in time) is left out of the
// average and keeps its carry, as Simulate's dropout.
// With top_k no honest worker is accused: every checker rebuilt each other worker's error
// buffers (slot 2's round 2 from its round 0, the round it last entered; slot 2, out of
// round 1, the others' round 1 by replaying it when it checks their round 2) as the
// worker kept them.
func TestRoleServesRoundsAsSimulate(t *testing.T) {
	for _, topK := range []int{0, 32} {
		t.Run("top_k="+strconv.Itoa(topK), func(t *testing.T) { testRoleServesRoundsAsSimulate(t, topK) })
	}
}

func testRoleServesRoundsAsSimulate(t *testing.T, topK int) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK}
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
	if len(c.proofs) != 0 || len(c.convicted) != 0 {
		t.Fatalf("honest workers accused: %d proofs, convicted %v", len(c.proofs), c.convicted)
	}
	if topK == 0 {
		return
	}
	// Each checker keeps, per other worker, the error buffers it rebuilt of the worker's
	// last two entered rounds: slot 2 entered rounds 0 and 2, the others all three. Slot
	// 2, out of round 1, did not check it: it replayed the others' round 1 to check their
	// round 2.
	entered := map[uint32][]uint64{0: {1, 2}, 1: {1, 2}, 2: {0, 2}}
	for _, checker := range ws {
		j, err := checker.role.jobOf(checker.lease)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w == checker {
				continue
			}
			wj, err := w.role.jobOf(w.lease)
			if err != nil {
				t.Fatal(err)
			}
			kept, _ := filepath.Glob(filepath.Join(j.Dir, fmt.Sprintf("checked-errbuf-w%d-*", w.lease.Worker)))
			if len(kept) != len(entered[w.lease.Worker]) {
				t.Fatalf("worker %d keeps %v of worker %d, want its rounds %v", checker.lease.Worker, kept, w.lease.Worker, entered[w.lease.Worker])
			}
			for _, r := range entered[w.lease.Worker] {
				rebuilt, err := os.ReadFile(j.checkedErrorBufferPath(w.lease.Worker, w.lease.ID, r))
				if err != nil {
					t.Fatal(err)
				}
				own, err := os.ReadFile(wj.errBufPath(r, w.lease.Worker))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rebuilt, own) {
					t.Fatalf("worker %d rebuilt worker %d's error buffer of round %d unlike the worker's own", checker.lease.Worker, w.lease.Worker, r)
				}
			}
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
		t.Run("top_k="+strconv.Itoa(topK), func(t *testing.T) { testRoleProvesAWrongAggregation(t, topK, 0) })
	}
	// The proof is included after every honest slot's turn has come: the turns start
	// again at the rejection, so slot 1 still aggregates and slot 2 waits its grace
	// (kept from when they started waiting, both would commit at once, whichever first).
	t.Run("proof after the turns", func(t *testing.T) { testRoleProvesAWrongAggregation(t, 0, 6*time.Second) })
}

func testRoleProvesAWrongAggregation(t *testing.T, topK int, proofLatency time.Duration) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK}
	c := newFakeChain(t, spec, 3, 2)
	c.expect[1] = []uint32{1, 2}
	c.proofLatency = proofLatency
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
		if proofLatency > 0 {
			ws[slot].role.opts.AggregatorGrace = proofLatency / 3
		}
	}
	ws[0].role.opts.CheatAggregate = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stopCheater := serveInBackground(ctx, ws[0])
	for i, err := range serveAll(t, ctx, ws[1:]) {
		if err != nil {
			t.Fatalf("worker %d: %v", i+1, err)
		}
	}
	stopCheater()

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
		// The first honest slot re-aggregates unless it is a grace period late (a slot still
		// proving or aggregating on a loaded machine), when the next takes its turn; with
		// the proof included after every turn has come, both wait for the rejection and
		// the order must hold.
		if rd.Aggregator != "provider-1" && (rd.Aggregator != "provider-2" || (proofLatency > 0 && r == 0)) {
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

// A worker that fabricates its pseudo-gradient (slot 2 commits one with its first element
// off; its round-end checkpoint is honest) is caught before round 0 is aggregated: the
// other workers fetch its end state from checkpoint custody, find the chunk that is not
// G_0 − end state, and prove it (MsgProveRoundFault, PSEUDO_GRADIENT); the chain excludes
// it from the round and convicts it, the round is aggregated without it, and the job ends
// at diloco.Simulate's globals with slot 2 out of both rounds (its provider is convicted:
// round 1 closes without it).
func TestRoleProvesAFabricatedPseudoGradient(t *testing.T) {
	testWorkerFaultProven(t, denseSpec, func(o *Options) { o.CheatPseudoGradient = true }, verifytypes.ROUND_FAULT_PSEUDO_GRADIENT, 0,
		map[uint64][]int{0: {2}, 1: {2}})
}

// With top_k the other workers rebuild the cheater's error buffers (zero in its first
// round, then the error_out they rebuilt when they checked its round 0) and prove its
// first wrong record (its header's error buffer roots are honest): in round 0, and in
// round 1 when it was honest in round 0 (the carried error buffer).
func TestRoleProvesAFabricatedCompressedPseudoGradient(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32}
	for _, faulty := range []uint64{0, 1} {
		t.Run("round "+strconv.FormatUint(faulty, 10), func(t *testing.T) {
			dropouts := map[uint64][]int{1: {2}}
			if faulty == 0 {
				dropouts[0] = []int{2}
			}
			p := testWorkerFaultProven(t, spec, func(o *Options) { o.CheatPseudoGradient, o.cheatPseudoGradientFrom = true, faulty },
				verifytypes.ROUND_FAULT_PSEUDO_GRADIENT, faulty, dropouts)
			if p.Header == nil || p.ErrorIn == nil || p.ErrorOut == nil || len(p.Claimed) == 0 || (p.PreviousHeader != nil) != (faulty > 0) {
				t.Fatalf("proof of round %d is not a record's (header %v, error_in %v, error_out %v, %d claimed chunks, previous header %v)",
					faulty, p.Header != nil, p.ErrorIn != nil, p.ErrorOut != nil, len(p.Claimed), p.PreviousHeader != nil)
			}
		})
	}
}

// A checker that joins at round join (slot 1's lease; slot 0 trained the rounds before
// alone) has none of slot 0's error buffers: it replays slot 0's rounds from its first,
// each G_q and end state fetched from custody, at most replay rounds per check, and so
// proves the record slot 0 fabricates in round faulty; nobody else is accused. Joining
// at round 2, its round-2 check replays rounds 0 and 1 and its round-3 check proves;
// joining at round 3 with two rounds per check, its round-3 check replays rounds 0 and
// 1 and leaves round 3 unchecked, its round-4 check replays rounds 2 and 3 and proves.
// Joining at round 2 while slot 0's round-0 end state is held by nobody until round 3
// closes, its round-2 replay fails and its round-3 check replays rounds 0 to 2 and proves.
// Either way it keeps two of slot 0's error buffers and end states at most.
func TestRoleJoinerRebuildsErrorBuffersToProveACompressedFault(t *testing.T) {
	for _, tc := range []struct {
		name         string
		join, faulty uint64
		replay       int
		lateRound0   bool
	}{
		{"join at 2", 2, 3, 0, false},
		{"join at 3, two rounds replayed per check", 3, 4, 2, false},
		{"join at 2, round 0 held late", 2, 3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32}
			c := newFakeChain(t, spec, 2, tc.faulty+1)
			dropouts := map[uint64][]int{tc.faulty: {0}}
			for q := range tc.join {
				c.expect[q] = []uint32{0}
				dropouts[q] = []int{1}
			}
			cheater, joiner := c.newWorker(t, 100, 0), c.newWorker(t, 101, 1)
			cheater.role.opts.CheatPseudoGradient, cheater.role.opts.cheatPseudoGradientFrom = true, tc.faulty
			if tc.replay > 0 {
				joiner.role.opts.errorBufferReplay = tc.replay
			}
			var logs bytes.Buffer // read once the joiner's Serve returned
			joiner.role.log = slog.New(slog.NewTextHandler(&logs, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if tc.lateRound0 {
				c.late = map[uint64]uint64{100: 0}
				joiner.role.opts.CheckWait = 300 * time.Millisecond
				// Round join+1 closes once the joiner committed it, after its check of
				// round join: its check of round join+1 may fetch them.
				c.holdLateWhen(ctx, func() bool {
					rd := c.rounds[tc.join+1]
					return rd != nil && rd.State != markettypes.ROUND_STATE_OPEN
				})
			}
			stopCheater := serveInBackground(ctx, cheater)
			if err := c.await(ctx, func() bool { return c.job.Round == tc.join }); err != nil {
				t.Fatalf("round %d never opened: %v", tc.join, err)
			}
			requireServed(t, ctx, []*worker{joiner})
			stopCheater()

			c.mu.Lock()
			defer c.mu.Unlock()
			if !slices.Equal(c.convicted, []string{"provider-0"}) || len(c.proofs) != 1 {
				t.Fatalf("convicted %v with %d proofs, want provider-0 with one", c.convicted, len(c.proofs))
			}
			if p := c.proofs[0]; p.Round != tc.faulty || p.Worker != 0 || p.Prover != "provider-1" || p.ErrorIn == nil {
				t.Fatalf("proof of round %d worker %d by %s (error_in opened: %v), want a record of round %d worker 0 by provider-1",
					p.Round, p.Worker, p.Prover, p.ErrorIn != nil, tc.faulty)
			}
			c.requireSimulated(t, spec, tc.faulty+1, dropouts)
			unchecked := strings.Contains(logs.String(), "rebuilt up to its round 1 of 2")
			if unchecked != (tc.replay > 0) {
				t.Fatalf("the joiner's round-%d check stopped its replay at round 1: %v, want %v; its logs:\n%s", tc.join, unchecked, tc.replay > 0, logs.String())
			}
			failed := strings.Contains(logs.String(), "the end state of its round 0")
			if failed != tc.lateRound0 {
				t.Fatalf("the joiner's replay failed to fetch slot 0's round-0 end state: %v, want %v; its logs:\n%s", failed, tc.lateRound0, logs.String())
			}
			j, err := joiner.role.jobOf(joiner.lease)
			if err != nil {
				t.Fatal(err)
			}
			buffers, _ := filepath.Glob(filepath.Join(j.Dir, "checked-errbuf-w0-*"))
			ends, _ := filepath.Glob(filepath.Join(j.Dir, "end-*-0"))
			if len(buffers) > 2 || len(ends) > 2 {
				t.Fatalf("the joiner keeps %v and %v of slot 0, want two of each at most", buffers, ends)
			}
		})
	}
}

// A checker that could not fetch a worker's round-1 end state in time (its checkpoint's
// custody pieces are held only once round 2 opens) aggregates round 1 unchecked; in round
// 2 it replays the worker's round 1 from the error buffer it kept of its round 0, and
// proves the record the worker fabricates in round 2; nobody else is accused.
func TestRoleReplaysARoundItCouldNotCheckToProveACompressedFault(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32}
	c := newFakeChain(t, spec, 2, 3)
	c.late = map[uint64]uint64{101: 1}
	// The checker is slot 0, the first aggregator: round 2 opens once it gave up on
	// checking round 1.
	checker, cheater := c.newWorker(t, 100, 0), c.newWorker(t, 101, 1)
	checker.role.opts.CheckWait = 300 * time.Millisecond
	cheater.role.opts.CheatPseudoGradient, cheater.role.opts.cheatPseudoGradientFrom = true, 2
	var logs bytes.Buffer // read once the checker's Serve returned
	checker.role.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.holdLateWhen(ctx, func() bool { return c.job.Round == 2 })
	stopCheater := serveInBackground(ctx, cheater)
	requireServed(t, ctx, []*worker{checker})
	stopCheater()

	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.convicted, []string{"provider-1"}) || len(c.proofs) != 1 {
		t.Fatalf("convicted %v with %d proofs, want provider-1 with one", c.convicted, len(c.proofs))
	}
	if p := c.proofs[0]; p.Round != 2 || p.Worker != 1 || p.Prover != "provider-0" || p.ErrorIn == nil {
		t.Fatalf("proof of round %d worker %d by %s (error_in opened: %v), want a record of round 2 worker 1 by provider-0", p.Round, p.Worker, p.Prover, p.ErrorIn != nil)
	}
	c.requireSimulated(t, spec, 3, map[uint64][]int{2: {1}})
	if !strings.Contains(logs.String(), `msg="cannot check a worker's round commitment: aggregating with it" job=7 round=1 worker=1`) {
		t.Fatalf("the checker checked round 1 after all, its logs:\n%s", logs.String())
	}
}

// A worker that starts round 1 from G_1 without its carry (zero Adam moments, as a
// joiner's start, though it entered round 0) is caught: its start root is not G_1's
// WorkerStart of its round-0 end state, the others rebuild the start it used and prove
// its first wrong moments chunk (MsgProveRoundFault, START); it is excluded from round 1
// and the job ends at Simulate's globals with slot 2 out of round 1.
func TestRoleProvesAWrongStart(t *testing.T) {
	testWorkerFaultProven(t, denseSpec, func(o *Options) { o.cheatStart = true }, verifytypes.ROUND_FAULT_START, 1,
		map[uint64][]int{1: {2}})
}

var denseSpec = diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}

// testWorkerFaultProven runs three workers of spec for two rounds, slot 2 cheating as
// cheat says, and checks that one honest worker's proof of kind in round faulty convicted
// it and that the committed globals are Simulate's with dropouts. It returns the proof.
func testWorkerFaultProven(t *testing.T, spec diloco.SyncSpec, cheat func(*Options), kind verifytypes.RoundFault, faulty uint64, dropouts map[uint64][]int) *verifytypes.MsgProveRoundFault {
	c := newFakeChain(t, spec, 3, 2)
	c.expect[faulty+1] = []uint32{0, 1} // the convicted slot's lease is closed
	ws, p := c.serveWithSlot2Cheating(t, cheat)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Kind != kind || p.Round != faulty || p.Worker != 2 || (p.Prover != "provider-0" && p.Prover != "provider-1") {
		t.Fatalf("proof: %s of round %d worker %d by %s, want %s of round %d worker 2 by an honest worker", p.Kind, p.Round, p.Worker, p.Prover, kind, faulty)
	}
	want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: spec, Seed: testSeed, Workers: 3, Rounds: 2, Dropouts: dropouts})
	if err != nil {
		t.Fatal(err)
	}
	for r := uint64(0); r < 2; r++ {
		rd := c.rounds[r]
		if next := want[r+1].Root(); !slices.Equal(rd.NextGlobalRoot, next[:]) {
			t.Fatalf("round %d: committed global %x, Simulate's %s", r, rd.NextGlobalRoot, next)
		}
		entered := []uint32{0, 1, 2}
		if slices.Contains(dropouts[r], 2) {
			entered = entered[:2]
		}
		if !slices.Equal(rd.Entered, entered) {
			t.Fatalf("round %d entered %v, want %v", r, rd.Entered, entered)
		}
	}
	if i := slices.IndexFunc(c.commits[faulty], func(cm markettypes.RoundCommit) bool { return cm.Worker == 2 }); i < 0 || !c.commits[faulty][i].Excluded {
		t.Fatalf("slot 2's commit of round %d is not excluded", faulty)
	}
	for _, w := range ws[:2] {
		if st := w.role.Status()[0]; st.Phase != PhaseDone || w.metrics.count() != 0 {
			t.Fatalf("worker %d's status: %+v, %d mismatches counted", w.lease.Worker, st, w.metrics.count())
		}
	}
	return p
}

// serveWithSlot2Cheating runs three workers on c (their Serve, and Run, which answers file
// queries), slot 2 cheating as cheat says, until the honest slots 0 and 1 are done; it
// fails unless slot 2, and only it, was convicted with one proof, which it returns.
func (c *fakeChain) serveWithSlot2Cheating(t *testing.T, cheat func(*Options)) ([]*worker, *verifytypes.MsgProveRoundFault) {
	t.Helper()
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	cheat(&ws[2].role.opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, w := range ws {
		runInBackground(t, ctx, w)
	}
	stopCheater := serveInBackground(ctx, ws[2])
	requireServed(t, ctx, ws[:2])
	stopCheater()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.convicted, []string{"provider-2"}) || len(c.proofs) != 1 {
		t.Fatalf("convicted %v with %d proofs, want provider-2 with one", c.convicted, len(c.proofs))
	}
	return ws, c.proofs[0]
}

// Round 1 opens on G_1 and every slot trains, commits and checkpoints it; then slot 2's
// round-0 checkpoint is convicted in a game (as x/verify's convict does: its commit is
// excluded, G_1 voided, round 1 deleted with its commits, its lease ends). The honest
// slots notice their round 1 is gone, aggregate round 0 again without slot 2, train round
// 1 again from the new G_1 with the carry they had, and commit and checkpoint it again
// (their next checkpoint, from step every): the job ends at diloco.Simulate's globals
// with slot 2 out of both rounds.
func TestRoleRedoesARoundWhoseStartGlobalWasVoided(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	c := newFakeChain(t, spec, 3, 2)
	c.holdGlobal = map[uint64]bool{1: true}
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	convictedCtx, stopConvicted := context.WithCancel(ctx)
	convictedDone := make(chan struct{})
	go func() {
		defer close(convictedDone)
		_ = ws[2].role.Serve(convictedCtx, ws[2].lease) // its lease ends with the conviction
	}()
	go func() {
		for ctx.Err() == nil {
			c.mu.Lock()
			if rd := c.rounds[1]; rd != nil && rd.State == markettypes.ROUND_STATE_AGGREGATING {
				c.convictSlot2InRound0()
				c.mu.Unlock()
				stopConvicted()
				return
			}
			c.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	requireServed(t, ctx, ws[:2])
	<-convictedDone

	c.mu.Lock()
	defer c.mu.Unlock()
	c.requireSimulated(t, spec, 2, map[uint64][]int{0: {2}, 1: {2}})
	for _, w := range ws[:2] {
		cps := c.checkpoints[w.lease.ID]
		if len(cps) != 3 || cps[1].StartStep != 2 || cps[2].StartStep != 2 || slices.Equal(cps[1].FinalHash, cps[2].FinalHash) {
			t.Fatalf("worker %d's checkpoints: %+v, want rounds 0, 1 and round 1 redone from the new G_1", w.lease.Worker, cps)
		}
		if st := w.role.Status()[0]; st.Phase != PhaseDone || st.Round != 1 {
			t.Fatalf("worker %d's status: %+v", w.lease.Worker, st)
		}
	}
}

// A worker still training round 1 when its start global G_1 is voided (slot 2 convicted
// in round 0) and round 1 opens again on the re-aggregated G_1: its commit from the old
// G_1 is refused (x/market checks global_root), and it trains round 1 again, with the
// same carry, from the new one. Slot 1 is held in its first round-1 step until the round
// has reopened; the job ends at Simulate's globals with slot 2 out, and slot 1 has one
// round-1 checkpoint, from the new G_1.
func TestRoleTrainsAgainARoundReopenedWhileItTrained(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	c := newFakeChain(t, spec, 3, 2)
	c.holdGlobal = map[uint64]bool{1: true}
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held := make(chan []byte, 1) // the G_1 slot 1 trains round 1 from, once it is held
	var once sync.Once
	ws[1].lease.OnStep = func(m trainer.StepMetric) {
		if m.Step <= uint64(spec.Every) { // round 1 starts at step Every
			return
		}
		once.Do(func() {
			c.mu.Lock()
			old := slices.Clone(c.rounds[1].GlobalRoot)
			c.mu.Unlock()
			held <- old
			for ctx.Err() == nil {
				c.mu.Lock()
				rd := c.rounds[1]
				reopened := rd != nil && !slices.Equal(rd.GlobalRoot, old)
				c.mu.Unlock()
				if reopened {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	convictedCtx, stopConvicted := context.WithCancel(ctx)
	convictedDone := make(chan struct{})
	go func() {
		defer close(convictedDone)
		_ = ws[2].role.Serve(convictedCtx, ws[2].lease) // its lease ends with the conviction
	}()
	go func() {
		select {
		case <-held:
		case <-ctx.Done():
			return
		}
		c.mu.Lock()
		c.convictSlot2InRound0()
		c.mu.Unlock()
		stopConvicted()
	}()
	requireServed(t, ctx, ws[:2])
	<-convictedDone

	c.mu.Lock()
	defer c.mu.Unlock()
	c.requireSimulated(t, spec, 2, map[uint64][]int{0: {2}, 1: {2}})
	if cps := c.checkpoints[ws[1].lease.ID]; len(cps) != 2 || cps[1].StartStep != 2 {
		t.Fatalf("slot 1's checkpoints: %+v, want rounds 0 and 1 (from the new G_1 only)", cps)
	}
	for _, w := range ws[:2] {
		if st := w.role.Status()[0]; st.Phase != PhaseDone || st.Round != 1 {
			t.Fatalf("worker %d's status: %+v", w.lease.Worker, st)
		}
	}
}

// A worker excluded from a round by someone else (a verifier's game) while the others
// wait for its round-end checkpoint in custody, which nobody holds (a convicted worker's
// custody is released): they stop waiting at once instead of after CheckWait, aggregate
// the round without it, and the job ends at Simulate's globals with its slot out.
func TestRoleStopsWaitingForTheFilesOfAWorkerExcludedMeanwhile(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	c := newFakeChain(t, spec, 3, 2)
	c.unheld = map[uint64]bool{102: true}
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	// Well below CheckWait (2m): the others must not wait it out.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	excludedCtx, stopExcluded := context.WithCancel(ctx)
	excludedDone := make(chan struct{})
	go func() {
		defer close(excludedDone)
		_ = ws[2].role.Serve(excludedCtx, ws[2].lease)
	}()
	go func() {
		for ctx.Err() == nil {
			c.mu.Lock()
			if rd := c.rounds[0]; rd.State == markettypes.ROUND_STATE_AGGREGATING {
				c.mu.Unlock()
				time.Sleep(300 * time.Millisecond) // the others are waiting for slot 2's files
				c.mu.Lock()
				i := slices.IndexFunc(c.commits[0], func(cm markettypes.RoundCommit) bool { return cm.Worker == 2 })
				c.commits[0][i].Excluded = true
				rd.Entered = []uint32{0, 1}
				c.expect[1] = []uint32{0, 1}
				c.mu.Unlock()
				stopExcluded()
				return
			}
			c.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	requireServed(t, ctx, ws[:2])
	<-excludedDone

	c.mu.Lock()
	defer c.mu.Unlock()
	c.requireSimulated(t, spec, 2, map[uint64][]int{0: {2}, 1: {2}})
}

// The same conviction as TestRoleRedoesARoundWhoseStartGlobalWasVoided, but round 0 is
// aggregated anew and round 1 opened again before the honest workers look: round 1 is
// open and holds none of their commits. They take it for deleted, go back to round 0
// (whose new global is theirs), and redo round 1 from it with their round-0 carry.
func TestRoleRedoesARoundDeletedAndOpenedAgainBeforeItLooked(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}
	c := newFakeChain(t, spec, 3, 2)
	c.holdGlobal = map[uint64]bool{1: true}
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: spec, Seed: testSeed, Workers: 3, Rounds: 2, Dropouts: map[uint64][]int{0: {2}, 1: {2}}})
	if err != nil {
		t.Fatal(err)
	}
	g1Dir := t.TempDir()
	g1Path := filepath.Join(g1Dir, "global-1")
	if err := os.WriteFile(g1Path, want[1].Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	g1Custody := filepath.Join(g1Dir, "custody")
	g1Pieces, err := WritePieces(g1Custody, markettypes.GlobalCustodyID(c.job.Id, 1), g1Path, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	g1Root := want[1].Root()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	convictedCtx, stopConvicted := context.WithCancel(ctx)
	convictedDone := make(chan struct{})
	go func() {
		defer close(convictedDone)
		_ = ws[2].role.Serve(convictedCtx, ws[2].lease)
	}()
	go func() {
		for ctx.Err() == nil {
			c.mu.Lock()
			if rd := c.rounds[1]; rd != nil && rd.State == markettypes.ROUND_STATE_AGGREGATING {
				i := slices.IndexFunc(c.commits[0], func(cm markettypes.RoundCommit) bool { return cm.Worker == 2 })
				c.commits[0][i].Excluded = true
				c.convicted = append(c.convicted, "provider-2")
				rd0 := c.rounds[0]
				rd0.Entered = []uint32{0, 1}
				c.voidGlobal(rd0)
				// Aggregated again at once, round 1 open again.
				rd0.State, rd0.NextGlobalRoot, rd0.NextGlobalSize, rd0.Aggregator = markettypes.ROUND_STATE_CHALLENGE, g1Root[:], g1Pieces.Size, "provider-0"
				c.net.register(g1Custody, g1Pieces)
				c.open(1, g1Root[:])
				c.expect[1] = []uint32{0, 1}
				delete(c.holdGlobal, 1)
				c.mu.Unlock()
				stopConvicted()
				return
			}
			c.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	requireServed(t, ctx, ws[:2])
	<-convictedDone

	c.mu.Lock()
	defer c.mu.Unlock()
	for r := uint64(0); r < 2; r++ {
		if next := want[r+1].Root(); !slices.Equal(c.rounds[r].NextGlobalRoot, next[:]) {
			t.Fatalf("round %d: committed global %x, Simulate's %s", r, c.rounds[r].NextGlobalRoot, next)
		}
	}
}

// A worker sidecar killed right after its commit of round 0 went on chain (before the
// round closed, so before it recorded round 0 as its carry) and started again once round
// 1 is open trains round 1 with the carry the chain says it has: its round-0 end state
// (Adam's moments run on), not a fresh start a checker would prove wrong. Dense and top_k
// (whose error buffer the carry also selects).
func TestRoleRestartedAfterItsCommitKeepsItsCarry(t *testing.T) {
	for _, topK := range []int{0, 32} {
		t.Run("top_k="+strconv.Itoa(topK), func(t *testing.T) { testRoleRestartedAfterItsCommit(t, topK) })
	}
}

func testRoleRestartedAfterItsCommit(t *testing.T, topK int) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK}
	c := newFakeChain(t, spec, 3, 2)
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	killCtx, kill := context.WithCancel(ctx)
	restarted := ws[2]
	submit := restarted.lease.SubmitCheckpoint
	restarted.lease.SubmitCheckpoint = func(ctx context.Context, cp trainer.Checkpoint, commit sdk.Msg) error {
		err := submit(ctx, cp, commit)
		if commit.(*markettypes.MsgCommitRound).Round == 0 {
			kill() // the process dies as its commit lands
		}
		return err
	}
	killed := make(chan error, 1)
	go func() { killed <- restarted.role.Serve(killCtx, restarted.lease) }()
	others := make(chan []error, 1)
	go func() { others <- serveAll(t, ctx, ws[:2]) }()
	if err := <-killed; !errors.Is(err, context.Canceled) {
		t.Fatalf("the killed sidecar's Serve: %v, want it cancelled", err)
	}
	if err := c.await(ctx, func() bool { rd := c.rounds[1]; return rd != nil && rd.State == markettypes.ROUND_STATE_OPEN }); err != nil {
		t.Fatal(err)
	}
	role, err := New(restarted.role.opts)
	if err != nil {
		t.Fatal(err)
	}
	restarted.role = role
	if err := role.Serve(ctx, restarted.lease); err != nil {
		t.Fatalf("the restarted sidecar: %v", err)
	}
	for i, err := range <-others {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.proofs {
		t.Errorf("the restarted honest worker was accused: %s of worker %d in round %d", p.Kind, p.Worker, p.Round)
	}
	if len(c.convicted) != 0 {
		t.Fatalf("convicted %v", c.convicted)
	}
	c.requireSimulated(t, spec, 2, nil)
}
