package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	cmtjson "github.com/cometbft/cometbft/libs/json"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	jsonrpcclient "github.com/cometbft/cometbft/rpc/jsonrpc/client"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/depinchain/depinchain/provider/db"
)

// Handler processes one height's typed events, in execution order. It is
// called for every height, in order, even when events is empty (deadlines are
// counted in heights). A nil return lets the cursor advance past the height;
// an error makes the Follower retry the same height, with backoff, until it
// succeeds: heights are never skipped.
//
// A crash between a handler's success and the cursor commit replays the
// height, so handlers must be idempotent: record what they did with
// db.Tx.MarkHandled (keyed by Event.Key or a semantic key) in the same
// db.Update as their other writes.
type Handler func(ctx context.Context, height int64, events []Event) error

// FollowerConfig configures a Follower. Zero durations take the defaults.
type FollowerConfig struct {
	// RPC is the node's CometBFT RPC address, e.g. "tcp://127.0.0.1:26657".
	RPC string
	// StartHeight is the first height processed when the store holds no cursor
	// yet; 0 starts at the chain's latest height.
	StartHeight int64
	// PollInterval is how often the chain height is polled while the websocket
	// subscription is down (default 2s).
	PollInterval time.Duration
	// WebsocketTimeout is how long the subscription may stay silent before it
	// is considered dead and re-established (default 30s). While the
	// subscription is healthy the chain height is still polled this often, as a
	// safety net.
	WebsocketTimeout time.Duration
	// RequestTimeout bounds each RPC call (default 10s).
	RequestTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff of retries and
	// reconnects (defaults 500ms and 30s).
	RetryMin, RetryMax time.Duration
	// Logger receives the follower's logs; nil discards them.
	Logger *slog.Logger
}

