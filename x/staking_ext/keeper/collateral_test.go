package keeper_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

func TestCheckCanBid(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(1_500_000)))
	checkCanBid := func(collateral sdk.Coin) func() error {
		return func() error {
			_, err := f.keeper.CheckCanBid(f.ctx, operator, collateral)
			return err
		}
	}

	provider, err := f.keeper.CheckCanBid(f.ctx, operator, udepin(8_500_000))
	require.NoError(t, err, "free bond 8.5 DEPIN covers exactly 8.5 DEPIN")
	require.Equal(t, f.provider(operator), provider)

	err = f.requireRejected(types.ErrInsufficientFreeBond, checkCanBid(udepin(8_500_001)))
	require.ErrorContains(t, err, "has free bond 8500000udepin (bond 10000000udepin, locked 1500000udepin) but the collateral is 8500001udepin")
	f.requireRejected(types.ErrInvalidDenom, checkCanBid(sdk.NewInt64Coin("stake", 1)))
	f.requireRejected(types.ErrInvalidAmount, checkCanBid(sdk.Coin{Denom: bondDenom, Amount: math.NewInt(-1)}))
	f.requireRejected(types.ErrProviderNotFound, func() error {
		_, err := f.keeper.CheckCanBid(f.ctx, account("stranger"), udepin(0))
		return err
	})

	require.NoError(t, f.keeper.Jail(f.ctx, operator, f.ctx.BlockTime().Add(time.Hour), "downtime"))
	err = f.requireRejected(types.ErrJailed, checkCanBid(udepin(0)))
	require.ErrorContains(t, err, "jailed until 2030-01-01T01:00:00Z")

	require.NoError(t, f.keeper.Tombstone(f.ctx, operator, "forged trace"))
	f.requireRejected(types.ErrTombstoned, checkCanBid(udepin(0)))
}

func TestLockAndUnlockCollateral(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	f.newEvents()

	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(4_000_000)))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "verify/dispute/9", udepin(6_000_000)))
	provider := f.provider(operator)
	require.Equal(t, udepin(10_000_000), provider.Locked)
	require.True(t, provider.FreeBond().IsZero())
	require.Equal(t, math.NewInt(10_000_000), f.balance(f.moduleAddress), "locking moves no tokens")
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventCollateralLocked"), 2)
	f.requireInvariants()

	unlocked, err := f.keeper.UnlockCollateral(f.ctx, operator, "market/lease/1")
	require.NoError(t, err)
	require.Equal(t, udepin(4_000_000), unlocked)
	provider = f.provider(operator)
	require.Equal(t, udepin(6_000_000), provider.Locked)
	require.Equal(t, udepin(4_000_000), provider.FreeBond())
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventCollateralUnlocked"), 1)

	// A ref is released exactly once.
	f.requireRejected(types.ErrLockNotFound, func() error {
		_, err := f.keeper.UnlockCollateral(f.ctx, operator, "market/lease/1")
		return err
	})
	// The same ref can be locked again once released.
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(0)))
	unlocked, err = f.keeper.UnlockCollateral(f.ctx, operator, "market/lease/1")
	require.NoError(t, err)
	require.Equal(t, udepin(0), unlocked)
}

func TestLockCollateralRejections(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(7_000_000)))
	lock := func(operator sdk.AccAddress, ref string, amount sdk.Coin) func() error {
		return func() error { return f.keeper.LockCollateral(f.ctx, operator, ref, amount) }
	}

	err := f.requireRejected(types.ErrInsufficientFreeBond, lock(operator, "market/lease/2", udepin(3_000_001)))
	require.ErrorContains(t, err, "cannot lock 3000001udepin for \"market/lease/2\"")
	err = f.requireRejected(types.ErrLockExists, lock(operator, "market/lease/1", udepin(1)))
	require.ErrorContains(t, err, `already has a collateral lock "market/lease/1"`)
	f.requireRejected(types.ErrInvalidLockRef, lock(operator, "", udepin(1)))
	f.requireRejected(types.ErrInvalidLockRef, lock(operator, "market/lease 2", udepin(1)))
	f.requireRejected(types.ErrInvalidLockRef, lock(operator, strings.Repeat("r", 129), udepin(1)))
	f.requireRejected(types.ErrInvalidDenom, lock(operator, "market/lease/2", sdk.NewInt64Coin("stake", 1)))
	f.requireRejected(types.ErrInvalidAmount, lock(operator, "market/lease/2", sdk.Coin{Denom: bondDenom, Amount: math.NewInt(-5)}))
	f.requireRejected(types.ErrProviderNotFound, lock(account("stranger"), "market/lease/2", udepin(1)))
	f.requireRejected(types.ErrLockNotFound, func() error {
		_, err := f.keeper.UnlockCollateral(f.ctx, account("stranger"), "market/lease/1")
		return err
	})
}

func TestLockCollateralIgnoresStatus(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	require.NoError(t, f.keeper.Jail(f.ctx, operator, f.ctx.BlockTime().Add(time.Hour), "downtime"))

	// x/verify locks a provider's bond for a dispute whatever its status.
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "verify/dispute/1", udepin(2_000_000)))
	require.NoError(t, f.keeper.Tombstone(f.ctx, operator, "lost dispute"))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "verify/dispute/2", udepin(2_000_000)))
	require.Equal(t, udepin(4_000_000), f.provider(operator).Locked)
}
