package keeper_test

import (
	"fmt"
	"testing"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/testutil/keepers"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// fileQuery drives one file query of a roundScenario: the worker answers from the file
// it committed (worker), the challenger descends by comparing with the file it computed
// itself (truth), towards the leftmost chunk where they differ, or towards target where
// they do not.
type fileQuery struct {
	s          *roundScenario
	id         uint64
	challenger sdk.AccAddress
	worker     []byte
	truth      []merkle.Hash
	target     uint64
}

// openQuery opens a query on worker w's round-r file and returns its driver.
func (s *roundScenario) openQuery(challenger sdk.AccAddress, r uint64, w uint32, file types.RoundFile, header *types.FileChunk, worker, truth []byte, target uint64) *fileQuery {
	s.t.Helper()
	res, err := s.msg.OpenFileQuery(s.Ctx, s.openMsg(challenger, r, w, file, header))
	require.NoError(s.t, err)
	return &fileQuery{s: s, id: res.QueryId, challenger: challenger, worker: worker, truth: merkle.LeafHashesOfBytes(truth, diloco.ChunkSize), target: target}
}

func (s *roundScenario) openMsg(challenger sdk.AccAddress, r uint64, w uint32, file types.RoundFile, header *types.FileChunk) *types.MsgOpenFileQuery {
	return &types.MsgOpenFileQuery{Challenger: challenger.String(), JobId: s.job.Id, Round: r, Worker: w, File: file, Header: header}
}

func (q *fileQuery) state() types.FileQuery {
	q.s.t.Helper()
	fq, err := q.s.Verify.GetFileQuery(q.s.Ctx, q.id)
	require.NoError(q.s.t, err)
	return fq
}

// answerMsg is the worker's answer to the query as it stands: from its own file.
func (q *fileQuery) answerMsg() *types.MsgAnswerFileQuery {
	fq := q.state()
	msg := &types.MsgAnswerFileQuery{Sender: fq.Provider, QueryId: q.id}
	if fq.Hi-fq.Lo == 1 {
		msg.Chunk = q.worker[fq.Lo*diloco.ChunkSize : min(uint64(len(q.worker)), (fq.Lo+1)*diloco.ChunkSize)]
		return msg
	}
	leaves := merkle.LeafHashesOfBytes(q.worker, diloco.ChunkSize)
	mid := fq.Lo + merkle.SplitPoint(fq.Hi-fq.Lo)
	l, r := merkle.RootFromLeafHashes(leaves[fq.Lo:mid]), merkle.RootFromLeafHashes(leaves[mid:fq.Hi])
	msg.Left, msg.Right = l[:], r[:]
	return msg
}

// descendMsg is the challenger's choice: the left child when the worker's differs from
// its own, else the right one when that differs, else towards target.
func (q *fileQuery) descendMsg() *types.MsgDescendFileQuery {
	fq := q.state()
	mid := fq.Lo + merkle.SplitPoint(fq.Hi-fq.Lo)
	left, right := merkle.RootFromLeafHashes(q.truth[fq.Lo:mid]), merkle.RootFromLeafHashes(q.truth[mid:fq.Hi])
	goRight := q.target >= mid
	switch {
	case fq.Turn != types.FILE_QUERY_TURN_CHALLENGER:
		// No children to compare yet: a move out of turn, which tests send on purpose.
	case merkle.Hash(fq.Left) != left:
		goRight = false
	case merkle.Hash(fq.Right) != right:
		goRight = true
	}
	return &types.MsgDescendFileQuery{Challenger: q.challenger.String(), QueryId: q.id, Right: goRight}
}

func (q *fileQuery) answer() {
	q.s.t.Helper()
	_, err := q.s.msg.AnswerFileQuery(q.s.Ctx, q.answerMsg())
	require.NoError(q.s.t, err)
}

func (q *fileQuery) descend() {
	q.s.t.Helper()
	_, err := q.s.msg.DescendFileQuery(q.s.Ctx, q.descendMsg())
	require.NoError(q.s.t, err)
}

// play runs the descent to the end (the worker's chunk answer) and returns the opening
// the query now holds for the challenger's proof (turn PROVE), checked against
// merkle.VerifyInclusion and against the answer event.
func (q *fileQuery) play() types.FileChunk {
	q.s.t.Helper()
	fq := q.state()
	root, size := merkle.Hash(fq.Root), fq.Size_
	for q.state().Hi-q.state().Lo > 1 {
		q.answer()
		q.s.nextBlock()
		q.descend()
		q.s.nextBlock()
	}
	lo := q.state().Lo
	q.answer()
	held := q.state()
	require.Equal(q.s.t, types.FILE_QUERY_TURN_PROVE, held.Turn, "the revealed chunk waits for the challenger's proof")
	answers := typedEvents[*types.EventFileQueryAnswered](q.s.env)
	last := answers[len(answers)-1]
	require.Equal(q.s.t, q.id, last.QueryId)
	require.Equal(q.s.t, lo, last.Lo)
	require.Equal(q.s.t, lo+1, last.Hi)
	proof := make([]merkle.Hash, len(last.Proof))
	for i, h := range last.Proof {
		proof[i] = merkle.Hash(h)
	}
	require.NoError(q.s.t, merkle.VerifyInclusion(root, lo, size, merkle.LeafHash(last.Data), proof), "the answer event carries the chunk's inclusion proof")
	require.Equal(q.s.t, last.Data, held.Chunk)
	require.Equal(q.s.t, last.Proof, held.Path)
	require.Equal(q.s.t, held.Deadline, last.Deadline)
	return types.FileChunk{Index: lo, Data: held.Chunk, Proof: held.Path}
}

// An honest worker answers a query down to a chunk: a round fault proof built from the
// revealed opening (the very opening the challenger could build from the worker's file)
// is refused as consistent, and once the proof's deadline passes the deposit goes to the
// worker's provider; nobody is convicted.
func TestFileQueryHonestWorkerAnswers(t *testing.T) {
	s := newRoundScenario(t, 0)
	challenger := s.account("challenger")
	deposit := s.verifyParams().FileQueryDeposit.Amount
	target := s.layout.StateChunks() - 1 // the short last chunk
	chBalance, provBalance := s.Balance(challenger), s.Balance(s.provs[0])
	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], s.files["start/1/0"], target)
	require.Equal(t, chBalance.Sub(deposit), s.Balance(challenger))
	s.requireInvariants()
	opening := q.play()
	require.Equal(t, target, opening.Index)
	s.requireInvariants()

	proof := s.startProof(challenger, 1, 0, target)
	require.Equal(t, proof.Claimed, []types.FileChunk{opening})
	s.requireRefused(types.ErrRoundConsistent, "start state chunk", proof)
	require.Equal(t, types.FILE_QUERY_TURN_PROVE, q.state().Turn, "a refused proof leaves the query waiting")

	s.advanceTo(q.state().Deadline)
	s.nextBlock()
	_, err := s.Verify.GetFileQuery(s.Ctx, q.id)
	require.ErrorIs(t, err, types.ErrFileQueryNotFound)
	ended := typedEvents[*types.EventFileQueryEnded](s.env)
	require.Equal(t, types.FILE_QUERY_OUTCOME_ANSWERED, ended[len(ended)-1].Outcome)
	require.Equal(t, chBalance.Sub(deposit), s.Balance(challenger))
	require.Equal(t, provBalance.Add(deposit), s.Balance(s.provs[0]), "the worker's provider is paid for its answers")
	require.Empty(t, typedEvents[*types.EventRoundFaultProven](s.env))
	s.requireInvariants()
}

