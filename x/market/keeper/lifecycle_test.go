package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"

	"github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// runPastCheckpointDeadline runs blocks until the lease's checkpoint deadline has been processed.
func (e *env) runPastCheckpointDeadline(leaseID uint64) {
	e.t.Helper()
	deadline := e.lease(leaseID).CheckpointDeadline
	for e.Ctx.BlockHeight() <= deadline {
		e.nextBlock(blockTime)
	}
}

func TestNonPerformanceClosesSlashesJailsAndReopens(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 1000)
	bondBefore := e.provider(alice).Bond
	poolBefore := e.ModuleBalance(distrtypes.ModuleName)

	deadline := l.CheckpointDeadline
	for e.Ctx.BlockHeight() < deadline {
		e.nextBlock(blockTime)
	}
	require.Equal(t, types.LEASE_STATE_ACTIVE, e.lease(l.Id).State, "the deadline height itself is still in time")
	e.nextBlock(blockTime)
	closedAt := e.lease(l.Id).ClosedAt

	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_CLOSED, l.State)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, l.CloseReason)
	require.True(t, l.Pending.IsZero(), "nothing was checkpointed, so nothing stays pending")

	p := e.provider(alice)
	slash := math.LegacyNewDecWithPrec(1, 2).MulInt(bondBefore.Amount).TruncateInt()
	require.Equal(t, bondBefore.Amount.Sub(slash), p.Bond.Amount, "bond reduced by non_performance_slash_fraction")
	require.Equal(t, poolBefore.Add(slash), e.ModuleBalance(distrtypes.ModuleName), "the slash funds the community pool")
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_JAILED, p.Status)
	require.Equal(t, closedAt.Add(time.Hour), p.JailedUntil)
	require.True(t, p.Locked.IsZero(), "collateral is unlocked")
	require.Equal(t, uint64(1), p.Reputation.LeasesFailed)
	require.Equal(t, uint64(1), p.Reputation.Slashes)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_OPEN, job.State)
	require.Equal(t, coin(jobDeposit), job.Escrow, "unclaimed pending went back to the escrow")
	require.Equal(t, deadline+bidWindow, job.BiddingDeadline)
	reopened := typedEvents[*types.EventJobReopened](e)
	require.Len(t, reopened, 1)
	require.Equal(t, jobID, reopened[0].JobId)
	require.Equal(t, []uint32{0}, reopened[0].VacantWorkers)
	require.Equal(t, uint32(2), reopened[0].AuctionRound)

	// The jailed provider cannot win the new round; the job expires without bids.
	e.requireRejected(types.ErrProviderIneligible, func() error {
		_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: alice.String(), JobId: jobID, PricePerGpuHour: coin(1000), StepsPerHour: testRate})
		return err
	})
	e.closeAuction(jobID)
	require.Equal(t, types.JOB_STATE_EXPIRED, e.job(jobID).State)
	require.Equal(t, int64(ownerFunds), e.Balance(e.owner).Int64())
}

func TestReplacementLeaseResumesFromLastFinalCheckpoint(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.registerProvider("alice"), e.registerProvider("bob")
	jobID, first := e.leaseJob(alice, 1000)

	e.advance(10)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, first.Id, 300)
	require.NoError(t, err)
	e.advance(3)
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, first.Id, claim, 300, []byte("hash-at-300"), "https://alice.example.com/ckpt/300", ""))
	// A later checkpoint that is still pending when alice goes silent.
	e.advance(5)
	claim2, err := e.Market.OnCheckpointSubmitted(e.Ctx, first.Id, 400)
	require.NoError(t, err)

	e.runPastCheckpointDeadline(first.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, e.lease(first.Id).CloseReason)
	require.Equal(t, claim2, e.lease(first.Id).Pending, "the claimed part waits for its checkpoint")
	require.Equal(t, types.JOB_STATE_OPEN, e.job(jobID).State)

	e.bid(bob, jobID, 1000)
	e.closeAuction(jobID)
	active := e.activeLeasesOfJob(jobID)
	require.Len(t, active, 1)
	second := active[0]
	require.Equal(t, bob.String(), second.Provider)
	require.Equal(t, uint32(0), second.Worker)
	require.Equal(t, uint64(300), second.ResumeStep)
	require.Equal(t, []byte("hash-at-300"), second.ResumeHash)
	require.Equal(t, "https://alice.example.com/ckpt/300", second.ResumeUri)
	created := typedEvents[*types.EventLeaseCreated](e)
	require.Equal(t, uint64(300), created[len(created)-1].ResumeStep)
	require.Equal(t, []byte("hash-at-300"), created[len(created)-1].ResumeHash)
	require.Equal(t, types.JOB_STATE_LEASED, e.job(jobID).State)
}

