package keeper_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// owed is price × gpus × elapsed / 1h rounded down, computed independently of the keeper.
func owed(price int64, gpus uint32, elapsed time.Duration) int64 {
	n := new(big.Int).Mul(big.NewInt(price*int64(gpus)), big.NewInt(int64(elapsed)))
	return n.Div(n, big.NewInt(int64(time.Hour))).Int64()
}

// queryCtx is a branch of the current state, as gRPC queries get: whatever the query
// settles is thrown away.
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

func TestPaymentAccruesReleasesAndCompletes(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	const price = 1237 // not a divisor of anything, so rounding shows
	ownerStart := e.Balance(e.owner)
	jobID, l := e.leaseJob(alice, price)
	start := l.StartTime

	// Irregular block times; the lease query settles up to the query's block time.
	for _, dt := range []time.Duration{7 * time.Second, 13 * time.Second, 5*time.Second + 300*time.Millisecond, 41 * time.Second} {
		e.nextBlock(dt)
	}
	elapsed := e.Ctx.BlockTime().Sub(start)
	viewed := e.queryLease(l.Id)
	want := owed(price, 2, elapsed)
	require.Equal(t, want, viewed.Pending.Amount.Int64(), "pending = price × gpus × elapsed / 1h")
	require.Equal(t, want, viewed.Accrued.Amount.Int64())
	require.Equal(t, start, e.lease(l.Id).SettledAt, "a query does not write the settlement")
	esc := e.queryEscrow(jobID)
	require.Equal(t, jobDeposit-want, esc.Unspent.Amount.Int64())

	// The checkpoint claims everything pending and moves the checkpoint deadline on.
	claim1, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id)
	require.NoError(t, err)
	require.Equal(t, coin(want), claim1)
	l = e.lease(l.Id)
	require.Equal(t, claim1, l.Committed)
	require.Equal(t, claim1, l.Pending)
	require.Equal(t, e.Ctx.BlockHeight()+ckptDeadline, l.CheckpointDeadline)
	has, err := e.Market.CheckpointDeadlines.Has(e.Ctx, collections.Join(l.CheckpointDeadline, l.Id))
	require.NoError(t, err)
	require.True(t, has)
	require.Equal(t, coin(jobDeposit-want), e.job(jobID).Escrow)

	// Time passes during the challenge window; x/verify then finalizes.
	e.advance(5)
	e.requireRejected(types.ErrInsufficientCommit, func() error {
		return e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim1.AddAmount(math.OneInt()), 100, []byte("h100"), "s3://ckpt/100")
	})
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim1, 100, []byte("h100"), "s3://ckpt/100"))
	l = e.lease(l.Id)
	require.Equal(t, claim1, l.Withdrawable)
	require.True(t, l.Committed.IsZero())
	require.Equal(t, []types.WorkerProgress{{Worker: 0, Step: 100, StateHash: []byte("h100"), Uri: "s3://ckpt/100"}}, e.job(jobID).Progress)
	require.Len(t, typedEvents[*types.EventWorkerProgress](e), 1)

	providerBefore := e.Balance(alice)
	res, err := e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String(), LeaseIds: []uint64{l.Id}})
	require.NoError(t, err)
	require.Equal(t, claim1, res.Amount)
	require.Equal(t, providerBefore.Add(claim1.Amount), e.Balance(alice))
	withdrawn := typedEvents[*types.EventEarningsWithdrawn](e)
	require.Len(t, withdrawn, 1)
	require.Equal(t, []uint64{l.Id}, withdrawn[0].LeaseIds)
	require.Equal(t, claim1, withdrawn[0].Amount)
	l = e.lease(l.Id)
	require.Equal(t, claim1, l.Withdrawn)
	require.True(t, l.Withdrawable.IsZero())
	e.requireRejected(types.ErrNothingToWithdraw, func() error {
		_, err := e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String()})
		return err
	})
	e.queryEscrow(jobID)

	// The last checkpoint reaches total_steps: the lease and the job complete.
	e.advance(30)
	claim2, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id)
	require.NoError(t, err)
	require.Equal(t, owed(price, 2, e.Ctx.BlockTime().Sub(start))-claim1.Amount.Int64(), claim2.Amount.Int64())
	e.advance(5) // accrues more, which no checkpoint claims
	repBefore := e.provider(alice).Reputation
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim2, 1000, []byte("h1000"), "s3://ckpt/1000"))

	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_CLOSED, l.State)
	require.Equal(t, types.LEASE_CLOSE_REASON_COMPLETED, l.CloseReason)
	require.Equal(t, claim2, l.Withdrawable)
	require.True(t, l.Pending.IsZero(), "unclaimed time after the last checkpoint goes back to the owner")
	p := e.provider(alice)
	require.True(t, p.Locked.IsZero(), "collateral is unlocked")
	_, err = e.StakingExt.Locks.Get(e.Ctx, collections.Join(alice, types.LeaseCollateralRef(l.Id)))
	require.ErrorIs(t, err, collections.ErrNotFound)
	require.Equal(t, repBefore.LeasesCompleted+1, p.Reputation.LeasesCompleted)

	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_COMPLETED, job.State)
	require.True(t, job.Escrow.IsZero())
	require.True(t, job.TimeDeadline.IsZero())
	paid := claim1.Add(claim2).Amount
	require.Equal(t, ownerStart.Sub(paid), e.Balance(e.owner), "the owner pays exactly the two checkpoints")

	res, err = e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String()})
	require.NoError(t, err)
	require.Equal(t, claim2, res.Amount)
	require.True(t, e.ModuleBalance(types.ModuleName).IsZero(), "nothing is left in escrow")
	require.Equal(t, coin(jobDeposit), e.queryEscrow(jobID).Deposited)
}