// A worker whose start state is wrong (it dropped its carried moments) is found out: the
// challenger descends where its own start state differs, the worker must reveal that
// chunk, and MsgProveRoundFault with the revealed opening convicts it.
func TestFileQueryWrongStartConvicted(t *testing.T) {
	s := newRoundScenario(t, 0)
	honest := s.files["start/1/0"]
	g, err := diloco.DecodeGlobal(s.files["g1"])
	require.NoError(t, err)
	s.replace("start/1/0", g.WorkerStart(nil).Encode())
	s.commit(1, 0)
	challenger := s.account("challenger")
	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], honest, 0)
	opening := q.play()
	first := leftmostDiff(honest, s.files["start/1/0"])
	require.Equal(t, first, opening.Index, "the descent ends at the first wrong chunk")

	proof := s.startProof(challenger, 1, 0, first)
	proof.Claimed = []types.FileChunk{opening}
	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(challenger)
	_, err = s.prove(proof)
	require.NoError(t, err)
	s.requireConvicted(challenger, s.provs[0], s.leases[0].Id, bond, balance.Add(s.verifyParams().FileQueryDeposit.Amount))
	require.True(t, s.store.commits[[3]uint64{s.job.Id, 1, 0}].Excluded)
	requireEndedVoid(t, s, q.id, challenger)
}

