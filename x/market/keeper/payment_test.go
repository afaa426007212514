package keeper_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// payFor is price × gpus × steps ÷ rate rounded down, computed independently of the keeper:
// what a lease earns for steps steps.
func payFor(price int64, gpus uint32, rate, steps uint64) int64 {
	n := new(big.Int).Mul(big.NewInt(price*int64(gpus)), new(big.Int).SetUint64(steps))
	return n.Div(n, new(big.Int).SetUint64(rate)).Int64()
}

// queryCtx is a branch of the current state, as gRPC queries get.
func (e *env) queryCtx() sdk.Context {
	c, _ := e.Ctx.CacheContext()
	return c
}

func (e *env) queryLease(id uint64) types.Lease {
	e.t.Helper()
	res, err := e.query.Lease(e.queryCtx(), &types.QueryLeaseRequest{LeaseId: id})
	require.NoError(e.t, err)
	return res.Lease
}

func (e *env) queryEscrow(jobID uint64) *types.QueryEscrowResponse {
	e.t.Helper()
	res, err := e.query.Escrow(e.queryCtx(), &types.QueryEscrowRequest{JobId: jobID})
	require.NoError(e.t, err)
	// The books of a live job balance: everything deposited is unspent, pending, releasable or paid.
	sum := res.Unspent.Add(res.Pending).Add(res.Withdrawable).Add(res.Withdrawn)
	if !e.job(jobID).State.IsTerminal() {
		require.Equal(e.t, res.Deposited, sum, "deposited = unspent + pending + withdrawable + withdrawn")
	}
	return res
}

// runWhileLeased runs blocks of dt until the job leaves LEASED (at most 1000 blocks).
func (e *env) runWhileLeased(jobID uint64, dt time.Duration) {
	e.t.Helper()
	for i := 0; e.job(jobID).State == types.JOB_STATE_LEASED; i++ {
		require.Less(e.t, i, 1000, "job %d never left LEASED", jobID)
		e.nextBlock(dt)
	}
}

func TestPayForStepsClaimsReleasesAndCompletes(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	const price = 1237 // not a divisor of anything, so rounding shows
	ownerStart := e.Balance(e.owner)
	jobID, l := e.leaseJob(alice, price)
	require.Equal(t, uint64(testRate), l.StepsPerHour)
	require.Equal(t, types.PricePerStep(math.NewInt(price), 2, testRate), l.PricePerStep)
	require.Equal(t, math.LegacyMustNewDecFromStr("24.74"), l.PricePerStep, "1237 × 2 GPUs ÷ 100 steps per hour")

	// Time without steps earns nothing.
	for _, dt := range []time.Duration{7 * time.Second, 13 * time.Second, 41 * time.Minute} {
		e.nextBlock(dt)
	}
	viewed := e.queryLease(l.Id)
	require.True(t, viewed.Pending.IsZero(), "no checkpoint, no pay: %s", viewed.Pending)
	require.True(t, viewed.Accrued.IsZero())
	require.Equal(t, coin(jobDeposit), e.queryEscrow(jobID).Unspent)

	// A checkpoint of 100 steps claims 100 × the price per step, and moves the deadline on.
	claim1, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	require.Equal(t, coin(payFor(price, 2, testRate, 100)), claim1)
	l = e.lease(l.Id)
	require.Equal(t, claim1, l.Committed)
	require.Equal(t, claim1, l.Pending)
	require.Equal(t, uint64(100), l.ClaimedStep)
	require.Equal(t, []uint64{100}, e.job(jobID).ClaimedSteps)
	require.Equal(t, e.Ctx.BlockHeight()+ckptDeadline, l.CheckpointDeadline)
	has, err := e.Market.CheckpointDeadlines.Has(e.Ctx, collections.Join(l.CheckpointDeadline, l.Id))
	require.NoError(t, err)
	require.True(t, has)
	require.Equal(t, coin(jobDeposit-claim1.Amount.Int64()), e.job(jobID).Escrow)

	// Time passes during the challenge window; x/verify then finalizes.
	e.advance(5)
	e.requireRejected(types.ErrInsufficientCommit, func() error {
		return e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim1.AddAmount(math.OneInt()), 100, []byte("h100"), "s3://ckpt/100", "")
	})
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim1, 100, []byte("h100"), "s3://ckpt/100", ""))
	l = e.lease(l.Id)
	require.Equal(t, claim1, l.Withdrawable)
	require.True(t, l.Committed.IsZero())
	require.Equal(t, []types.WorkerProgress{{Worker: 0, Step: 100, StateHash: []byte("h100"), Uri: "s3://ckpt/100"}}, e.job(jobID).Progress)

	providerBefore := e.Balance(alice)
	res, err := e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String(), LeaseIds: []uint64{l.Id}})
	require.NoError(t, err)
	require.Equal(t, claim1, res.Amount)
	require.Equal(t, providerBefore.Add(claim1.Amount), e.Balance(alice))
	e.queryEscrow(jobID)

	// Nine more checkpoints of 100 steps; the rounding of each is never compounded:
	// the lease's total is the exact pay for 1000 steps.
	var claims []sdk.Coin
	for step := uint64(200); step <= 1000; step += 100 {
		e.advance(3)
		c, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, step)
		require.NoError(t, err)
		claims = append(claims, c)
	}
	repBefore := e.provider(alice).Reputation
	rest := sdk.NewCoin(denom, math.ZeroInt())
	for i, c := range claims {
		rest = rest.Add(c)
		require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, c, uint64(200+100*i), []byte("h"), "", ""))
	}
	total := claim1.Add(rest)
	require.Equal(t, coin(payFor(price, 2, testRate, 1000)), total, "1000 steps × the price per step, rounded once")

	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_CLOSED, l.State)
	require.Equal(t, types.LEASE_CLOSE_REASON_COMPLETED, l.CloseReason)
	require.True(t, l.RateCheckAt.IsZero(), "a closed lease has no rate check")
	require.True(t, e.provider(alice).Locked.IsZero(), "collateral is unlocked")
	require.Equal(t, repBefore.LeasesCompleted+1, e.provider(alice).Reputation.LeasesCompleted)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_COMPLETED, job.State)
	require.True(t, job.Escrow.IsZero())
	require.True(t, job.TimeDeadline.IsZero())
	require.Equal(t, ownerStart.Sub(total.Amount), e.Balance(e.owner), "the owner pays exactly the steps, whatever the time")
	res, err = e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String()})
	require.NoError(t, err)
	require.Equal(t, rest, res.Amount)
	require.True(t, e.ModuleBalance(types.ModuleName).IsZero(), "nothing is left in escrow")
	require.Empty(t, e.dumpIndexes())
}

