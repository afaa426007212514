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