// requireEndedVoid checks that query id ended VOID with the conviction, its deposit paid
// back to the challenger (requireConvicted checked the balance).
func requireEndedVoid(t *testing.T, s *roundScenario, id uint64, challenger sdk.AccAddress) {
	t.Helper()
	_, err := s.Verify.GetFileQuery(s.Ctx, id)
	require.ErrorIs(t, err, types.ErrFileQueryNotFound, "the conviction ends the query")
	ended := typedEvents[*types.EventFileQueryEnded](s.env)
	require.Equal(t, id, ended[len(ended)-1].QueryId)
	require.Equal(t, types.FILE_QUERY_OUTCOME_VOID, ended[len(ended)-1].Outcome)
	require.Equal(t, challenger.String(), ended[len(ended)-1].PaidTo)
	require.Contains(t, ended[len(ended)-1].Reason, "the worker was convicted")
	require.Zero(t, s.fileQueryDeadlines())
}

func leftmostDiff(a, b []byte) uint64 {
	for i := uint64(0); ; i++ {
		lo, hi := i*diloco.ChunkSize, (i+1)*diloco.ChunkSize
		if string(a[lo:min(hi, uint64(len(a)))]) != string(b[lo:min(hi, uint64(len(b)))]) {
			return i
		}
	}
}

// A top-k worker whose error buffer (error_out) is wrong at one chunk is found out by an
// ERROR_OUT query opened with its header, and convicted by a pseudo-gradient proof whose
// error_out opening is the revealed one.
func TestFileQueryWrongErrorOutConvicted(t *testing.T) {
	s := newRoundScenario(t, 700)
	p, err := diloco.DecodeCompressed(s.files["pg/0/0"])
	require.NoError(t, err)
	honest := s.files["err/"+p.ErrOut.Hex()]
	k := s.layout.Chunks - 1
	wrong := append([]byte(nil), honest...)
	wrong[k*diloco.ChunkSize] ^= 1
	p.ErrOut = merkle.RootOfBytes(wrong, diloco.ChunkSize)
	s.files["err/"+p.ErrOut.Hex()] = wrong
	c, err := p.Compressed()
	require.NoError(t, err)
	s.replace("pg/0/0", c.Encode())
	s.commit(0, 0)
	challenger := s.account("challenger")
	q := s.openQuery(challenger, 0, 0, types.ROUND_FILE_ERROR_OUT, s.open1("pg/0/0", 0), wrong, honest, 0)
	require.Equal(t, p.ErrOut[:], q.state().Root)
	opening := q.play()
	require.Equal(t, uint64(k), opening.Index)

	proof := s.pgProof(challenger, 0, 0, k)
	require.Equal(t, *proof.ErrorOut, opening, "the revealed opening is the worker file's")
	proof.ErrorOut = &opening
	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(challenger)
	_, err = s.prove(proof)
	require.NoError(t, err)
	s.requireConvicted(challenger, s.provs[0], s.leases[0].Id, bond, balance.Add(s.verifyParams().FileQueryDeposit.Amount))
	require.Contains(t, s.store.commits[[3]uint64{s.job.Id, 0, 0}].ExcludedReason, fmt.Sprintf("error buffer chunk %d", k))
	requireEndedVoid(t, s, q.id, challenger)
}

// A worker that does not answer by its deadline is convicted by the end blocker as of a
// start fault, the challenger as prover: its deposit comes back with the reward.
func TestFileQueryWithheldAnswerConvicts(t *testing.T) {
	s := newRoundScenario(t, 0)
	challenger := s.account("challenger")
	before := s.Balance(challenger)
	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], s.files["start/1/0"], 0)
	q.answer()
	q.descend()
	deadline := q.state().Deadline
	bond := s.provider(s.provs[0]).Bond.Amount
	s.advanceTo(deadline)
	require.Equal(t, types.FILE_QUERY_TURN_WORKER, q.state().Turn, "still open at its deadline")
	s.nextBlock()

	_, err := s.Verify.GetFileQuery(s.Ctx, q.id)
	require.ErrorIs(t, err, types.ErrFileQueryNotFound)
	s.requireConvicted(challenger, s.provs[0], s.leases[0].Id, bond, before)
	fault := typedEvents[*types.EventRoundFaultProven](s.env)[0]
	require.Equal(t, types.ROUND_FAULT_START, fault.Kind)
	require.Contains(t, fault.Reason, "withheld chunks")
	require.Equal(t, challenger.String(), fault.Prover)
	ended := typedEvents[*types.EventFileQueryEnded](s.env)
	require.Len(t, ended, 1)
	require.Equal(t, types.FILE_QUERY_OUTCOME_WITHHELD, ended[0].Outcome)
	require.Equal(t, challenger.String(), ended[0].PaidTo)
	require.True(t, s.store.commits[[3]uint64{s.job.Id, 1, 0}].Excluded)
	require.Zero(t, s.fileQueryDeadlines())
}

