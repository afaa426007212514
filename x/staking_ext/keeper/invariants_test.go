package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/keeper"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// The invariants must notice the breakages they exist for; each case
// breaks state behind the keeper's back and then repairs it.

func TestModuleBalanceInvariantDetectsUnbackedTokens(t *testing.T) {
	f := newFixture(t)
	f.registerProvider("operator", 8_000_000, 8_000_000)
	stray := sdk.NewCoins(udepin(1))
	require.NoError(t, f.bank.MintCoins(f.ctx, mintModule, stray))
	require.NoError(t, f.bank.SendCoinsFromModuleToModule(f.ctx, mintModule, types.ModuleName, stray))

	message, broken := keeper.ModuleBalanceInvariant(f.keeper)(f.ctx)
	require.True(t, broken)
	require.Contains(t, message, "module account holds 8000001udepin but provider bonds (8000000), verifier bonds (0) and unbondings (0) are 8000000udepin")
	_, broken = keeper.AllInvariants(f.keeper)(f.ctx)
	require.True(t, broken)

	require.NoError(t, f.bank.SendCoinsFromModuleToModule(f.ctx, types.ModuleName, mintModule, stray))
}

func TestLocksInvariantDetectsMismatches(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(5)))
	provider := f.provider(operator)

	tampered := provider
	tampered.Locked = udepin(4)
	require.NoError(t, f.keeper.Providers.Set(f.ctx, operator, tampered))
	message, broken := keeper.LocksInvariant(f.keeper)(f.ctx)
	require.True(t, broken)
	require.Contains(t, message, "locked 4 but locks add up to 5")
	require.NoError(t, f.keeper.Providers.Set(f.ctx, operator, provider))

	orphan := collections.Join(account("stranger"), "market/lease/9")
	require.NoError(t, f.keeper.Locks.Set(f.ctx, orphan, types.CollateralLock{Operator: f.addressText(account("stranger")), Ref: "market/lease/9", Amount: udepin(1)}))
	message, broken = keeper.LocksInvariant(f.keeper)(f.ctx)
	require.True(t, broken)
	require.Contains(t, message, f.addressText(account("stranger"))+" holds locks but is not a provider")
	require.NoError(t, f.keeper.Locks.Remove(f.ctx, orphan))
}