func TestRejectionOfReplacedLeaseKeepsReplacementRunning(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.registerProvider("alice"), e.registerProvider("bob")
	jobID, first := e.leaseJob(alice, 1000)
	e.advance(10)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, first.Id, 100)
	require.NoError(t, err)
	e.runPastCheckpointDeadline(first.Id)
	e.bid(bob, jobID, 1000)
	e.closeAuction(jobID)
	require.Equal(t, types.JOB_STATE_LEASED, e.job(jobID).State)
	escrowBefore := e.job(jobID).Escrow
	roundBefore := e.job(jobID).AuctionRound
	reopenedBefore := len(typedEvents[*types.EventJobReopened](e))

	// x/verify proves alice's old checkpoint wrong while bob is working.
	_, err = e.Market.OnCheckpointRejected(e.Ctx, first.Id)
	require.NoError(t, err)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_LEASED, job.State, "the job has no vacant worker to auction")
	require.Equal(t, roundBefore, job.AuctionRound)
	require.Len(t, typedEvents[*types.EventJobReopened](e), reopenedBefore)
	require.Len(t, e.activeLeasesOfJob(jobID), 1)
	require.True(t, e.lease(first.Id).Pending.IsZero())
	require.Equal(t, escrowBefore.Add(claim), job.Escrow, "the claim went back to the escrow")
	e.queryEscrow(jobID)
}

func TestNonPerformanceWithZeroSlashFractionStillClosesLease(t *testing.T) {
	e := newEnv(t)
	e.setParams(func(p *types.Params) { p.NonPerformanceSlashFraction = math.LegacyZeroDec() })
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 1000)
	bondBefore := e.provider(alice).Bond

	e.runPastCheckpointDeadline(l.Id)

	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, e.lease(l.Id).CloseReason)
	p := e.provider(alice)
	require.Equal(t, bondBefore, p.Bond, "a zero fraction slashes nothing")
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_JAILED, p.Status)
	require.Equal(t, types.JOB_STATE_OPEN, e.job(jobID).State)
}

func TestCancelOpenJobRefundsDeposit(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	before := e.Balance(e.owner)
	jobID := e.submitJob()
	e.bid(alice, jobID, 1000)
	res, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
	require.NoError(t, err)
	require.Equal(t, coin(jobDeposit), res.Refunded)
	require.Equal(t, before, e.Balance(e.owner))
	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_CANCELLED, job.State)
	require.True(t, job.Escrow.IsZero())
	require.False(t, e.hasBid(alice, jobID), "bids on a cancelled job are dropped")
	require.Empty(t, e.dumpIndexes(), "no deadline is left for a cancelled job")
	closed := typedEvents[*types.EventJobClosed](e)
	require.Len(t, closed, 1)
	require.Equal(t, types.JOB_STATE_CANCELLED, closed[0].State)

	// The cancelled auction's deadline passes without effect.
	e.advance(bidWindow + 1)
	require.Equal(t, types.JOB_STATE_CANCELLED, e.job(jobID).State)
}

