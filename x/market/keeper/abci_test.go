package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/market/types"
)

func TestEndBlockerProcessesAtMostMaxDeadlinesPerBlockInOrder(t *testing.T) {
	e := newEnv(t)
	e.setParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 5 })
	var ids []uint64
	for i := 0; i < 12; i++ {
		ids = append(ids, e.submitJob())
	}
	deadline := e.job(ids[0]).BiddingDeadline
	e.nextBlock(blockTime)
	later := e.submitJob() // due one block after the twelve
	require.Equal(t, deadline+1, e.job(later).BiddingDeadline)
	ids = append(ids, later)
	for e.Ctx.BlockHeight() < deadline {
		e.nextBlock(blockTime)
	}

	expired := func() []uint64 {
		var out []uint64
		for _, id := range ids {
			if e.job(id).State == types.JOB_STATE_EXPIRED {
				out = append(out, id)
			}
		}
		return out
	}
	closedInBlock := func() []uint64 {
		var out []uint64
		for _, ev := range typedEvents[*types.EventJobClosed](e) {
			out = append(out, ev.JobId)
		}
		e.events = nil
		return out
	}
	e.events = nil

	// Height deadline: the first five of the twelve.
	e.nextBlock(blockTime)
	require.Equal(t, ids[:5], expired())
	require.Equal(t, ids[:5], closedInBlock())
	// The next block: the next five; the job due at this height waits behind them.
	e.nextBlock(blockTime)
	require.Equal(t, ids[:10], expired())
	require.Equal(t, ids[5:10], closedInBlock())
	// The third block: the last two of the twelve, then the later one.
	e.nextBlock(blockTime)
	require.Equal(t, ids, expired())
	require.Equal(t, ids[10:], closedInBlock())
	require.Empty(t, e.dumpIndexes())
}

func TestEndBlockerBudgetIsSharedAcrossDeadlineKinds(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.registerProvider("alice"), e.registerProvider("bob")
	s := spec()
	s.Workers = 2
	two := e.submitJobWith(s, jobDeposit)
	e.bid(alice, two, 1000)
	e.bid(bob, two, 1000)
	e.closeAuction(two)
	leases := e.activeLeasesOfJob(two)
	require.Len(t, leases, 2)
	deadline := leases[0].CheckpointDeadline
	require.Equal(t, deadline, leases[1].CheckpointDeadline)
	e.setParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 3 })
	for e.Ctx.BlockHeight() < deadline-bidWindow {
		e.nextBlock(blockTime)
	}
	a1, a2 := e.submitJob(), e.submitJob() // two auctions due at the same height
	require.Equal(t, deadline, e.job(a1).BiddingDeadline)
	for e.Ctx.BlockHeight() <= deadline {
		e.nextBlock(blockTime)
	}

	// Auctions go first, then as many checkpoint deadlines as the budget allows.
	require.Equal(t, types.JOB_STATE_EXPIRED, e.job(a1).State)
	require.Equal(t, types.JOB_STATE_EXPIRED, e.job(a2).State)
	require.Equal(t, types.LEASE_STATE_CLOSED, e.lease(leases[0].Id).State)
	require.Equal(t, types.LEASE_STATE_ACTIVE, e.lease(leases[1].Id).State, "over budget: waits a block")
	e.nextBlock(blockTime)
	require.Equal(t, types.LEASE_STATE_CLOSED, e.lease(leases[1].Id).State)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, e.lease(leases[1].Id).CloseReason)
}

func TestBeginBlockerKeepsBlockHashesForRetentionWindow(t *testing.T) {
	e := newEnv(t)
	e.setParams(func(p *types.Params) { p.BlockHashRetention = 3 })
	e.advance(6)
	h := e.Ctx.BlockHeight()
	for _, height := range []int64{h, h - 1, h - 2} {
		hash, err := e.Market.BlockHash(e.Ctx, height)
		require.NoError(t, err)
		require.Equal(t, byte(height), hash[31], "the hash recorded at height %d", height)
	}
	_, err := e.Market.BlockHash(e.Ctx, h-3)
	require.ErrorIs(t, err, types.ErrBlockHashUnavailable)
	_, err = e.Market.BlockHash(e.Ctx, h+1)
	require.ErrorIs(t, err, types.ErrBlockHashUnavailable)
}