// A challenger that does not descend abandons the query: the deposit goes to the worker.
func TestFileQueryAbandonedPaysTheWorker(t *testing.T) {
	s := newRoundScenario(t, 0)
	challenger := s.account("challenger")
	before, provBefore := s.Balance(challenger), s.Balance(s.provs[1])
	q := s.openQuery(challenger, 1, 1, types.ROUND_FILE_START, nil, s.files["start/1/1"], s.files["start/1/1"], 0)
	q.answer()
	queries := keeper.NewQueryServerImpl(s.Verify)
	res, err := queries.FileQuery(s.Ctx, &types.QueryFileQueryRequest{QueryId: q.id})
	require.NoError(t, err)
	require.Equal(t, q.state(), res.FileQuery)
	require.Len(t, res.FileQuery.Left, 32, "the query shows the worker's children while the challenger chooses")
	s.advanceTo(q.state().Deadline)
	s.nextBlock()
	_, err = queries.FileQuery(s.Ctx, &types.QueryFileQueryRequest{QueryId: q.id})
	require.Equal(t, codes.NotFound, status.Code(err), "an ended query is gone")
	deposit := s.verifyParams().FileQueryDeposit.Amount
	require.Equal(t, before.Sub(deposit), s.Balance(challenger))
	require.Equal(t, provBefore.Add(deposit), s.Balance(s.provs[1]))
	ended := typedEvents[*types.EventFileQueryEnded](s.env)
	require.Len(t, ended, 1)
	require.Equal(t, types.FILE_QUERY_OUTCOME_ABANDONED, ended[0].Outcome)
	require.Empty(t, typedEvents[*types.EventRoundFaultProven](s.env))
	require.False(t, s.store.commits[[3]uint64{s.job.Id, 1, 1}].Excluded)
	s.requireInvariants()
}

// A query whose commit is excluded meanwhile (another proof convicted the worker) ends
// void at its next move, the deposit back to the challenger.
func TestFileQueryVoidWhenTheCommitIsExcluded(t *testing.T) {
	s := newRoundScenario(t, 0)
	challenger := s.account("challenger")
	before := s.Balance(challenger)
	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], s.files["start/1/0"], 0)
	key := [3]uint64{s.job.Id, 1, 0}
	c := s.store.commits[key]
	c.Excluded, c.ExcludedReason = true, "proven elsewhere"
	s.store.commits[key] = c
	q.answer()
	require.Equal(t, before, s.Balance(challenger))
	ended := typedEvents[*types.EventFileQueryEnded](s.env)
	require.Len(t, ended, 1)
	require.Equal(t, types.FILE_QUERY_OUTCOME_VOID, ended[0].Outcome)
	require.Contains(t, ended[0].Reason, "proven elsewhere")
	s.requireInvariants()
}

func (s *roundScenario) fileQueryDeadlines() int {
	s.t.Helper()
	iter, err := s.Verify.FileQueryDeadlines.Iterate(s.Ctx, nil)
	require.NoError(s.t, err)
	keys, err := iter.Keys()
	require.NoError(s.t, err)
	return len(keys)
}

func (s *roundScenario) dumpFileQueryDeadlines() string {
	return s.Snapshot(s.t, keepers.KeySetPart("", func() sdk.Context { return s.Ctx }, s.Verify.FileQueryDeadlines)).String()
}

