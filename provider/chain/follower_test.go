package chain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// rpcProxy sits between the follower and the node's RPC. It can cut the
// websocket (close live upgraded connections and refuse new ones) while
// plain HTTP requests, and so polling, keep working: a network failure that
// only hits the long-lived connection.
type rpcProxy struct {
	addr string // tcp://host:port, as the follower is configured
	srv  *http.Server

	mu       sync.Mutex
	cut      bool
	upgraded map[net.Conn]bool
}

func startProxy(t *testing.T, rpc string) *rpcProxy {
	t.Helper()
	target, err := url.Parse(strings.Replace(rpc, "tcp://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rpcProxy{addr: "tcp://" + ln.Addr().String(), upgraded: map[net.Conn]bool{}}
	forward := httputil.NewSingleHostReverseProxy(target)
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if cut && r.URL.Path == "/websocket" {
				http.Error(w, "websocket cut by test", http.StatusServiceUnavailable)
				return
			}
			forward.ServeHTTP(w, r)
		}),
		// The reverse proxy hijacks the client connection of a websocket
		// upgrade; remember those so cutWebsocket can drop them.
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateHijacked {
				p.mu.Lock()
				p.upgraded[c] = true
				p.mu.Unlock()
			}
		},
	}
	go p.srv.Serve(ln)
	t.Cleanup(func() {
		p.srv.Close()
		p.restoreWebsocket()
		p.mu.Lock()
		for c := range p.upgraded {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *rpcProxy) cutWebsocket() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.upgraded {
		c.Close()
		delete(p.upgraded, c)
	}
}

func (p *rpcProxy) restoreWebsocket() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// collector is a Handler that records what it was given and checks that
// heights arrive one at a time, in order.
type collector struct {
	mu      sync.Mutex
	heights []int64
	events  []Event
	err     error
}

func (c *collector) handle(_ context.Context, height int64, events []Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.heights); n > 0 && height != c.heights[n-1]+1 && c.err == nil {
		c.err = fmt.Errorf("height %d delivered after %d", height, c.heights[n-1])
	}
	for _, e := range events {
		if e.Height != height && c.err == nil {
			c.err = fmt.Errorf("event of height %d delivered with height %d", e.Height, height)
		}
	}
	c.heights = append(c.heights, height)
	c.events = append(c.events, events...)
	return nil
}

// matching returns the recorded events for which keep holds.
func (c *collector) matching(keep func(Event) bool) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Event
	for _, e := range c.events {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func jobCreated(id uint64) func(Event) bool {
	return func(e Event) bool {
		m, ok := e.Message.(*markettypes.EventJobCreated)
		return ok && m.JobId == id
	}
}

func jobClosed(id uint64) func(Event) bool {
	return func(e Event) bool {
		m, ok := e.Message.(*markettypes.EventJobClosed)
		return ok && m.JobId == id
	}
}

// runFollower starts a follower and returns a function that stops it and
// waits for Run to return.
func runFollower(t *testing.T, f *Follower) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("follower did not stop")
		}
	}
}

