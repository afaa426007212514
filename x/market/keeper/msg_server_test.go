package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

func TestSubmitJobEscrowsDepositAndOpensAuction(t *testing.T) {
	e := newEnv(t)
	before := e.Balance(e.owner)
	s := spec()
	res, err := e.msg.SubmitJob(e.Ctx, &types.MsgSubmitJob{Owner: e.owner.String(), Spec: s, Deposit: coin(jobDeposit)})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.JobId)

	job := e.job(res.JobId)
	require.Equal(t, types.JOB_STATE_OPEN, job.State)
	require.Equal(t, e.owner.String(), job.Owner)
	require.Equal(t, s.WithAuditDefault(), job.Spec, "the stored spec is the submitted one with the audit default filled in")
	require.Equal(t, &types.AuditSpec{Auditors: types.DefaultAuditors}, job.Spec.Audit)
	require.Equal(t, coin(0), job.AuditFees)
	require.Equal(t, coin(0), job.Compensation)
	require.Equal(t, coin(jobDeposit), job.Escrow)
	require.Equal(t, coin(jobDeposit), job.Deposited)
	require.Equal(t, e.Ctx.BlockHeight()+bidWindow, job.BiddingDeadline)
	require.Equal(t, uint32(1), job.AuctionRound)
	require.Len(t, job.Seed, 32)
	has, err := e.Market.BiddingDeadlines.Has(e.Ctx, collections.Join(job.BiddingDeadline, job.Id))
	require.NoError(t, err)
	require.True(t, has, "the auction must be in the bidding deadline index")

	require.Equal(t, before.SubRaw(jobDeposit), e.Balance(e.owner))
	require.Equal(t, math.NewInt(jobDeposit), e.ModuleBalance(types.ModuleName))
	created := typedEvents[*types.EventJobCreated](e)
	require.Len(t, created, 1)
	require.Equal(t, job.BiddingDeadline, created[0].BiddingDeadline)
	require.Equal(t, coin(jobDeposit), created[0].Deposit)

	second := e.submitJob()
	require.Equal(t, uint64(2), second)
	require.NotEqual(t, job.Seed, e.job(second).Seed, "job seeds are domain-separated by id")
}

