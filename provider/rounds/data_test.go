package rounds

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/datasets"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// flakyDatasets fails PrepareRound with errs in turn, then succeeds.
type flakyDatasets struct {
	errs  []error
	calls int
}

func (d *flakyDatasets) PrepareRound(context.Context, markettypes.Job, uint32, uint64, string) (datasets.Result, error) {
	d.calls++
	if d.calls <= len(d.errs) {
		return datasets.Result{}, d.errs[d.calls-1]
	}
	return datasets.Result{}, nil
}

// A round's data whose shards have too few active holders is waited for (their replicas
// are being repaired), not failed at once; a round without shards for the slot is not
// retried; data still missing after CheckWait fails with the fetcher's error.
func TestRoundDataWaitsForItsShardsHolders(t *testing.T) {
	unavailable := errors.Join(datasets.ErrNotFetchable, errors.New("shard 8: 1 of its 3 pieces could be had intact"))
	for _, tc := range []struct {
		name      string
		errs      []error
		wait      time.Duration
		want      error
		wantCalls int
	}{
		{"repaired while waiting", []error{unavailable, unavailable}, time.Minute, nil, 3},
		{"no shard in the round", []error{datasets.ErrNoShardInRound}, time.Minute, ErrNoData, 1},
		{"never repaired", []error{unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable}, 50 * time.Millisecond, datasets.ErrNotFetchable, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &flakyDatasets{errs: tc.errs}
			r := &Role{opts: Options{Datasets: d, PollInterval: 10 * time.Millisecond, CheckWait: tc.wait}, log: slog.New(slog.DiscardHandler)}
			err := r.datasetData(markettypes.Job{Id: 1})(context.Background(), 0, 0, t.TempDir())
			switch {
			case tc.want == nil && err != nil, tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err %v, want %v", err, tc.want)
			case tc.wantCalls > 0 && d.calls != tc.wantCalls:
				t.Fatalf("%d calls, want %d", d.calls, tc.wantCalls)
			case tc.wantCalls < 0 && (d.calls < 2 || d.calls > len(tc.errs)):
				t.Fatalf("%d calls: want retries until CheckWait, then the error", d.calls)
			}
		})
	}
}
