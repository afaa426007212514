package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// File queries (x/verify's MsgOpenFileQuery, MsgAnswerFileQuery, MsgDescendFileQuery).
//
// A worker's start state and, with top_k, the error buffer its pseudo-gradient's header
// names are computable by anyone but held only by the worker: when a checker's rebuilt
// file has another root than the one committed, it cannot open the worker's chunk to
// prove it. It opens a file query instead: the worker must reveal the children of each
// node the checker descends into (the one whose hash differs from the checker's own tree)
// down to one chunk, which the chain then holds with its path (turn PROVE) — the opening
// the ordinary MsgProveRoundFault takes. A worker that does not answer in time is
// convicted by the chain itself.
//
// The challenger's side is queryFile, called by a check that found such a file; the
// worker's side is answerFileQuery, run for every query on this operator's commits.

// fileQueryNeeded is a check's finding that a worker's round file is not the one this
// sidecar rebuilt (correct), which only the worker can open: prove builds the proof from
// the chunk a file query reveals, or returns nil when that chunk is right after all.
type fileQueryNeeded struct {
	commit  markettypes.RoundCommit
	file    verifytypes.RoundFile
	correct []byte
	// header is chunk 0 of the worker's compressed pseudo-gradient, opened (ERROR_OUT).
	header *verifytypes.FileChunk
	prove  func(verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error)
}

func (e *fileQueryNeeded) Error() string {
	return fmt.Sprintf("worker %d's %s of round %d is not the one rebuilt here, and only the worker can open it", e.commit.Worker, e.file, e.commit.Round)
}

// queryFile plays the challenger's side of a file query on need and returns the proof of
// the chunk it reveals (nil: the chain left the worker out meanwhile, by this query's
// timeout or another's proof). Other challengers' queries on the file do not stand in the
// way; an open the chain refuses (this challenger's own query from before a restart is
// still open, or it cannot pay the deposit) is tried again, and given up after CheckWait
// so that the round's aggregation is not held up by it.
func (r *Role) queryFile(ctx context.Context, j Job, need *fileQueryNeeded) (*verifytypes.MsgProveRoundFault, error) {
	c := need.commit
	leaves := merkle.LeafHashesOfBytes(need.correct, diloco.ChunkSize)
	refusedUntil := time.Now().Add(r.opts.CheckWait)
	warned := false
	for {
		if r.leftOut(ctx, c) {
			return nil, nil
		}
		res, err := r.opts.Submit(ctx, &verifytypes.MsgOpenFileQuery{Challenger: r.opts.Operator, JobId: c.JobId, Round: c.Round, Worker: c.Worker,
			File: need.file, Header: need.header})
		if err != nil {
			if !time.Now().Before(refusedUntil) {
				return nil, fmt.Errorf("the chain refused every file query on it for %s: %w", r.opts.CheckWait, err)
			}
			if !warned {
				r.log.Warn("the chain refused this sidecar's file query; trying again", "job", c.JobId, "round", c.Round, "worker", c.Worker,
					"file", need.file.String(), "err", err)
				warned = true
			}
			if err := r.sleep(ctx, nil); err != nil {
				return nil, err
			}
			continue
		}
		opened, ok := chain.FindEvent[*verifytypes.EventFileQueryOpened](res.Events)
		if !ok {
			return nil, errors.New("the file query transaction has no EventFileQueryOpened")
		}
		id := opened.QueryId
		r.log.Info("opened a file query on a worker's round file", "job", c.JobId, "round", c.Round, "worker", c.Worker, "file", need.file.String(), "query", id)
		opening, err := r.descend(ctx, id, leaves)
		if err != nil || opening == nil {
			return nil, err
		}
		msg, err := need.prove(*opening)
		if msg == nil && err == nil {
			err = fmt.Errorf("file query %d revealed chunk %d of worker %d's %s, and it is right", id, opening.Index, c.Worker, need.file)
		}
		return msg, err
	}
}

