package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	cmttypes "github.com/cometbft/cometbft/types"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	txtypes "github.com/cosmos/cosmos-sdk/types/tx"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
)

// sentTx is a transaction the node accepted into its mempool and the tool
// waits to see in a block.
type sentTx struct {
	hash   string
	phase  *phase
	kind   msgKind
	msgs   int
	acct   *account
	sentAt time.Time
	// done, if set, is called with the result once the transaction is in a
	// block, or with a nil result once it is counted lost, without the
	// tracker's lock held.
	done func(height int64, res *abci.ExecTxResult)
}

// counts are transactions and the messages in them.
type counts struct{ txs, msgs int }

// tracker broadcasts transactions and follows the chain block by block,
// matching each block's transactions (by hash) against those it sent and
// reading their results from CometBFT's block_results. It is the one place
// that counts: sent, included (ok or failed), rejected at CheckTx, lost.
type tracker struct {
	rpc    *rpchttp.HTTP
	txs    txtypes.ServiceClient
	auth   authtypes.QueryClient
	signer signer
	gas    gasTable
	// maxPending bounds the transactions in flight (accepted, not yet in a
	// block) over all accounts; lostAfter is how long one may stay in flight
	// before it is counted lost.
	maxPending int
	lostAfter  time.Duration
	logf       func(format string, args ...any)

	mu      sync.Mutex
	cond    *sync.Cond
	pending map[string]*sentTx
	// height is the last block processed; settled the last one whose
	// callbacks (done, onBlock) have returned. times and blockTxs describe
	// every block processed since the tracker started.
	height, settled int64
	times           map[int64]time.Time
	blockTxs        map[int64]int
	// okAt counts the successful transactions the tool sent, by height and kind.
	okAt map[int64]map[msgKind]counts
	// onBlock receives each block's finalize-block events (end-block auction
	// results) and the tool's successful transactions in it by kind, after
	// the block's transactions are recorded.
	onBlock func(height int64, events []abci.Event, ours map[msgKind]counts)
	err     error
}

func (t *tracker) init(ctx context.Context) error {
	t.cond = sync.NewCond(&t.mu)
	t.pending = map[string]*sentTx{}
	t.times = map[int64]time.Time{}
	t.blockTxs = map[int64]int{}
	t.okAt = map[int64]map[msgKind]counts{}
	st, err := t.rpc.Status(ctx)
	if err != nil {
		return fmt.Errorf("CometBFT status: %w", err)
	}
	t.height = st.SyncInfo.LatestBlockHeight
	t.settled = t.height
	t.times[t.height] = st.SyncInfo.LatestBlockTime
	return nil
}

