package keeper

import (
	"context"
	"time"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// Slash takes floor(fraction × bond) from operator's bond and returns it.
// beneficiaryShare of the slashed amount (rounded down) goes to beneficiary,
// e.g. the challenger who proved fraud; the rest, rounding remainder
// included, funds the community pool. With a nil (or empty) beneficiary
// everything goes to the pool. Tokens only move out of the module account:
// nothing is minted or burned. Locks are accounting inside the bond and stay
// as they are, so free bond may drop to zero while leases still hold
// collateral. All checks run before the first transfer; a transfer can only
// fail after that if the module account does not hold the bonds, which
// ModuleBalanceInvariant reports.
// fraction must be in (0, 1], beneficiaryShare in [0, 1] and reason non-empty.
// Tombstoned and jailed providers can still be slashed.
func (k Keeper) Slash(
	ctx context.Context,
	operator sdk.AccAddress,
	fraction math.LegacyDec,
	reason string,
	beneficiary sdk.AccAddress,
	beneficiaryShare math.LegacyDec,
) (sdk.Coin, error) {
	if fraction.IsNil() || !fraction.IsPositive() || fraction.GT(math.LegacyOneDec()) {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrInvalidSlash, "fraction must be in (0, 1], got %s", fraction)
	}
	hasBeneficiary := len(beneficiary) > 0
	if hasBeneficiary && (beneficiaryShare.IsNil() || beneficiaryShare.IsNegative() || beneficiaryShare.GT(math.LegacyOneDec())) {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrInvalidSlash, "beneficiary share must be in [0, 1], got %s", beneficiaryShare)
	}
	if reason == "" {
		return sdk.Coin{}, errorsmod.Wrap(types.ErrInvalidReason, "a slash needs a reason")
	}
	if hasBeneficiary && k.bankKeeper.BlockedAddr(beneficiary) {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrBlockedRecipient, "slash beneficiary %s may not receive funds", k.formatAddress(beneficiary))
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return sdk.Coin{}, err
	}

	denom := provider.Bond.Denom
	slashed := sdk.NewCoin(denom, fraction.MulInt(provider.Bond.Amount).TruncateInt())
	toBeneficiary := sdk.NewCoin(denom, math.ZeroInt())
	beneficiaryText := ""
	if hasBeneficiary {
		toBeneficiary.Amount = beneficiaryShare.MulInt(slashed.Amount).TruncateInt()
		beneficiaryText = k.formatAddress(beneficiary)
	}
	toCommunityPool := slashed.Sub(toBeneficiary)

	if toBeneficiary.IsPositive() {
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, beneficiary, sdk.NewCoins(toBeneficiary)); err != nil {
			return sdk.Coin{}, err
		}
	}
	if toCommunityPool.IsPositive() {
		if err := k.distrKeeper.FundCommunityPool(ctx, sdk.NewCoins(toCommunityPool), k.moduleAddress); err != nil {
			return sdk.Coin{}, err
		}
	}
	provider.Bond = provider.Bond.Sub(slashed)
	provider.Reputation.Slashes++
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return sdk.Coin{}, err
	}
	if err := keeperutil.Emit(ctx, &types.EventProviderSlashed{
		Operator:            provider.Operator,
		Reason:              reason,
		Fraction:            fraction.String(),
		Amount:              slashed,
		Beneficiary:         beneficiaryText,
		BeneficiaryAmount:   toBeneficiary,
		CommunityPoolAmount: toCommunityPool,
	}); err != nil {
		return sdk.Coin{}, err
	}
	return slashed, keeperutil.Emit(ctx, &types.EventReputationChanged{Operator: provider.Operator, Reputation: provider.Reputation})
}

// Jail stops operator from bidding until at least until, after which it may
// send MsgUnjail. Jailing a jailed provider keeps the later of the two end
// times, so a short jail cannot cut a long one short. Jailing a tombstoned
// provider changes nothing and is not an error: tombstoned is strictly worse,
// and a caller's deadline processing should not fail over it.
func (k Keeper) Jail(ctx context.Context, operator sdk.AccAddress, until time.Time, reason string) error {
	if reason == "" {
		return errorsmod.Wrap(types.ErrInvalidReason, "jailing needs a reason")
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return err
	}
	switch provider.Status {
	case types.PROVIDER_STATUS_TOMBSTONED:
		return nil
	case types.PROVIDER_STATUS_JAILED:
		if provider.JailedUntil.After(until) {
			until = provider.JailedUntil
		}
	}

	provider.Status = types.PROVIDER_STATUS_JAILED
	provider.JailedUntil = until.UTC()
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventProviderJailed{Operator: provider.Operator, Reason: reason, JailedUntil: provider.JailedUntil})
}

// Tombstone bans operator for good after proven fraud: it can never bid,
// update its record, bond more or unjail. Its remaining free bond can still
// be unbonded. Tombstoning twice changes nothing.
func (k Keeper) Tombstone(ctx context.Context, operator sdk.AccAddress, reason string) error {
	if reason == "" {
		return errorsmod.Wrap(types.ErrInvalidReason, "tombstoning needs a reason")
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return err
	}
	if provider.Status == types.PROVIDER_STATUS_TOMBSTONED {
		return nil
	}

	provider.Status = types.PROVIDER_STATUS_TOMBSTONED
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventProviderTombstoned{Operator: provider.Operator, Reason: reason})
}

// RecordLeaseOutcome counts a finished lease in operator's reputation:
// completed, or failed (closed for non-performance or lost a dispute).
func (k Keeper) RecordLeaseOutcome(ctx context.Context, operator sdk.AccAddress, completed bool) error {
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return err
	}
	if completed {
		provider.Reputation.LeasesCompleted++
	} else {
		provider.Reputation.LeasesFailed++
	}
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventReputationChanged{Operator: provider.Operator, Reputation: provider.Reputation})
}

// ReputationScore is operator's Reputation.Score, used by x/market to break
// auction ties.
func (k Keeper) ReputationScore(ctx context.Context, operator sdk.AccAddress) (int64, error) {
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return 0, err
	}
	return provider.Reputation.Score(), nil
}
