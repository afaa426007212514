package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// bidAt places op's bid at a price per GPU-hour and a committed rate.
func (e *env) bidAt(op sdk.AccAddress, jobID uint64, price int64, rate uint64) {
	e.t.Helper()
	_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op.String(), JobId: jobID, PricePerGpuHour: coin(price), StepsPerHour: rate})
	require.NoError(e.t, err)
}

// The auction ranks by price per step, so a dearer GPU-hour that does more steps wins
// over a cheaper, slower one; equal prices per step fall back to reputation, then to the
// earlier bid.
func TestAuctionRanksBidsByPricePerStep(t *testing.T) {
	e := newEnv(t)
	alice, bob, carol := e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")
	jobID := e.submitJob()
	e.bidAt(alice, jobID, 1000, 50)  // 1000 × 2 ÷ 50 = 40 per step
	e.bidAt(bob, jobID, 3000, 200)   // 30 per step: dearest per hour, cheapest per step
	e.bidAt(carol, jobID, 2000, 100) // 40 per step
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, bob.String(), l.Provider)
	require.Equal(t, uint64(200), l.StepsPerHour)
	require.Equal(t, math.LegacyNewDec(30), l.PricePerStep)
	job := e.job(jobID)
	require.Equal(t, coin(3000), job.CapPricePerGpuHour, "the first round's price per step caps later rounds")
	require.Equal(t, uint64(200), job.CapStepsPerHour)
	created := typedEvents[*types.EventLeaseCreated](e)
	require.Len(t, created, 1)
	require.Equal(t, uint64(200), created[0].StepsPerHour)

	// A tie in price per step: the provider with the better reputation wins, and between
	// equals the earlier bid.
	f := newEnv(t)
	dave, erin, frank := f.registerProvider("dave"), f.registerProvider("erin"), f.registerProvider("frank")
	f.giveReputation(frank, 3)
	jobID = f.submitJob()
	f.bidAt(dave, jobID, 1000, 50)
	f.bidAt(erin, jobID, 2000, 100)
	f.closeAuction(jobID)
	require.Equal(t, dave.String(), f.activeLeasesOfJob(jobID)[0].Provider, "same price per step, same reputation: the earlier bid")
	jobID = f.submitJob()
	f.bidAt(erin, jobID, 2000, 100)
	f.bidAt(frank, jobID, 1000, 50)
	f.closeAuction(jobID)
	require.Equal(t, frank.String(), f.activeLeasesOfJob(jobID)[0].Provider, "same price per step: the better reputation")
}

// Every bid that commits no usable rate is refused with an error naming why, and changes
// nothing: no rate, a rate that cannot finish the job in max_duration, an absurd rate.
func TestBidsWithoutAUsableRateAreRefused(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID := e.submitJob() // 1000 steps, max duration 24 h: at least 42 steps per hour
	cases := []struct {
		name string
		rate uint64
		want *errorsmod.Error
		text string
	}{
		{"no rate", 0, types.ErrInvalidRate, "steps_per_hour is 0"},
		{"too slow for max_duration", 41, types.ErrRateTooLow, "41 steps per hour complete 984 steps in max_duration 24h0m0s, and 1000 steps remain"},
		{"absurd", types.MaxStepsPerHour + 1, types.ErrInvalidRate, "above the most a bid may commit"},
		{"overflowing", ^uint64(0), types.ErrInvalidRate, "above the most a bid may commit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.requireRejected(tc.want, func() error {
				_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: alice.String(), JobId: jobID, PricePerGpuHour: coin(1000), StepsPerHour: tc.rate})
				if err != nil {
					require.Contains(t, err.Error(), tc.text)
				}
				return err
			})
		})
	}
	e.bidAt(alice, jobID, 1000, 42) // just fast enough
	require.True(t, e.hasBid(alice, jobID))
}

