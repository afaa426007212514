package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

func TestSlashWithBeneficiary(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_007, 10_000_007)
	challenger := account("challenger")
	f.newEvents()

	slashed, err := f.keeper.Slash(f.ctx, operator, math.LegacyMustNewDecFromStr("0.333"), "fraud proof on lease 7",
		challenger, math.LegacyMustNewDecFromStr("0.25"))
	require.NoError(t, err)

	// floor(0.333 × 10000007) = 3330002; the challenger gets floor(0.25 ×
	// 3330002) = 832500 and the pool the rest, rounding remainder included.
	require.Equal(t, udepin(3_330_002), slashed)
	require.Equal(t, math.NewInt(832_500), f.balance(challenger))
	require.Equal(t, math.NewInt(2_497_502), f.balance(f.communityPool))
	require.Equal(t, math.NewInt(6_670_005), f.balance(f.moduleAddress))
	provider := f.provider(operator)
	require.Equal(t, udepin(6_670_005), provider.Bond)
	require.Equal(t, uint64(1), provider.Reputation.Slashes)

	events := f.eventsOfType("depinchain.stakingext.v1.EventProviderSlashed")
	require.Len(t, events, 1)
	attributes := map[string]string{}
	for _, attribute := range events[0].Attributes {
		attributes[attribute.Key] = attribute.Value
	}
	require.Equal(t, `"0.333000000000000000"`, attributes["fraction"])
	require.Equal(t, `"`+f.addressText(challenger)+`"`, attributes["beneficiary"])
	require.Equal(t, `{"denom":"udepin","amount":"832500"}`, attributes["beneficiary_amount"])
	require.Equal(t, `{"denom":"udepin","amount":"2497502"}`, attributes["community_pool_amount"])
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventReputationChanged"), 1)
}

func TestSlashWithoutBeneficiary(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 9_000_000, 9_000_000)

	slashed, err := f.keeper.Slash(f.ctx, operator, math.LegacyMustNewDecFromStr("0.01"), "missed checkpoint", nil, math.LegacyDec{})
	require.NoError(t, err)
	require.Equal(t, udepin(90_000), slashed)
	require.Equal(t, math.NewInt(90_000), f.balance(f.communityPool))
	require.Equal(t, udepin(8_910_000), f.provider(operator).Bond)
}

func TestSlashKeepsLocks(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(7_000_000)))

	slashed, err := f.keeper.Slash(f.ctx, operator, math.LegacyMustNewDecFromStr("0.5"), "lost dispute", nil, math.LegacyZeroDec())
	require.NoError(t, err)
	require.Equal(t, udepin(4_000_000), slashed)
	provider := f.provider(operator)
	require.Equal(t, udepin(4_000_000), provider.Bond)
	require.Equal(t, udepin(7_000_000), provider.Locked, "locks are accounting inside the bond and stay")
	require.True(t, provider.FreeBond().IsZero(), "free bond floors at zero while locked exceeds bond")
	f.requireRejected(types.ErrInsufficientFreeBond, func() error {
		_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: provider.Operator, Amount: udepin(1)})
		return err
	})
	f.requireInvariants()

	_, err = f.keeper.UnlockCollateral(f.ctx, operator, "market/lease/1")
	require.NoError(t, err)
	require.Equal(t, udepin(4_000_000), f.provider(operator).FreeBond())

	// A full slash takes the whole remaining bond.
	slashed, err = f.keeper.Slash(f.ctx, operator, math.LegacyOneDec(), "forged checkpoint", nil, math.LegacyZeroDec())
	require.NoError(t, err)
	require.Equal(t, udepin(4_000_000), slashed)
	require.True(t, f.provider(operator).Bond.IsZero())
	require.Equal(t, math.NewInt(8_000_000), f.balance(f.communityPool))
}

func TestSlashRoundsTinyAmountsToZero(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(operator), Amount: udepin(7_999_999)})
	require.NoError(t, err)

	slashed, err := f.keeper.Slash(f.ctx, operator, math.LegacyMustNewDecFromStr("0.5"), "missed checkpoint",
		account("challenger"), math.LegacyOneDec())
	require.NoError(t, err)
	require.True(t, slashed.IsZero(), "floor(0.5 × 1) is zero, got %s", slashed)
	require.Equal(t, udepin(1), f.provider(operator).Bond)
	require.Equal(t, uint64(1), f.provider(operator).Reputation.Slashes, "the slash still counts")
}

func TestSlashRejections(t *testing.T) {
	half := math.LegacyMustNewDecFromStr("0.5")
	challenger := account("challenger")
	// slash calls Slash on the fixture's provider unless the case names another operator.
	type slashCall func(f *fixture, provider sdk.AccAddress) error
	slash := func(fraction math.LegacyDec, reason string, beneficiary sdk.AccAddress, share math.LegacyDec) slashCall {
		return func(f *fixture, provider sdk.AccAddress) error {
			_, err := f.keeper.Slash(f.ctx, provider, fraction, reason, beneficiary, share)
			return err
		}
	}
	tests := []struct {
		name string
		call slashCall
		want *errorsmod.Error
	}{
		{"zero fraction", slash(math.LegacyZeroDec(), "r", nil, half), types.ErrInvalidSlash},
		{"negative fraction", slash(math.LegacyMustNewDecFromStr("-0.1"), "r", nil, half), types.ErrInvalidSlash},
		{"fraction above one", slash(math.LegacyMustNewDecFromStr("1.000000000000000001"), "r", nil, half), types.ErrInvalidSlash},
		{"unset fraction", slash(math.LegacyDec{}, "r", nil, half), types.ErrInvalidSlash},
		{"share above one", slash(half, "r", challenger, math.LegacyMustNewDecFromStr("1.5")), types.ErrInvalidSlash},
		{"negative share", slash(half, "r", challenger, math.LegacyMustNewDecFromStr("-0.5")), types.ErrInvalidSlash},
		{"unset share with a beneficiary", slash(half, "r", challenger, math.LegacyDec{}), types.ErrInvalidSlash},
		{"no reason", slash(half, "", nil, half), types.ErrInvalidReason},
		{"beneficiary that cannot receive", func(f *fixture, provider sdk.AccAddress) error {
			return slash(half, "r", f.blockedAddress, half)(f, provider)
		}, types.ErrBlockedRecipient},
		{"unknown provider", func(f *fixture, _ sdk.AccAddress) error {
			return slash(half, "r", nil, half)(f, account("stranger"))
		}, types.ErrProviderNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			provider := f.registerProvider("operator", 8_000_000, 8_000_000)
			f.requireRejected(tc.want, func() error { return tc.call(f, provider) })
		})
	}
}

