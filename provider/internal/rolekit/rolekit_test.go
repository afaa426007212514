package rolekit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Push never blocks: past the queue's size it refuses; Serve drains in order.
func TestQueueRefusesWhenFullAndServesInOrder(t *testing.T) {
	q := NewQueue[int](2)
	if !q.Push(1) || !q.Push(2) || q.Push(3) || q.Len() != 2 {
		t.Fatalf("pushes into a queue of 2: len %d", q.Len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	var got []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Serve(ctx, func(_ context.Context, v int) {
			got = append(got, v)
			if len(got) == 2 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not drain two items and stop within 10s")
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("served %v, want [1 2]", got)
	}
}

func TestLastError(t *testing.T) {
	var e LastError
	if msg, at := e.Get(); msg != "" || !at.IsZero() {
		t.Fatalf("fresh: %q %v", msg, at)
	}
	e.Note(errors.New("first"))
	e.Note(errors.New("second"))
	if msg, at := e.Get(); msg != "second" || at.IsZero() {
		t.Fatalf("after two: %q %v", msg, at)
	}
}

// Every runs at once, then on each tick, and stops with ctx.
func TestEveryRunsAtOnceAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not stop within 10s of its context ending")
	}
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
}

func TestPriorityYieldsToHeldWork(t *testing.T) {
	var p Priority
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Yield(ctx); err != nil {
		t.Fatalf("nothing held: %v", err)
	}
	p.Hold()
	p.Hold()
	done := make(chan error, 1)
	go func() { done <- p.Yield(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("yielded while work was held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.Release()
	select {
	case err := <-done:
		t.Fatalf("yielded while one item was still held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.Release()
	if err := <-done; err != nil {
		t.Fatalf("yield after the last release: %v", err)
	}
	short, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	p.Hold()
	if err := p.Yield(short); err == nil {
		t.Fatal("yield returned while work was held and its context ended")
	}
	p.Release()
	p.Release() // an extra release changes nothing
	if p.Held() != 0 {
		t.Fatalf("held %d", p.Held())
	}
}
