package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// withdrawEarnings pays provider what final checkpoints released on the listed leases (on
// all its leases when none are listed) and returns the total and the leases it came from
// (MsgWithdrawEarnings).
func (k Keeper) withdrawEarnings(ctx context.Context, provider sdk.AccAddress, msg *types.MsgWithdrawEarnings) (sdk.Coin, []uint64, error) {
	ids := msg.LeaseIds
	if len(ids) == 0 {
		iter, err := k.Leases.Indexes.Provider.MatchExact(ctx, provider)
		if err != nil {
			return sdk.Coin{}, nil, err
		}
		if ids, err = iter.PrimaryKeys(); err != nil {
			return sdk.Coin{}, nil, err
		}
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return sdk.Coin{}, nil, err
	}
	total := sdk.NewInt64Coin(params.Denom, 0)
	var paid []types.Lease
	seen := map[uint64]bool{}
	for _, id := range ids {
		if seen[id] {
			return sdk.Coin{}, nil, errorsmod.Wrapf(types.ErrInvalidAmount, "lease %d listed twice", id)
		}
		seen[id] = true
		lease, err := k.GetLease(ctx, id)
		if err != nil {
			return sdk.Coin{}, nil, err
		}
		if lease.Provider != msg.Provider {
			return sdk.Coin{}, nil, errorsmod.Wrapf(types.ErrNotLeaseProvider, "lease %d belongs to %s", id, lease.Provider)
		}
		if lease.Withdrawable.IsPositive() {
			total = total.Add(lease.Withdrawable)
			lease.Withdrawn = lease.Withdrawn.Add(lease.Withdrawable)
			lease.Withdrawable = sdk.NewInt64Coin(lease.Withdrawable.Denom, 0)
			paid = append(paid, lease)
		}
	}
	if !total.IsPositive() {
		return sdk.Coin{}, nil, errorsmod.Wrapf(types.ErrNothingToWithdraw, "provider %s has no earnings released by final checkpoints", msg.Provider)
	}
	paidIDs := make([]uint64, 0, len(paid))
	for _, l := range paid {
		if err := k.Leases.Set(ctx, l.Id, l); err != nil {
			return sdk.Coin{}, nil, err
		}
		paidIDs = append(paidIDs, l.Id)
	}
	if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, provider, sdk.NewCoins(total)); err != nil {
		return sdk.Coin{}, nil, err
	}
	return total, paidIDs, nil
}