func (c *FollowerConfig) applyDefaults() {
	setDefault := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDefault(&c.PollInterval, 2*time.Second)
	setDefault(&c.WebsocketTimeout, 30*time.Second)
	setDefault(&c.RequestTimeout, 10*time.Second)
	setDefault(&c.RetryMin, 500*time.Millisecond)
	setDefault(&c.RetryMax, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// FollowerStatus is a snapshot of the follower's progress, for metrics and
// the status API.
type FollowerStatus struct {
	// CursorHeight is the last height fully processed.
	CursorHeight int64
	// ChainHeight is the latest height the node reported.
	ChainHeight int64
	// Lag is ChainHeight - CursorHeight.
	Lag int64
	// WebsocketConnected is true while the header subscription delivers.
	WebsocketConnected bool
	// EventsDelivered counts typed events handed to the handler.
	EventsDelivered uint64
	// HandlerErrors counts handler failures (each one is retried).
	HandlerErrors uint64
	// FetchErrors counts failed RPC reads of heights and of the chain height.
	FetchErrors uint64
	// DecodeErrors counts typed events that did not decode and were skipped.
	DecodeErrors uint64
	// WebsocketReconnects counts lost subscriptions.
	WebsocketReconnects uint64
	// LastError is the most recent error, empty if none since the last success.
	LastError string
}

// Follower replays the chain's typed events from a durable cursor. A
// websocket NewBlockHeader subscription only wakes it up; what it processes
// is driven by the cursor, so a lost connection, a restart or a missed
// notification delays events but never drops or repeats a height.
type Follower struct {
	cfg     FollowerConfig
	db      *db.DB
	handle  Handler
	rpc     *rpchttp.HTTP
	decoder blockDecoder
	log     *slog.Logger

	cursor          atomic.Int64
	chainHeight     atomic.Int64
	wsConnected     atomic.Bool
	eventsDelivered atomic.Uint64
	handlerErrors   atomic.Uint64
	fetchErrors     atomic.Uint64
	decodeErrors    atomic.Uint64
	wsReconnects    atomic.Uint64

	mu      sync.Mutex
	lastErr string
}

// NewFollower prepares a follower; Run starts it.
func NewFollower(cfg FollowerConfig, st *db.DB, handle Handler) (*Follower, error) {
	cfg.applyDefaults()
	if st == nil || handle == nil {
		return nil, errors.New("follower needs a store and a handler")
	}
	if cfg.StartHeight < 0 {
		return nil, fmt.Errorf("start height %d is negative", cfg.StartHeight)
	}
	rpc, err := rpchttp.New(cfg.RPC, "/websocket")
	if err != nil {
		return nil, fmt.Errorf("RPC client for %s: %w", cfg.RPC, err)
	}
	f := &Follower{cfg: cfg, db: st, handle: handle, rpc: rpc, log: cfg.Logger.With("component", "follower")}
	f.decoder = blockDecoder{log: f.log, onDecodeError: func() { f.decodeErrors.Add(1) }}
	return f, nil
}

// Status returns a snapshot of the follower's progress. It is safe to call
// from any goroutine.
func (f *Follower) Status() FollowerStatus {
	f.mu.Lock()
	lastErr := f.lastErr
	f.mu.Unlock()
	cursor, chain := f.cursor.Load(), f.chainHeight.Load()
	return FollowerStatus{
		CursorHeight:        cursor,
		ChainHeight:         chain,
		Lag:                 max(chain-cursor, 0),
		WebsocketConnected:  f.wsConnected.Load(),
		EventsDelivered:     f.eventsDelivered.Load(),
		HandlerErrors:       f.handlerErrors.Load(),
		FetchErrors:         f.fetchErrors.Load(),
		DecodeErrors:        f.decodeErrors.Load(),
		WebsocketReconnects: f.wsReconnects.Load(),
		LastError:           lastErr,
	}
}

// Run follows the chain until ctx ends, then returns nil. It returns an
// error only when the store fails in a way retrying cannot fix.
func (f *Follower) Run(ctx context.Context) error {
	if err := f.loadCursor(ctx); err != nil {
		return ignoreCancel(ctx, err)
	}
	f.log.Info("following the chain", "rpc", f.cfg.RPC, "from_height", f.cursor.Load()+1)

	// The header watcher must end with Run however Run ends: cancel first,
	// then wait (defers run last-in first-out).
	ctx, cancel := context.WithCancel(ctx)
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.watchHeaders(ctx, wake)
	}()
	defer wg.Wait()
	defer cancel()

	for {
		if err := f.catchUp(ctx); err != nil {
			return ignoreCancel(ctx, err)
		}
		wait := f.cfg.PollInterval
		if f.wsConnected.Load() {
			wait = f.cfg.WebsocketTimeout
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

func ignoreCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// loadCursor reads the stored cursor or, on the very first start, stores one
// just below the start height so that the start height is processed.
func (f *Follower) loadCursor(ctx context.Context) error {
	h, ok, err := f.db.Cursor()
	if err != nil {
		return fmt.Errorf("reading cursor: %w", err)
	}
	if ok {
		f.cursor.Store(h)
		return nil
	}
	start := f.cfg.StartHeight
	if start == 0 {
		latest, err := f.retry(ctx, "reading the chain height", f.latestHeight)
		if err != nil {
			return err
		}
		// A chain that has not committed a block yet starts at its first.
		start = max(latest, 1)
	}
	if err := f.db.Update(func(tx *db.Tx) error { return tx.SetCursor(start - 1) }); err != nil {
		return fmt.Errorf("storing the initial cursor: %w", err)
	}
	f.cursor.Store(start - 1)
	f.log.Info("no saved position: starting at height", "height", start)
	return nil
}

// retry calls fn until it succeeds or ctx ends, backing off between tries.
func (f *Follower) retry(ctx context.Context, what string, fn func(context.Context) (int64, error)) (int64, error) {
	bo := newBackoff(f.cfg.RetryMin, f.cfg.RetryMax)
	for {
		v, err := fn(ctx)
		if err == nil {
			return v, nil
		}
		f.fetchErrors.Add(1)
		f.noteError(fmt.Errorf("%s: %w", what, err))
		if !sleep(ctx, bo.wait()) {
			return 0, ctx.Err()
		}
	}
}

// catchUp processes every height from the cursor up to the chain's latest.
// It returns an error only when ctx ends or the store fails.
func (f *Follower) catchUp(ctx context.Context) error {
	latest, err := f.latestHeight(ctx)
	if err != nil {
		// The next wake-up or poll tries again.
		f.fetchErrors.Add(1)
		f.noteError(fmt.Errorf("reading the chain height: %w", err))
		return nil
	}
	for h := f.cursor.Load() + 1; h <= latest; h++ {
		if err := f.processHeight(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// processHeight fetches, decodes and hands over one height, then advances
// the cursor. Failures are retried with backoff until they succeed.
func (f *Follower) processHeight(ctx context.Context, height int64) error {
	bo := newBackoff(f.cfg.RetryMin, f.cfg.RetryMax)
	for {
		err := f.tryHeight(ctx, height)
		if err == nil {
			f.clearError()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, db.ErrCursorGap) {
			// Someone else moved the cursor under us; continuing would skip or
			// repeat heights.
			return err
		}
		f.noteError(err)
		f.log.Warn("processing height failed; retrying", "height", height, "err", err)
		if !sleep(ctx, bo.wait()) {
			return ctx.Err()
		}
	}
}

func (f *Follower) tryHeight(ctx context.Context, height int64) error {
	events, err := f.fetchEvents(ctx, height)
	if err != nil {
		f.fetchErrors.Add(1)
		return fmt.Errorf("height %d: %w", height, err)
	}
	if err := f.handle(ctx, height, events); err != nil {
		f.handlerErrors.Add(1)
		return fmt.Errorf("height %d: handler: %w", height, err)
	}
	if err := f.db.Update(func(tx *db.Tx) error { return tx.AdvanceCursor(height) }); err != nil {
		return fmt.Errorf("height %d: advancing cursor: %w", height, err)
	}
	f.cursor.Store(height)
	f.eventsDelivered.Add(uint64(len(events)))
	f.noteChainHeight(height)
	return nil
}

// fetchEvents reads a height's block results (and, when it has transactions,
// the block for their hashes) and decodes its typed events.
func (f *Follower) fetchEvents(ctx context.Context, height int64) ([]Event, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.RequestTimeout)
	defer cancel()
	results, err := f.rpc.BlockResults(ctx, &height)
	if err != nil {
		return nil, fmt.Errorf("block_results: %w", err)
	}
	var hashes []string
	if len(results.TxsResults) > 0 {
		block, err := f.rpc.Block(ctx, &height)
		if err != nil {
			return nil, fmt.Errorf("block: %w", err)
		}
		txs := block.Block.Txs
		if len(txs) != len(results.TxsResults) {
			return nil, fmt.Errorf("block has %d transactions but %d results", len(txs), len(results.TxsResults))
		}
		hashes = make([]string, len(txs))
		for i, tx := range txs {
			hashes[i] = fmt.Sprintf("%X", tx.Hash())
		}
	}
	return f.decoder.decode(height, hashes, results), nil
}

func (f *Follower) latestHeight(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.RequestTimeout)
	defer cancel()
	st, err := f.rpc.Status(ctx)
	if err != nil {
		return 0, err
	}
	h := st.SyncInfo.LatestBlockHeight
	f.noteChainHeight(h)
	return h, nil
}

// noteChainHeight raises the known chain height; reports from the poll and
// the websocket race, and the older one must not win.
func (f *Follower) noteChainHeight(h int64) {
	for {
		cur := f.chainHeight.Load()
		if h <= cur || f.chainHeight.CompareAndSwap(cur, h) {
			return
		}
	}
}

// newBlockHeaderQuery selects the event that wakes the follower.
const newBlockHeaderQuery = "tm.event='NewBlockHeader'"

// watchHeaders keeps a NewBlockHeader subscription alive, forever: each
// header pokes wake. When the subscription fails or goes silent it is torn
// down and re-established with capped exponential backoff; meanwhile Run
// polls.
func (f *Follower) watchHeaders(ctx context.Context, wake chan<- struct{}) {
	bo := newBackoff(f.cfg.RetryMin, f.cfg.RetryMax)
	for {
		delivered, err := f.subscribeHeaders(ctx, wake)
		f.wsConnected.Store(false)
		if ctx.Err() != nil {
			return
		}
		// Let Run switch to fast polling now rather than after its current wait.
		poke(wake)
		if delivered {
			bo.reset()
		}
		f.wsReconnects.Add(1)
		wait := bo.wait()
		f.log.Warn("block header subscription lost; polling until it is back", "err", err, "retry_in", wait)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// subscribeHeaders runs one websocket session. It reports whether any
// header arrived, and why the session ended.
func (f *Follower) subscribeHeaders(ctx context.Context, wake chan<- struct{}) (delivered bool, err error) {
	// The client's own reconnect loop is switched off: it gives up after a
	// fixed number of tries and does not resubscribe without help. This loop
	// reconnects instead, forever, with a fresh client each time. Pings make a
	// dropped connection fail a write (which closes ResponsesCh) instead of
	// waiting for the silence timeout.
	ws, err := jsonrpcclient.NewWS(f.cfg.RPC, "/websocket",
		jsonrpcclient.MaxReconnectAttempts(0),
		jsonrpcclient.PingPeriod(f.cfg.WebsocketTimeout/3))
	if err != nil {
		return false, err
	}
	if err := ws.Start(); err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer func() { _ = ws.Stop() }()

	subCtx, cancel := context.WithTimeout(ctx, f.cfg.RequestTimeout)
	err = ws.Subscribe(subCtx, newBlockHeaderQuery)
	cancel()
	if err != nil {
		return false, fmt.Errorf("subscribing: %w", err)
	}

	silence := time.NewTimer(f.cfg.WebsocketTimeout)
	defer silence.Stop()
	for {
		select {
		case <-ctx.Done():
			return delivered, ctx.Err()
		case <-silence.C:
			return delivered, fmt.Errorf("no block header for %s", f.cfg.WebsocketTimeout)
		case resp, ok := <-ws.ResponsesCh:
			if !ok {
				return delivered, errors.New("connection closed")
			}
			if resp.Error != nil {
				return delivered, fmt.Errorf("subscription refused: %w", resp.Error)
			}
			var result ctypes.ResultEvent
			if err := cmtjson.Unmarshal(resp.Result, &result); err != nil {
				return delivered, fmt.Errorf("decoding event: %w", err)
			}
			header, ok := result.Data.(cmttypes.EventDataNewBlockHeader)
			if !ok {
				continue // the subscription's acknowledgement carries no event
			}
			if !delivered {
				delivered = true
				f.wsConnected.Store(true)
				f.log.Info("block header subscription up", "height", header.Header.Height)
			}
			f.noteChainHeight(header.Header.Height)
			silence.Reset(f.cfg.WebsocketTimeout)
			poke(wake)
		}
	}
}

// poke signals wake without blocking: a pending wake-up already covers this one.
func poke(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

func (f *Follower) noteError(err error) {
	f.mu.Lock()
	f.lastErr = err.Error()
	f.mu.Unlock()
}

func (f *Follower) clearError() {
	f.mu.Lock()
	f.lastErr = ""
	f.mu.Unlock()
}
