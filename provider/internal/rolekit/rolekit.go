// Package rolekit holds the small pieces every role of the sidecar is built
// from: a queue of work one worker drains in order, a periodic loop, and
// the last error a role met, for the status API.
package rolekit

import (
	"context"
	"sync"
	"time"
)

// Queue is a bounded queue of work for one worker. Push never blocks: a
// role's event handler may call it inside the daemon's database
// transaction.
type Queue[T any] struct{ ch chan T }

// NewQueue returns a queue holding at most size items.
func NewQueue[T any](size int) Queue[T] { return Queue[T]{ch: make(chan T, size)} }

// Push queues v and reports whether there was room.
func (q Queue[T]) Push(v T) bool {
	select {
	case q.ch <- v:
		return true
	default:
		return false
	}
}

// Len is how many items wait.
func (q Queue[T]) Len() int { return len(q.ch) }

// Serve calls fn on each queued item, one at a time and in order, until
// ctx ends.
func (q Queue[T]) Serve(ctx context.Context, fn func(context.Context, T)) {
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-q.ch:
			fn(ctx, v)
		}
	}
}

// Every calls fn at once and then every interval, until ctx ends.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// LastError is the most recent error a role met. The zero value is ready;
// it is safe for concurrent use.
type LastError struct {
	mu  sync.Mutex
	msg string
	at  time.Time
}

// Note records err as the most recent error.
func (e *LastError) Note(err error) {
	e.mu.Lock()
	e.msg, e.at = err.Error(), time.Now()
	e.mu.Unlock()
}

// Get returns the most recent error and when it happened; "" before any.
func (e *LastError) Get() (string, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.msg, e.at
}

// Priority lets one worker's work go before another's: the first holds it while it has
// work queued (Hold, Release), the second calls Yield before each item and waits while
// anything is held. The zero value is ready; it is safe for concurrent use.
type Priority struct {
	mu   sync.Mutex
	held int
	// free is closed while nothing is held; nil until first used.
	free chan struct{}
}

func (p *Priority) freeLocked() chan struct{} {
	if p.free == nil {
		p.free = make(chan struct{})
		if p.held == 0 {
			close(p.free)
		}
	}
	return p.free
}

// Hold marks one item of priority work; Release it when done.
func (p *Priority) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freeLocked()
	if p.held == 0 {
		p.free = make(chan struct{})
	}
	p.held++
}

// Release ends one Hold.
func (p *Priority) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freeLocked()
	if p.held == 0 {
		return
	}
	p.held--
	if p.held == 0 {
		close(p.free)
	}
}

// Held is how many items of priority work are held now.
func (p *Priority) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Yield waits until no priority work is held, or ctx ends (its error then).
func (p *Priority) Yield(ctx context.Context) error {
	p.mu.Lock()
	free := p.freeLocked()
	p.mu.Unlock()
	select {
	case <-free:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
