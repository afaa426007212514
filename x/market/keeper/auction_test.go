package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

func TestAuctionCheapestBidWinsAndLocksCollateral(t *testing.T) {
	e := newEnv(t)
	alice, bob, carol := e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")
	jobID := e.submitJob()
	e.bid(alice, jobID, 3000)
	e.bid(bob, jobID, 1000)
	e.bid(carol, jobID, 2000)
	deadline := e.job(jobID).BiddingDeadline

	e.advance(int(deadline - e.Ctx.BlockHeight())) // to the deadline height: still open
	require.Equal(t, types.JOB_STATE_OPEN, e.job(jobID).State, "the auction closes at the end of the deadline height")
	closeTime := e.Ctx.BlockTime()
	e.nextBlock(blockTime)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_LEASED, job.State)
	leases := e.leasesOfJob(jobID)
	require.Len(t, leases, 1)
	l := leases[0]
	collateral := e.collateral(spec())
	require.Equal(t, bob.String(), l.Provider)
	require.Equal(t, coin(1000), l.PricePerGpuHour)
	require.Equal(t, uint32(2), l.Gpus)
	require.Equal(t, uint32(0), l.Worker)
	require.Equal(t, types.LEASE_STATE_ACTIVE, l.State)
	require.Equal(t, deadline, l.StartHeight)
	require.Equal(t, closeTime, l.StartTime)
	require.Equal(t, deadline+ckptDeadline, l.CheckpointDeadline)
	require.Equal(t, coin(collateral.Int64()), l.Collateral)
	require.Equal(t, int64(17_280), collateral.Int64(), "10% of 3600 × 2 GPUs × 24h")

	lock, err := e.StakingExt.Locks.Get(e.Ctx, collections.Join(bob, types.LeaseCollateralRef(l.Id)))
	require.NoError(t, err)
	require.Equal(t, l.Collateral, lock.Amount)
	require.Equal(t, l.Collateral, e.provider(bob).Locked)
	require.True(t, e.provider(alice).Locked.IsZero())
	require.True(t, e.provider(carol).Locked.IsZero())

	lost := typedEvents[*types.EventBidLost](e)
	require.ElementsMatch(t, []string{alice.String(), carol.String()}, []string{lost[0].Provider, lost[1].Provider})
	require.Len(t, lost, 2)
	created := typedEvents[*types.EventLeaseCreated](e)
	require.Len(t, created, 1)
	require.Equal(t, bob.String(), created[0].Provider)
	for _, p := range []sdk.AccAddress{alice, bob, carol} {
		require.False(t, e.hasBid(p, jobID), "all bids are deleted at close")
	}
	has, err := e.Market.BiddingDeadlines.Has(e.Ctx, collections.Join(deadline, jobID))
	require.NoError(t, err)
	require.False(t, has)
	require.False(t, job.TimeDeadline.IsZero(), "a leased job has an escrow/duration deadline")
}

func TestAuctionTieBreaks(t *testing.T) {
	cases := []struct {
		name string
		// run places the bids (alice, bob, carol registered) and returns the expected winner.
		run func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress
	}{
		{"equal price: higher reputation wins", func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress {
			e.giveReputation(bob, 3)
			e.giveReputation(carol, 1)
			e.bid(alice, jobID, 1000)
			e.bid(carol, jobID, 1000)
			e.bid(bob, jobID, 1000)
			return bob
		}},
		{"lower price beats higher reputation", func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress {
			e.giveReputation(bob, 10)
			e.bid(bob, jobID, 1000)
			e.bid(alice, jobID, 999)
			return alice
		}},
		{"equal price and reputation: earlier bid wins", func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress {
			e.bid(carol, jobID, 1000)
			e.nextBlock(blockTime)
			e.bid(alice, jobID, 1000)
			e.bid(bob, jobID, 1000)
			return carol
		}},
		{"equal price and reputation in one block: lower sequence wins", func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress {
			e.bid(bob, jobID, 1000)
			e.bid(alice, jobID, 1000)
			return bob
		}},
		{"re-bidding takes a new place in the queue", func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress {
			e.bid(alice, jobID, 1000)
			e.bid(bob, jobID, 1000)
			e.bid(alice, jobID, 1000) // same price, but now later than bob
			return bob
		}},
		{"re-bidding a lower price wins", func(e *env, jobID uint64, alice, bob, carol sdk.AccAddress) sdk.AccAddress {
			e.bid(alice, jobID, 1000)
			e.bid(bob, jobID, 900)
			e.bid(alice, jobID, 800)
			return alice
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			alice, bob, carol := e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")
			jobID := e.submitJob()
			want := tc.run(e, jobID, alice, bob, carol)
			e.closeAuction(jobID)
			leases := e.leasesOfJob(jobID)
			require.Len(t, leases, 1)
			require.Equal(t, want.String(), leases[0].Provider)
		})
	}
}

func TestAuctionMultiWorkerJobGetsDistinctProviders(t *testing.T) {
	e := newEnv(t)
	alice, bob, carol := e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")
	s := spec()
	s.Workers = 2
	jobID := e.submitJobWith(s, jobDeposit)
	e.bid(alice, jobID, 1500)
	e.bid(bob, jobID, 1000)
	e.bid(carol, jobID, 2000)
	e.closeAuction(jobID)

	require.Equal(t, types.JOB_STATE_LEASED, e.job(jobID).State)
	leases := e.leasesOfJob(jobID)
	require.Len(t, leases, 2)
	require.Equal(t, bob.String(), leases[0].Provider)
	require.Equal(t, uint32(0), leases[0].Worker)
	require.Equal(t, alice.String(), leases[1].Provider)
	require.Equal(t, uint32(1), leases[1].Worker)
	for _, l := range leases {
		require.Equal(t, l.Collateral, e.provider(sdk.MustAccAddressFromBech32(l.Provider)).Locked)
	}
	require.True(t, e.provider(carol).Locked.IsZero())
	lost := typedEvents[*types.EventBidLost](e)
	require.Len(t, lost, 1)
	require.Equal(t, carol.String(), lost[0].Provider)
}

