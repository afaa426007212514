package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// CheckCanBid returns the provider when it may take on a lease needing
// collateral: it is active (neither jailed nor tombstoned), its bond covers
// min_bond_per_gpu × its GPUs, and its free bond covers the collateral. The
// error says which condition failed and by how much. It does not check the
// GPU inventory against a job; use Provider.Satisfies for that.
func (k Keeper) CheckCanBid(ctx context.Context, operator sdk.AccAddress, collateral sdk.Coin) (types.Provider, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidateNonNegativeAmount("collateral", collateral, params.BondDenom); err != nil {
		return types.Provider{}, err
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return types.Provider{}, err
	}
	if err := provider.CheckBidding(params); err != nil {
		return types.Provider{}, err
	}
	if free := provider.FreeBond(); free.IsLT(collateral) {
		return types.Provider{}, errorsmod.Wrapf(types.ErrInsufficientFreeBond, "%s has free bond %s (bond %s, locked %s) but the collateral is %s",
			provider.Operator, free, provider.Bond, provider.Locked, collateral)
	}
	return provider, nil
}

// LockCollateral reserves amount of operator's free bond under ref, a
// reference owned by the calling module (e.g. "market/lease/7", or
// "verify/dispute/3"). A ref can hold one lock at a time, so the caller
// releases exactly what it locked. The provider's status is not checked:
// x/verify must be able to lock a jailed provider's bond for a dispute.
func (k Keeper) LockCollateral(ctx context.Context, operator sdk.AccAddress, ref string, amount sdk.Coin) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := types.ValidateLockRef(ref); err != nil {
		return err
	}
	if err := types.ValidateNonNegativeAmount("amount", amount, params.BondDenom); err != nil {
		return err
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return err
	}
	key := collections.Join(operator, ref)
	exists, err := k.Locks.Has(ctx, key)
	if err != nil {
		return err
	}
	if exists {
		return errorsmod.Wrapf(types.ErrLockExists, "%s already has a collateral lock %q", provider.Operator, ref)
	}
	if free := provider.FreeBond(); free.IsLT(amount) {
		return errorsmod.Wrapf(types.ErrInsufficientFreeBond, "cannot lock %s for %q: %s has free bond %s (bond %s, locked %s)",
			amount, ref, provider.Operator, free, provider.Bond, provider.Locked)
	}

	if err := k.Locks.Set(ctx, key, types.CollateralLock{Operator: provider.Operator, Ref: ref, Amount: amount}); err != nil {
		return err
	}
	provider.Locked = provider.Locked.Add(amount)
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventCollateralLocked{Operator: provider.Operator, Ref: ref, Amount: amount})
}

// UnlockCollateral releases the lock ref on operator's bond and returns its
// amount. locked never goes below zero, even if it somehow held less than
// the lock (which LocksInvariant would report).
func (k Keeper) UnlockCollateral(ctx context.Context, operator sdk.AccAddress, ref string) (sdk.Coin, error) {
	key := collections.Join(operator, ref)
	lock, err := k.Locks.Get(ctx, key)
	if err != nil {
		return sdk.Coin{}, keeperutil.NotFound(err, types.ErrLockNotFound, "%s has no collateral lock %q", k.formatAddress(operator), ref)
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return sdk.Coin{}, err
	}

	if err := k.Locks.Remove(ctx, key); err != nil {
		return sdk.Coin{}, err
	}
	provider.Locked.Amount = math.MaxInt(provider.Locked.Amount.Sub(lock.Amount.Amount), math.ZeroInt())
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return sdk.Coin{}, err
	}
	return lock.Amount, keeperutil.Emit(ctx, &types.EventCollateralUnlocked{Operator: provider.Operator, Ref: ref, Amount: lock.Amount})
}
