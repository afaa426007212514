package chain

import (
	"context"
	"time"
)

// backoff doubles a wait from min up to max; reset starts over.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, next: min}
}

// wait returns the current wait and doubles the next one.
func (b *backoff) wait() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

func (b *backoff) reset() { b.next = b.min }

// sleep waits for d or until ctx ends, reporting whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
