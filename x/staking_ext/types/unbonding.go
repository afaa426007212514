package types

import (
	"fmt"
	"math"
	"time"
)

var (
	earliestQueueTime = time.Unix(0, math.MinInt64).UTC()
	latestQueueTime   = time.Unix(0, math.MaxInt64).UTC()
)

// CompletionTimeKey is the key the unbonding queue orders an unbonding by:
// its completion time in Unix nanoseconds, which sorts the same as the time
// itself. Times outside 1677–2262 do not fit and are rejected rather than
// wrapped around.
func CompletionTimeKey(completion time.Time) (int64, error) {
	if completion.Before(earliestQueueTime) || completion.After(latestQueueTime) {
		return 0, fmt.Errorf("completion time %s is outside the unbonding queue's range %s to %s",
			completion.UTC().Format(time.RFC3339), earliestQueueTime.Format(time.RFC3339), latestQueueTime.Format(time.RFC3339))
	}
	return completion.UnixNano(), nil
}