func TestCheckpointHooksRejectInactiveOrUnknownLeases(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 1000)
	e.requireRejected(types.ErrLeaseNotFound, func() error {
		_, err := e.Market.OnCheckpointSubmitted(e.Ctx, 99, 100)
		return err
	})
	e.requireRejected(types.ErrLeaseNotFound, func() error {
		return e.Market.OnCheckpointFinal(e.Ctx, 99, coin(0), 1, nil, "", "")
	})
	e.requireRejected(types.ErrLeaseNotFound, func() error { _, err := e.Market.OnCheckpointRejected(e.Ctx, 99); return err })
	e.requireRejected(types.ErrInvalidAmount, func() error {
		_, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 1001)
		return err
	})
	_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
	require.NoError(t, err)
	e.requireRejected(types.ErrLeaseNotActive, func() error {
		_, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
		return err
	})
}

func TestCheckpointRejectedRefundsAndReopensJob(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 2000)
	e.advance(10)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	require.Equal(t, coin(payFor(2000, 2, testRate, 100)), claim)
	e.advance(4)
	claim2, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 200)
	require.NoError(t, err)

	refund, err := e.Market.OnCheckpointRejected(e.Ctx, l.Id)
	require.NoError(t, err)
	require.Equal(t, claim.Add(claim2), refund, "the refund is everything the lease had pending")

	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_CLOSED, l.State)
	require.Equal(t, types.LEASE_CLOSE_REASON_FRAUD, l.CloseReason)
	require.True(t, l.Pending.IsZero())
	require.True(t, l.Committed.IsZero())
	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_OPEN, job.State)
	require.Equal(t, coin(jobDeposit), job.Escrow, "everything the lease had pending goes back to the escrow")
	require.Equal(t, []uint64{0}, job.ClaimedSteps, "the refunded steps are unpaid again")
	require.Equal(t, e.Ctx.BlockHeight()+bidWindow, job.BiddingDeadline)
	require.Equal(t, uint32(2), job.AuctionRound)
	require.True(t, job.TimeDeadline.IsZero())
	refunded := typedEvents[*types.EventPaymentRefunded](e)
	require.Len(t, refunded, 1)
	require.Equal(t, refund, refunded[0].Amount)
	p := e.provider(alice)
	require.True(t, p.Locked.IsZero())
	require.Equal(t, uint64(1), p.Reputation.LeasesFailed)
	e.queryEscrow(jobID)

	// A later final for the rejected checkpoint has nothing left to release.
	e.requireRejected(types.ErrInsufficientCommit, func() error {
		return e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim, 100, []byte("bad"), "", "")
	})
}

