package keeper_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	storetypes "cosmossdk.io/store/types"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
)

// dueJobsPerBlock is how many auctions close in the measured block, whatever the number
// of other jobs.
const dueJobsPerBlock = 5

// farFuture is a bidding window no benchmark or test reaches.
const farFuture = 1 << 40

// endBlockerBench is a chain with open jobs whose auctions close far in the future.
type endBlockerBench struct {
	f     *keepers.Fixture
	msg   types.MsgServer
	owner string
}

func newEndBlockerBench(tb testing.TB, openJobs int) *endBlockerBench {
	tb.Helper()
	f := keepers.New(tb, keepers.Committing())
	bb := &endBlockerBench{f: f, msg: keeper.NewMsgServerImpl(f.Market)}
	owner := addr("owner")
	bb.owner = owner.String()
	f.Fund(tb, owner, int64(openJobs+1_000_000)*jobDeposit)
	p, err := f.Market.Params.Get(f.Ctx)
	require.NoError(tb, err)
	p.MaxBiddingWindowBlocks = farFuture
	require.NoError(tb, f.Market.Params.Set(f.Ctx, p))
	far := spec()
	far.BiddingWindowBlocks = farFuture
	for i := 0; i < openJobs; i++ {
		_, err := bb.msg.SubmitJob(f.Ctx, &types.MsgSubmitJob{Owner: bb.owner, Spec: far, Deposit: coin(jobDeposit)})
		require.NoError(tb, err)
	}
	bb.commit()
	return bb
}

// commit writes the block's changes to the IAVL trees, as the chain does after every
// block, so that reads in the next block go to committed state and not to a growing
// in-memory set of unsaved changes.
func (bb *endBlockerBench) commit() {
	bb.f.Ctx.MultiStore().(storetypes.CommitMultiStore).Commit()
}

// prepareDueBlock submits dueJobsPerBlock jobs without bids and moves to the height where
// their auctions close (they will expire and refund their deposits), then commits.
func (bb *endBlockerBench) prepareDueBlock(tb testing.TB) {
	tb.Helper()
	s := spec()
	s.BiddingWindowBlocks = types.DefaultParams().MinBiddingWindowBlocks
	for i := 0; i < dueJobsPerBlock; i++ {
		_, err := bb.msg.SubmitJob(bb.f.Ctx, &types.MsgSubmitJob{Owner: bb.owner, Spec: s, Deposit: coin(jobDeposit)})
		require.NoError(tb, err)
	}
	header := bb.f.Ctx.BlockHeader()
	header.Height += int64(s.BiddingWindowBlocks)
	bb.f.Ctx = bb.f.Ctx.WithBlockHeader(header)
	bb.commit()
}

// BenchmarkEndBlocker measures one EndBlocker call in a block where exactly
// dueJobsPerBlock auctions close (and expire, refunding their owners), next to N other
// open jobs whose auctions close far in the future. The due jobs are re-created for every
// iteration with the timer stopped.
//
// How the ratio is computed: run
//
//	go test -run '^$' -bench BenchmarkEndBlocker ./x/market/keeper
//
// and divide the ns/op of open_jobs=10000 by the ns/op of open_jobs=100 (on a shared
// machine, use -count and compare the minimums). EndBlocker walks each deadline index only
// up to "now", so the far jobs are never visited: allocs/op and gas/op (the store work)
// are the same for both sizes, and the time ratio stays near 1; what remains is the
// deeper IAVL tree and bigger database, O(log N) per store access.
// TestEndBlockerGasDoesNotGrowWithOpenJobs checks the same property exactly, in gas.
func BenchmarkEndBlocker(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("open_jobs=%d", n), func(b *testing.B) {
			bb := newEndBlockerBench(b, n)
			b.ReportAllocs()
			var gas uint64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				bb.prepareDueBlock(b)
				// As in FinalizeBlock: the block runs on a cache over the committed stores,
				// written back when the block commits.
				block := bb.f.Ctx.MultiStore().CacheMultiStore()
				ctx := bb.f.Ctx.WithMultiStore(block).WithEventManager(sdk.NewEventManager()).
					WithGasMeter(storetypes.NewInfiniteGasMeter())
				b.StartTimer()
				if err := bb.f.Market.EndBlocker(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				gas += ctx.GasMeter().GasConsumed()
				block.Write()
				b.StartTimer()
			}
			b.StopTimer()
			// Store work per block, independent of machine load: equal for both sizes.
			b.ReportMetric(float64(gas)/float64(b.N), "gas/op")
			bb.commit()
			// Every due auction was processed, none of the far ones.
			iter, err := bb.f.Market.Jobs.Indexes.State.MatchExact(bb.f.Ctx, int32(types.JOB_STATE_OPEN))
			require.NoError(b, err)
			open, err := iter.PrimaryKeys()
			require.NoError(b, err)
			require.Len(b, open, n)
		})
	}
}

// TestEndBlockerGasDoesNotGrowWithOpenJobs: the store work (gas) of a block in which five
// auctions close is the same whether 10 or 2,000 other jobs are open. The only allowed
// difference is a byte or two per value (bigger ids and balances), far below what visiting
// even one more job would cost.
func TestEndBlockerGasDoesNotGrowWithOpenJobs(t *testing.T) {
	gasFor := func(openJobs int) uint64 {
		bb := newEndBlockerBench(t, openJobs)
		bb.prepareDueBlock(t)
		ctx := bb.f.Ctx.WithGasMeter(storetypes.NewInfiniteGasMeter())
		require.NoError(t, bb.f.Market.EndBlocker(ctx))
		iter, err := bb.f.Market.Jobs.Indexes.State.MatchExact(bb.f.Ctx, int32(types.JOB_STATE_EXPIRED))
		require.NoError(t, err)
		expired, err := iter.PrimaryKeys()
		require.NoError(t, err)
		require.Len(t, expired, dueJobsPerBlock)
		msg, broken := keeper.AllInvariants(bb.f.Market)(bb.f.Ctx)
		require.False(t, broken, msg)
		return ctx.GasMeter().GasConsumed()
	}
	small, large := gasFor(10), gasFor(2_000)
	t.Logf("EndBlocker gas with 5 due auctions: %d (10 open jobs), %d (2000 open jobs)", small, large)
	require.Positive(t, small)
	require.InEpsilon(t, float64(small), float64(large), 0.02, "gas %d with 10 open jobs, %d with 2000", small, large)
}
