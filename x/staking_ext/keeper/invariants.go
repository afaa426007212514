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
// exactly the sum of all provider and verifier bonds plus all queued unbondings. Slashes
// pay out of the module account and reduce a bond or an entry by the same amount, so
// they keep it.
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
		verifierBonds := math.ZeroInt()
		err = k.Verifiers.Walk(ctx, nil, func(_ sdk.AccAddress, v types.Verifier) (bool, error) {
			verifierBonds = verifierBonds.Add(v.Bond.Amount)
			return false, nil
		})
		if err != nil {
			return invariantMessage("module-balance", "reading verifiers: %s", err), true
		}
		balance := k.bankKeeper.GetBalance(ctx, k.moduleAddress, params.BondDenom)
		if expected := bonds.Add(verifierBonds).Add(unbondings); !balance.Amount.Equal(expected) {
			return invariantMessage("module-balance", "module account holds %s but provider bonds (%s), verifier bonds (%s) and unbondings (%s) are %s%s",
				balance, bonds, verifierBonds, unbondings, expected, params.BondDenom), true
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

// AuditSetInvariant checks the audit set: positions 0..size−1 each hold one member, the
// reverse index agrees, and the members are exactly the ACTIVE verifiers.
func AuditSetInvariant(k Keeper) sdk.Invariant {
	return func(ctx sdk.Context) (string, bool) {
		size, err := k.auditSetSize(ctx)
		if err != nil {
			return invariantMessage("audit-set", "reading the size: %s", err), true
		}
		var problems []string
		members := map[string]bool{}
		var entries uint64
		err = k.AuditSet.Walk(ctx, nil, func(pos uint64, operator sdk.AccAddress) (bool, error) {
			entries++
			if pos >= size {
				problems = append(problems, fmt.Sprintf("position %d is beyond the size %d", pos, size))
			}
			back, err := k.AuditSetPositions.Get(ctx, operator)
			if err != nil || back != pos {
				problems = append(problems, fmt.Sprintf("%s at position %d is indexed at %d (%v)", k.formatAddress(operator), pos, back, err))
			}
			members[string(operator)] = true
			return false, nil
		})
		if err != nil {
			return invariantMessage("audit-set", "reading the set: %s", err), true
		}
		if entries != size {
			problems = append(problems, fmt.Sprintf("%d entries for a size of %d", entries, size))
		}
		err = k.Verifiers.Walk(ctx, nil, func(operator sdk.AccAddress, v types.Verifier) (bool, error) {
			if active := v.Status == types.VERIFIER_STATUS_ACTIVE; active != members[string(operator)] {
				problems = append(problems, fmt.Sprintf("%s is %s but in the set: %t", v.Operator, v.Status, members[string(operator)]))
			}
			delete(members, string(operator))
			return false, nil
		})
		if err != nil {
			return invariantMessage("audit-set", "reading verifiers: %s", err), true
		}
		if len(members) > 0 {
			problems = append(problems, fmt.Sprintf("%d set members are not verifiers", len(members)))
		}
		if len(problems) > 0 {
			return invariantMessage("audit-set", "%s", strings.Join(problems, "; ")), true
		}
		return invariantMessage("audit-set", "the audit set is the active verifiers"), false
	}
}

// AllInvariants runs every invariant and reports the first broken one.
func AllInvariants(k Keeper) sdk.Invariant {
	return func(ctx sdk.Context) (string, bool) {
		for _, invariant := range []sdk.Invariant{ModuleBalanceInvariant(k), LocksInvariant(k), AuditSetInvariant(k)} {
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
