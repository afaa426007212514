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

// SlashInfraction slashes a provider for an infraction committed at infractionHeight
// (for fraud, the height its checkpoint was committed): floor(fraction × bond) from the
// bond and floor(fraction × amount) from every provider unbonding entry the operator
// began at or after that height, the way x/staking slashes unbonding delegations begun
// after an infraction. Unbonding after cheating therefore saves nothing. Entries begun
// before the infraction were not at stake when it was committed and are left alone.
// The whole amount goes to recipientModule, which distributes it (x/verify pays the
// challenger, the job owner and the community pool); locks stay as they are;
// reputation.slashes increments. Checks run before the first write or transfer.
func (k Keeper) SlashInfraction(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, infractionHeight int64,
	reason, recipientModule string,
) (sdk.Coin, error) {
	if err := checkSlash(fraction, reason, recipientModule); err != nil {
		return sdk.Coin{}, err
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return sdk.Coin{}, err
	}
	fromBond := fraction.MulInt(provider.Bond.Amount).TruncateInt()
	fromUnbonding, err := k.slashUnbondings(ctx, operator, types.UNBONDING_ROLE_PROVIDER, fraction, infractionHeight)
	if err != nil {
		return sdk.Coin{}, err
	}
	total := sdk.NewCoin(provider.Bond.Denom, fromBond.Add(fromUnbonding))
	if total.IsPositive() {
		if err := k.bankKeeper.SendCoinsFromModuleToModule(ctx, types.ModuleName, recipientModule, sdk.NewCoins(total)); err != nil {
			return sdk.Coin{}, err
		}
	}
	provider.Bond.Amount = provider.Bond.Amount.Sub(fromBond)
	provider.Reputation.Slashes++
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return sdk.Coin{}, err
	}
	zero := sdk.NewCoin(total.Denom, math.ZeroInt())
	if err := keeperutil.Emit(ctx, &types.EventProviderSlashed{
		Operator: provider.Operator, Reason: reason, Fraction: fraction.String(), Amount: total,
		BeneficiaryAmount: zero, CommunityPoolAmount: zero,
		FromUnbonding: sdk.NewCoin(total.Denom, fromUnbonding), InfractionHeight: infractionHeight, RecipientModule: recipientModule,
	}); err != nil {
		return sdk.Coin{}, err
	}
	return total, keeperutil.Emit(ctx, &types.EventReputationChanged{Operator: provider.Operator, Reputation: provider.Reputation})
}

// checkSlash validates what every infraction slash needs.
func checkSlash(fraction math.LegacyDec, reason, recipientModule string) error {
	if fraction.IsNil() || !fraction.IsPositive() || fraction.GT(math.LegacyOneDec()) {
		return errorsmod.Wrapf(types.ErrInvalidSlash, "fraction must be in (0, 1], got %s", fraction)
	}
	if reason == "" {
		return errorsmod.Wrap(types.ErrInvalidReason, "a slash needs a reason")
	}
	if recipientModule == types.ModuleName {
		return errorsmod.Wrap(types.ErrInvalidSlash, "a slash cannot go back to the bond module itself")
	}
	return nil
}

// slashUnbondings takes floor(fraction × amount) from each of operator's unbonding
// entries of role created at or after infractionHeight, removes entries it empties, and
// returns the total taken (still in the module account; the caller moves it). An
// operator has at most max_unbonding_entries entries, so the cost is bounded.
func (k Keeper) slashUnbondings(ctx context.Context, operator sdk.AccAddress, role types.UnbondingRole, fraction math.LegacyDec, infractionHeight int64) (math.Int, error) {
	iter, err := k.Unbondings.Indexes.Operator.MatchExact(ctx, operator)
	if err != nil {
		return math.Int{}, err
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return math.Int{}, err
	}
	taken := math.ZeroInt()
	for _, id := range ids {
		entry, err := k.Unbondings.Get(ctx, id)
		if err != nil {
			return math.Int{}, err
		}
		if entry.Role != role || entry.CreationHeight < infractionHeight {
			continue
		}
		cut := fraction.MulInt(entry.Amount.Amount).TruncateInt()
		if !cut.IsPositive() {
			continue
		}
		taken = taken.Add(cut)
		entry.Amount.Amount = entry.Amount.Amount.Sub(cut)
		if entry.Amount.IsZero() {
			err = k.Unbondings.Remove(ctx, id)
		} else {
			err = k.Unbondings.Set(ctx, id, entry)
		}
		if err != nil {
			return math.Int{}, err
		}
	}
	return taken, nil
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
