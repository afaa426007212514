package keepers_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"cosmossdk.io/collections"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/testutil/keepers"
)

// recorder is a testing.TB that records a fatal failure instead of ending the test.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs check with a recorder and returns what it failed with ("" if it passed).
func failure(t *testing.T, check func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failure
}

func TestSnapshotSeesEveryChange(t *testing.T) {
	f := keepers.New(t)
	alice := sdk.AccAddress("alice_______________")
	f.Fund(t, alice, 100)
	take := func() keepers.Snapshot {
		return f.Snapshot(t, append([]keepers.Part{f.Balances(), f.MarketState()}, f.MarketDeadlines()...)...)
	}

	before := take()
	if got := failure(t, func(tb testing.TB) { before.RequireUnchanged(tb) }); got != "" {
		t.Fatalf("nothing changed, yet: %s", got)
	}

	f.Fund(t, alice, 1)
	got := failure(t, func(tb testing.TB) { before.RequireUnchanged(tb, "funding %s", "alice") })
	if !strings.Contains(got, "funding alice: balances changed") || !strings.Contains(got, `"101"`) {
		t.Fatalf("a balance change was reported as %q", got)
	}

	before = take()
	if err := f.Market.BiddingDeadlines.Set(f.Ctx, collectionsPair(7, 3)); err != nil {
		t.Fatal(err)
	}
	if got := failure(t, func(tb testing.TB) { before.RequireUnchanged(tb) }); !strings.Contains(got, "market bidding deadlines changed") {
		t.Fatalf("an index change was reported as %q", got)
	}

	before = take()
	f.Ctx.EventManager().EmitEvent(sdk.NewEvent("something"))
	if got := failure(t, func(tb testing.TB) { before.RequireUnchanged(tb) }); !strings.Contains(got, "1 events were emitted") {
		t.Fatalf("an event was reported as %q", got)
	}
}

func TestStorePartSeesRawBytes(t *testing.T) {
	f := keepers.New(t)
	ctx := func() sdk.Context { return f.Ctx }
	key := f.Keys["market"]
	before := keepers.TakeSnapshot(t, ctx, keepers.StorePart("the market store", ctx, key))
	f.Ctx.KVStore(key).Set([]byte{0xfe}, []byte{0x01})
	if got := failure(t, func(tb testing.TB) { before.RequireUnchanged(tb) }); !strings.Contains(got, "+ fe=01") {
		t.Fatalf("a raw write was reported as %q", got)
	}
}

func collectionsPair(height int64, id uint64) collections.Pair[int64, uint64] {
	return collections.Join(height, id)
}
