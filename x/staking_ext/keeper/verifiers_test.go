package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"

	"github.com/depinchain/depinchain/x/staking_ext/keeper"
	v2 "github.com/depinchain/depinchain/x/staking_ext/migrations/v2"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

func (f *fixture) registerVerifier(label string, bond int64) sdk.AccAddress {
	f.t.Helper()
	op := account(label)
	f.fund(op, bond*2)
	_, err := f.msgServer.RegisterVerifier(f.ctx, &types.MsgRegisterVerifier{Operator: f.addressText(op), Bond: udepin(bond)})
	require.NoError(f.t, err)
	return op
}

func (f *fixture) verifier(op sdk.AccAddress) types.Verifier {
	f.t.Helper()
	v, err := f.keeper.GetVerifier(f.ctx, op)
	require.NoError(f.t, err)
	return v
}

func (f *fixture) setMembers() []string {
	f.t.Helper()
	res, err := f.queryServer.Verifiers(f.ctx, &types.QueryVerifiersRequest{ActiveOnly: true})
	require.NoError(f.t, err)
	var out []string
	for _, v := range res.Verifiers {
		out = append(out, v.Operator)
	}
	require.Equal(f.t, uint64(len(out)), res.SetSize)
	return out
}

func TestVerifierLifecycle(t *testing.T) {
	f := newFixture(t)
	min := types.DefaultMinVerifierBond.Int64()
	alice := f.registerVerifier("alice", min)
	bob := f.registerVerifier("bob", 2*min)
	carol := f.registerVerifier("carol", min)
	require.Equal(t, []string{f.addressText(alice), f.addressText(bob), f.addressText(carol)}, f.setMembers())
	require.Equal(t, math.NewInt(4*min), f.balance(f.moduleAddress))

	// Bob unbonds below the minimum: he leaves the set and carol takes his position.
	res, err := f.msgServer.UnbondVerifier(f.ctx, &types.MsgUnbondVerifier{Operator: f.addressText(bob), Amount: udepin(min + 1)})
	require.NoError(t, err)
	entry, err := f.keeper.Unbondings.Get(f.ctx, res.UnbondingId)
	require.NoError(t, err)
	require.Equal(t, types.UNBONDING_ROLE_VERIFIER, entry.Role)
	require.Equal(t, f.ctx.BlockHeight()+types.DefaultUnbondingBlocks, entry.CompletionHeight)
	require.Equal(t, types.VERIFIER_STATUS_INACTIVE, f.verifier(bob).Status)
	require.Equal(t, []string{f.addressText(alice), f.addressText(carol)}, f.setMembers())
	pos, err := f.queryServer.Verifier(f.ctx, &types.QueryVerifierRequest{Operator: f.addressText(carol)})
	require.NoError(t, err)
	require.Equal(t, uint64(1), pos.Position)

	// Activating needs the minimum bond back.
	err = f.requireRejected(types.ErrVerifierBondTooLow, func() error {
		_, err := f.msgServer.ActivateVerifier(f.ctx, &types.MsgActivateVerifier{Operator: f.addressText(bob)})
		return err
	})
	require.Contains(t, err.Error(), "bond 1udepin more")
	_, err = f.msgServer.BondVerifier(f.ctx, &types.MsgBondVerifier{Operator: f.addressText(bob), Amount: udepin(1)})
	require.NoError(t, err)
	require.Equal(t, types.VERIFIER_STATUS_INACTIVE, f.verifier(bob).Status, "bonding alone does not bring a verifier back")
	_, err = f.msgServer.ActivateVerifier(f.ctx, &types.MsgActivateVerifier{Operator: f.addressText(bob)})
	require.NoError(t, err)
	require.Equal(t, []string{f.addressText(alice), f.addressText(carol), f.addressText(bob)}, f.setMembers())

	// Missing an audit (x/verify) deactivates; tombstoning is for good.
	require.NoError(t, f.keeper.DeactivateVerifier(f.ctx, alice, "missed an audit"))
	require.Equal(t, []string{f.addressText(bob), f.addressText(carol)}, f.setMembers())
	require.NoError(t, f.keeper.TombstoneVerifier(f.ctx, carol, "attested to fraud"))
	require.Equal(t, []string{f.addressText(bob)}, f.setMembers())
	for _, op := range []sdk.AccAddress{carol} {
		f.requireRejected(types.ErrVerifierTombstoned, func() error {
			_, err := f.msgServer.ActivateVerifier(f.ctx, &types.MsgActivateVerifier{Operator: f.addressText(op)})
			return err
		})
		f.requireRejected(types.ErrVerifierTombstoned, func() error {
			_, err := f.msgServer.BondVerifier(f.ctx, &types.MsgBondVerifier{Operator: f.addressText(op), Amount: udepin(1)})
			return err
		})
	}
	// A tombstoned verifier may still unbond what is left.
	_, err = f.msgServer.UnbondVerifier(f.ctx, &types.MsgUnbondVerifier{Operator: f.addressText(carol), Amount: udepin(min)})
	require.NoError(t, err)
	f.requireInvariants()
}

