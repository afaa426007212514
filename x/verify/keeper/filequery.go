package keeper

import (
	"context"
	"fmt"
	"slices"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// FileQueryKey indexes an open query by the commit it queries: (job, round, worker, id).
type FileQueryKey = collections.Quad[uint64, uint64, uint32, uint64]

func fileQueryKey(q types.FileQuery) FileQueryKey {
	return collections.Join4(q.JobId, q.Round, q.Worker, q.Id)
}

// commitFileQueries returns the queries open on worker's commit of round.
func (k Keeper) commitFileQueries(ctx context.Context, jobID, round uint64, worker uint32) ([]types.FileQuery, error) {
	iter, err := k.FileQueriesByCommit.Iterate(ctx, collections.NewSuperPrefixedQuadRange3[uint64, uint64, uint32, uint64](jobID, round, worker))
	if err != nil {
		return nil, err
	}
	keys, err := iter.Keys()
	if err != nil {
		return nil, err
	}
	out := make([]types.FileQuery, 0, len(keys))
	for _, key := range keys {
		q, err := k.GetFileQuery(ctx, key.K4())
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// fileNames say what a query's file is, in errors and conviction reasons.
var fileNames = map[types.RoundFile]string{
	types.ROUND_FILE_START:     "start state",
	types.ROUND_FILE_ERROR_OUT: "error buffer (error_out)",
}

// GetFileQuery returns an open file query or ErrFileQueryNotFound.
func (k Keeper) GetFileQuery(ctx context.Context, id uint64) (types.FileQuery, error) {
	q, err := k.FileQueries.Get(ctx, id)
	if err != nil {
		return q, keeperutil.NotFound(err, types.ErrFileQueryNotFound, "file query %d (an ended query is deleted)", id)
	}
	return q, nil
}

// openFileQuery opens a file query (MsgOpenFileQuery): the commit must be one a
// MsgProveRoundFault could convict now (it exists and is not excluded), the file one its
// job has, the challenger not its provider, and no query of the same challenger open on
// the same file. Others' queries do not stand in the way: a worker's accomplice opening
// one and descending where the file is right must not keep an honest challenger out. The
// deposit is escrowed last, after every check, so a refused query changes nothing.
func (k Keeper) openFileQuery(ctx sdk.Context, challenger sdk.AccAddress, challengerText string, msg *types.MsgOpenFileQuery) (uint64, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	job, err := k.marketKeeper.GetJob(ctx, msg.JobId)
	if err != nil {
		return 0, err
	}
	cfg, err := types.JobConfig(job)
	if err != nil {
		return 0, err
	}
	sync, err := types.JobSync(job)
	if err != nil {
		return 0, err
	}
	if _, err := k.marketKeeper.GetRound(ctx, msg.JobId, msg.Round); err != nil {
		return 0, err
	}
	commit, err := k.marketKeeper.GetRoundCommit(ctx, msg.JobId, msg.Round, msg.Worker)
	if err != nil {
		return 0, err
	}
	if commit.Excluded {
		return 0, errorsmod.Wrapf(types.ErrInvalidFileQuery, "job %d round %d worker %d was already excluded (%s)", msg.JobId, msg.Round, msg.Worker, commit.ExcludedReason)
	}
	provider, err := k.addressCodec.StringToBytes(commit.Provider)
	if err != nil {
		return 0, err
	}
	if challenger.Equals(sdk.AccAddress(provider)) {
		return 0, errorsmod.Wrapf(types.ErrSelfChallenge, "%s made the commit of job %d round %d worker %d", commit.Provider, msg.JobId, msg.Round, msg.Worker)
	}
	root, size, err := k.queriedFile(ctx, params, diloco.NewLayout(cfg), sync, commit, msg)
	if err != nil {
		return 0, err
	}
	q := types.FileQuery{
		Challenger: challengerText, JobId: msg.JobId, Round: msg.Round, Worker: msg.Worker, File: msg.File,
		LeaseId: commit.LeaseId, Provider: commit.Provider, CommittedHeight: commit.CommittedHeight,
		Root: root, Size_: size, Lo: 0, Hi: size, Node: root, Turn: types.FILE_QUERY_TURN_WORKER,
		Deadline: ctx.BlockHeight() + int64(params.MoveTimeout), Deposit: params.FileQueryDeposit, OpenedHeight: ctx.BlockHeight(),
	}
	open, err := k.commitFileQueries(ctx, msg.JobId, msg.Round, msg.Worker)
	if err != nil {
		return 0, err
	}
	for _, o := range open {
		if o.Challenger == challengerText && o.File == msg.File {
			return 0, errorsmod.Wrapf(types.ErrFileQueryOpen, "file query %d of %s is open on the %s of job %d round %d worker %d",
				o.Id, o.Challenger, fileNames[msg.File], msg.JobId, msg.Round, msg.Worker)
		}
	}
	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, challenger, types.ModuleName, sdk.NewCoins(q.Deposit)); err != nil {
		return 0, err
	}
	if q.Id, err = k.FileQuerySeq.Next(ctx); err != nil {
		return 0, err
	}
	if err := k.saveFileQuery(ctx, q); err != nil {
		return 0, err
	}
	if err := k.FileQueriesByCommit.Set(ctx, fileQueryKey(q)); err != nil {
		return 0, err
	}
	return q.Id, keeperutil.Emit(ctx, &types.EventFileQueryOpened{
		QueryId: q.Id, JobId: q.JobId, Round: q.Round, Worker: q.Worker, File: q.File, Challenger: q.Challenger,
		Provider: q.Provider, LeaseId: q.LeaseId, Root: q.Root, Size_: q.Size_, Deposit: q.Deposit, Deadline: q.Deadline,
	})
}

// queriedFile is the root and chunk count of the file msg queries: the start state's,
// from the commit; the error buffer's, from the header of the compressed pseudo-gradient
// the challenger opens (a header that opens but does not parse is itself a
// pseudo-gradient fault, to be proven directly).
func (k Keeper) queriedFile(ctx sdk.Context, params types.Params, l diloco.Layout, sync diloco.Sync, commit markettypes.RoundCommit, msg *types.MsgOpenFileQuery) ([]byte, uint64, error) {
	switch msg.File {
	case types.ROUND_FILE_START:
		if msg.Header != nil {
			return nil, 0, errorsmod.Wrapf(types.ErrInvalidFileQuery, "header: a %s query has none", msg.File)
		}
		if _, err := merkle.HashFromBytes(commit.StartRoot); err != nil {
			return nil, 0, errorsmod.Wrapf(types.ErrInvalidFileQuery, "worker %d's start_root is not a hash", msg.Worker)
		}
		return commit.StartRoot, l.StateChunks(), nil
	case types.ROUND_FILE_ERROR_OUT:
		if sync.TopK == 0 {
			return nil, 0, errorsmod.Wrapf(types.ErrInvalidFileQuery, "job %d sends dense pseudo-gradients: they leave no error buffer", msg.JobId)
		}
		if msg.Header != nil {
			ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(len(msg.Header.Data)+merkle.HashSize*len(msg.Header.Proof)), "file query header")
		}
		header, err := openChunk(ctx, params, "header", commit.PseudoGradientRoot, l.CompressedFileChunks(int(sync.TopK)), 0, msg.Header)
		if err != nil {
			return nil, 0, keeperutil.WrapCause(types.ErrInvalidFileQuery, err, "")
		}
		_, errOut, err := diloco.CompressedErrorRoots(header)
		if err != nil {
			return nil, 0, errorsmod.Wrapf(types.ErrInvalidFileQuery,
				"header: worker %d's pseudo-gradient header is malformed (%v): prove a %s fault with it", msg.Worker, err, types.ROUND_FAULT_PSEUDO_GRADIENT)
		}
		return errOut[:], uint64(l.Chunks), nil
	default:
		return nil, 0, errorsmod.Wrapf(types.ErrInvalidFileQuery, "file: %s is not a round file", msg.File)
	}
}

// fileQueryMove loads the query a move names and checks that it is sender's turn and in
// time. void is why the query ends without the move (the queried commit was excluded or
// taken back since it opened); "" when the move goes ahead.
func (k Keeper) fileQueryMove(ctx sdk.Context, id uint64, sender sdk.AccAddress, turn types.FileQueryTurn) (types.Params, types.FileQuery, string, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return params, types.FileQuery{}, "", err
	}
	q, err := k.GetFileQuery(ctx, id)
	if err != nil {
		return params, q, "", err
	}
	mover := q.Provider
	if turn == types.FILE_QUERY_TURN_CHALLENGER {
		mover = q.Challenger
	}
	addr, err := k.addressCodec.StringToBytes(mover)
	if err != nil {
		return params, q, "", err
	}
	switch {
	case !sdk.AccAddress(addr).Equals(sender):
		return params, q, "", errorsmod.Wrapf(types.ErrNotYourTurn, "file query %d: %s moves as the %s, not %s", id, mover, turn, sender)
	case q.Turn != turn:
		return params, q, "", errorsmod.Wrapf(types.ErrNotYourTurn, "file query %d waits for the %s", id, q.Turn)
	case ctx.BlockHeight() > q.Deadline:
		// The end blocker ends queries at their deadline, but only so many per block: a
		// late move must not rescue one it has not reached yet.
		return params, q, "", errorsmod.Wrapf(types.ErrMoveTooLate, "file query %d: the %s move was due by height %d", id, q.Turn, q.Deadline)
	}
	void, err := k.fileQueryVoid(ctx, q)
	return params, q, void, err
}

