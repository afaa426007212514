package keeper

import (
	"context"
	"fmt"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// This file is the market's side of audits and of the money a conviction moves: x/verify
// pays auditors from a job's escrow, gives back what they did not earn, and credits the
// job with its share of lost challenger bonds and with the compensation a conviction
// pays. Every coin that leaves the escrow this way is counted in job.audit_fees, every
// coin that comes in beyond refunds in job.compensation.

// TakeAuditFees moves audit fees for one checkpoint from a job's escrow to toModule (x/verify,
// which holds them until the checkpoint resolves): up to want fees of perAuditor, as many
// as the escrow covers once the job's leases are settled. It returns how many it took.
// A zero fee takes nothing and covers every auditor.
func (k Keeper) TakeAuditFees(ctx context.Context, jobID, leaseID, index uint64, perAuditor sdk.Coin, want uint32, toModule string) (uint32, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return 0, err
	}
	if perAuditor.Denom != job.Escrow.Denom || perAuditor.IsNegative() {
		return 0, errorsmod.Wrapf(types.ErrInvalidAmount, "audit fee %s is not in the escrow's denomination %s", perAuditor, job.Escrow.Denom)
	}
	if want == 0 {
		return 0, nil
	}
	if perAuditor.IsZero() {
		return want, nil
	}
	if job.State.IsTerminal() {
		return 0, nil // its escrow was refunded: nobody is paid to audit a finished job
	}
	n := want
	if affordable := job.Escrow.Amount.Quo(perAuditor.Amount); affordable.LT(math.NewInt(int64(want))) {
		n = uint32(affordable.Int64())
	}
	if n == 0 {
		return 0, k.Jobs.Set(ctx, job.Id, job)
	}
	total := sdk.NewCoin(perAuditor.Denom, perAuditor.Amount.MulRaw(int64(n)))
	if err := k.bankKeeper.SendCoinsFromModuleToModule(ctx, types.ModuleName, toModule, sdk.NewCoins(total)); err != nil {
		return 0, err
	}
	job.Escrow = job.Escrow.Sub(total)
	job.AuditFees = coinOrZero(job.AuditFees, total.Denom).Add(total)
	if err := k.scheduleTimeDeadline(sdkCtx, &job); err != nil {
		return 0, err
	}
	if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
		return 0, err
	}
	return n, keeperutil.Emit(ctx, &types.EventAuditFeesCharged{
		JobId: job.Id, LeaseId: leaseID, CheckpointIndex: index, Amount: total, Escrow: job.Escrow,
	})
}

// CreditJob moves amount from fromModule into a job: into its escrow while it is live (a
// replacement lease spends it), to its owner once it is over. An audit fee reduces
// job.audit_fees; the other kinds add to job.compensation.
func (k Keeper) CreditJob(ctx context.Context, fromModule string, jobID uint64, amount sdk.Coin, kind string) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	switch kind {
	case types.CreditAuditFee, types.CreditLostBond, types.CreditCompensation:
	default:
		return fmt.Errorf("crediting job %d: unknown kind %q", jobID, kind)
	}
	if !amount.IsValid() || amount.IsZero() {
		return nil
	}
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	if amount.Denom != job.Escrow.Denom {
		return errorsmod.Wrapf(types.ErrInvalidAmount, "crediting %s to job %d, whose escrow is in %s", amount, job.Id, job.Escrow.Denom)
	}
	if err := k.bankKeeper.SendCoinsFromModuleToModule(ctx, fromModule, types.ModuleName, sdk.NewCoins(amount)); err != nil {
		return err
	}
	if kind == types.CreditAuditFee {
		fees := coinOrZero(job.AuditFees, amount.Denom)
		job.AuditFees = fees.Sub(sdk.NewCoin(amount.Denom, math.MinInt(amount.Amount, fees.Amount)))
	} else {
		job.Compensation = coinOrZero(job.Compensation, amount.Denom).Add(amount)
	}
	toOwner := job.State.IsTerminal()
	if err := k.refundToJob(sdkCtx, &job, amount); err != nil {
		return err
	}
	if !toOwner {
		if err := k.scheduleTimeDeadline(sdkCtx, &job); err != nil {
			return err
		}
	}
	if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventJobCredited{JobId: job.Id, Kind: kind, Amount: amount, ToOwner: toOwner})
}

// OnCheckpointWithheld handles a checkpoint whose auditors reported that its provider
// did not serve the state it starts from: nobody could check it, so it is not delivered.
// The lease is closed for non-performance as if it had missed its checkpoint deadline
// (slashed, jailed, a failed lease), everything it has pending goes back to the job, and
// a live job returns to auction from its last final checkpoint.
func (k Keeper) OnCheckpointWithheld(ctx context.Context, leaseID uint64, reason string) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	lease, err := k.GetLease(ctx, leaseID)
	if err != nil {
		return err
	}
	job, err := k.GetJob(ctx, lease.JobId)
	if err != nil {
		return err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if lease.State == types.LEASE_STATE_ACTIVE {
		if err := k.closeLease(sdkCtx, &job, &lease, types.LEASE_CLOSE_REASON_NON_PERFORMANCE); err != nil {
			return err
		}
		if err := k.penalizeNonPerformance(sdkCtx, params, lease, reason); err != nil {
			return err
		}
	}
	if _, err := k.refundPending(sdkCtx, &job, &lease); err != nil {
		return err
	}
	return k.reopenAfterLeaseLoss(sdkCtx, &job)
}

// coinOrZero reads a coin field that jobs from before audits existed do not have.
func coinOrZero(c sdk.Coin, denom string) sdk.Coin {
	if c.Denom == "" || c.Amount.IsNil() {
		return sdk.NewCoin(denom, math.ZeroInt())
	}
	return c
}
