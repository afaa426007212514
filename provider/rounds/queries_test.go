package rounds

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cosmos/gogoproto/proto"
	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// The fake chain's file queries: x/verify's moves as the roles see them (the keeper's
// own tests check the refusals and the deadlines).

func (c *fakeChain) FileQuery(_ context.Context, in *verifytypes.QueryFileQueryRequest, _ ...grpc.CallOption) (*verifytypes.QueryFileQueryResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.queries[in.QueryId]
	if !ok {
		return nil, fmt.Errorf("file query %d not found", in.QueryId)
	}
	return &verifytypes.QueryFileQueryResponse{FileQuery: *q}, nil
}

func refused(why string, args ...any) error {
	return &chain.TxError{Result: &chain.TxResult{Code: 1, Log: fmt.Sprintf(why, args...)}}
}

func (c *fakeChain) openFileQuery(m *verifytypes.MsgOpenFileQuery) (*chain.TxResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.commits[m.Round], func(cm markettypes.RoundCommit) bool { return cm.Worker == m.Worker })
	if i < 0 || c.commits[m.Round][i].Excluded {
		return nil, refused("no commit of worker %d in round %d to query", m.Worker, m.Round)
	}
	commit := c.commits[m.Round][i]
	if commit.Provider == m.Challenger {
		return nil, refused("self query")
	}
	for _, q := range c.queries {
		if q.JobId == m.JobId && q.Round == m.Round && q.Worker == m.Worker && q.File == m.File && q.Challenger == m.Challenger {
			return nil, refused("file query %d is open on it", q.Id)
		}
	}
	l := diloco.NewLayout(tinyConfig())
	root, size := commit.StartRoot, l.StateChunks()
	if m.File == verifytypes.ROUND_FILE_ERROR_OUT {
		pgRoot, _ := merkle.HashFromBytes(commit.PseudoGradientRoot)
		files := l.CompressedFileChunks(int(c.job.Spec.Sync.TopK))
		if m.Header == nil || m.Header.Index != 0 || merkle.VerifyInclusion(pgRoot, 0, files, merkle.LeafHash(m.Header.Data), rootsOf(m.Header.Proof)) != nil {
			return nil, refused("header does not open")
		}
		_, out, err := diloco.CompressedErrorRoots(m.Header.Data)
		if err != nil {
			return nil, refused("%v", err)
		}
		root, size = out[:], uint64(l.Chunks)
	}
	q := &verifytypes.FileQuery{Id: uint64(len(c.queryLog) + 1), Challenger: m.Challenger, JobId: m.JobId, Round: m.Round, Worker: m.Worker, File: m.File,
		LeaseId: commit.LeaseId, Provider: commit.Provider, Root: root, Size_: size, Lo: 0, Hi: size, Node: root,
		Turn: verifytypes.FILE_QUERY_TURN_WORKER, Deadline: 1}
	c.queries[q.Id] = q
	c.queryLog = append(c.queryLog, *q)
	ev := &verifytypes.EventFileQueryOpened{QueryId: q.Id, JobId: q.JobId, Round: q.Round, Worker: q.Worker, File: q.File, Challenger: q.Challenger, Provider: q.Provider}
	c.emitLocked(ev)
	typed, err := sdk.TypedEventToEvent(ev)
	if err != nil {
		return nil, err
	}
	return &chain.TxResult{Events: []abci.Event{abci.Event(typed)}}, nil
}

func (c *fakeChain) answerFileQuery(m *verifytypes.MsgAnswerFileQuery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.queries[m.QueryId]
	if !ok || q.Turn != verifytypes.FILE_QUERY_TURN_WORKER || m.Sender != q.Provider {
		return refused("not the worker's turn in file query %d", m.QueryId)
	}
	if q.Hi-q.Lo == 1 {
		if leaf := merkle.LeafHash(m.Chunk); !bytes.Equal(leaf[:], q.Node) {
			return refused("chunk is not the node")
		}
		q.Chunk, q.Turn = m.Chunk, verifytypes.FILE_QUERY_TURN_PROVE
	} else {
		left, err1 := merkle.HashFromBytes(m.Left)
		right, err2 := merkle.HashFromBytes(m.Right)
		if node := merkle.NodeHash(left, right); err1 != nil || err2 != nil || !bytes.Equal(node[:], q.Node) {
			return refused("children do not hash to the node")
		}
		q.Left, q.Right, q.Turn = m.Left, m.Right, verifytypes.FILE_QUERY_TURN_CHALLENGER
	}
	q.Deadline++
	return nil
}