// Refused file query messages name what is wrong and change nothing.
func TestFileQueryRefusals(t *testing.T) {
	s := newRoundScenario(t, 0)
	challenger := s.account("challenger")
	other := s.account("other")
	open := func(msg *types.MsgOpenFileQuery) func(sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.msg.OpenFileQuery(ctx, msg); return err }
	}
	answer := func(msg *types.MsgAnswerFileQuery) func(sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.msg.AnswerFileQuery(ctx, msg); return err }
	}
	descend := func(msg *types.MsgDescendFileQuery) func(sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.msg.DescendFileQuery(ctx, msg); return err }
	}
	refused := func(want *errorsmod.Error, text string, call func(sdk.Context) error) {
		t.Helper()
		require.ErrorContains(t, s.requireRejected(want, call), text)
	}
	s.store.commits[[3]uint64{s.job.Id, 0, 1}] = func() (c markettypes.RoundCommit) {
		c = s.store.commits[[3]uint64{s.job.Id, 0, 1}]
		c.Excluded, c.ExcludedReason = true, "convicted before"
		return c
	}()

	// Opening.
	refused(sdkerrors.ErrNotFound, "no round 7", open(s.openMsg(challenger, 7, 0, types.ROUND_FILE_START, nil)))
	refused(types.ErrInvalidFileQuery, "already excluded", open(s.openMsg(challenger, 0, 1, types.ROUND_FILE_START, nil)))
	refused(types.ErrSelfChallenge, "made the commit", open(s.openMsg(s.provs[0], 1, 0, types.ROUND_FILE_START, nil)))
	refused(types.ErrInvalidFileQuery, "dense pseudo-gradients", open(s.openMsg(challenger, 1, 0, types.ROUND_FILE_ERROR_OUT, s.open1("pg/1/0", 0))))
	refused(types.ErrInvalidFileQuery, "header: a ROUND_FILE_START query has none", open(s.openMsg(challenger, 1, 0, types.ROUND_FILE_START, s.open1("pg/1/0", 0))))
	refused(types.ErrInvalidFileQuery, "not a round file", open(s.openMsg(challenger, 1, 0, types.ROUND_FILE_UNSPECIFIED, nil)))
	pauper := addr("pauper")
	refused(sdkerrors.ErrInsufficientFunds, "insufficient funds", open(s.openMsg(pauper, 1, 0, types.ROUND_FILE_START, nil)))

	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], s.files["start/1/0"], 3)
	refused(types.ErrFileQueryOpen, fmt.Sprintf("file query %d of %s is open", q.id, challenger), open(s.openMsg(challenger, 1, 0, types.ROUND_FILE_START, nil)))

	// The worker's turn.
	good := q.answerMsg()
	wrongSender := *good
	wrongSender.Sender = challenger.String()
	refused(types.ErrNotYourTurn, "moves as the FILE_QUERY_TURN_WORKER", answer(&wrongSender))
	refused(types.ErrNotYourTurn, "waits for the FILE_QUERY_TURN_WORKER", descend(q.descendMsg()))
	swapped := *good
	swapped.Left, swapped.Right = good.Right, good.Left
	refused(types.ErrInvalidFileAnswer, "do not hash to node", answer(&swapped))
	chunk := *good
	chunk.Left, chunk.Right, chunk.Chunk = nil, nil, s.files["start/1/0"][:diloco.ChunkSize]
	refused(types.ErrInvalidFileAnswer, "not a leaf", answer(&chunk))
	short := *good
	short.Left = good.Left[:31]
	refused(types.ErrInvalidHash, "left", answer(&short))
	late := q.state().Deadline + 1
	refused(types.ErrMoveTooLate, "was due by height", func(ctx sdk.Context) error {
		_, err := s.msg.AnswerFileQuery(ctx.WithBlockHeight(late), good)
		return err
	})
	refused(types.ErrFileQueryNotFound, "file query 99", answer(&types.MsgAnswerFileQuery{Sender: good.Sender, QueryId: 99}))

	// The challenger's turn.
	q.answer()
	refused(types.ErrNotYourTurn, "waits for the FILE_QUERY_TURN_CHALLENGER", answer(q.answerMsg()))
	notChallenger := q.descendMsg()
	notChallenger.Challenger = other.String()
	refused(types.ErrNotYourTurn, "moves as the FILE_QUERY_TURN_CHALLENGER", descend(notChallenger))

	// At the leaf: only the right chunk.
	for q.state().Hi-q.state().Lo > 1 {
		q.descend()
		if q.state().Hi-q.state().Lo > 1 {
			q.answer()
		}
	}
	leaf := q.answerMsg()
	children := *leaf
	children.Left, children.Right = make([]byte, 32), make([]byte, 32)
	refused(types.ErrInvalidFileAnswer, "a leaf: answer its chunk", answer(&children))
	wrongChunk := *leaf
	wrongChunk.Chunk = append([]byte{leaf.Chunk[0] ^ 1}, leaf.Chunk[1:]...)
	refused(types.ErrInvalidFileAnswer, "its leaf hash is not node", answer(&wrongChunk))
	long := *leaf
	long.Chunk = make([]byte, diloco.ChunkSize+1)
	refused(types.ErrInvalidFileAnswer, "a chunk has at most", answer(&long))
	_, err := s.msg.AnswerFileQuery(s.Ctx, leaf)
	require.NoError(t, err)
	require.Equal(t, uint64(3), typedEvents[*types.EventFileQueryAnswered](s.env)[len(typedEvents[*types.EventFileQueryAnswered](s.env))-1].Lo)
	s.requireInvariants()
}