// A lease whose checkpointed steps fall below rate_tolerance of what its committed rate
// promises is closed for non-performance at its rate check (slashed, jailed), keeps what
// it claimed for the steps it did, and the job reopens from its last final checkpoint; a
// lease that keeps up gets its next check.
func TestRateCheckClosesALeaseBehindItsCommittedRate(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.registerProvider("alice"), e.registerProvider("bob")
	s := spec()
	s.CheckpointDeadlineBlocks = 10_000 // the rate check, not the deadline, catches the slow lease
	jobID := e.submitJobWith(s, jobDeposit)
	e.bidAt(alice, jobID, 2000, 200) // promises 200 steps an hour: at 0.5 tolerance, 100 after the first hour
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	interval := e.params().RateCheckInterval
	require.Equal(t, l.StartTime.Add(interval), l.RateCheckAt)
	has, err := e.Market.RateChecks.Has(e.Ctx, collections.Join(l.RateCheckAt.UnixNano(), l.Id))
	require.NoError(t, err)
	require.True(t, has)

	// It checkpoints 120 steps (enough for the first check) and has them finalized.
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 120)
	require.NoError(t, err)
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim, 120, []byte("h120"), "s3://120", ""))
	for e.Ctx.BlockTime().Before(l.RateCheckAt) {
		e.nextBlock(time.Minute)
	}
	e.nextBlock(time.Minute)
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_ACTIVE, l.State, "120 steps in the first hour meet 0.5 × 200")
	require.True(t, l.RateCheckAt.After(e.Ctx.BlockTime().Add(-time.Minute)), "the next check is scheduled")

	// Then it slows to 20 steps an hour: at the second check it has 140 of the 200 required.
	claim2, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 140)
	require.NoError(t, err)
	bondBefore := e.provider(alice).Bond
	for e.lease(l.Id).State == types.LEASE_STATE_ACTIVE {
		require.True(t, e.Ctx.BlockTime().Before(l.StartTime.Add(3*interval)), "never closed")
		e.nextBlock(time.Minute)
	}
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, l.CloseReason)
	require.True(t, l.RateCheckAt.IsZero())
	require.Equal(t, claim2, l.Pending, "the steps it did stay claimed until x/verify decides them")
	p := e.provider(alice)
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_JAILED, p.Status)
	require.True(t, p.Bond.Amount.LT(bondBefore.Amount), "slashed")
	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_OPEN, job.State, "reopened")

	// The slow lease's steps 120–140 become final before the new auction closes, so the
	// replacement resumes from 140 and its checkpoint at 200 claims 140–200.
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim2, 140, []byte("h140"), "s3://140", ""))
	e.bidAt(bob, jobID, 2000, 200)
	e.closeAuction(jobID)
	b := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, uint64(140), b.ResumeStep)
	c, err := e.Market.OnCheckpointSubmitted(e.Ctx, b.Id, 200)
	require.NoError(t, err)
	require.Equal(t, coin(payFor(2000, 2, 200, 60)), c)
}

// The owner's bound: a completed job costs at most total_steps × the winning price per
// step plus audit fees, whatever happens to providers — here the first lease is lost
// mid-job with a claimed, not yet final checkpoint, a replacement bid above the cap is
// refused, and the replacement resumes from the last final checkpoint.
func TestOwnerCostStaysWithinTheBoundWhenALeaseIsReplaced(t *testing.T) {
	e := newEnv(t)
	alice, bob, carol := e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")
	ownerStart := e.Balance(e.owner)
	jobID := e.submitJob()
	e.bidAt(alice, jobID, 3000, 100) // 60 per step: the cap
	e.closeAuction(jobID)
	a := e.activeLeasesOfJob(jobID)[0]

	c1, err := e.Market.OnCheckpointSubmitted(e.Ctx, a.Id, 100)
	require.NoError(t, err)
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, a.Id, c1, 100, []byte("h100"), "", ""))
	c2, err := e.Market.OnCheckpointSubmitted(e.Ctx, a.Id, 200)
	require.NoError(t, err)
	// Alice's host dies: her deadline passes, she is closed, the job reopens from step 100.
	e.runPastCheckpointDeadline(a.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, e.lease(a.Id).CloseReason)
	require.Equal(t, types.JOB_STATE_OPEN, e.job(jobID).State)

	// A bid dearer per step than the first round's winner would break the bound.
	e.requireRejected(types.ErrPricePerStepAboveCap, func() error {
		_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: carol.String(), JobId: jobID, PricePerGpuHour: coin(3100), StepsPerHour: 100})
		return err
	})
	e.bidAt(bob, jobID, 2500, 100) // 50 per step
	e.closeAuction(jobID)
	b := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, uint64(100), b.ResumeStep)

	// Bob redoes 100–200 while Alice's claim on it is pending: his checkpoint at 200
	// claims nothing (those steps are claimed), and Alice's checkpoint then becomes final.
	z, err := e.Market.OnCheckpointSubmitted(e.Ctx, b.Id, 200)
	require.NoError(t, err)
	require.True(t, z.IsZero(), "steps 100–200 are already claimed: %s", z)
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, a.Id, c2, 200, []byte("h200"), "", ""))
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, b.Id, z, 200, []byte("h200"), "", ""))
	bobPaid := sdk.NewCoin(denom, math.ZeroInt())
	for step := uint64(300); step <= 1000; step += 100 {
		c, err := e.Market.OnCheckpointSubmitted(e.Ctx, b.Id, step)
		require.NoError(t, err)
		bobPaid = bobPaid.Add(c)
		require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, b.Id, c, step, []byte("h"), "", ""))
	}
	require.Equal(t, types.JOB_STATE_COMPLETED, e.job(jobID).State)

	alicePaid := c1.Add(c2)
	require.Equal(t, coin(payFor(3000, 2, 100, 200)), alicePaid)
	require.Equal(t, coin(payFor(2500, 2, 100, 800)), bobPaid)
	spent := ownerStart.Sub(e.Balance(e.owner))
	require.Equal(t, alicePaid.Add(bobPaid).Amount, spent, "the owner paid each step once")
	bound := math.NewInt(payFor(3000, 2, 100, 1000)) // total_steps × the winning 60 per step
	require.True(t, spent.LTE(bound), "owner spent %s, bound %s", spent, bound)
	e.requireInvariants()
}