func TestVerifierRejections(t *testing.T) {
	f := newFixture(t)
	min := types.DefaultMinVerifierBond.Int64()
	op := account("op")
	f.fund(op, 3*min)
	text := f.addressText(op)
	register := func(bond sdk.Coin) func() error {
		return func() error {
			_, err := f.msgServer.RegisterVerifier(f.ctx, &types.MsgRegisterVerifier{Operator: text, Bond: bond})
			return err
		}
	}
	f.requireRejected(types.ErrVerifierBondTooLow, register(udepin(min-1)))
	f.requireRejected(types.ErrInvalidDenom, register(sdk.NewInt64Coin("uother", min)))
	f.requireRejected(types.ErrInvalidAmount, register(udepin(0)))
	f.requireRejected(sdkerrors.ErrInsufficientFunds, register(udepin(4*min)))
	f.requireRejected(sdkerrors.ErrInvalidAddress, func() error {
		_, err := f.msgServer.RegisterVerifier(f.ctx, &types.MsgRegisterVerifier{Operator: "nobody", Bond: udepin(min)})
		return err
	})
	require.NoError(t, register(udepin(min))())
	f.requireRejected(types.ErrVerifierExists, register(udepin(min)))
	f.requireRejected(types.ErrVerifierActive, func() error {
		_, err := f.msgServer.ActivateVerifier(f.ctx, &types.MsgActivateVerifier{Operator: text})
		return err
	})
	f.requireRejected(types.ErrInsufficientFreeBond, func() error {
		_, err := f.msgServer.UnbondVerifier(f.ctx, &types.MsgUnbondVerifier{Operator: text, Amount: udepin(min + 1)})
		return err
	})
	f.requireRejected(types.ErrVerifierNotFound, func() error {
		_, err := f.msgServer.BondVerifier(f.ctx, &types.MsgBondVerifier{Operator: f.addressText(account("stranger")), Amount: udepin(1)})
		return err
	})
}

// A draw picks distinct members, skips the excluded operator, and reads at most
// MaxDrawAttempts positions however large the set is.
func TestDrawVerifiersIsBounded(t *testing.T) {
	f := newFixture(t)
	min := types.DefaultMinVerifierBond.Int64()
	var ops []sdk.AccAddress
	for i := 0; i < 30; i++ {
		ops = append(ops, f.registerVerifier(string(rune('a'+i%26))+string(rune('a'+i/26)), min))
	}
	excluded := f.addressText(ops[3])
	for seed := byte(0); seed < 20; seed++ {
		ctx := f.ctx.WithGasMeter(storetypes.NewInfiniteGasMeter())
		drawn, err := f.keeper.DrawVerifiers(ctx, []byte{seed}, 3, excluded)
		require.NoError(t, err)
		require.Len(t, drawn, 3)
		require.NotContains(t, drawn, excluded)
		require.NotEqual(t, drawn[0], drawn[1])
		require.NotEqual(t, drawn[1], drawn[2])
		require.NotEqual(t, drawn[0], drawn[2])
		// Reads (each a flat and a per-byte gas charge) stay far below one per member.
		require.Less(t, ctx.GasMeter().GasConsumed(), uint64(types.MaxDrawAttempts(3))*3_000)
	}
	// The draw is a pure function of the seed and the set.
	a, err := f.keeper.DrawVerifiers(f.ctx, []byte("same"), 5, "")
	require.NoError(t, err)
	b, err := f.keeper.DrawVerifiers(f.ctx, []byte("same"), 5, "")
	require.NoError(t, err)
	require.Equal(t, a, b)
}

// SlashInfraction reaches the provider unbonding entries begun at or after the
// infraction height, and none of the others.
func TestSlashInfractionReachesLaterUnbondings(t *testing.T) {
	f := newFixture(t)
	op := f.registerProvider("operator", 40_000_000, 40_000_000)
	text := f.addressText(op)
	unbond := func(amount int64) uint64 {
		res, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: text, Amount: udepin(amount)})
		require.NoError(t, err)
		return res.UnbondingId
	}
	before := unbond(4_000_000)
	f.advance(1, time.Minute)
	infraction := f.ctx.BlockHeight()
	same := unbond(2_000_000)
	f.advance(3, time.Minute)
	after := unbond(6_000_000)
	// A verifier entry of the same operator is another role's.
	f.fund(op, types.DefaultMinVerifierBond.Int64())
	_, err := f.msgServer.RegisterVerifier(f.ctx, &types.MsgRegisterVerifier{Operator: text, Bond: sdk.NewCoin(bondDenom, types.DefaultMinVerifierBond)})
	require.NoError(t, err)
	res, err := f.msgServer.UnbondVerifier(f.ctx, &types.MsgUnbondVerifier{Operator: text, Amount: udepin(1_000_000)})
	require.NoError(t, err)

	bond := f.provider(op).Bond.Amount
	half := math.LegacyNewDecWithPrec(5, 1)
	recipient := authtypes.NewModuleAddress(mintModule)
	got := f.balance(recipient)
	slashed, err := f.keeper.SlashInfraction(f.ctx, op, half, infraction, "forged checkpoint", mintModule)
	require.NoError(t, err)
	require.Equal(t, bond.QuoRaw(2).Add(math.NewInt(1_000_000+3_000_000)), slashed.Amount)
	require.Equal(t, got.Add(slashed.Amount), f.balance(recipient), "the recipient module gets the whole slash")
	amount := func(id uint64) int64 {
		u, err := f.keeper.Unbondings.Get(f.ctx, id)
		require.NoError(t, err)
		return u.Amount.Amount.Int64()
	}
	require.Equal(t, int64(4_000_000), amount(before), "begun before the infraction: not at stake")
	require.Equal(t, int64(1_000_000), amount(same), "begun in the infraction's block: slashed")
	require.Equal(t, int64(3_000_000), amount(after))
	require.Equal(t, int64(1_000_000), amount(res.UnbondingId), "a verifier entry is not a provider's")
	events := f.eventsOfType("depinchain.stakingext.v1.EventProviderSlashed")
	require.NotEmpty(t, events)

	f.requireRejected(types.ErrInvalidSlash, func() error {
		_, err := f.keeper.SlashInfraction(f.ctx, op, half, infraction, "again", types.ModuleName)
		return err
	})
	f.requireRejected(types.ErrInvalidReason, func() error {
		_, err := f.keeper.SlashInfraction(f.ctx, op, half, infraction, "", mintModule)
		return err
	})
}