func TestCancelLeasedJobSettlesByFinality(t *testing.T) {
	cases := []struct {
		name string
		// settle finishes the committed checkpoint; it reports the coins the provider and
		// the owner gain from it.
		settle func(e *env, leaseID uint64, claim int64) (providerGain, ownerGain int64)
	}{
		{"checkpoint becomes final", func(e *env, leaseID uint64, claim int64) (int64, int64) {
			require.NoError(e.t, e.Market.OnCheckpointFinal(e.Ctx, leaseID, coin(claim), 100, []byte("h"), "", ""))
			res, err := e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: e.lease(leaseID).Provider})
			require.NoError(e.t, err)
			require.Equal(e.t, coin(claim), res.Amount)
			return claim, 0
		}},
		{"checkpoint is rejected", func(e *env, leaseID uint64, claim int64) (int64, int64) {
			_, err := e.Market.OnCheckpointRejected(e.Ctx, leaseID)
			require.NoError(e.t, err)
			return 0, claim
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			alice := e.registerProvider("alice")
			ownerStart := e.Balance(e.owner)
			jobID, l := e.leaseJob(alice, 1800)
			e.advance(10)
			claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
			require.NoError(t, err)
			require.Equal(t, coin(payFor(1800, 2, testRate, 100)), claim)
			e.advance(7) // time without steps: nothing more is owed

			res, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
			require.NoError(t, err)
			require.Equal(t, coin(jobDeposit-claim.Amount.Int64()), res.Refunded, "the unspent escrow")
			require.Equal(t, ownerStart.Sub(claim.Amount), e.Balance(e.owner))
			l = e.lease(l.Id)
			require.Equal(t, types.LEASE_CLOSE_REASON_CANCELLED, l.CloseReason)
			require.Equal(t, claim, l.Pending, "committed pending stays until its checkpoint settles")
			require.Equal(t, claim, l.Committed)
			require.True(t, e.provider(alice).Locked.IsZero())
			require.Equal(t, stakingexttypes.Reputation{}, e.provider(alice).Reputation, "a cancel is nobody's fault")
			require.Equal(t, claim.Amount, e.ModuleBalance(types.ModuleName))

			providerBefore := e.Balance(alice)
			providerGain, ownerGain := tc.settle(e, l.Id, claim.Amount.Int64())
			require.Equal(t, providerBefore.AddRaw(providerGain), e.Balance(alice))
			require.Equal(t, ownerStart.Sub(claim.Amount).AddRaw(ownerGain), e.Balance(e.owner))
			require.True(t, e.ModuleBalance(types.ModuleName).IsZero())
			require.True(t, e.lease(l.Id).Pending.IsZero())
		})
	}
}

// A lease whose checkpoint deadline has passed is lost even while EndBlock's per-block cap
// keeps its deadline entry waiting: a late checkpoint must not move the deadline and
// rescue it from the non-performance close, slash and jail. (Found by the app
// simulation: with max_deadlines_per_block 1, a provider checkpointed a lease one block
// after its deadline and OnCheckpointSubmitted replaced the waiting entry.)
func TestLateCheckpointCannotRescueLeaseWaitingBehindDeadlineCap(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	_, l := e.leaseJob(alice, 1000)
	e.setParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 1 })

	// Another job's auction closes at the lease's deadline height and, coming first in
	// EndBlock's order, takes the block's only deadline slot.
	deadline := l.CheckpointDeadline
	for e.Ctx.BlockHeight() < deadline-bidWindow {
		e.nextBlock(blockTime)
	}
	other := e.submitJob()
	require.Equal(t, deadline, e.job(other).BiddingDeadline)
	for e.Ctx.BlockHeight() <= deadline {
		e.nextBlock(blockTime)
	}
	require.Equal(t, types.JOB_STATE_EXPIRED, e.job(other).State, "the auction took the slot")
	require.Equal(t, types.LEASE_STATE_ACTIVE, e.lease(l.Id).State, "the lease's deadline entry waits for the next block")

	e.requireRejected(types.ErrCheckpointDeadlinePassed, func() error {
		_, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
		return err
	})

	e.nextBlock(blockTime)
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_CLOSED, l.State)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, l.CloseReason)
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_JAILED, e.provider(alice).Status)
}