// answerFileQueries takes a transaction of answers: all of them, or (the first refused)
// none.
func (c *fakeChain) answerFileQueries(msgs []sdk.Msg) error {
	c.mu.Lock()
	for _, m := range msgs {
		a, ok := m.(*verifytypes.MsgAnswerFileQuery)
		if q := c.queries[a.GetQueryId()]; !ok || q == nil || q.Turn != verifytypes.FILE_QUERY_TURN_WORKER || q.Provider != a.Sender {
			c.mu.Unlock()
			return refused("a transaction of several messages takes only answers due")
		}
	}
	c.answeredBatches++
	c.mu.Unlock()
	for _, m := range msgs {
		if err := c.answerFileQuery(m.(*verifytypes.MsgAnswerFileQuery)); err != nil {
			return err
		}
	}
	return nil
}

func (c *fakeChain) descendFileQuery(m *verifytypes.MsgDescendFileQuery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.queries[m.QueryId]
	if !ok || q.Turn != verifytypes.FILE_QUERY_TURN_CHALLENGER || m.Challenger != q.Challenger {
		return refused("not the challenger's turn in file query %d", m.QueryId)
	}
	split := q.Lo + merkle.SplitPoint(q.Hi-q.Lo)
	sibling := q.Right
	if m.Right {
		q.Lo, q.Node, sibling = split, q.Right, q.Left
	} else {
		q.Hi, q.Node = split, q.Left
	}
	q.Path = append([][]byte{sibling}, q.Path...)
	q.Left, q.Right, q.Turn = nil, nil, verifytypes.FILE_QUERY_TURN_WORKER
	q.Deadline++
	c.emitLocked(&verifytypes.EventFileQueryDescended{QueryId: q.Id, Right: m.Right, Lo: q.Lo, Hi: q.Hi, Node: q.Node})
	return nil
}

// endQueriesOn ends the queries on a commit that was just convicted. The caller holds c.mu.
func (c *fakeChain) endQueriesOn(commit markettypes.RoundCommit) {
	for id, q := range c.queries {
		if q.JobId == commit.JobId && q.Round == commit.Round && q.Worker == commit.Worker {
			delete(c.queries, id)
			c.emitLocked(&verifytypes.EventFileQueryEnded{QueryId: id, Outcome: verifytypes.FILE_QUERY_OUTCOME_VOID})
		}
	}
}

// emitLocked hands ev to every listening role's HandleEvent, as the sidecar's event
// follower does, once the caller's block is done. The caller holds c.mu.
func (c *fakeChain) emitLocked(ev proto.Message) {
	roles := slices.Clone(c.listeners)
	go func() {
		for _, r := range roles {
			if after, err := r.HandleEvent(context.Background(), nil, chain.Event{Message: ev}); err == nil && after != nil {
				after()
			}
		}
	}()
}

// runInBackground runs w's Run (its file query answers) until the test ends.
func runInBackground(t *testing.T, ctx context.Context, w *worker) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.role.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// A worker that starts round 2 from its round-0 end state instead of its round-1 carry
// commits a start no checker can rebuild (neither WorkerStart of its carry nor of none):
// an honest checker opens a file query on its start state, descends to a chunk whose
// hash is not its own tree's, and proves the chunk the worker revealed wrong (START). The
// cheater answers every move (it only lied in what it trained from).
func TestRoleQueriesAStartItCannotRebuild(t *testing.T) {
	p := testWorkerFaultQueried(t, denseSpec, func(o *Options) { o.cheatStaleCarry = true }, verifytypes.ROUND_FILE_START, 2)
	if p.Kind != verifytypes.ROUND_FAULT_START || len(p.Claimed) != 1 {
		t.Fatalf("proof: %s with %d claimed chunks, want START with the revealed one", p.Kind, len(p.Claimed))
	}
}

// A top-k worker whose header names an error_out buffer with one element off (its
// records honest): a checker rebuilds the buffer, finds another root, queries the
// worker's error_out and proves the revealed chunk is not what its record leaves.
func TestRoleQueriesAWrongErrorOut(t *testing.T) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32}
	p := testWorkerFaultQueried(t, spec, func(o *Options) { o.CheatErrorOut = true }, verifytypes.ROUND_FILE_ERROR_OUT, 0)
	if p.Kind != verifytypes.ROUND_FAULT_PSEUDO_GRADIENT || p.ErrorOut == nil || p.Chunk != 0 {
		t.Fatalf("proof: %s of chunk %d (error_out opened: %t), want PSEUDO_GRADIENT of chunk 0 with the revealed error_out chunk", p.Kind, p.Chunk, p.ErrorOut != nil)
	}
}