// fileQueryVoid says why the commit q queries can no longer be convicted of a round
// fault, "" while it can. The query is ended lazily, by its next move or its deadline,
// rather than where x/market excludes a commit or takes a round back: those paths then
// need not know of file queries, and an ended query costs nothing more meanwhile.
func (k Keeper) fileQueryVoid(ctx sdk.Context, q types.FileQuery) (string, error) {
	c, err := k.marketKeeper.GetRoundCommit(ctx, q.JobId, q.Round, q.Worker)
	switch {
	case err != nil && keeperutil.IsRefusal(err):
		return fmt.Sprintf("worker %d's commit of round %d was taken back with the round", q.Worker, q.Round), nil
	case err != nil:
		return "", err
	case c.LeaseId != q.LeaseId || c.CommittedHeight != q.CommittedHeight:
		return fmt.Sprintf("worker %d's commit of round %d was taken back and made again", q.Worker, q.Round), nil
	case c.Excluded:
		return fmt.Sprintf("worker %d's commit of round %d was excluded: %s", q.Worker, q.Round, c.ExcludedReason), nil
	}
	return "", nil
}

// answerFileQuery is the worker's move (MsgAnswerFileQuery): the current node's
// children, or at a leaf its chunk, which the query then holds with its path (turn
// PROVE) for the challenger's MsgProveRoundFault until the deadline.
func (k Keeper) answerFileQuery(ctx sdk.Context, sender sdk.AccAddress, msg *types.MsgAnswerFileQuery) error {
	params, q, void, err := k.fileQueryMove(ctx, msg.QueryId, sender, types.FILE_QUERY_TURN_WORKER)
	if err != nil {
		return err
	}
	if void != "" {
		return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_VOID, q.Challenger, void)
	}
	node := merkle.Hash(q.Node)
	answered := &types.EventFileQueryAnswered{QueryId: q.Id, JobId: q.JobId, Round: q.Round, Worker: q.Worker, File: q.File, Lo: q.Lo, Hi: q.Hi}
	if q.Hi-q.Lo == 1 {
		if len(msg.Left) > 0 || len(msg.Right) > 0 {
			return errorsmod.Wrapf(types.ErrInvalidFileAnswer, "left, right: file query %d is at chunk %d, a leaf: answer its chunk", q.Id, q.Lo)
		}
		// Any length up to a chunk: a file's last chunk may be short, and the leaf hash
		// binds the bytes either way.
		if len(msg.Chunk) > diloco.ChunkSize {
			return errorsmod.Wrapf(types.ErrInvalidFileAnswer, "chunk: %d bytes, a chunk has at most %d", len(msg.Chunk), diloco.ChunkSize)
		}
		ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(len(msg.Chunk))+params.GasPerHash, "file query chunk")
		if merkle.LeafHash(msg.Chunk) != node {
			return errorsmod.Wrapf(types.ErrInvalidFileAnswer, "chunk: its leaf hash is not node %s of chunk %d", node, q.Lo)
		}
		q.Chunk = msg.Chunk
		if err := k.passFileQueryTurn(ctx, params, &q, types.FILE_QUERY_TURN_PROVE); err != nil {
			return err
		}
		answered.Data, answered.Proof, answered.Deadline = q.Chunk, q.Path, q.Deadline
		return keeperutil.Emit(ctx, answered)
	}
	if len(msg.Chunk) > 0 {
		return errorsmod.Wrapf(types.ErrInvalidFileAnswer, "chunk: file query %d is at chunks [%d, %d), not a leaf: answer the children", q.Id, q.Lo, q.Hi)
	}
	l, err := hash32("left", msg.Left)
	if err != nil {
		return err
	}
	r, err := hash32("right", msg.Right)
	if err != nil {
		return err
	}
	ctx.GasMeter().ConsumeGas(params.GasPerHash, "file query node")
	if merkle.NodeHash(l, r) != node {
		return errorsmod.Wrapf(types.ErrInvalidFileAnswer, "left, right: they do not hash to node %s of chunks [%d, %d)", node, q.Lo, q.Hi)
	}
	q.Left, q.Right = l[:], r[:]
	if err := k.passFileQueryTurn(ctx, params, &q, types.FILE_QUERY_TURN_CHALLENGER); err != nil {
		return err
	}
	answered.Left, answered.Right, answered.Deadline = q.Left, q.Right, q.Deadline
	return keeperutil.Emit(ctx, answered)
}