func TestSubmitJobRejections(t *testing.T) {
	withSpec := func(change func(*types.JobSpec)) func(*types.MsgSubmitJob) {
		return func(m *types.MsgSubmitJob) { change(&m.Spec) }
	}
	digest := "sha256:" + "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12"
	cases := []struct {
		name   string
		change func(*types.MsgSubmitJob)
		want   *errorsmod.Error
	}{
		{"empty name", withSpec(func(s *types.JobSpec) { s.Name = "  " }), types.ErrInvalidSpec},
		{"zero gpus per worker", withSpec(func(s *types.JobSpec) { s.Gpu.PerWorker = 0 }), types.ErrInvalidSpec},
		{"zero min vram", withSpec(func(s *types.JobSpec) { s.Gpu.MinVramGib = 0 }), types.ErrInvalidSpec},
		{"zero workers", withSpec(func(s *types.JobSpec) { s.Workers = 0 }), types.ErrInvalidSpec},
		{"workers above max_workers", withSpec(func(s *types.JobSpec) { s.Workers = types.DefaultParams().MaxWorkers + 1 }), types.ErrInvalidSpec},
		{"container without digest", withSpec(func(s *types.JobSpec) {
			s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_CONTAINER, Image: "ghcr.io/acme/train:1"}
		}), types.ErrInvalidSpec},
		{"container with malformed digest", withSpec(func(s *types.JobSpec) {
			s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_CONTAINER, Image: "ghcr.io/acme/train:1", Digest: "sha256:XYZ"}
		}), types.ErrInvalidSpec},
		{"container without image", withSpec(func(s *types.JobSpec) {
			s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_CONTAINER, Digest: digest}
		}), types.ErrInvalidSpec},
		{"reference workload with an image", withSpec(func(s *types.JobSpec) { s.Workload.Image = "ghcr.io/acme/train:1" }), types.ErrInvalidSpec},
		{"unspecified workload kind", withSpec(func(s *types.JobSpec) { s.Workload.Kind = types.WORKLOAD_KIND_UNSPECIFIED }), types.ErrInvalidSpec},
		{"zero total steps", withSpec(func(s *types.JobSpec) { s.TotalSteps = 0 }), types.ErrInvalidSpec},
		{"zero checkpoint interval", withSpec(func(s *types.JobSpec) { s.CheckpointInterval = 0 }), types.ErrInvalidSpec},
		{"checkpoint interval above total steps", withSpec(func(s *types.JobSpec) { s.CheckpointInterval = s.TotalSteps + 1 }), types.ErrInvalidSpec},
		{"zero max price", withSpec(func(s *types.JobSpec) { s.MaxPricePerGpuHour = coin(0) }), types.ErrInvalidSpec},
		// Above the bound, price × GPUs × duration overflowed math.Int and panicked in EndBlock.
		{"max price above the bound", withSpec(func(s *types.JobSpec) { s.MaxPricePerGpuHour.Amount = types.MaxPricePerGPUHour.AddRaw(1) }), types.ErrInvalidSpec},
		{"max price in another denom", withSpec(func(s *types.JobSpec) { s.MaxPricePerGpuHour.Denom = "uatom" }), types.ErrInvalidSpec},
		{"zero max duration", withSpec(func(s *types.JobSpec) { s.MaxDuration = 0 }), types.ErrInvalidSpec},
		{"max duration above the limit", withSpec(func(s *types.JobSpec) { s.MaxDuration = types.MaxJobDuration + time.Second }), types.ErrInvalidSpec},
		{"bidding window below min", withSpec(func(s *types.JobSpec) { s.BiddingWindowBlocks = types.DefaultParams().MinBiddingWindowBlocks - 1 }), types.ErrInvalidSpec},
		{"bidding window above max", withSpec(func(s *types.JobSpec) { s.BiddingWindowBlocks = types.DefaultParams().MaxBiddingWindowBlocks + 1 }), types.ErrInvalidSpec},
		{"duplicate gpu model", withSpec(func(s *types.JobSpec) { s.Gpu.Models = []string{h100Model, h100Model} }), types.ErrInvalidSpec},
		{"zero deposit", func(m *types.MsgSubmitJob) { m.Deposit = coin(0) }, types.ErrInvalidDeposit},
		{"deposit in another denom", func(m *types.MsgSubmitJob) { m.Deposit.Denom = "uatom" }, types.ErrInvalidDeposit},
		{"deposit below min_deposit", func(m *types.MsgSubmitJob) { m.Deposit = coin(types.DefaultParams().MinDeposit.Amount.Int64() - 1) }, types.ErrInvalidDeposit},
		{"deposit above the owner's balance", func(m *types.MsgSubmitJob) { m.Deposit = coin(ownerFunds + 1) }, sdkerrors.ErrInsufficientFunds},
		{"malformed owner", func(m *types.MsgSubmitJob) { m.Owner = "depin1notanaddress" }, sdkerrors.ErrInvalidAddress},
		{"owner with another prefix", func(m *types.MsgSubmitJob) { m.Owner = "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu" }, sdkerrors.ErrInvalidAddress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.submitJob() // some state that must stay as it is
			msg := &types.MsgSubmitJob{Owner: e.owner.String(), Spec: spec(), Deposit: coin(jobDeposit)}
			tc.change(msg)
			e.requireRejected(tc.want, func() error {
				_, err := e.msg.SubmitJob(e.Ctx, msg)
				return err
			})
		})
	}
}