// Genesis carries an open query mid-descent: a fresh chain imports it with its deadline
// and by-commit index, and it goes on to its answer.
func TestFileQueryGenesisRoundTrip(t *testing.T) {
	s := newRoundScenario(t, 0)
	challenger := s.account("challenger")
	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], s.files["start/1/0"], 5)
	q.answer()
	q.descend()
	exported, err := s.Verify.ExportGenesis(s.Ctx)
	require.NoError(t, err)
	require.NoError(t, exported.Validate())
	require.Len(t, exported.FileQueries, 1)
	require.Len(t, exported.FileQueries[0].Path, 1)
	require.Equal(t, q.id+1, exported.NextFileQueryId)
	bz, err := s.Codec.MarshalJSON(exported)
	require.NoError(t, err)
	var imported types.GenesisState
	require.NoError(t, s.Codec.UnmarshalJSON(bz, &imported))

	deadlines := s.dumpFileQueryDeadlines()
	for _, clear := range []func() error{
		func() error { return s.Verify.FileQueries.Clear(s.Ctx, nil) },
		func() error { return s.Verify.FileQueryDeadlines.Clear(s.Ctx, nil) },
		func() error { return s.Verify.FileQueriesByCommit.Clear(s.Ctx, nil) },
	} {
		require.NoError(t, clear())
	}
	require.NoError(t, s.Verify.InitGenesis(s.Ctx, &imported))
	again, err := s.Verify.ExportGenesis(s.Ctx)
	require.NoError(t, err)
	require.Equal(t, exported, again)
	require.Equal(t, deadlines, s.dumpFileQueryDeadlines())
	_, err = s.msg.OpenFileQuery(s.Ctx, s.openMsg(challenger, 1, 0, types.ROUND_FILE_START, nil))
	require.ErrorIs(t, err, types.ErrFileQueryOpen, "the by-commit index is rebuilt")
	require.Equal(t, uint64(5), q.play().Index)

	bad := imported
	bad.FileQueries = append([]types.FileQuery{}, imported.FileQueries...)
	bad.FileQueries[0].Lo = bad.FileQueries[0].Hi
	require.ErrorContains(t, bad.Validate(), "is not inside the file")
	bad.FileQueries = append([]types.FileQuery{}, imported.FileQueries...)
	bad.FileQueries[0].Turn = types.FILE_QUERY_TURN_PROVE
	require.ErrorContains(t, bad.Validate(), "a revealed chunk")
	bad.FileQueries = append([]types.FileQuery{}, imported.FileQueries[0], imported.FileQueries[0])
	bad.FileQueries[1].Id++
	bad.NextFileQueryId++
	require.ErrorContains(t, bad.Validate(), "second open query")
}

// The v5 migration gives version-4 params (no file_query_deposit, so zero) the default,
// and starts query ids at 1.
func TestMigrate4to5SetsFileQueryDeposit(t *testing.T) {
	s := newScenario(t, 16, 8)
	p := s.verifyParams()
	p.FileQueryDeposit = sdk.Coin{}
	p.ChallengeWindow = 123
	require.NoError(t, s.Verify.Params.Set(s.Ctx, p))
	require.NoError(t, s.Verify.FileQuerySeq.Set(s.Ctx, 0))

	require.NoError(t, keeper.NewMigrator(s.Verify).Migrate4to5(s.Ctx))

	got := s.verifyParams()
	require.Equal(t, types.DefaultParams().FileQueryDeposit, got.FileQueryDeposit)
	require.Equal(t, uint64(123), got.ChallengeWindow)
	require.NoError(t, got.Validate())
	next, err := s.Verify.FileQuerySeq.Peek(s.Ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), next)
}