// The v4 migration gives a lease from before committed rates the conservative rate that
// finishes the job in max_duration, a claimed step its accrued pay buys, and a rate check.
func TestMigrate3to4GivesOldLeasesAConservativeRate(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 3000)
	// What v3 left: a lease and a bid with no rate, a lease that accrued time-based pay.
	old := l
	old.StepsPerHour, old.PricePerStep, old.ClaimedStep = 0, math.LegacyDec{}, 0
	require.NoError(t, e.Market.RateChecks.Remove(e.Ctx, collections.Join(l.RateCheckAt.UnixNano(), l.Id)))
	old.RateCheckAt = time.Time{}
	old.Accrued, old.Pending, old.Committed = coin(3000), coin(3000), coin(3000) // half an hour of 2 GPUs at 3000
	require.NoError(t, e.Market.Leases.Set(e.Ctx, l.Id, old))
	job := e.job(jobID)
	job.Escrow = job.Escrow.Sub(coin(3000))
	job.ClaimedSteps, job.CapStepsPerHour, job.CapPricePerGpuHour = nil, 0, sdk.Coin{}
	require.NoError(t, e.Market.Jobs.Set(e.Ctx, jobID, job))
	bob := e.registerProvider("bob")
	other := e.submitJob()
	require.NoError(t, e.Market.Bids.Set(e.Ctx, collections.Join(other, []byte(bob)),
		types.Bid{JobId: other, Provider: bob.String(), PricePerGpuHour: coin(1000), Sequence: 99}))
	params := e.params()
	params.RateTolerance, params.RateCheckInterval = math.LegacyDec{}, 0
	params.MaxTransformerParams = 4 << 20 // v3's default
	require.NoError(t, e.Market.Params.Set(e.Ctx, params))

	require.NoError(t, keeper.NewMigrator(e.Market).Migrate3to4(e.Ctx))
	require.Equal(t, uint64(types.DefaultMaxTransformerParams), e.params().MaxTransformerParams, "v3's default rises to v4's")

	rate := types.ConservativeRate(1000, 24*time.Hour)
	require.Equal(t, uint64(42), rate, "1000 steps in 24 h, rounded up")
	m := e.lease(l.Id)
	require.Equal(t, rate, m.StepsPerHour)
	require.Equal(t, types.PricePerStep(math.NewInt(3000), 2, rate), m.PricePerStep)
	require.Equal(t, uint64(21), m.ClaimedStep, "3000 buys 3000 × 42 ÷ 6000 = 21 steps")
	require.Equal(t, e.Ctx.BlockTime().Add(types.DefaultRateCheckInterval), m.RateCheckAt)
	bid, err := e.Market.Bids.Get(e.Ctx, collections.Join(other, []byte(bob)))
	require.NoError(t, err)
	require.Equal(t, rate, bid.StepsPerHour)
	job = e.job(jobID)
	require.Equal(t, []uint64{21}, job.ClaimedSteps)
	require.Equal(t, rate, job.CapStepsPerHour)
	require.Equal(t, types.DefaultRateTolerance, e.params().RateTolerance)
	e.requireInvariants()

	// The lease goes on under the new rule: its next checkpoint pays steps 21–100 only.
	c, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	require.Equal(t, coin(payFor(3000, 2, rate, 100)-payFor(3000, 2, rate, 21)), c)
}