func TestPlaceBidRecordsAndReplacesBid(t *testing.T) {
	e := newEnv(t)
	p := e.registerProvider("alice")
	jobID := e.submitJob()

	e.bid(p, jobID, 3000)
	bid, err := e.Market.Bids.Get(e.Ctx, collections.Join(jobID, []byte(p)))
	require.NoError(t, err)
	require.Equal(t, coin(3000), bid.PricePerGpuHour)
	require.Equal(t, e.Ctx.BlockHeight(), bid.CreatedHeight)
	first := bid.Sequence

	e.nextBlock(blockTime)
	e.bid(p, jobID, maxPrice) // the max price itself is allowed
	bid, err = e.Market.Bids.Get(e.Ctx, collections.Join(jobID, []byte(p)))
	require.NoError(t, err)
	require.Equal(t, coin(maxPrice), bid.PricePerGpuHour, "re-bidding replaces the price")
	require.Greater(t, bid.Sequence, first, "re-bidding takes a new sequence")
	require.Len(t, typedEvents[*types.EventBidPlaced](e), 2)
	res, err := e.query.Bids(e.Ctx, &types.QueryBidsRequest{JobId: jobID})
	require.NoError(t, err)
	require.Len(t, res.Bids, 1, "one bid per provider per job")
}

func TestPlaceBidRejections(t *testing.T) {
	// bigSpec needs 2.4 DEPIN collateral: more than a 1-GPU provider with a 2 DEPIN bond has free.
	bigSpec := spec()
	bigSpec.Gpu.PerWorker = 1
	bigSpec.MaxPricePerGpuHour = coin(1_000_000)

	cases := []struct {
		name string
		// setup returns the message to send; the env holds one open default job (id 1)
		// and a registered, eligible provider "alice".
		setup func(e *env) *types.MsgPlaceBid
		want  *errorsmod.Error
	}{
		{"unknown job", func(e *env) *types.MsgPlaceBid {
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 99, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrJobNotFound},
		{"job already leased", func(e *env) *types.MsgPlaceBid {
			bob := e.registerProvider("bob")
			e.bid(bob, 1, 100)
			e.closeAuction(1)
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrJobNotOpen},
		{"job cancelled", func(e *env) *types.MsgPlaceBid {
			_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: 1})
			require.NoError(e.t, err)
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrJobNotOpen},
		{"after the bidding deadline", func(e *env) *types.MsgPlaceBid {
			// Two auctions due at the same height with room for one per block: the second is
			// still open one block after its deadline.
			e.setParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 1 })
			second := e.submitJob()
			require.Equal(e.t, e.job(1).BiddingDeadline, e.job(second).BiddingDeadline)
			e.closeAuction(second)
			require.Equal(e.t, types.JOB_STATE_OPEN, e.job(second).State)
			require.Greater(e.t, e.Ctx.BlockHeight(), e.job(second).BiddingDeadline)
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: second, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrBiddingClosed},
		{"price above the job's max", func(e *env) *types.MsgPlaceBid {
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(maxPrice + 1), StepsPerHour: testRate}
		}, types.ErrBidAboveMax},
		{"zero price", func(e *env) *types.MsgPlaceBid {
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(0), StepsPerHour: testRate}
		}, types.ErrInvalidPrice},
		{"price in another denom", func(e *env) *types.MsgPlaceBid {
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: sdkCoin("uatom", 100), StepsPerHour: testRate}
		}, types.ErrInvalidPrice},
		{"empty price", func(e *env) *types.MsgPlaceBid {
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1}
		}, types.ErrInvalidPrice},
		{"unregistered provider", func(e *env) *types.MsgPlaceBid {
			stranger := addr("stranger")
			e.Fund(e.t, stranger, providerFunds)
			return &types.MsgPlaceBid{Provider: stranger.String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"malformed provider address", func(e *env) *types.MsgPlaceBid {
			return &types.MsgPlaceBid{Provider: "depin1bogus", JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, sdkerrors.ErrInvalidAddress},
		{"free bond below the collateral", func(e *env) *types.MsgPlaceBid {
			poor := e.registerProviderWith("poor", 2_000_000, h100s(1))
			big := e.submitJobWith(bigSpec, jobDeposit)
			require.True(e.t, e.collateral(bigSpec).GT(e.provider(poor).FreeBond().Amount))
			return &types.MsgPlaceBid{Provider: poor.String(), JobId: big, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"gpu model not in the spec", func(e *env) *types.MsgPlaceBid {
			p := e.registerProviderWith("a100-80", 8_000_000, stakingexttypes.GPUInventory{Model: "A100-SXM4-80GB", VramMib: 81920, Count: 8})
			return &types.MsgPlaceBid{Provider: p.String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"gpu vram below the spec", func(e *env) *types.MsgPlaceBid {
			s := spec()
			s.Gpu.Models = nil // any model, but 80 GiB each
			jobID := e.submitJobWith(s, jobDeposit)
			p := e.registerProviderWith("a100-40", 8_000_000, a100s(8))
			return &types.MsgPlaceBid{Provider: p.String(), JobId: jobID, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"too few gpus of one class", func(e *env) *types.MsgPlaceBid {
			// 1 + 1 H100s in two classes do not make the 2 GPUs of one host a worker needs.
			p := e.registerProviderWith("split", 2_000_000, h100s(1),
				stakingexttypes.GPUInventory{Model: h100Model, VramMib: h100VRAMMiB + 1024, Count: 1})
			return &types.MsgPlaceBid{Provider: p.String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"jailed provider", func(e *env) *types.MsgPlaceBid {
			require.NoError(e.t, e.StakingExt.Jail(e.Ctx, addr("alice"), e.Ctx.BlockTime().Add(time.Hour), "test"))
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"provider bonded below min_bond_per_gpu", func(e *env) *types.MsgPlaceBid {
			_, err := e.sxMsg.Unbond(e.Ctx, &stakingexttypes.MsgUnbond{Operator: addr("alice").String(), Amount: coin(providerBond - 7_000_000)})
			require.NoError(e.t, err)
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
		{"too many bids", func(e *env) *types.MsgPlaceBid {
			e.setParams(func(p *types.Params) { p.MaxBidsPerJob = 2 })
			e.bid(e.registerProvider("bob"), 1, 100)
			e.bid(e.registerProvider("carol"), 1, 100)
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: 1, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrTooManyBids},
		{"provider already serves the job", func(e *env) *types.MsgPlaceBid {
			s := spec()
			s.Workers = 2
			jobID := e.submitJobWith(s, jobDeposit)
			e.bid(addr("alice"), jobID, 100)
			e.closeAuction(jobID) // alice takes worker 0, worker 1 goes to another round
			require.Equal(e.t, types.JOB_STATE_OPEN, e.job(jobID).State)
			require.Len(e.t, e.activeLeasesOfJob(jobID), 1)
			return &types.MsgPlaceBid{Provider: addr("alice").String(), JobId: jobID, PricePerGpuHour: coin(100), StepsPerHour: testRate}
		}, types.ErrProviderIneligible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.registerProvider("alice")
			require.Equal(t, uint64(1), e.submitJob())
			msg := tc.setup(e)
			e.requireRejected(tc.want, func() error {
				_, err := e.msg.PlaceBid(e.Ctx, msg)
				return err
			})
		})
	}
}

// A bidder x/stakingext refuses is the market's ErrProviderIneligible (the code clients
// match on), and the refusal behind it stays in the chain and in the text.
func TestPlaceBidIneligibleKeepsTheStakingExtReason(t *testing.T) {
	e := newEnv(t)
	jobID := e.submitJob()
	stranger := addr("stranger")
	e.Fund(t, stranger, providerFunds)
	_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: stranger.String(), JobId: jobID, PricePerGpuHour: coin(100), StepsPerHour: testRate})
	require.ErrorIs(t, err, types.ErrProviderIneligible)
	require.ErrorIs(t, err, stakingexttypes.ErrProviderNotFound)
	require.Contains(t, err.Error(), "provider not found: provider cannot bid on this job")
	codespace, code, _ := errorsmod.ABCIInfo(err, false)
	require.Equal(t, types.ModuleName, codespace)
	require.Equal(t, types.ErrProviderIneligible.ABCICode(), code)
}

func TestPlaceBidAtMaxBidsReplacesExistingBid(t *testing.T) {
	e := newEnv(t)
	e.setParams(func(p *types.Params) { p.MaxBidsPerJob = 1 })
	p := e.registerProvider("alice")
	jobID := e.submitJob()
	e.bid(p, jobID, 200)
	e.bid(p, jobID, 100) // a full job still accepts a re-bid from a bidder
	bid, err := e.Market.Bids.Get(e.Ctx, collections.Join(jobID, []byte(p)))
	require.NoError(t, err)
	require.Equal(t, coin(100), bid.PricePerGpuHour)
}

func TestWithdrawBid(t *testing.T) {
	e := newEnv(t)
	p := e.registerProvider("alice")
	jobID := e.submitJob()
	e.bid(p, jobID, 100)
	_, err := e.msg.WithdrawBid(e.Ctx, &types.MsgWithdrawBid{Provider: p.String(), JobId: jobID})
	require.NoError(t, err)
	require.False(t, e.hasBid(p, jobID))
	require.Len(t, typedEvents[*types.EventBidWithdrawn](e), 1)

	e.requireRejected(types.ErrBidNotFound, func() error {
		_, err := e.msg.WithdrawBid(e.Ctx, &types.MsgWithdrawBid{Provider: p.String(), JobId: jobID})
		return err
	})
	e.requireRejected(sdkerrors.ErrInvalidAddress, func() error {
		_, err := e.msg.WithdrawBid(e.Ctx, &types.MsgWithdrawBid{Provider: "depin1bogus", JobId: jobID})
		return err
	})

	// A withdrawn bid does not take part in the auction.
	e.closeAuction(jobID)
	require.Equal(t, types.JOB_STATE_EXPIRED, e.job(jobID).State)
}

func TestCancelJobRejections(t *testing.T) {
	e := newEnv(t)
	jobID := e.submitJob()
	stranger := addr("stranger")
	e.requireRejected(types.ErrNotJobOwner, func() error {
		_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: stranger.String(), JobId: jobID})
		return err
	})
	e.requireRejected(types.ErrJobNotFound, func() error {
		_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: 42})
		return err
	})
	_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
	require.NoError(t, err)
	e.requireRejected(types.ErrJobClosed, func() error {
		_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
		return err
	})
}

func TestTopUpDepositOfOpenJob(t *testing.T) {
	e := newEnv(t)
	jobID := e.submitJob()
	donor := addr("donor")
	e.Fund(t, donor, 5_000)
	_, err := e.msg.TopUpDeposit(e.Ctx, &types.MsgTopUpDeposit{Depositor: donor.String(), JobId: jobID, Amount: coin(5_000)})
	require.NoError(t, err)
	job := e.job(jobID)
	require.Equal(t, coin(jobDeposit+5_000), job.Escrow)
	require.Equal(t, coin(jobDeposit+5_000), job.Deposited)
	require.True(t, e.Balance(donor).IsZero())
	require.True(t, job.TimeDeadline.IsZero(), "a job without leases burns nothing and has no time deadline")
}

func TestTopUpDepositRejections(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *env, jobID uint64) *types.MsgTopUpDeposit
		want  *errorsmod.Error
	}{
		{"closed job", func(e *env, jobID uint64) *types.MsgTopUpDeposit {
			_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
			require.NoError(e.t, err)
			return &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: jobID, Amount: coin(100)}
		}, types.ErrJobClosed},
		{"unknown job", func(e *env, _ uint64) *types.MsgTopUpDeposit {
			return &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: 77, Amount: coin(100)}
		}, types.ErrJobNotFound},
		{"zero amount", func(e *env, jobID uint64) *types.MsgTopUpDeposit {
			return &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: jobID, Amount: coin(0)}
		}, types.ErrInvalidDeposit},
		{"another denom", func(e *env, jobID uint64) *types.MsgTopUpDeposit {
			return &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: jobID, Amount: sdkCoin("uatom", 100)}
		}, types.ErrInvalidDeposit},
		{"malformed depositor", func(e *env, jobID uint64) *types.MsgTopUpDeposit {
			return &types.MsgTopUpDeposit{Depositor: "depin1bogus", JobId: jobID, Amount: coin(100)}
		}, sdkerrors.ErrInvalidAddress},
		{"more than the depositor has", func(e *env, jobID uint64) *types.MsgTopUpDeposit {
			return &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: jobID, Amount: coin(ownerFunds)}
		}, sdkerrors.ErrInsufficientFunds},
	}
	for _, tc := range cases {
		for _, leased := range []bool{false, true} {
			name := tc.name + "/open"
			if leased {
				name = tc.name + "/leased"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t)
				var jobID uint64
				if leased {
					// A leased job: the handler would reschedule its time deadline.
					jobID, _ = e.leaseJob(e.registerProvider("alice"), 1000)
					e.advance(10)
				} else {
					jobID = e.submitJob()
				}
				msg := tc.setup(e, jobID)
				e.requireRejected(tc.want, func() error {
					_, err := e.msg.TopUpDeposit(e.Ctx, msg)
					return err
				})
			})
		}
	}
}

