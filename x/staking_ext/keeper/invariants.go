package keeper

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// The invariants below are plain functions rather than x/crisis routes (x/crisis
// is deprecated in v0.53): tests and simulations call them after every
// scenario. Each returns a message and whether the invariant is broken.

// ModuleBalanceInvariant checks token conservation: the module account holds
// exactly the sum of all bonds plus all queued unbondings. Slashes pay out of
// the module account and reduce a bond by the same amount, so they keep it.
func ModuleBalanceInvariant(k Keeper) sdk.Invariant {
	return func(ctx sdk.Context) (string, bool) {
		params, err := k.Params.Get(ctx)
		if err != nil {
			return invariantMessage("module-balance", "reading params: %s", err), true
		}
		bonds, unbondings := math.ZeroInt(), math.ZeroInt()
		err = k.Providers.Walk(ctx, nil, func(_ sdk.AccAddress, provider types.Provider) (bool, error) {
			bonds = bonds.Add(provider.Bond.Amount)
			return false, nil
		})
		if err != nil {
			return invariantMessage("module-balance", "reading providers: %s", err), true
		}
		err = k.Unbondings.Walk(ctx, nil, func(_ uint64, unbonding types.Unbonding) (bool, error) {
			unbondings = unbondings.Add(unbonding.Amount.Amount)
			return false, nil
		})
		if err != nil {
			return invariantMessage("module-balance", "reading unbondings: %s", err), true
		}
		balance := k.bankKeeper.GetBalance(ctx, k.moduleAddress, params.BondDenom)
		if expected := bonds.Add(unbondings); !balance.Amount.Equal(expected) {
			return invariantMessage("module-balance", "module account holds %s but bonds (%s) plus unbondings (%s) are %s%s",
				balance, bonds, unbondings, expected, params.BondDenom), true
		}
		return invariantMessage("module-balance", "module account holds bonds plus unbondings"), false
	}
}

// LocksInvariant checks that each provider's locked amount is the sum of its
// collateral locks, and that every lock belongs to a provider.
func LocksInvariant(k Keeper) sdk.Invariant {
	return func(ctx sdk.Context) (string, bool) {
		sums := map[string]math.Int{}
		err := k.Locks.Walk(ctx, nil, func(key collections.Pair[sdk.AccAddress, string], lock types.CollateralLock) (bool, error) {
			operator := string(key.K1())
			if _, seen := sums[operator]; !seen {
				sums[operator] = math.ZeroInt()
			}
			sums[operator] = sums[operator].Add(lock.Amount.Amount)
			return false, nil
		})
		if err != nil {
			return invariantMessage("locks", "reading locks: %s", err), true
		}
		var problems []string
		err = k.Providers.Walk(ctx, nil, func(operator sdk.AccAddress, provider types.Provider) (bool, error) {
			sum, found := sums[string(operator)]
			if !found {
				sum = math.ZeroInt()
			}
			delete(sums, string(operator))
			if !provider.Locked.Amount.Equal(sum) {
				problems = append(problems, fmt.Sprintf("%s: locked %s but locks add up to %s", provider.Operator, provider.Locked.Amount, sum))
			}
			return false, nil
		})
		if err != nil {
			return invariantMessage("locks", "reading providers: %s", err), true
		}
		for _, operator := range slices.Sorted(maps.Keys(sums)) {
			problems = append(problems, fmt.Sprintf("%s holds locks but is not a provider", k.formatAddress(sdk.AccAddress(operator))))
		}
		if len(problems) > 0 {
			return invariantMessage("locks", "%s", strings.Join(problems, "; ")), true
		}
		return invariantMessage("locks", "every provider's locked amount equals its locks"), false
	}
}

// AllInvariants runs every invariant and reports the first broken one.
func AllInvariants(k Keeper) sdk.Invariant {
	return func(ctx sdk.Context) (string, bool) {
		for _, invariant := range []sdk.Invariant{ModuleBalanceInvariant(k), LocksInvariant(k)} {
			if message, broken := invariant(ctx); broken {
				return message, true
			}
		}
		return invariantMessage("all", "all invariants hold"), false
	}
}

func invariantMessage(name, format string, args ...any) string {
	return sdk.FormatInvariant(types.ModuleName, name, fmt.Sprintf(format, args...))
}