// descendFileQuery is the challenger's move (MsgDescendFileQuery): into the child over
// the chunks its own tree disagrees on; the other child joins the path.
func (k Keeper) descendFileQuery(ctx sdk.Context, sender sdk.AccAddress, msg *types.MsgDescendFileQuery) error {
	params, q, void, err := k.fileQueryMove(ctx, msg.QueryId, sender, types.FILE_QUERY_TURN_CHALLENGER)
	if err != nil {
		return err
	}
	if void != "" {
		return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_VOID, q.Challenger, void)
	}
	mid := q.Lo + merkle.SplitPoint(q.Hi-q.Lo)
	sibling := q.Right
	if msg.Right {
		q.Lo, q.Node, sibling = mid, q.Right, q.Left
	} else {
		q.Hi, q.Node = mid, q.Left
	}
	// Nearest the node first: the order merkle.VerifyInclusion reads a proof in.
	q.Path = slices.Insert(q.Path, 0, sibling)
	q.Left, q.Right = nil, nil
	if err := k.passFileQueryTurn(ctx, params, &q, types.FILE_QUERY_TURN_WORKER); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventFileQueryDescended{QueryId: q.Id, Right: msg.Right, Lo: q.Lo, Hi: q.Hi, Node: q.Node, Deadline: q.Deadline})
}