// descend follows file query id, choosing at each of the challenger's turns the child
// whose root is not the one in leaves' tree, until the worker has revealed a chunk (its
// opening) or the query is gone (nil).
func (r *Role) descend(ctx context.Context, id uint64, leaves []merkle.Hash) (*verifytypes.FileChunk, error) {
	moved := int64(-1)
	for {
		res, err := r.opts.Chain.FileQuery(ctx, &verifytypes.QueryFileQueryRequest{QueryId: id})
		if err != nil {
			r.log.Info("the file query ended without a revealed chunk", "query", id, "err", err)
			return nil, nil
		}
		q := res.FileQuery
		switch {
		case q.Turn == verifytypes.FILE_QUERY_TURN_PROVE:
			return &verifytypes.FileChunk{Index: q.Lo, Data: q.Chunk, Proof: q.Path}, nil
		case q.Turn == verifytypes.FILE_QUERY_TURN_CHALLENGER && q.Deadline != moved:
			if q.Hi > uint64(len(leaves)) || q.Hi-q.Lo < 2 {
				return nil, fmt.Errorf("file query %d is at chunks [%d, %d) of a file of %d", id, q.Lo, q.Hi, len(leaves))
			}
			split := q.Lo + merkle.SplitPoint(q.Hi-q.Lo)
			left := merkle.RootFromLeafHashes(leaves[q.Lo:split])
			leftDiffers := !bytes.Equal(q.Left, left[:])
			if !leftDiffers {
				if right := merkle.RootFromLeafHashes(leaves[split:q.Hi]); bytes.Equal(q.Right, right[:]) {
					return nil, fmt.Errorf("file query %d: both children of chunks [%d, %d) are the rebuilt file's", id, q.Lo, q.Hi)
				}
			}
			if _, err := r.opts.Submit(ctx, &verifytypes.MsgDescendFileQuery{Challenger: r.opts.Operator, QueryId: id, Right: !leftDiffers}); err != nil {
				r.log.Warn("the chain refused this sidecar's descent; trying again", "query", id, "err", err)
			} else {
				moved = q.Deadline
			}
		}
		if err := r.sleep(ctx, nil); err != nil {
			return nil, err
		}
	}
}

// queryAnswers are the file queries that may wait for this operator's move: a set, not a
// queue, so that a flood of queries (each paid for by its challenger) drops none — a
// missed answer is a conviction.
type queryAnswers struct {
	mu      sync.Mutex
	pending map[uint64]bool
	wake    chan struct{}
	// file is the file each open query is answered from, kept between its moves.
	file map[uint64][]byte
}

func newQueryAnswers() *queryAnswers {
	return &queryAnswers{pending: map[uint64]bool{}, wake: make(chan struct{}, 1), file: map[uint64][]byte{}}
}

// ask marks query id for a look.
func (a *queryAnswers) ask(id uint64) {
	a.mu.Lock()
	a.pending[id] = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *queryAnswers) forget(id uint64) {
	a.mu.Lock()
	delete(a.file, id)
	a.mu.Unlock()
}

// take returns the queries asked about since the last take, in id order.
func (a *queryAnswers) take() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]uint64, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	clear(a.pending)
	slices.Sort(ids)
	return ids
}

// answerQueries answers the asked queries until ctx ends: every move due from this
// operator in one transaction (one by one if the chain refuses the batch).
func (r *Role) answerQueries(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.answers.wake:
		}
		var msgs []sdk.Msg
		for _, id := range r.answers.take() {
			msg, err := r.fileQueryAnswer(ctx, id)
			if err != nil && ctx.Err() == nil {
				r.log.Error("cannot answer a file query on this operator's round file", "query", id, "err", err)
			}
			if msg != nil {
				msgs = append(msgs, msg)
			}
		}
		if len(msgs) == 0 {
			continue
		}
		if _, err := r.opts.Submit(ctx, msgs...); err == nil || len(msgs) == 1 {
			r.logAnswers(msgs, err)
			continue
		}
		for _, msg := range msgs {
			_, err := r.opts.Submit(ctx, msg)
			r.logAnswers([]sdk.Msg{msg}, err)
		}
	}
}

func (r *Role) logAnswers(msgs []sdk.Msg, err error) {
	for _, m := range msgs {
		a := m.(*verifytypes.MsgAnswerFileQuery)
		if err != nil {
			r.log.Error("the chain refused this worker's file query answer", "query", a.QueryId, "err", err)
			continue
		}
		r.log.Info("answered a file query on this worker's round file", "query", a.QueryId, "leaf", len(a.Chunk) > 0)
	}
}