func TestCheckpointHooksRejectInactiveOrUnknownLeases(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 1000)
	e.requireRejected(types.ErrLeaseNotFound, func() error {
		_, err := e.Market.OnCheckpointSubmitted(e.Ctx, 99)
		return err
	})
	e.requireRejected(types.ErrLeaseNotFound, func() error {
		return e.Market.OnCheckpointFinal(e.Ctx, 99, coin(0), 1, nil, "")
	})
	e.requireRejected(types.ErrLeaseNotFound, func() error { _, err := e.Market.OnCheckpointRejected(e.Ctx, 99); return err })
	_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: jobID})
	require.NoError(t, err)
	e.requireRejected(types.ErrLeaseNotActive, func() error {
		_, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id)
		return err
	})
}

func TestCheckpointRejectedRefundsAndReopensJob(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	jobID, l := e.leaseJob(alice, 2000)
	e.advance(10)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id)
	require.NoError(t, err)
	require.True(t, claim.IsPositive())
	e.advance(4) // more pending that no checkpoint claims
	pending := e.lease(l.Id).Pending

	refund, err := e.Market.OnCheckpointRejected(e.Ctx, l.Id)
	require.NoError(t, err)
	require.True(t, refund.IsGTE(pending) && refund.IsGTE(claim), "the refund %s is all the lease had pending (at least %s)", refund, pending)

	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_STATE_CLOSED, l.State)
	require.Equal(t, types.LEASE_CLOSE_REASON_FRAUD, l.CloseReason)
	require.True(t, l.Pending.IsZero())
	require.True(t, l.Committed.IsZero())
	require.True(t, l.Withdrawable.IsZero())
	job := e.job(jobID)
	require.Equal(t, types.JOB_STATE_OPEN, job.State)
	require.Equal(t, coin(jobDeposit), job.Escrow, "everything the lease had pending goes back to the escrow")
	require.Equal(t, e.Ctx.BlockHeight()+bidWindow, job.BiddingDeadline)
	require.Equal(t, uint32(2), job.AuctionRound)
	require.True(t, job.TimeDeadline.IsZero())
	has, err := e.Market.BiddingDeadlines.Has(e.Ctx, collections.Join(job.BiddingDeadline, jobID))
	require.NoError(t, err)
	require.True(t, has)
	refunded := typedEvents[*types.EventPaymentRefunded](e)
	require.Len(t, refunded, 1)
	require.Equal(t, claim, refunded[0].Amount)
	reopened := typedEvents[*types.EventJobReopened](e)
	require.Len(t, reopened, 1)
	require.Equal(t, []uint32{0}, reopened[0].VacantWorkers)
	p := e.provider(alice)
	require.True(t, p.Locked.IsZero())
	require.Equal(t, uint64(1), p.Reputation.LeasesFailed)
	e.queryEscrow(jobID)

	// A later final for the rejected checkpoint has nothing left to release.
	e.requireRejected(types.ErrInsufficientCommit, func() error {
		return e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim, 100, []byte("bad"), "")
	})
}

