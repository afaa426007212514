package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// populate gives the fixture providers in every status with locks,
// unbondings, slashes and reputation, and returns the tokens the module
// account holds for them.
func populate(t *testing.T, f *fixture) math.Int {
	t.Helper()
	alice := f.registerProvider("alice", 30_000_000, 20_000_000)
	bob := f.registerProvider("bob", 10_000_000, 10_000_000)
	carol := f.registerProvider("carol", 9_000_000, 9_000_000)
	require.NoError(t, f.keeper.LockCollateral(f.ctx, alice, "market/lease/1", udepin(3_000_000)))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, alice, "verify/dispute/4", udepin(2_000_000)))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, carol, "market/lease/2", udepin(1_000_000)))
	_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(alice), Amount: udepin(1_000_000)})
	require.NoError(t, err)
	f.advance(5, time.Minute)
	_, err = f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(carol), Amount: udepin(500_000)})
	require.NoError(t, err)
	require.NoError(t, f.keeper.RecordLeaseOutcome(f.ctx, alice, true))
	require.NoError(t, f.keeper.RecordLeaseOutcome(f.ctx, carol, false))
	require.NoError(t, f.keeper.Jail(f.ctx, carol, f.ctx.BlockTime().Add(time.Hour), "downtime"))
	_, err = f.keeper.Slash(f.ctx, bob, math.LegacyMustNewDecFromStr("0.25"), "forged checkpoint", account("challenger"), math.LegacyMustNewDecFromStr("0.5"))
	require.NoError(t, err)
	require.NoError(t, f.keeper.Tombstone(f.ctx, bob, "forged checkpoint"))
	return f.balance(f.moduleAddress)
}

func TestGenesisRoundTrip(t *testing.T) {
	source := newFixture(t)
	held := populate(t, source)
	exported, err := source.keeper.ExportGenesis(source.ctx)
	require.NoError(t, err)
	require.Len(t, exported.Providers, 3)
	require.Len(t, exported.Locks, 3)
	require.Len(t, exported.Unbondings, 2)
	require.Equal(t, uint64(3), exported.NextUnbondingId)

	// The JSON a node writes to genesis.json decodes to the same state.
	cdc := newCodec()
	raw, err := cdc.MarshalJSON(exported)
	require.NoError(t, err)
	var decoded types.GenesisState
	require.NoError(t, cdc.UnmarshalJSON(raw, &decoded))

	target := newFixture(t)
	require.NoError(t, target.bank.MintCoins(target.ctx, mintModule, sdk.NewCoins(sdk.NewCoin(bondDenom, held))))
	require.NoError(t, target.bank.SendCoinsFromModuleToModule(target.ctx, mintModule, types.ModuleName, sdk.NewCoins(sdk.NewCoin(bondDenom, held))))
	require.NoError(t, target.keeper.InitGenesis(target.ctx, &decoded))
	reexported, err := target.keeper.ExportGenesis(target.ctx)
	require.NoError(t, err)
	require.Equal(t, exported, reexported)

	// The imported chain carries on where the exported one stopped:
	// indexes work and the id sequence continues.
	target.ctx = target.ctx.WithBlockTime(source.ctx.BlockTime())
	response, err := target.msgServer.Unbond(target.ctx, &types.MsgUnbond{Operator: target.addressText(account("alice")), Amount: udepin(1)})
	require.NoError(t, err)
	require.Equal(t, uint64(3), response.UnbondingId)
	jailed, err := target.queryServer.Providers(target.ctx, &types.QueryProvidersRequest{Status: types.PROVIDER_STATUS_JAILED})
	require.NoError(t, err)
	require.Len(t, jailed.Providers, 1)
	// Bank balances are x/bank's genesis, not ours: alice starts with nothing
	// here and receives both of her unbondings.
	target.advance(types.DefaultUnbondingBlocks+10, types.DefaultUnbondingPeriod)
	require.NoError(t, target.keeper.EndBlocker(target.ctx))
	require.Equal(t, math.NewInt(1_000_000+1), target.balance(account("alice")))
}

func TestInitGenesisRequiresTheModuleAccountToHoldTheBonds(t *testing.T) {
	source := newFixture(t)
	populate(t, source)
	exported, err := source.keeper.ExportGenesis(source.ctx)
	require.NoError(t, err)

	target := newFixture(t)
	err = target.keeper.InitGenesis(target.ctx, exported)
	require.ErrorIs(t, err, types.ErrInvalidGenesis)
	require.ErrorContains(t, err, "the stakingext module account holds 0udepin but bonds and unbondings add up to 36500000udepin")
}

func TestInitGenesisValidates(t *testing.T) {
	f := newFixture(t)
	populate(t, f)
	exported, err := f.keeper.ExportGenesis(f.ctx)
	require.NoError(t, err)
	exported.Locks[0].Amount = udepin(1)

	target := newFixture(t)
	err = target.keeper.InitGenesis(target.ctx, exported)
	require.ErrorIs(t, err, types.ErrInvalidGenesis)
	require.ErrorContains(t, err, "but its locks add up to")
}