func TestWithdrawEarningsRejections(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	bob := e.registerProvider("bob")
	_, aliceLease := e.leaseJob(alice, 1000)
	_, bobLease := e.leaseJob(bob, 1000)
	e.advance(20)
	// Bob's lease has released earnings; alice's has pending but nothing final.
	_, err := e.Market.OnCheckpointSubmitted(e.Ctx, aliceLease.Id, 100)
	require.NoError(t, err)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, bobLease.Id, 100)
	require.NoError(t, err)
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, bobLease.Id, claim, 100, []byte("h100"), "s3://ckpt/100", ""))

	cases := []struct {
		name string
		msg  *types.MsgWithdrawEarnings
		want *errorsmod.Error
	}{
		{"nothing released yet", &types.MsgWithdrawEarnings{Provider: alice.String(), LeaseIds: []uint64{aliceLease.Id}}, types.ErrNothingToWithdraw},
		{"nothing released on any lease", &types.MsgWithdrawEarnings{Provider: alice.String()}, types.ErrNothingToWithdraw},
		{"someone else's lease", &types.MsgWithdrawEarnings{Provider: alice.String(), LeaseIds: []uint64{bobLease.Id}}, types.ErrNotLeaseProvider},
		{"own lease and someone else's", &types.MsgWithdrawEarnings{Provider: alice.String(), LeaseIds: []uint64{aliceLease.Id, bobLease.Id}}, types.ErrNotLeaseProvider},
		{"duplicate ids", &types.MsgWithdrawEarnings{Provider: bob.String(), LeaseIds: []uint64{bobLease.Id, bobLease.Id}}, types.ErrInvalidAmount},
		{"unknown lease", &types.MsgWithdrawEarnings{Provider: bob.String(), LeaseIds: []uint64{bobLease.Id, 99}}, types.ErrLeaseNotFound},
		{"not a provider at all", &types.MsgWithdrawEarnings{Provider: addr("stranger").String()}, types.ErrNothingToWithdraw},
		{"malformed provider", &types.MsgWithdrawEarnings{Provider: "depin1bogus"}, sdkerrors.ErrInvalidAddress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := e.t
			e.t = t
			defer func() { e.t = parent }()
			e.requireRejected(tc.want, func() error {
				_, err := e.msg.WithdrawEarnings(e.Ctx, tc.msg)
				return err
			})
		})
	}
}