// A file query's moves are cheap and metered: the chunk answer pays gas_per_byte for its
// bytes, every move stays far below a dispute move's bound.
func TestFileQueryGas(t *testing.T) {
	s := newRoundScenario(t, 700)
	challenger := s.account("challenger")
	params := s.verifyParams()
	gas := map[string]uint64{}
	var id uint64
	used, err := s.deliver(func(ctx sdk.Context) error {
		res, err := s.msg.OpenFileQuery(ctx, s.openMsg(challenger, 0, 0, types.ROUND_FILE_ERROR_OUT, s.open1("pg/0/0", 0)))
		if err == nil {
			id = res.QueryId
		}
		return err
	})
	require.NoError(t, err)
	gas["open (error_out)"] = used
	p, err := diloco.DecodeCompressed(s.files["pg/0/0"])
	require.NoError(t, err)
	buf := s.files["err/"+p.ErrOut.Hex()]
	q := &fileQuery{s: s, id: id, challenger: challenger, worker: buf, truth: merkle.LeafHashesOfBytes(buf, diloco.ChunkSize)}
	for q.state().Hi-q.state().Lo > 1 {
		msg := q.answerMsg()
		gas["answer (node)"], err = s.deliver(func(ctx sdk.Context) error { _, err := s.msg.AnswerFileQuery(ctx, msg); return err })
		require.NoError(t, err)
		d := q.descendMsg()
		gas["descend"], err = s.deliver(func(ctx sdk.Context) error { _, err := s.msg.DescendFileQuery(ctx, d); return err })
		require.NoError(t, err)
	}
	leaf := q.answerMsg()
	gas["answer (chunk)"], err = s.deliver(func(ctx sdk.Context) error { _, err := s.msg.AnswerFileQuery(ctx, leaf); return err })
	require.NoError(t, err)
	for name, g := range gas {
		t.Logf("%-18s %d gas", name, g)
		require.Less(t, g, types.MaxMoveGas/10, name)
	}
	require.Greater(t, gas["answer (chunk)"], params.GasPerByte*uint64(len(leaf.Chunk)), "the chunk's bytes are paid for")
}