// passFileQueryTurn gives the move to turn with a fresh deadline and saves the query.
func (k Keeper) passFileQueryTurn(ctx sdk.Context, params types.Params, q *types.FileQuery, turn types.FileQueryTurn) error {
	if err := k.FileQueryDeadlines.Remove(ctx, collections.Join(q.Deadline, q.Id)); err != nil {
		return err
	}
	q.Turn, q.Deadline = turn, ctx.BlockHeight()+int64(params.MoveTimeout)
	return k.saveFileQuery(ctx, *q)
}

// saveFileQuery stores an open query and its deadline entry.
func (k Keeper) saveFileQuery(ctx sdk.Context, q types.FileQuery) error {
	if err := k.FileQueries.Set(ctx, q.Id, q); err != nil {
		return err
	}
	return k.FileQueryDeadlines.Set(ctx, collections.Join(q.Deadline, q.Id))
}

// endFileQuery pays the deposit to paidTo and deletes the query: ended queries live on in
// their events only.
func (k Keeper) endFileQuery(ctx sdk.Context, q types.FileQuery, outcome types.FileQueryOutcome, paidTo, reason string) error {
	to, err := k.addressCodec.StringToBytes(paidTo)
	if err != nil {
		return err
	}
	if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, to, sdk.NewCoins(q.Deposit)); err != nil {
		return err
	}
	if err := k.FileQueries.Remove(ctx, q.Id); err != nil {
		return err
	}
	if err := k.FileQueryDeadlines.Remove(ctx, collections.Join(q.Deadline, q.Id)); err != nil {
		return err
	}
	if err := k.FileQueriesByCommit.Remove(ctx, fileQueryKey(q)); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventFileQueryEnded{
		QueryId: q.Id, JobId: q.JobId, Round: q.Round, Worker: q.Worker, File: q.File,
		Outcome: outcome, PaidTo: paidTo, Deposit: q.Deposit, Reason: reason,
	})
}