// testWorkerFaultQueried runs three workers of spec for three rounds, slot 2 cheating as
// cheat says, and checks that in round faulty an honest worker queried slot 2's file and
// convicted it with the revealed chunk, and that the job still ends at Simulate's globals.
func testWorkerFaultQueried(t *testing.T, spec diloco.SyncSpec, cheat func(*Options), file verifytypes.RoundFile, faulty uint64) *verifytypes.MsgProveRoundFault {
	const rounds = 3
	c := newFakeChain(t, spec, 3, rounds)
	for r := faulty + 1; r < rounds; r++ {
		c.expect[r] = []uint32{0, 1} // the convicted slot's lease is closed
	}
	_, p := c.serveWithSlot2Cheating(t, cheat)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Round != faulty || p.Worker != 2 || (p.Prover != "provider-0" && p.Prover != "provider-1") {
		t.Fatalf("proof of round %d worker %d by %s, want round %d worker 2 by an honest worker", p.Round, p.Worker, p.Prover, faulty)
	}
	queried := slices.IndexFunc(c.queryLog, func(q verifytypes.FileQuery) bool {
		return q.Round == faulty && q.Worker == 2 && q.File == file && q.Challenger == p.Prover
	})
	if queried < 0 {
		t.Fatalf("file queries %v: none by the prover on slot 2's %s of round %d", c.queryLog, file, faulty)
	}
	dropouts := map[uint64][]int{}
	for r := faulty; r < rounds; r++ {
		dropouts[r] = []int{2}
	}
	c.requireSimulated(t, spec, rounds, dropouts)
	return p
}

// An honest worker answers two file queries on its start state at once (griefers': the
// descents always go right) move by move down to a chunk, which with the collected path
// opens against its committed start root — and is the chunk a checker rebuilds, so no
// proof can be built from it.
func TestRoleAnswersAFileQueryToTheLeaf(t *testing.T) {
	c := newFakeChain(t, denseSpec, 2, 2)
	ws := []*worker{c.newWorker(t, 100, 0), c.newWorker(t, 101, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	requireServed(t, ctx, ws)

	var ids []uint64
	for _, griefer := range []string{"griefer-1", "griefer-2"} {
		res, err := c.openFileQuery(&verifytypes.MsgOpenFileQuery{Challenger: griefer, JobId: c.job.Id, Round: 1, Worker: 1, File: verifytypes.ROUND_FILE_START})
		if err != nil {
			t.Fatal(err)
		}
		opened, ok := chain.FindEvent[*verifytypes.EventFileQueryOpened](res.Events)
		if !ok {
			t.Fatal("no EventFileQueryOpened in the open's result")
		}
		ids = append(ids, opened.QueryId)
	}
	// Both queries are asked about before the worker's Run starts: its first answers go
	// out in one transaction.
	if err := c.await(ctx, func() bool {
		a := ws[1].role.answers
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.pending) == 2
	}); err != nil {
		t.Fatal(err)
	}
	runInBackground(t, ctx, ws[1])
	var q verifytypes.FileQuery
	for moves := 0; ; moves++ {
		var qs []verifytypes.FileQuery
		if err := c.await(ctx, func() bool {
			qs = nil
			for _, id := range ids {
				if c.queries[id].Turn == verifytypes.FILE_QUERY_TURN_WORKER {
					return false
				}
				qs = append(qs, *c.queries[id])
			}
			return true
		}); err != nil {
			t.Fatalf("the worker did not answer move %d of both queries: %v", moves, err)
		}
		if q = qs[0]; q.Turn == verifytypes.FILE_QUERY_TURN_PROVE {
			if qs[1].Turn != verifytypes.FILE_QUERY_TURN_PROVE || !bytes.Equal(qs[1].Chunk, q.Chunk) {
				t.Fatalf("the two queries ended apart: %+v", qs)
			}
			break
		}
		for _, q := range qs {
			if err := c.descendFileQuery(&verifytypes.MsgDescendFileQuery{Challenger: q.Challenger, QueryId: q.Id, Right: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	l := diloco.NewLayout(tinyConfig())
	c.mu.Lock()
	batches := c.answeredBatches
	c.mu.Unlock()
	if batches == 0 {
		t.Fatal("the worker never answered the two queries' moves in one transaction")
	}
	if q.Lo != l.StateChunks()-1 {
		t.Fatalf("the descent ended at chunk %d, want the last, %d", q.Lo, l.StateChunks()-1)
	}
	root, err := merkle.HashFromBytes(q.Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := merkle.VerifyInclusion(root, q.Lo, q.Size_, merkle.LeafHash(q.Chunk), rootsOf(q.Path)); err != nil {
		t.Fatalf("the revealed chunk does not open against the start root: %v", err)
	}
	j, err := ws[0].role.jobOf(ws[0].lease)
	if err != nil {
		t.Fatal(err)
	}
	g, err := j.Global(1)
	if err != nil {
		t.Fatal(err)
	}
	end, err := ws[0].role.endState(ctx, j, c.commits[0][slices.IndexFunc(c.commits[0], func(cm markettypes.RoundCommit) bool { return cm.Worker == 1 })])
	if err != nil {
		t.Fatal(err)
	}
	msg, err := dispute.StartChunkFault("griefer", c.job.Id, 1, 1, l, j.Sync, g.Encode(), end, verifytypes.FileChunk{Index: q.Lo, Data: q.Chunk, Proof: q.Path})
	if err != nil || msg != nil {
		t.Fatalf("a proof from an honest worker's revealed chunk: %v, %v", msg, err)
	}
}