// On the real x/market rounds, a round's global does not become final while a file query
// on one of its commits is open — past its challenge window and its checkpoints' — so a
// worker cannot answer slowly into finality, nor a proof of the revealed chunk come after
// it. Once the query ends (here answered honestly and not proven), the global is final.
func TestRoundGlobalWaitsForAnOpenFileQuery(t *testing.T) {
	r := newTraceRounds(t)
	vp := r.verifyParams()
	vp.MoveTimeout = 1000 // each move may come late, far past the round's windows
	require.NoError(t, r.Verify.Params.Set(r.Ctx, vp))
	round0 := map[uint32]redoRun{0: r.trainRound(0, 0, 0, r.g0, nil), 1: r.trainRound(1, 0, 0, r.g0, nil)}
	r.aggregate(0, 0, r.g0, round0, false)
	start := r.g0.WorkerStart(nil).Encode()

	challenger := r.account("challenger")
	var id uint64
	_, err := r.deliver(func(ctx sdk.Context) error {
		res, err := r.msg.OpenFileQuery(ctx, &types.MsgOpenFileQuery{Challenger: challenger.String(), JobId: r.job.Id, Round: 0, Worker: 1, File: types.ROUND_FILE_START})
		if res != nil {
			id = res.QueryId
		}
		return err
	})
	require.NoError(t, err)
	queried, err := r.Verify.RoundFilesQueried(r.Ctx, r.job.Id, 0)
	require.NoError(t, err)
	require.True(t, queried)

	windows := max(r.round(0).ChallengeDeadline, r.checkpoint(r.leases[1].Id, 0).ChallengeDeadline) + 10
	require.Less(t, windows, r.Ctx.BlockHeight()+int64(vp.MoveTimeout), "the test's windows end within the first move's time")
	r.advanceTo(windows)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, r.checkpoint(r.leases[1].Id, 0).Status)
	require.Equal(t, markettypes.ROUND_STATE_CHALLENGE, r.round(0).State, "the global waits for the open query")

	// The worker answers honestly, always descending left, down to its first chunk.
	leaves := merkle.LeafHashesOfBytes(start, diloco.ChunkSize)
	for {
		q, err := r.Verify.GetFileQuery(r.Ctx, id)
		require.NoError(t, err)
		if q.Turn == types.FILE_QUERY_TURN_PROVE {
			break
		}
		_, err = r.deliver(func(ctx sdk.Context) error {
			if q.Turn == types.FILE_QUERY_TURN_CHALLENGER {
				_, err := r.msg.DescendFileQuery(ctx, &types.MsgDescendFileQuery{Challenger: challenger.String(), QueryId: id})
				return err
			}
			msg := &types.MsgAnswerFileQuery{Sender: q.Provider, QueryId: id}
			if q.Hi-q.Lo == 1 {
				msg.Chunk = start[q.Lo*diloco.ChunkSize : (q.Lo+1)*diloco.ChunkSize]
			} else {
				mid := q.Lo + merkle.SplitPoint(q.Hi-q.Lo)
				left, right := merkle.RootFromLeafHashes(leaves[q.Lo:mid]), merkle.RootFromLeafHashes(leaves[mid:q.Hi])
				msg.Left, msg.Right = left[:], right[:]
			}
			_, err := r.msg.AnswerFileQuery(ctx, msg)
			return err
		})
		require.NoError(t, err)
		r.nextBlock()
	}
	require.Equal(t, markettypes.ROUND_STATE_CHALLENGE, r.round(0).State, "the global waits for the revealed chunk's proof")
	q, err := r.Verify.GetFileQuery(r.Ctx, id)
	require.NoError(t, err)
	r.runUntil(int64(vp.MoveTimeout)+20, func() bool { return r.round(0).State == markettypes.ROUND_STATE_FINAL })
	require.Greater(t, r.Ctx.BlockHeight(), q.Deadline, "final only after the proof's deadline")
	queried, err = r.Verify.RoundFilesQueried(r.Ctx, r.job.Id, 0)
	require.NoError(t, err)
	require.False(t, queried)
	ended := typedEvents[*types.EventFileQueryEnded](r.env)
	require.Equal(t, types.FILE_QUERY_OUTCOME_ANSWERED, ended[len(ended)-1].Outcome)
	r.requireInvariants()
}

// A cheating worker's accomplice opens a query on its wrong start state first and descends
// where the file is right, to run out the clock. It does not keep an honest challenger
// out: the honest query goes on beside it, finds the wrong chunk and convicts the worker,
// which ends both queries VOID, each deposit back to its challenger.
func TestFileQueryAnAccompliceCannotShieldAWorker(t *testing.T) {
	s := newRoundScenario(t, 0)
	honest := s.files["start/1/0"]
	g, err := diloco.DecodeGlobal(s.files["g1"])
	require.NoError(t, err)
	s.replace("start/1/0", g.WorkerStart(nil).Encode())
	s.commit(1, 0)
	first := leftmostDiff(honest, s.files["start/1/0"])
	accomplice, challenger := s.account("accomplice"), s.account("challenger")
	// The accomplice "compares" with the worker's own file: it aims at the last chunk.
	shield := s.openQuery(accomplice, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], s.files["start/1/0"], s.layout.StateChunks()-1)
	shield.answer()
	q := s.openQuery(challenger, 1, 0, types.ROUND_FILE_START, nil, s.files["start/1/0"], honest, 0)
	opening := q.play()
	require.Equal(t, first, opening.Index)
	require.Equal(t, types.FILE_QUERY_TURN_CHALLENGER, shield.state().Turn, "the accomplice's query is still open")

	proof := s.startProof(challenger, 1, 0, first)
	proof.Claimed = []types.FileChunk{opening}
	bond, balance := s.provider(s.provs[0]).Bond.Amount, s.Balance(challenger)
	accompliceBalance := s.Balance(accomplice)
	_, err = s.prove(proof)
	require.NoError(t, err)
	deposit := s.verifyParams().FileQueryDeposit.Amount
	s.requireConvicted(challenger, s.provs[0], s.leases[0].Id, bond, balance.Add(deposit))
	require.Equal(t, accompliceBalance.Add(deposit), s.Balance(accomplice), "the accomplice's query ended void")
	for _, id := range []uint64{shield.id, q.id} {
		_, err := s.Verify.GetFileQuery(s.Ctx, id)
		require.ErrorIs(t, err, types.ErrFileQueryNotFound)
	}
	require.Zero(t, s.fileQueryDeadlines())
}