func TestFollowerDeliversEveryEventOnceAcrossRestartsAndWebsocketLoss(t *testing.T) {
	ctx := needChain(t)
	proxy := startProxy(t, node.RPC)
	st := openStore(t)
	got := &collector{}
	start, err := node.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := FollowerConfig{
		RPC:              proxy.addr,
		StartHeight:      start,
		PollInterval:     200 * time.Millisecond,
		WebsocketTimeout: 3 * time.Second,
		RetryMin:         100 * time.Millisecond,
		RetryMax:         time.Second,
	}
	newFollower := func() *Follower {
		f, err := NewFollower(cfg, st, got.handle)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	seen := func(what string, keep func(Event) bool) Event {
		t.Helper()
		eventually(t, 30*time.Second, what, func() bool { return len(got.matching(keep)) > 0 })
		return got.matching(keep)[0]
	}

	// Phase 1: a live follower sees transaction events and end-block events.
	f := newFollower()
	stop := runFollower(t, f)
	eventually(t, 30*time.Second, "the websocket subscription", func() bool { return f.Status().WebsocketConnected })

	reg := registerProvider(t, ctx, keyWatched)
	watched := mustAddr(t, ctx, keyWatched)
	regEvent := seen("EventProviderRegistered", func(e Event) bool {
		m, ok := e.Message.(*stakingexttypes.EventProviderRegistered)
		return ok && m.Operator == watched
	})
	if regEvent.Source != reg.Hash || regEvent.Height != reg.Height || regEvent.TxIndex < 0 {
		t.Errorf("EventProviderRegistered came from %s at %d (tx %d), want tx %s at %d", regEvent.Source, regEvent.Height, regEvent.TxIndex, reg.Hash, reg.Height)
	}

	// A job with the shortest bidding window and no bids expires in EndBlock:
	// its EventJobClosed exists only among the finalize-block events.
	jobTx, jobA := submitJob(t, ctx, 2)
	created := seen("EventJobCreated A", jobCreated(jobA))
	if created.Source != jobTx.Hash || created.Height != jobTx.Height {
		t.Errorf("EventJobCreated from %s at %d, want %s at %d", created.Source, created.Height, jobTx.Hash, jobTx.Height)
	}
	closed := seen("EventJobClosed A", jobClosed(jobA))
	if closed.Source != FinalizeBlock || closed.TxIndex != -1 {
		t.Errorf("EventJobClosed came from %q (tx %d), want %q", closed.Source, closed.TxIndex, FinalizeBlock)
	}
	if m := closed.Message.(*markettypes.EventJobClosed); m.State != markettypes.JOB_STATE_EXPIRED {
		t.Errorf("job %d closed as %s, want EXPIRED", jobA, m.State)
	}
	if closed.Height < jobTx.Height+2 {
		t.Errorf("job closed at %d, before its bidding window (created at %d) ended", closed.Height, jobTx.Height)
	}

	// Phase 2: stopped, the follower misses a whole job's life.
	stop()
	stoppedAt, _, err := st.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	_, jobB := submitJob(t, ctx, 2)
	var job markettypes.QueryJobResponse
	eventually(t, 30*time.Second, "job B to expire", func() bool {
		resp, err := markettypes.NewQueryClient(conn).Job(ctx, &markettypes.QueryJobRequest{JobId: jobB})
		if err == nil {
			job = *resp
		}
		return err == nil && job.Job.State == markettypes.JOB_STATE_EXPIRED
	})
	if n := len(got.matching(jobCreated(jobB))); n != 0 {
		t.Fatalf("a stopped follower delivered %d events", n)
	}

	// Phase 3: restarted with the websocket unreachable, it replays from the
	// stored cursor and keeps up by polling.
	proxy.cutWebsocket()
	f = newFollower()
	stop = runFollower(t, f)
	seen("EventJobCreated B (replayed)", jobCreated(jobB))
	seen("EventJobClosed B (replayed)", jobClosed(jobB))
	if f.Status().CursorHeight <= stoppedAt {
		t.Errorf("cursor %d did not move past %d", f.Status().CursorHeight, stoppedAt)
	}
	_, jobC := submitJob(t, ctx, 2)
	seen("EventJobClosed C (while the websocket is cut)", jobClosed(jobC))
	if f.Status().WebsocketConnected {
		t.Fatal("websocket reported connected through a cut proxy")
	}

	// Phase 4: the websocket comes back and is used again.
	proxy.restoreWebsocket()
	eventually(t, 30*time.Second, "the websocket to reconnect", func() bool { return f.Status().WebsocketConnected })

	// Phase 5: the live connection drops mid-run for several blocks.
	reconnects := f.Status().WebsocketReconnects
	proxy.cutWebsocket()
	eventually(t, 15*time.Second, "the follower to notice the dropped websocket", func() bool { return !f.Status().WebsocketConnected })
	_, jobD := submitJob(t, ctx, 2)
	seen("EventJobClosed D (after the websocket dropped)", jobClosed(jobD))
	proxy.restoreWebsocket()
	eventually(t, 30*time.Second, "the websocket to reconnect again", func() bool { return f.Status().WebsocketConnected })
	if f.Status().WebsocketReconnects <= reconnects {
		t.Errorf("reconnects = %d, want more than %d", f.Status().WebsocketReconnects, reconnects)
	}
	stop()

	// Every height from the start to the cursor was handed over exactly once,
	// and so was every event.
	if got.err != nil {
		t.Fatal(got.err)
	}
	cursor, _, err := st.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.heights) == 0 || got.heights[0] != start || got.heights[len(got.heights)-1] != cursor {
		t.Fatalf("heights %d..%d delivered, want %d..%d", got.heights[0], got.heights[len(got.heights)-1], start, cursor)
	}
	if want := int(cursor - start + 1); len(got.heights) != want {
		t.Fatalf("%d height deliveries for %d heights", len(got.heights), want)
	}
	keys := map[string]bool{}
	for _, e := range got.events {
		if keys[e.Key()] {
			t.Errorf("event %s (%s) delivered twice", e.Key(), e.Type())
		}
		keys[e.Key()] = true
	}
	for _, id := range []uint64{jobA, jobB, jobC, jobD} {
		if n := len(got.matching(jobCreated(id))); n != 1 {
			t.Errorf("job %d: EventJobCreated delivered %d times", id, n)
		}
		if n := len(got.matching(jobClosed(id))); n != 1 {
			t.Errorf("job %d: EventJobClosed delivered %d times", id, n)
		}
	}
	if s := f.Status(); s.EventsDelivered == 0 || s.Lag < 0 || s.DecodeErrors != 0 {
		t.Errorf("status after the run: %+v", s)
	}
}