func TestJail(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	long := f.ctx.BlockTime().Add(24 * time.Hour)
	f.newEvents()

	require.NoError(t, f.keeper.Jail(f.ctx, operator, long, "downtime"))
	provider := f.provider(operator)
	require.Equal(t, types.PROVIDER_STATUS_JAILED, provider.Status)
	require.Equal(t, long, provider.JailedUntil)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventProviderJailed"), 1)

	// A shorter second jail does not cut the first one short; a longer one extends it.
	require.NoError(t, f.keeper.Jail(f.ctx, operator, long.Add(-time.Hour), "downtime again"))
	require.Equal(t, long, f.provider(operator).JailedUntil)
	require.NoError(t, f.keeper.Jail(f.ctx, operator, long.Add(time.Hour), "downtime again"))
	require.Equal(t, long.Add(time.Hour), f.provider(operator).JailedUntil)

	// Jailed providers are listed through the status index.
	jailed, err := f.queryServer.Providers(f.ctx, &types.QueryProvidersRequest{Status: types.PROVIDER_STATUS_JAILED})
	require.NoError(t, err)
	require.Len(t, jailed.Providers, 1)

	f.requireRejected(types.ErrInvalidReason, func() error { return f.keeper.Jail(f.ctx, operator, long, "") })
	f.requireRejected(types.ErrProviderNotFound, func() error { return f.keeper.Jail(f.ctx, account("stranger"), long, "downtime") })
}

func TestTombstone(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	operatorText := f.addressText(operator)
	f.newEvents()

	require.NoError(t, f.keeper.Tombstone(f.ctx, operator, "forged checkpoint on lease 3"))
	require.Equal(t, types.PROVIDER_STATUS_TOMBSTONED, f.provider(operator).Status)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventProviderTombstoned"), 1)

	// Tombstoning is permanent and idempotent; jailing cannot downgrade it.
	f.newEvents()
	before := f.snapshot()
	require.NoError(t, f.keeper.Tombstone(f.ctx, operator, "again"))
	require.NoError(t, f.keeper.Jail(f.ctx, operator, f.ctx.BlockTime().Add(time.Hour), "downtime"))
	before.RequireUnchanged(t)

	f.requireRejected(types.ErrTombstoned, func() error {
		_, err := f.msgServer.Unjail(f.ctx, &types.MsgUnjail{Operator: operatorText})
		return err
	})
	f.requireRejected(types.ErrTombstoned, func() error {
		_, err := f.keeper.CheckCanBid(f.ctx, operator, udepin(0))
		return err
	})
	f.requireRejected(types.ErrInvalidReason, func() error { return f.keeper.Tombstone(f.ctx, operator, "") })
	f.requireRejected(types.ErrProviderNotFound, func() error { return f.keeper.Tombstone(f.ctx, account("stranger"), "fraud") })

	// It can still be slashed, and may take its remaining free bond home.
	_, err := f.keeper.Slash(f.ctx, operator, math.LegacyMustNewDecFromStr("0.5"), "second dispute", nil, math.LegacyZeroDec())
	require.NoError(t, err)
	_, err = f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: operatorText, Amount: udepin(4_000_000)})
	require.NoError(t, err)
}

func TestReputation(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	f.newEvents()

	for range 3 {
		require.NoError(t, f.keeper.RecordLeaseOutcome(f.ctx, operator, true))
	}
	require.NoError(t, f.keeper.RecordLeaseOutcome(f.ctx, operator, false))
	score, err := f.keeper.ReputationScore(f.ctx, operator)
	require.NoError(t, err)
	require.Equal(t, int64(3-2), score)

	_, err = f.keeper.Slash(f.ctx, operator, math.LegacyMustNewDecFromStr("0.1"), "missed checkpoint", nil, math.LegacyZeroDec())
	require.NoError(t, err)
	score, err = f.keeper.ReputationScore(f.ctx, operator)
	require.NoError(t, err)
	require.Equal(t, int64(3-2-5), score)
	require.Equal(t, types.Reputation{LeasesCompleted: 3, LeasesFailed: 1, Slashes: 1}, f.provider(operator).Reputation)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventReputationChanged"), 5)

	_, err = f.keeper.ReputationScore(f.ctx, account("stranger"))
	require.ErrorIs(t, err, types.ErrProviderNotFound)
	f.requireRejected(types.ErrProviderNotFound, func() error { return f.keeper.RecordLeaseOutcome(f.ctx, account("stranger"), true) })
}