// fileQueryAnswer is this operator's move in file query id if it is its turn (nil
// otherwise): the children of the current node, or the chunk at a leaf, of the file as
// this worker made it (roundFile).
func (r *Role) fileQueryAnswer(ctx context.Context, id uint64) (*verifytypes.MsgAnswerFileQuery, error) {
	res, err := r.opts.Chain.FileQuery(ctx, &verifytypes.QueryFileQueryRequest{QueryId: id})
	if err != nil {
		return nil, nil // ended
	}
	q := res.FileQuery
	if q.Provider != r.opts.Operator || q.Turn != verifytypes.FILE_QUERY_TURN_WORKER {
		return nil, nil
	}
	r.answers.mu.Lock()
	file, ok := r.answers.file[id]
	r.answers.mu.Unlock()
	if !ok {
		if file, err = r.roundFile(ctx, q); err != nil {
			return nil, fmt.Errorf("rebuilding the worker's %s of job %d round %d: %w", q.File, q.JobId, q.Round, err)
		}
		r.answers.mu.Lock()
		r.answers.file[id] = file
		r.answers.mu.Unlock()
	}
	leaves := merkle.LeafHashesOfBytes(file, diloco.ChunkSize)
	if root := merkle.RootFromLeafHashes(leaves); !bytes.Equal(root[:], q.Root) || uint64(len(leaves)) != q.Size_ {
		return nil, fmt.Errorf("the %s rebuilt here has root %s, the one committed is %x", q.File, root, q.Root)
	}
	msg := &verifytypes.MsgAnswerFileQuery{Sender: r.opts.Operator, QueryId: id}
	if q.Hi-q.Lo == 1 {
		msg.Chunk = file[q.Lo*diloco.ChunkSize : min(uint64(len(file)), (q.Lo+1)*diloco.ChunkSize)]
	} else {
		split := q.Lo + merkle.SplitPoint(q.Hi-q.Lo)
		left, right := merkle.RootFromLeafHashes(leaves[q.Lo:split]), merkle.RootFromLeafHashes(leaves[split:q.Hi])
		msg.Left, msg.Right = left[:], right[:]
	}
	return msg, nil
}

// roundFile rebuilds the file query q opens, as the worker made it: its start state
// (G_round's WorkerStart of its carry, the end state of the last round its lease entered)
// or the error buffer its compressed pseudo-gradient left (kept on disk when it trained,
// else replayed from its rounds).
func (r *Role) roundFile(ctx context.Context, q verifytypes.FileQuery) ([]byte, error) {
	jr, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: q.JobId})
	if err != nil {
		return nil, err
	}
	j, err := r.jobOf(Lease{Job: jr.Job})
	if err != nil {
		return nil, err
	}
	c := markettypes.RoundCommit{JobId: q.JobId, Round: q.Round, Worker: q.Worker, LeaseId: q.LeaseId}
	switch q.File {
	case verifytypes.ROUND_FILE_START:
		g, err := r.committedGlobal(ctx, j, c, q.Round)
		if err != nil {
			return nil, fmt.Errorf("G_%d: %w", q.Round, err)
		}
		carry, err := r.carryState(ctx, j, c)
		if err != nil {
			return nil, fmt.Errorf("the carry: %w", err)
		}
		return g.WorkerStart(carry).Encode(), nil
	case verifytypes.ROUND_FILE_ERROR_OUT:
		if kept, err := readErrBuf(j.errBufPath(q.Round, q.Worker), diloco.NewLayout(j.Config).Elems()); err == nil {
			return diloco.EncodeErrorBuffer(kept), nil
		}
		// Not kept (pruned, or another disk): replayed as a checker replays any worker's.
		next := c
		next.Round++
		buf, err := r.errorBufferAfter(ctx, j, next, c)
		if err != nil {
			return nil, err
		}
		return diloco.EncodeErrorBuffer(buf), nil
	}
	return nil, fmt.Errorf("file %s is not a round file", q.File)
}

// carryState is the state worker c carried into its round: its end state of the last
// round its lease entered before, or nil.
func (r *Role) carryState(ctx context.Context, j Job, c markettypes.RoundCommit) (*exact.State, error) {
	prev, err := r.previousEntered(ctx, j, c)
	if err != nil || prev == nil {
		return nil, err
	}
	if r.opts.cheatStaleCarry {
		if older, err := r.previousEntered(ctx, j, *prev); err == nil && older != nil {
			prev = older
		}
	}
	end, err := r.endState(ctx, j, *prev)
	if err != nil {
		return nil, err
	}
	return exact.Decode(end)
}