func TestAuctionPartiallyFilledJobReopensForVacantWorkers(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.registerProvider("alice"), e.registerProvider("bob")
	s := spec()
	s.Workers = 2
	jobID := e.submitJobWith(s, jobDeposit)
	e.bid(alice, jobID, 1000)
	e.closeAuction(jobID)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_OPEN, job.State)
	require.Equal(t, uint32(2), job.AuctionRound)
	reopened := typedEvents[*types.EventJobReopened](e)
	require.Len(t, reopened, 1)
	require.Equal(t, []uint32{1}, reopened[0].VacantWorkers)
	require.Equal(t, job.BiddingDeadline, reopened[0].BiddingDeadline)
	require.Len(t, e.activeLeasesOfJob(jobID), 1)

	// The first round's price per step caps the later ones (the owner's bound).
	e.requireRejected(types.ErrPricePerStepAboveCap, func() error {
		_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: bob.String(), JobId: jobID, PricePerGpuHour: coin(1200), StepsPerHour: testRate})
		return err
	})
	e.bid(bob, jobID, 900)
	e.closeAuction(jobID)
	require.Equal(t, types.JOB_STATE_LEASED, e.job(jobID).State)
	leases := e.activeLeasesOfJob(jobID)
	require.Len(t, leases, 2)
	require.Equal(t, bob.String(), leases[1].Provider)
	require.Equal(t, uint32(1), leases[1].Worker)
}

func TestAuctionWithoutBidsExpiresAndRefundsDeposit(t *testing.T) {
	e := newEnv(t)
	before := e.Balance(e.owner)
	jobID := e.submitJob()
	e.closeAuction(jobID)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_EXPIRED, job.State)
	require.True(t, job.Escrow.IsZero())
	require.Equal(t, before, e.Balance(e.owner), "the whole deposit comes back")
	require.True(t, e.ModuleBalance(types.ModuleName).IsZero())
	closed := typedEvents[*types.EventJobClosed](e)
	require.Len(t, closed, 1)
	require.Equal(t, types.JOB_STATE_EXPIRED, closed[0].State)
	require.Equal(t, coin(jobDeposit), closed[0].Refunded)
	has, err := e.Market.BiddingDeadlines.Has(e.Ctx, collections.Join(job.BiddingDeadline, jobID))
	require.NoError(t, err)
	require.False(t, has)
}

func TestAuctionSkipsWinnerThatBecameIneligible(t *testing.T) {
	cases := []struct {
		name    string
		disable func(e *env, p sdk.AccAddress)
	}{
		{"jailed", func(e *env, p sdk.AccAddress) {
			require.NoError(e.t, e.StakingExt.Jail(e.Ctx, p, e.Ctx.BlockTime().Add(time.Hour), "downtime"))
		}},
		{"unbonded below the minimum bond", func(e *env, p sdk.AccAddress) {
			_, err := e.sxMsg.Unbond(e.Ctx, &stakingexttypes.MsgUnbond{Operator: p.String(), Amount: coin(providerBond - 1_000_000)})
			require.NoError(e.t, err)
		}},
		{"tombstoned", func(e *env, p sdk.AccAddress) {
			require.NoError(e.t, e.StakingExt.Tombstone(e.Ctx, p, "fraud"))
		}},
		{"gpus no longer satisfy the spec", func(e *env, p sdk.AccAddress) {
			_, err := e.sxMsg.UpdateProvider(e.Ctx, &stakingexttypes.MsgUpdateProvider{
				Operator: p.String(), Moniker: "cheap", Endpoint: "https://cheap.example.com", Region: "eu-west",
				Gpus: []stakingexttypes.GPUInventory{a100s(8)},
			})
			require.NoError(e.t, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cheap, dear := e.registerProvider("cheap"), e.registerProvider("dear")
			jobID := e.submitJob()
			e.bid(cheap, jobID, 500)
			e.bid(dear, jobID, 2000)
			tc.disable(e, cheap)
			e.closeAuction(jobID)

			leases := e.leasesOfJob(jobID)
			require.Len(t, leases, 1)
			require.Equal(t, dear.String(), leases[0].Provider, "the next eligible bid wins")
			require.True(t, e.provider(cheap).Locked.IsZero(), "no collateral is locked for the skipped winner")
			lost := typedEvents[*types.EventBidLost](e)
			require.Len(t, lost, 1)
			require.Equal(t, cheap.String(), lost[0].Provider)
		})
	}
}

func TestAuctionWithOnlyIneligibleWinnersExpires(t *testing.T) {
	e := newEnv(t)
	p := e.registerProvider("alice")
	before := e.Balance(e.owner)
	jobID := e.submitJob()
	e.bid(p, jobID, 500)
	require.NoError(t, e.StakingExt.Jail(e.Ctx, p, e.Ctx.BlockTime().Add(time.Hour), "downtime"))
	e.closeAuction(jobID)
	require.Equal(t, types.JOB_STATE_EXPIRED, e.job(jobID).State)
	require.Equal(t, before, e.Balance(e.owner))
	require.Empty(t, e.leasesOfJob(jobID))
}