// A job whose escrow cannot pay its lease's next checkpoint fails at the end of the block
// in which that became so; what its checkpoints claimed stays for the provider.
func TestEscrowThatCannotPayTheNextCheckpointFailsTheJob(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	// 3600 per GPU-hour × 2 GPUs ÷ 100 steps per hour = 72 per step: 7200 a checkpoint.
	const deposit = 10_000
	ownerStart := e.Balance(e.owner)
	s := spec()
	s.CheckpointDeadlineBlocks = 1000
	jobID := e.submitJobWith(s, deposit)
	e.bid(alice, jobID, maxPrice)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, l.StartTime.Add(s.MaxDuration), e.job(jobID).TimeDeadline, "the deposit covers the first checkpoint: the deadline is max duration")

	e.advance(20)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	require.Equal(t, coin(7200), claim)
	require.Equal(t, e.Ctx.BlockTime(), e.job(jobID).TimeDeadline, "2800 left cannot pay the next 7200: due now")
	e.nextBlock(blockTime)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_FAILED, job.State)
	require.Contains(t, job.CloseReason, "escrow exhausted")
	require.True(t, job.Escrow.IsZero())
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_ESCROW_EXHAUSTED, l.CloseReason)
	require.Equal(t, claim, l.Pending, "the claimed checkpoint stays for the provider")
	require.Equal(t, ownerStart.Sub(claim.Amount), e.Balance(e.owner), "the rest went back to the owner")
	require.True(t, e.provider(alice).Locked.IsZero())
	e.requireInvariants()

	// The checkpoint still settles by the finality rule after the job failed.
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim, 100, []byte("h"), "", ""))
	res, err := e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String()})
	require.NoError(t, err)
	require.Equal(t, claim, res.Amount)
	require.True(t, e.ModuleBalance(types.ModuleName).IsZero())
}

// A claim larger than the escrow takes what is left, and the job fails at the block's end.
func TestClaimBeyondTheEscrowTakesWhatIsLeft(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	s := spec()
	s.CheckpointDeadlineBlocks = 1000
	jobID := e.submitJobWith(s, 7200)
	e.bid(alice, jobID, maxPrice)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	// An audit fee took part of the escrow: the checkpoint's 7200 no longer fit.
	n, err := e.Market.TakeAuditFees(e.Ctx, jobID, l.Id, 0, coin(2200), 1, distrtypes.ModuleName)
	require.NoError(t, err)
	require.Equal(t, uint32(1), n)
	require.Equal(t, coin(5000), e.job(jobID).Escrow)

	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	require.Equal(t, coin(5000), claim, "all that was left")
	e.nextBlock(blockTime)
	require.Equal(t, types.JOB_STATE_FAILED, e.job(jobID).State)
	require.Equal(t, coin(5000), e.lease(l.Id).Accrued)
}

func TestTopUpRescuesAJobThatCouldNotPayItsNextCheckpoint(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	s := spec()
	s.CheckpointDeadlineBlocks = 1000
	jobID := e.submitJobWith(s, 10_000)
	e.bid(alice, jobID, maxPrice)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	_, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	due := e.job(jobID).TimeDeadline
	require.Equal(t, e.Ctx.BlockTime(), due)

	_, err = e.msg.TopUpDeposit(e.Ctx, &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: jobID, Amount: coin(10_000)})
	require.NoError(t, err)
	job := e.job(jobID)
	require.Equal(t, coin(12_800), job.Escrow)
	require.Equal(t, l.StartTime.Add(s.MaxDuration), job.TimeDeadline, "covered again: the deadline is max duration")
	has, err := e.Market.TimeDeadlines.Has(e.Ctx, collections.Join(due.UnixNano(), jobID))
	require.NoError(t, err)
	require.False(t, has, "the old deadline entry is gone")
	e.advance(3)
	require.Equal(t, types.JOB_STATE_LEASED, e.job(jobID).State)
}

func TestMaxDurationFailsJob(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	s := spec()
	s.MaxDuration = 10 * time.Minute
	s.CheckpointDeadlineBlocks = 1000
	jobID := e.submitJobWith(s, jobDeposit)
	_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: alice.String(), JobId: jobID, PricePerGpuHour: coin(maxPrice), StepsPerHour: 6000})
	require.NoError(t, err)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, l.StartTime.Add(10*time.Minute), e.job(jobID).TimeDeadline)

	e.advance(50) // 300s
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(t, err)
	e.runWhileLeased(jobID, 7*time.Second) // block times that do not hit the end exactly
	require.Equal(t, types.JOB_STATE_FAILED, e.job(jobID).State)
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_MAX_DURATION, l.CloseReason)
	require.Equal(t, claim, l.Accrued, "only the checkpointed steps are paid")
	require.Equal(t, claim, l.Pending)
	require.Equal(t, coin(ownerFunds-claim.Amount.Int64()), sdk.NewCoin(denom, e.Balance(e.owner)))
}