// fileQueryTimeout ends a query whose deadline passed (the end blocker). A worker that
// did not answer withheld its file: it is convicted as of a round fault of the file's
// kind, with the challenger as prover, who gets its deposit back. A challenger that did
// not descend abandoned the query, and one that did not prove the revealed chunk wrong
// was answered: the deposit goes to the worker's provider either way.
func (k Keeper) fileQueryTimeout(ctx sdk.Context, id uint64) error {
	q, found, err := keeperutil.Optional(k.FileQueries.Get(ctx, id))
	if err != nil || !found {
		return err
	}
	void, err := k.fileQueryVoid(ctx, q)
	if err != nil {
		return err
	}
	switch {
	case void != "":
		return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_VOID, q.Challenger, void)
	case q.Turn == types.FILE_QUERY_TURN_CHALLENGER:
		return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_ABANDONED, q.Provider,
			fmt.Sprintf("the challenger did not descend by height %d", q.Deadline))
	case q.Turn == types.FILE_QUERY_TURN_PROVE:
		return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_ANSWERED, q.Provider,
			fmt.Sprintf("the worker revealed chunk %d and no proof of it came by height %d", q.Lo, q.Deadline))
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	challenger, err := k.addressCodec.StringToBytes(q.Challenger)
	if err != nil {
		return err
	}
	kind := types.ROUND_FAULT_START
	if q.File == types.ROUND_FILE_ERROR_OUT {
		kind = types.ROUND_FAULT_PSEUDO_GRADIENT
	}
	reason := fmt.Sprintf("worker %d withheld chunks [%d, %d) of its %s (file query %d, due by height %d)", q.Worker, q.Lo, q.Hi, fileNames[q.File], q.Id, q.Deadline)
	fault := roundFault{
		jobID: q.JobId, round: q.Round, worker: q.Worker, kind: kind, chunk: q.Lo,
		leaseID: q.LeaseId, provider: q.Provider, height: q.CommittedHeight, reason: reason,
	}
	// A conviction that fails (which a withheld answer should never make it) must not
	// leave the query open without a deadline: it ends void, the deposit refunded.
	convictCtx, write := ctx.CacheContext()
	if err := k.convictRoundFault(convictCtx, params, challenger, q.Challenger, fault); err != nil {
		k.Logger(ctx).Error("file query conviction failed", "query", q.Id, "err", err)
		return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_VOID, q.Challenger, fmt.Sprintf("convicting the worker failed: %v", err))
	}
	write()
	return k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_WITHHELD, q.Challenger, reason)
}

// endCommitFileQueries ends the file queries open on worker's commit of round (just
// convicted) VOID, their deposits back to their challengers.
func (k Keeper) endCommitFileQueries(ctx sdk.Context, jobID, round uint64, worker uint32, reason string) error {
	open, err := k.commitFileQueries(ctx, jobID, round, worker)
	if err != nil {
		return err
	}
	for _, q := range open {
		if err := k.endFileQuery(ctx, q, types.FILE_QUERY_OUTCOME_VOID, q.Challenger, reason); err != nil {
			return err
		}
	}
	return nil
}

// RoundFilesQueried reports whether a file query is open on a commit of the round
// (x/market's RoundTraceKeeper): its global is not final meanwhile, so a worker cannot
// answer slowly past finality, nor a proof of a revealed chunk come after it. One index
// entry is read.
func (k Keeper) RoundFilesQueried(ctx context.Context, jobID, round uint64) (bool, error) {
	iter, err := k.FileQueriesByCommit.Iterate(ctx, collections.NewSuperPrefixedQuadRange[uint64, uint64, uint32, uint64](jobID, round))
	if err != nil {
		return false, err
	}
	defer iter.Close()
	return iter.Valid(), nil
}