func TestFollowerRetriesAFailingHeightUntilItSucceeds(t *testing.T) {
	ctx := needChain(t)
	st := openStore(t)
	start, err := node.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const failures = 3
	var (
		mu      sync.Mutex
		calls   = map[int64]int{}
		order   []int64
		cursors []int64 // the stored cursor at each call
	)
	handle := func(_ context.Context, height int64, _ []Event) error {
		mu.Lock()
		defer mu.Unlock()
		cur, _, err := st.Cursor()
		if err != nil {
			return err
		}
		calls[height]++
		order = append(order, height)
		cursors = append(cursors, cur)
		if height == start && calls[height] <= failures {
			return errors.New("disk full")
		}
		return nil
	}
	f, err := NewFollower(FollowerConfig{RPC: node.RPC, StartHeight: start, PollInterval: 200 * time.Millisecond, RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond}, st, handle)
	if err != nil {
		t.Fatal(err)
	}
	stop := runFollower(t, f)
	eventually(t, 30*time.Second, "the follower to pass the failing height", func() bool { return f.Status().CursorHeight >= start+2 })
	stop()

	mu.Lock()
	defer mu.Unlock()
	if calls[start] != failures+1 {
		t.Errorf("failing height handled %d times, want %d", calls[start], failures+1)
	}
	for i, h := range order {
		if h != start && calls[h] != 1 {
			t.Errorf("height %d handled %d times", h, calls[h])
		}
		if cursors[i] != h-1 {
			t.Errorf("height %d handled with the cursor at %d: the cursor moved past an unprocessed height", h, cursors[i])
		}
	}
	if s := f.Status(); s.HandlerErrors != failures {
		t.Errorf("HandlerErrors = %d, want %d", s.HandlerErrors, failures)
	}
}

func TestFollowerStartsAtTheChainHeightOnFirstRun(t *testing.T) {
	ctx := needChain(t)
	st := openStore(t)
	before, err := node.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := &collector{}
	f, err := NewFollower(FollowerConfig{RPC: node.RPC, PollInterval: 200 * time.Millisecond}, st, got.handle)
	if err != nil {
		t.Fatal(err)
	}
	stop := runFollower(t, f)
	eventually(t, 30*time.Second, "a few heights", func() bool {
		got.mu.Lock()
		defer got.mu.Unlock()
		return len(got.heights) >= 3
	})
	stop()
	got.mu.Lock()
	defer got.mu.Unlock()
	if first := got.heights[0]; first < before || first > before+3 {
		t.Errorf("first start processed height %d first; the chain was at %d", first, before)
	}
}
