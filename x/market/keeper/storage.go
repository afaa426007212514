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
