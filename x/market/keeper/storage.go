package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// Storage pay of custody holders. At MsgSubmitJob a job with a custody section moves its
// storage budget (x/shardregistry's pieces × retention periods × fee) from the deposit
// into job.storage_escrow; x/shardregistry pays each holder of a custody piece from it for
// every period the holder proves (PayStorage). Steps never spend it and storage never
// spends the step escrow, so the owner's cost is bounded by total_steps × price per step
// + audit fees + the storage budget. Jobs from before storage pay have neither field
// (empty denom) and pay nothing.

// reserveStorage moves the job's storage budget from its escrow into its storage escrow.
// A deposit that cannot cover it is refused with ErrInvalidDeposit naming both amounts.
func reserveStorage(job *types.Job, budget math.Int) error {
	if budget.IsNil() || !budget.IsPositive() {
		return nil
	}
	reserve := sdk.NewCoin(job.Escrow.Denom, budget)
	if job.Escrow.IsLT(reserve) {
		return errorsmod.Wrapf(types.ErrInvalidDeposit,
			"deposit %s cannot cover the custody storage budget %s (pieces × retention periods × x/shardregistry's custody_storage_fee_per_piece_period)",
			job.Escrow, reserve)
	}
	job.Escrow = job.Escrow.Sub(reserve)
	job.StorageEscrow = reserve
	return nil
}

// PayStorage pays holder amount (in the job's escrow denom) for one period it proved of a
// custody piece of jobID, from the job's storage escrow: at most what is left of it, so the
// owner never pays more than the budget reserved at submit. Whether the job is live or
// over does not matter: the final checkpoint is kept, and paid for, after the job closes.
// It returns what it paid (zero once the storage escrow is spent).
func (k Keeper) PayStorage(ctx context.Context, jobID uint64, holder sdk.AccAddress, amount math.Int) (sdk.Coin, error) {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return sdk.Coin{}, err
	}
	if amount.IsNil() || amount.IsNegative() {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrInvalidAmount, "storage fee must be non-negative, got %s", amount)
	}
	escrow := coinOrZero(job.StorageEscrow, job.Escrow.Denom)
	pay := sdk.NewCoin(escrow.Denom, math.MinInt(amount, escrow.Amount))
	if !pay.IsPositive() {
		return pay, nil
	}
	if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, holder, sdk.NewCoins(pay)); err != nil {
		return sdk.Coin{}, err
	}
	job.StorageEscrow = escrow.Sub(pay)
	job.StorageFees = coinOrZero(job.StorageFees, pay.Denom).Add(pay)
	if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
		return sdk.Coin{}, err
	}
	return pay, keeperutil.Emit(ctx, &types.EventStorageFeePaid{
		JobId: job.Id, Holder: holder.String(), Amount: pay, StorageEscrowLeft: job.StorageEscrow,
	})
}

// Retention of custody objects and the refund of the storage escrow (consensus version
// 5). x/shardregistry tells the market when it registers and releases a custody object of
// a job (OnCustodyRegistered, OnCustodyReleased), so job.custody_held counts the objects
// still held. The market decides when a final checkpoint's object may go: a worker's last
// final checkpoint (WorkerProgress.custody_id) is what a replacement lease resumes from,
// so it has no release time while the job runs; once a newer final checkpoint of the
// worker supersedes it (the same lease's or a replacement's), or the job ends however it
// ends (completed, failed, cancelled, expired), it is kept retain_checkpoints from then
// and released. Checkpoints that never become final (withheld, rejected) are released at
// once by x/verify; a checkpoint still pending when its job ends is decided by x/verify
// as usual and then takes one of those paths, so no custody object is left without a
// release time. Once the job is over and its last object is released, what the holders
// were not paid of the storage escrow goes back to the owner. A holder is paid each
// period it proves, when it proves it; the period running at the release is not proven
// and not paid.

// OnCustodyRegistered counts a new custody object of jobID (x/shardregistry, as it
// registers a checkpoint's pieces).
func (k Keeper) OnCustodyRegistered(ctx context.Context, jobID uint64) error {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	job.CustodyHeld++
	return k.Jobs.Set(ctx, job.Id, job)
}

// OnCustodyReleased counts a custody object of jobID as released (x/shardregistry, as it
// releases one) and refunds the storage escrow if it was the last one of an ended job.
func (k Keeper) OnCustodyReleased(ctx context.Context, jobID uint64) error {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	if job.CustodyHeld == 0 {
		return errorsmod.Wrapf(types.ErrInvalidAmount, "job %d: a custody object was released but none is counted as held", jobID)
	}
	job.CustodyHeld--
	if err := k.refundStorageIfDone(sdk.UnwrapSDKContext(ctx), &job); err != nil {
		return err
	}
	return k.Jobs.Set(ctx, job.Id, job)
}

// retainCustody schedules custody object id's release after the job's retention; nothing
// for a checkpoint without custody.
func (k Keeper) retainCustody(ctx context.Context, id string) error {
	if id == "" || k.custody.keeper == nil {
		return nil
	}
	return k.custody.keeper.ReleaseCustodyAfterRetention(ctx, id)
}

// retainFinalCustody schedules the release of every worker's last final checkpoint
// retain_checkpoints from now: the job has ended, nobody resumes from them, and the owner
// can fetch them until then.
func (k Keeper) retainFinalCustody(ctx context.Context, job types.Job) error {
	for _, p := range job.Progress {
		if err := k.retainCustody(ctx, p.CustodyId); err != nil {
			return err
		}
	}
	return nil
}

// refundStorageIfDone sends what is left of an ended job's storage escrow to its owner
// once none of its custody objects is held: nobody can be paid from it any more. It
// changes the job; the caller saves it.
func (k Keeper) refundStorageIfDone(ctx sdk.Context, job *types.Job) error {
	if !job.State.IsTerminal() || job.CustodyHeld != 0 || job.StorageEscrow.Amount.IsNil() || !job.StorageEscrow.IsPositive() {
		return nil
	}
	refund := job.StorageEscrow
	owner, err := k.addressCodec.StringToBytes(job.Owner)
	if err != nil {
		return err
	}
	if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, owner, sdk.NewCoins(refund)); err != nil {
		return err
	}
	job.StorageEscrow = sdk.NewCoin(refund.Denom, math.ZeroInt())
	return keeperutil.Emit(ctx, &types.EventStorageEscrowRefunded{
		JobId: job.Id, Owner: job.Owner, Amount: refund, StorageFees: coinOrZero(job.StorageFees, refund.Denom),
	})
}