func TestEscrowRunsDry(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	// 3600 per GPU-hour × 2 GPUs = 2udepin per second: 1000udepin last 500s.
	const deposit = 1000
	ownerStart := e.Balance(e.owner)
	s := spec()
	s.CheckpointDeadlineBlocks = 1000 // the escrow, not the checkpoint deadline, ends this lease
	jobID := e.submitJobWith(s, deposit)
	e.bid(alice, jobID, maxPrice)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, l.StartTime.Add(500*time.Second), e.job(jobID).TimeDeadline, "the dry moment is in the deadline index")

	e.advance(20)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id)
	require.NoError(t, err)
	require.Equal(t, coin(2*int64(e.Ctx.BlockTime().Sub(l.StartTime)/time.Second)), claim)
	require.Equal(t, l.StartTime.Add(500*time.Second), e.job(jobID).TimeDeadline, "settling does not move the dry moment")

	dry := l.StartTime.Add(500 * time.Second)
	e.runWhileLeased(jobID, 7*time.Second)
	job := e.job(jobID)
	require.False(t, e.lease(l.Id).ClosedAt.Before(dry), "closed before the escrow ran dry")
	require.True(t, e.lease(l.Id).ClosedAt.Before(dry.Add(7*time.Second)), "closed later than the first block at the dry moment")
	require.Equal(t, types.JOB_STATE_FAILED, job.State)
	require.True(t, job.Escrow.IsZero())
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_ESCROW_EXHAUSTED, l.CloseReason)
	require.Equal(t, coin(deposit), l.Accrued, "the lease accrued the whole deposit and not a coin more")
	require.Equal(t, claim, l.Pending, "only the claimed part stays for the provider")
	require.False(t, l.Pending.IsNegative())
	require.Equal(t, ownerStart.Sub(claim.Amount), e.Balance(e.owner), "the unclaimed part went back to the owner")
	require.True(t, e.provider(alice).Locked.IsZero())
	e.requireInvariants()

	// The checkpoint still settles by the finality rule after the job failed.
	require.NoError(t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim, 100, []byte("h"), ""))
	res, err := e.msg.WithdrawEarnings(e.Ctx, &types.MsgWithdrawEarnings{Provider: alice.String()})
	require.NoError(t, err)
	require.Equal(t, claim, res.Amount)
	require.True(t, e.ModuleBalance(types.ModuleName).IsZero())
}

func TestTopUpPushesTimeDeadlineLater(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	s := spec()
	s.CheckpointDeadlineBlocks = 1000
	jobID := e.submitJobWith(s, 1000) // 2udepin per second: dry after 500s
	e.bid(alice, jobID, maxPrice)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	before := e.job(jobID).TimeDeadline
	require.Equal(t, l.StartTime.Add(500*time.Second), before)

	e.advance(30)
	spent := 2 * int64(e.Ctx.BlockTime().Sub(l.StartTime)/time.Second)
	_, err := e.msg.TopUpDeposit(e.Ctx, &types.MsgTopUpDeposit{Depositor: e.owner.String(), JobId: jobID, Amount: coin(1000)})
	require.NoError(t, err)
	job := e.job(jobID)
	require.Equal(t, l.StartTime.Add(1000*time.Second), job.TimeDeadline, "2000 at 2 per second lasts 1000s from the start")
	require.Equal(t, coin(2000-spent), job.Escrow, "time worked was settled at the old balance")
	require.Equal(t, coin(2000), job.Deposited)
	has, err := e.Market.TimeDeadlines.Has(e.Ctx, collections.Join(before.UnixNano(), jobID))
	require.NoError(t, err)
	require.False(t, has, "the old deadline entry is gone")
	has, err = e.Market.TimeDeadlines.Has(e.Ctx, collections.Join(job.TimeDeadline.UnixNano(), jobID))
	require.NoError(t, err)
	require.True(t, has)
	topped := typedEvents[*types.EventDepositToppedUp](e)
	require.Len(t, topped, 1)
	require.Equal(t, job.Escrow, topped[0].Escrow)

	// Past the old dry moment the job still runs; it fails at the new one.
	for e.Ctx.BlockTime().Before(before.Add(blockTime)) {
		e.nextBlock(blockTime)
	}
	require.Equal(t, types.JOB_STATE_LEASED, e.job(jobID).State)
	e.runWhileLeased(jobID, blockTime)
	require.Equal(t, types.JOB_STATE_FAILED, e.job(jobID).State)
	closedAt := e.lease(l.Id).ClosedAt
	require.False(t, closedAt.Before(l.StartTime.Add(1000*time.Second)))
	require.True(t, closedAt.Before(l.StartTime.Add(1000*time.Second+blockTime)))
	require.Equal(t, coin(2000), e.lease(l.Id).Accrued)
}

func TestMaxDurationFailsJob(t *testing.T) {
	e := newEnv(t)
	alice := e.registerProvider("alice")
	s := spec()
	s.MaxDuration = 10 * time.Minute
	s.CheckpointDeadlineBlocks = 1000
	jobID := e.submitJobWith(s, jobDeposit)
	e.bid(alice, jobID, maxPrice)
	e.closeAuction(jobID)
	l := e.activeLeasesOfJob(jobID)[0]
	require.Equal(t, l.StartTime.Add(10*time.Minute), e.job(jobID).TimeDeadline)

	e.advance(50) // 300s
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id)
	require.NoError(t, err)
	e.runWhileLeased(jobID, 7*time.Second) // block times that do not hit the end exactly
	require.Equal(t, types.JOB_STATE_FAILED, e.job(jobID).State)
	l = e.lease(l.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_MAX_DURATION, l.CloseReason)
	require.Equal(t, coin(owed(maxPrice, 2, 10*time.Minute)), l.Accrued, "time past max duration is not paid")
	require.Equal(t, claim, l.Pending)
	require.Equal(t, coin(ownerFunds-claim.Amount.Int64()), sdk.NewCoin(denom, e.Balance(e.owner)))
}