func TestVerifierGenesisRoundTrip(t *testing.T) {
	source := newFixture(t)
	min := types.DefaultMinVerifierBond.Int64()
	a := source.registerVerifier("a", min)
	b := source.registerVerifier("b", min)
	source.registerVerifier("c", min)
	require.NoError(t, source.keeper.DeactivateVerifier(source.ctx, a, "missed"))
	require.NoError(t, source.keeper.RecordAudit(source.ctx, b, types.AuditAttested))
	exported, err := source.keeper.ExportGenesis(source.ctx)
	require.NoError(t, err)
	require.Len(t, exported.Verifiers, 3)
	require.Equal(t, source.setMembers(), exported.AuditSet, "the set is exported in position order")

	held := source.balance(source.moduleAddress)
	target := newFixture(t)
	coins := sdk.NewCoins(sdk.NewCoin(bondDenom, held))
	require.NoError(t, target.bank.MintCoins(target.ctx, mintModule, coins))
	require.NoError(t, target.bank.SendCoinsFromModuleToModule(target.ctx, mintModule, types.ModuleName, coins))
	require.NoError(t, target.keeper.InitGenesis(target.ctx, exported))
	again, err := target.keeper.ExportGenesis(target.ctx)
	require.NoError(t, err)
	require.Equal(t, exported, again)
	require.Equal(t, source.setMembers(), target.setMembers())

	bad := *exported
	bad.AuditSet = append([]string{}, exported.AuditSet[:1]...)
	require.ErrorContains(t, bad.Validate(target.addressCodec), "audit_set lists 1 verifiers but 2 are active")
	bad.AuditSet = append(append([]string{}, exported.AuditSet...), source.addressText(a))
	require.ErrorContains(t, bad.Validate(target.addressCodec), "is not an active verifier")
}

// The version 2 migration fills in the new params and gives each queued unbonding its
// completion height.
func TestMigrate1to2(t *testing.T) {
	f := newFixture(t)
	op := f.registerProvider("operator", 10_000_000, 10_000_000)
	_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(op), Amount: udepin(1_000_000)})
	require.NoError(t, err)
	// Make it look like version 1 state: no new params, no completion height.
	p, err := f.keeper.Params.Get(f.ctx)
	require.NoError(t, err)
	p.UnbondingBlocks, p.MinVerifierBond = 0, math.Int{}
	require.NoError(t, f.keeper.Params.Set(f.ctx, p))
	u, err := f.keeper.Unbondings.Get(f.ctx, 1)
	require.NoError(t, err)
	u.CompletionHeight = 0
	require.NoError(t, f.keeper.Unbondings.Set(f.ctx, 1, u))

	require.NoError(t, v2.Migrate(f.ctx, v2.Collections{Params: f.keeper.Params, Unbondings: f.keeper.Unbondings}))
	p, err = f.keeper.Params.Get(f.ctx)
	require.NoError(t, err)
	require.Equal(t, types.DefaultParams(), p)
	u, err = f.keeper.Unbondings.Get(f.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, u.CreationHeight+types.DefaultUnbondingBlocks, u.CompletionHeight)
	require.Equal(t, types.UNBONDING_ROLE_PROVIDER, u.Role)
	// The completion-time index still finds it.
	iter, err := f.keeper.Unbondings.Indexes.CompletionTime.Iterate(f.ctx, collections.NewPrefixUntilPairRange[int64, uint64](u.CompletionTime.UnixNano()))
	require.NoError(t, err)
	ids, err := iter.PrimaryKeys()
	require.NoError(t, err)
	require.Equal(t, []uint64{1}, ids)
	_ = keeper.NewMigrator(f.keeper)
}