// watch processes new blocks until ctx ends. A node that stops answering for
// 30 s ends the run (waiters see the error).
func (t *tracker) watch(ctx context.Context) {
	lastOK := time.Now()
	for ctx.Err() == nil {
		err := t.catchUp(ctx)
		switch {
		case err == nil:
			lastOK = time.Now()
		case ctx.Err() != nil:
			return
		case time.Since(lastOK) > 30*time.Second:
			t.fail(fmt.Errorf("following the chain: %w", err))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (t *tracker) fail(err error) {
	t.mu.Lock()
	t.err = err
	t.cond.Broadcast()
	t.mu.Unlock()
}

func (t *tracker) catchUp(ctx context.Context) error {
	st, err := t.rpc.Status(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	next := t.height + 1
	t.mu.Unlock()
	for h := next; h <= st.SyncInfo.LatestBlockHeight; h++ {
		if err := t.processBlock(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

func (t *tracker) processBlock(ctx context.Context, h int64) error {
	blk, err := t.rpc.Block(ctx, &h)
	if err != nil {
		return fmt.Errorf("block %d: %w", h, err)
	}
	res, err := t.rpc.BlockResults(ctx, &h)
	if err != nil {
		return fmt.Errorf("block_results %d: %w", h, err)
	}
	if len(res.TxsResults) != len(blk.Block.Txs) {
		return fmt.Errorf("block %d has %d transactions but %d results", h, len(blk.Block.Txs), len(res.TxsResults))
	}
	var callbacks []func()
	t.mu.Lock()
	t.times[h] = blk.Block.Time
	t.blockTxs[h] = len(blk.Block.Txs)
	for i, tx := range blk.Block.Txs {
		hash := txHash(tx)
		st, ok := t.pending[hash]
		if !ok {
			continue // not ours, or already counted lost
		}
		delete(t.pending, hash)
		r := res.TxsResults[i]
		st.phase.included(st, h, r)
		if r.Code == 0 {
			if t.okAt[h] == nil {
				t.okAt[h] = map[msgKind]counts{}
			}
			c := t.okAt[h][st.kind]
			c.txs++
			c.msgs += st.msgs
			t.okAt[h][st.kind] = c
		}
		if st.done != nil {
			callbacks = append(callbacks, func() { st.done(h, r) })
		}
	}
	now := time.Now()
	for hash, st := range t.pending {
		if now.Sub(st.sentAt) > t.lostAfter {
			callbacks = append(callbacks, t.lose(hash, st))
		}
	}
	ours := maps.Clone(t.okAt[h])
	t.height = h
	t.cond.Broadcast()
	t.mu.Unlock()
	for _, cb := range callbacks {
		cb()
	}
	if t.onBlock != nil {
		t.onBlock(h, res.FinalizeBlockEvents, ours)
	}
	t.mu.Lock()
	t.settled = h
	t.cond.Broadcast()
	t.mu.Unlock()
	return nil
}

// lose counts a transaction that never made it into a block; its account's
// later sequences cannot land either, so the account re-reads its sequence.
// t.mu is held; the returned function, to call once it is released, tells
// the sender.
func (t *tracker) lose(hash string, st *sentTx) func() {
	delete(t.pending, hash)
	st.phase.lost++
	st.phase.pending--
	st.acct.resync.Store(true)
	t.logf("lost %s %s from %s after %s", st.kind, hash, st.acct, time.Since(st.sentAt).Round(time.Second))
	return func() {
		if st.done != nil {
			st.done(0, nil)
		}
	}
}

func txHash(tx cmttypes.Tx) string { return fmt.Sprintf("%X", tx.Hash()) }

// wait blocks until pred (called with t.mu held) is true, ctx ends or the
// tracker fails.
func (t *tracker) wait(ctx context.Context, pred func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for !pred() {
		if t.err != nil {
			return t.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		t.cond.Wait()
	}
	return nil
}

// waitBlocks waits until n more blocks are processed.
func (t *tracker) waitBlocks(ctx context.Context, n int64) error {
	t.mu.Lock()
	target := t.height + n
	t.mu.Unlock()
	return t.wait(ctx, func() bool { return t.height >= target })
}

func (t *tracker) latest() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.height
}

// errStopped means the phase ended before the transaction was sent.
var errStopped = errors.New("phase stopped")

var expectedSeq = regexp.MustCompile(`account sequence mismatch, expected (\d+)`)

// send signs msgs (all of one kind) from a and broadcasts them in sync mode,
// returning once the node has accepted the transaction (true) or refused it
// (false, counted in the phase); the tracker counts its inclusion later. The
// caller holds a exclusively. stop ends waiting for a free slot (the phase is
// over: errStopped); ctx bounds the broadcast itself, so a transaction is
// never abandoned half-sent.
func (t *tracker) send(stop, ctx context.Context, ph *phase, a *account, kind msgKind, msgs []sdk.Msg, done func(int64, *abci.ExecTxResult)) (bool, error) {
	waited := time.Now()
	err := t.wait(stop, func() bool { return len(t.pending) < t.maxPending })
	ph.idle.Add(int64(time.Since(waited)))
	if err != nil {
		if stop.Err() != nil && ctx.Err() == nil {
			return false, errStopped
		}
		return false, err
	}
	if a.resync.Load() {
		if err := a.load(ctx, t.auth); err != nil {
			return false, err
		}
	}
	gas := t.gas.limit(kind, len(msgs))
	for attempt := 0; ; attempt++ {
		txBytes, err := t.signer.sign(ctx, a, a.seq, gas, msgs...)
		if err != nil {
			return false, fmt.Errorf("signing for %s: %w", a, err)
		}
		st := &sentTx{hash: txHash(txBytes), phase: ph, kind: kind, msgs: len(msgs), acct: a, sentAt: time.Now(), done: done}
		// Registered before the broadcast, so a block that includes it can
		// never be processed before the tracker knows it.
		t.mu.Lock()
		t.pending[st.hash] = st
		ph.pending++
		t.mu.Unlock()
		resp, err := t.txs.BroadcastTx(ctx, &txtypes.BroadcastTxRequest{TxBytes: txBytes, Mode: txtypes.BroadcastMode_BROADCAST_MODE_SYNC})
		var r *sdk.TxResponse
		if err == nil {
			r = resp.TxResponse
		}
		accepted := err == nil && (r.Code == 0 ||
			(r.Codespace == sdkerrors.RootCodespace && r.Code == sdkerrors.ErrTxInMempoolCache.ABCICode()))
		if accepted {
			a.seq++
			t.mu.Lock()
			ph.sent(kind, len(msgs))
			t.mu.Unlock()
			return true, nil
		}
		t.mu.Lock()
		if _, still := t.pending[st.hash]; still {
			delete(t.pending, st.hash)
			ph.pending--
		}
		t.mu.Unlock()
		if err != nil {
			// Whether the node took it is unknown: learn the sequence again.
			a.resync.Store(true)
			t.mu.Lock()
			ph.reject(kind, "broadcast: "+err.Error())
			t.mu.Unlock()
			return false, nil
		}
		root := r.Codespace == sdkerrors.RootCodespace
		switch {
		case root && r.Code == sdkerrors.ErrWrongSequence.ABCICode() && attempt < 5:
			m := expectedSeq.FindStringSubmatch(r.RawLog)
			if m == nil {
				if err := a.load(ctx, t.auth); err != nil {
					return false, err
				}
				continue
			}
			a.seq, _ = strconv.ParseUint(m[1], 10, 64)
			continue
		case root && r.Code == sdkerrors.ErrMempoolIsFull.ABCICode() && attempt < 50:
			t.mu.Lock()
			ph.mempoolFull++
			t.mu.Unlock()
			if err := t.waitBlocks(stop, 1); err != nil {
				return false, errStopped
			}
			continue
		}
		t.mu.Lock()
		ph.reject(kind, fmt.Sprintf("%s code %d: %s", r.Codespace, r.Code, r.RawLog))
		t.mu.Unlock()
		return false, nil
	}
}

// sendAndWait sends one transaction and waits for it to be in a block,
// failing unless it succeeded. It is for set-up steps.
func (t *tracker) sendAndWait(ctx context.Context, ph *phase, a *account, kind msgKind, msgs ...sdk.Msg) error {
	type outcome struct {
		height int64
		res    *abci.ExecTxResult
	}
	got := make(chan outcome, 1)
	accepted, err := t.send(ctx, ctx, ph, a, kind, msgs, func(h int64, r *abci.ExecTxResult) { got <- outcome{h, r} })
	if err != nil {
		return err
	}
	if !accepted {
		t.mu.Lock()
		defer t.mu.Unlock()
		return fmt.Errorf("%s from %s was refused: %v", kind, a, ph.rejections)
	}
	select {
	case o := <-got:
		if o.res == nil {
			return fmt.Errorf("%s from %s was lost", kind, a)
		}
		if o.res.Code != 0 {
			return fmt.Errorf("%s from %s failed in block %d: code %d: %s", kind, a, o.height, o.res.Code, o.res.Log)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain waits until the phase has nothing in flight and the callbacks of
// the blocks that included its transactions have run, or until timeout,
// after which what is left counts as lost.
func (t *tracker) drain(ctx context.Context, ph *phase, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := t.wait(wctx, func() bool { return ph.pending == 0 && t.settled == t.height })
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		var callbacks []func()
		t.mu.Lock()
		for hash, st := range t.pending {
			if st.phase == ph {
				callbacks = append(callbacks, t.lose(hash, st))
			}
		}
		t.mu.Unlock()
		for _, cb := range callbacks {
			cb()
		}
		return nil
	}
	return err
}