func TestUpdateParams(t *testing.T) {
	e := newEnv(t)
	p := types.DefaultParams()
	p.MaxBidsPerJob = 7
	_, err := e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: p})
	require.NoError(t, err)
	require.Equal(t, p, e.params())
	require.Len(t, typedEvents[*types.EventParamsUpdated](e), 1)

	e.requireRejected(types.ErrInvalidAuthority, func() error {
		_, err := e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.owner.String(), Params: types.DefaultParams()})
		return err
	})
	invalid := []func(*types.Params){
		func(p *types.Params) { p.Denom = "" },
		func(p *types.Params) { p.MaxBidsPerJob = 0 },
		func(p *types.Params) { p.MaxDeadlinesPerBlock = 0 },
		func(p *types.Params) { p.MinBiddingWindowBlocks = p.MaxBiddingWindowBlocks + 1 },
		func(p *types.Params) { p.MinDeposit = sdkCoin("uatom", 1) },
		func(p *types.Params) { p.CollateralRatio = math.LegacyNewDec(11) },
		func(p *types.Params) { p.NonPerformanceSlashFraction = math.LegacyNewDec(2) },
	}
	for _, change := range invalid {
		bad := types.DefaultParams()
		change(&bad)
		e.requireRejected(types.ErrInvalidParams, func() error {
			_, err := e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: bad})
			return err
		})
	}
}
