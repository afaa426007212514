package keeper_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

func TestRegisterProvider(t *testing.T) {
	f := newFixture(t)
	operator := account("operator")
	f.fund(operator, 20_000_000)
	f.advance(4, time.Minute)
	msg := f.registerMsg(operator)
	msg.Gpus = []types.GPUInventory{h100s(8), a100s(4)}
	msg.Bond = udepin(12_000_000)

	_, err := f.msgServer.RegisterProvider(f.ctx, msg)
	require.NoError(t, err)

	require.Equal(t, types.Provider{
		Operator:         msg.Operator,
		Moniker:          "gpu-farm-1",
		Endpoint:         "https://gpu1.example.com:8443",
		Region:           "eu-west",
		Gpus:             []types.GPUInventory{h100s(8), a100s(4)},
		Bond:             udepin(12_000_000),
		Locked:           udepin(0),
		Status:           types.PROVIDER_STATUS_ACTIVE,
		RegisteredHeight: 5,
	}, f.provider(operator))
	require.Equal(t, math.NewInt(8_000_000), f.balance(operator))
	require.Equal(t, math.NewInt(12_000_000), f.balance(f.moduleAddress))
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventProviderRegistered"), 1)
}

func TestRegisterProviderRejections(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(f *fixture, msg *types.MsgRegisterProvider)
		want    *errorsmod.Error
		message string
	}{
		{"empty operator", func(_ *fixture, m *types.MsgRegisterProvider) { m.Operator = "" }, sdkerrors.ErrInvalidAddress, "operator"},
		{"operator with another chain's prefix", func(_ *fixture, m *types.MsgRegisterProvider) {
			m.Operator = "cosmos1qypqxpqpqgpsgqgzqvzqzqsrqsqsyqcyy2wt4y"
		}, sdkerrors.ErrInvalidAddress, "operator"},
		{"empty moniker", func(_ *fixture, m *types.MsgRegisterProvider) { m.Moniker = "" }, types.ErrInvalidDescription, "moniker must not be empty"},
		{"moniker too long", func(_ *fixture, m *types.MsgRegisterProvider) { m.Moniker = strings.Repeat("m", 71) }, types.ErrInvalidDescription, "moniker is 71 bytes"},
		{"moniker with control character", func(_ *fixture, m *types.MsgRegisterProvider) { m.Moniker = "gpu\x00farm" }, types.ErrInvalidDescription, "moniker"},
		{"moniker with surrounding space", func(_ *fixture, m *types.MsgRegisterProvider) { m.Moniker = " gpu-farm" }, types.ErrInvalidDescription, "whitespace"},
		{"empty endpoint", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "" }, types.ErrInvalidDescription, "endpoint must not be empty"},
		{"endpoint without scheme", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "gpu1.example.com:8443" }, types.ErrInvalidDescription, "http or https"},
		{"ftp endpoint", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "ftp://gpu1.example.com" }, types.ErrInvalidDescription, "http or https"},
		{"endpoint without host", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "https:///checkpoints" }, types.ErrInvalidDescription, "must name a host"},
		{"opaque endpoint", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "https:gpu1.example.com" }, types.ErrInvalidDescription, "must name a host"},
		{"endpoint with credentials", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "https://admin:secret@gpu1.example.com" }, types.ErrInvalidDescription, "credentials"},
		{"endpoint with space", func(_ *fixture, m *types.MsgRegisterProvider) { m.Endpoint = "https://gpu1.example.com/a b" }, types.ErrInvalidDescription, "spaces"},
		{"endpoint too long", func(_ *fixture, m *types.MsgRegisterProvider) {
			m.Endpoint = "https://gpu1.example.com/" + strings.Repeat("p", 240)
		}, types.ErrInvalidDescription, "at most 256"},
		{"empty region", func(_ *fixture, m *types.MsgRegisterProvider) { m.Region = "" }, types.ErrInvalidDescription, "region must not be empty"},
		{"GPU without model", func(_ *fixture, m *types.MsgRegisterProvider) { m.Gpus[0].Model = "" }, types.ErrInvalidGPU, "gpus[0]: model must not be empty"},
		{"GPU without VRAM", func(_ *fixture, m *types.MsgRegisterProvider) { m.Gpus[0].VramMib = 0 }, types.ErrInvalidGPU, "vram_mib must be positive"},
		{"GPU class with zero count", func(_ *fixture, m *types.MsgRegisterProvider) { m.Gpus[0].Count = 0 }, types.ErrInvalidGPU, "count must be positive"},
		{"GPU class listed twice", func(_ *fixture, m *types.MsgRegisterProvider) {
			m.Gpus = []types.GPUInventory{h100s(4), a100s(1), h100s(4)}
		}, types.ErrInvalidGPU, "gpus[2]: class H100-SXM5-80GB with 81920 MiB is listed twice"},
		{"more GPU classes than max_gpu_classes", func(_ *fixture, m *types.MsgRegisterProvider) {
			m.Gpus = nil
			for vram := uint64(1); vram <= 17; vram++ {
				m.Gpus = append(m.Gpus, types.GPUInventory{Model: "T4", VramMib: vram * 1024, Count: 1})
			}
		}, types.ErrInvalidGPU, "17 classes, at most 16"},
		{"bond in another denom", func(_ *fixture, m *types.MsgRegisterProvider) { m.Bond = sdk.NewInt64Coin("uatom", 8_000_000) }, types.ErrInvalidDenom, "bond must be in udepin"},
		{"zero bond", func(_ *fixture, m *types.MsgRegisterProvider) { m.Bond = udepin(0) }, types.ErrInvalidAmount, "bond must be positive"},
		{"negative bond", func(_ *fixture, m *types.MsgRegisterProvider) {
			m.Bond = sdk.Coin{Denom: bondDenom, Amount: math.NewInt(-1)}
		}, types.ErrInvalidAmount, "bond must not be negative"},
		{"bond without amount", func(_ *fixture, m *types.MsgRegisterProvider) { m.Bond = sdk.Coin{Denom: bondDenom} }, types.ErrInvalidAmount, "bond has no amount"},
		{"bond below the minimum for the GPUs", func(_ *fixture, m *types.MsgRegisterProvider) { m.Bond = udepin(7_999_999) }, types.ErrBondBelowMinimum,
			"bond 7999999udepin is below the 8000000udepin that 8 GPUs need"},
		{"already registered", func(f *fixture, m *types.MsgRegisterProvider) {
			_, err := f.msgServer.RegisterProvider(f.ctx, f.registerMsg(account("operator")))
			require.NoError(f.t, err)
		}, types.ErrProviderExists, "already a provider"},
		{"bond larger than the balance", func(_ *fixture, m *types.MsgRegisterProvider) { m.Bond = udepin(30_000_001) }, sdkerrors.ErrInsufficientFunds, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			operator := account("operator")
			f.fund(operator, 30_000_000)
			msg := f.registerMsg(operator)
			tc.mutate(f, msg)
			err := f.requireRejected(tc.want, func() error {
				_, err := f.msgServer.RegisterProvider(f.ctx, msg)
				return err
			})
			require.ErrorContains(t, err, tc.message)
		})
	}
}

func TestRegisterProviderWithoutGPUs(t *testing.T) {
	f := newFixture(t)
	operator := account("storage-only")
	f.fund(operator, 1)
	msg := f.registerMsg(operator)
	msg.Gpus, msg.Bond = nil, udepin(1)

	_, err := f.msgServer.RegisterProvider(f.ctx, msg)
	require.NoError(t, err)
	provider := f.provider(operator)
	require.Zero(t, provider.TotalGPUs())
	require.False(t, provider.Satisfies(nil, 0, 1))
}

func TestUpdateProvider(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	f.newEvents()
	update := &types.MsgUpdateProvider{
		Operator: f.addressText(operator),
		Moniker:  "gpu-farm-renamed",
		Endpoint: "http://10.0.0.7:8080/sidecar",
		Region:   "us-east",
		Gpus:     []types.GPUInventory{h100s(4)},
	}

	_, err := f.msgServer.UpdateProvider(f.ctx, update)
	require.NoError(t, err)
	provider := f.provider(operator)
	require.Equal(t, "gpu-farm-renamed", provider.Moniker)
	require.Equal(t, "http://10.0.0.7:8080/sidecar", provider.Endpoint)
	require.Equal(t, "us-east", provider.Region)
	require.Equal(t, []types.GPUInventory{h100s(4)}, provider.Gpus)
	require.Equal(t, udepin(8_000_000), provider.Bond)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventProviderUpdated"), 1)

	// Adding GPUs beyond what the bond covers is allowed, but bidding is not.
	update.Gpus = []types.GPUInventory{h100s(8), a100s(8)}
	_, err = f.msgServer.UpdateProvider(f.ctx, update)
	require.NoError(t, err)
	_, err = f.keeper.CheckCanBid(f.ctx, operator, udepin(0))
	require.ErrorIs(t, err, types.ErrBondBelowMinimum)
	require.ErrorContains(t, err, "its 16 GPUs need 16000000udepin; bond 8000000udepin more")
}

func TestUpdateProviderRejections(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	valid := func() *types.MsgUpdateProvider {
		return &types.MsgUpdateProvider{
			Operator: f.addressText(operator), Moniker: "m", Endpoint: "https://h.example", Region: "r",
			Gpus: []types.GPUInventory{h100s(1)},
		}
	}
	updateWith := func(mutate func(*types.MsgUpdateProvider)) func() error {
		return func() error {
			msg := valid()
			mutate(msg)
			_, err := f.msgServer.UpdateProvider(f.ctx, msg)
			return err
		}
	}

	f.requireRejected(sdkerrors.ErrInvalidAddress, updateWith(func(m *types.MsgUpdateProvider) { m.Operator = "depin1nope" }))
	f.requireRejected(types.ErrInvalidDescription, updateWith(func(m *types.MsgUpdateProvider) { m.Endpoint = "unix:///run/sidecar.sock" }))
	f.requireRejected(types.ErrInvalidGPU, updateWith(func(m *types.MsgUpdateProvider) { m.Gpus = []types.GPUInventory{h100s(1), h100s(2)} }))
	f.requireRejected(types.ErrProviderNotFound, updateWith(func(m *types.MsgUpdateProvider) { m.Operator = f.addressText(account("stranger")) }))

	require.NoError(t, f.keeper.Tombstone(f.ctx, operator, "forged checkpoint"))
	f.requireRejected(types.ErrTombstoned, updateWith(func(*types.MsgUpdateProvider) {}))
}

func TestBond(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 20_000_000, 8_000_000)
	f.newEvents()

	_, err := f.msgServer.Bond(f.ctx, &types.MsgBond{Operator: f.addressText(operator), Amount: udepin(5_000_000)})
	require.NoError(t, err)
	require.Equal(t, udepin(13_000_000), f.provider(operator).Bond)
	require.Equal(t, math.NewInt(7_000_000), f.balance(operator))
	require.Equal(t, math.NewInt(13_000_000), f.balance(f.moduleAddress))
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventBonded"), 1)

	// A jailed provider may bond, e.g. to get back above the minimum.
	require.NoError(t, f.keeper.Jail(f.ctx, operator, f.ctx.BlockTime().Add(time.Hour), "missed checkpoint"))
	_, err = f.msgServer.Bond(f.ctx, &types.MsgBond{Operator: f.addressText(operator), Amount: udepin(1)})
	require.NoError(t, err)
}

func TestBondRejections(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 8_000_000)
	bond := func(operator string, amount sdk.Coin) func() error {
		return func() error {
			_, err := f.msgServer.Bond(f.ctx, &types.MsgBond{Operator: operator, Amount: amount})
			return err
		}
	}
	operatorText := f.addressText(operator)

	f.requireRejected(sdkerrors.ErrInvalidAddress, bond("", udepin(1)))
	f.requireRejected(types.ErrInvalidAmount, bond(operatorText, udepin(0)))
	f.requireRejected(types.ErrInvalidDenom, bond(operatorText, sdk.NewInt64Coin("stake", 1)))
	f.requireRejected(types.ErrProviderNotFound, bond(f.addressText(account("stranger")), udepin(1)))
	f.requireRejected(sdkerrors.ErrInsufficientFunds, bond(operatorText, udepin(2_000_001)))

	require.NoError(t, f.keeper.Tombstone(f.ctx, operator, "forged checkpoint"))
	f.requireRejected(types.ErrTombstoned, bond(operatorText, udepin(1)))
}

func TestUnbond(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	f.advance(1, time.Hour)
	f.newEvents()

	response, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(operator), Amount: udepin(3_000_000)})
	require.NoError(t, err)
	require.Equal(t, uint64(1), response.UnbondingId, "unbonding ids start at 1")
	unbonding, err := f.keeper.Unbondings.Get(f.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, types.Unbonding{
		Id:               1,
		Operator:         f.addressText(operator),
		Amount:           udepin(3_000_000),
		CreationHeight:   2,
		CompletionTime:   genesisTime.Add(time.Hour + types.DefaultUnbondingPeriod),
		Role:             types.UNBONDING_ROLE_PROVIDER,
		CompletionHeight: 2 + types.DefaultUnbondingBlocks,
	}, unbonding)
	require.Equal(t, udepin(7_000_000), f.provider(operator).Bond)
	require.True(t, f.balance(operator).IsZero(), "nothing is paid before the unbonding period passes")
	require.Equal(t, math.NewInt(10_000_000), f.balance(f.moduleAddress))
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventUnbondingStarted"), 1)

	// Unbonding below min_bond_per_gpu × GPUs is allowed; bidding then is not.
	response, err = f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(operator), Amount: udepin(7_000_000)})
	require.NoError(t, err)
	require.Equal(t, uint64(2), response.UnbondingId)
	require.True(t, f.provider(operator).Bond.IsZero())
	_, err = f.keeper.CheckCanBid(f.ctx, operator, udepin(0))
	require.ErrorIs(t, err, types.ErrBondBelowMinimum)
}

func TestUnbondRejections(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	operatorText := f.addressText(operator)
	unbond := func(operator string, amount sdk.Coin) func() error {
		return func() error {
			_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: operator, Amount: amount})
			return err
		}
	}
	require.NoError(t, f.keeper.LockCollateral(f.ctx, operator, "market/lease/1", udepin(6_000_000)))

	f.requireRejected(sdkerrors.ErrInvalidAddress, unbond("depin1", udepin(1)))
	f.requireRejected(types.ErrInvalidAmount, unbond(operatorText, udepin(0)))
	f.requireRejected(types.ErrInvalidDenom, unbond(operatorText, sdk.NewInt64Coin("stake", 1)))
	f.requireRejected(types.ErrProviderNotFound, unbond(f.addressText(account("stranger")), udepin(1)))
	err := f.requireRejected(types.ErrInsufficientFreeBond, unbond(operatorText, udepin(4_000_001)))
	require.ErrorContains(t, err, "cannot unbond 4000001udepin: free bond is 4000000udepin (bond 10000000udepin, locked 6000000udepin)")

	for range types.DefaultMaxUnbondingEntries {
		require.NoError(t, unbond(operatorText, udepin(1))())
	}
	err = f.requireRejected(types.ErrTooManyUnbondings, unbond(operatorText, udepin(1)))
	require.ErrorContains(t, err, "already has 7 unbonding entries")
}

func TestUnbondRejectsAddressesThatCannotReceive(t *testing.T) {
	f := newFixture(t)
	// A module account (here gov's) could register through a proposal, but
	// its unbonding could never be paid out.
	coins := sdk.NewCoins(udepin(8_000_000))
	require.NoError(t, f.bank.MintCoins(f.ctx, mintModule, coins))
	require.NoError(t, f.bank.SendCoinsFromModuleToModule(f.ctx, mintModule, govModule, coins))
	_, err := f.msgServer.RegisterProvider(f.ctx, f.registerMsg(f.blockedAddress))
	require.NoError(t, err)

	f.requireRejected(types.ErrBlockedRecipient, func() error {
		_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(f.blockedAddress), Amount: udepin(1)})
		return err
	})
}

func TestUnjail(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)
	unjail := func() error {
		_, err := f.msgServer.Unjail(f.ctx, &types.MsgUnjail{Operator: f.addressText(operator)})
		return err
	}

	f.requireRejected(types.ErrNotJailed, unjail)

	until := f.ctx.BlockTime().Add(time.Hour)
	require.NoError(t, f.keeper.Jail(f.ctx, operator, until, "missed checkpoint deadline"))
	f.advance(10, time.Hour-time.Nanosecond)
	err := f.requireRejected(types.ErrStillJailed, unjail)
	require.ErrorContains(t, err, "jailed until 2030-01-01T01:00:00Z")

	f.advance(1, time.Nanosecond)
	f.newEvents()
	require.NoError(t, unjail(), "jailed_until equal to the block time is over")
	require.Equal(t, types.PROVIDER_STATUS_ACTIVE, f.provider(operator).Status)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventProviderUnjailed"), 1)
	_, err = f.keeper.CheckCanBid(f.ctx, operator, udepin(0))
	require.NoError(t, err)

	f.requireRejected(types.ErrProviderNotFound, func() error {
		_, err := f.msgServer.Unjail(f.ctx, &types.MsgUnjail{Operator: f.addressText(account("stranger"))})
		return err
	})
	f.requireRejected(sdkerrors.ErrInvalidAddress, func() error {
		_, err := f.msgServer.Unjail(f.ctx, &types.MsgUnjail{})
		return err
	})
}

func TestUpdateParams(t *testing.T) {
	f := newFixture(t)
	params := types.DefaultParams()
	params.MinBondPerGpu = math.NewInt(2_000_000)
	params.UnbondingPeriod = 7 * 24 * time.Hour

	_, err := f.msgServer.UpdateParams(f.ctx, &types.MsgUpdateParams{Authority: f.authority, Params: params})
	require.NoError(t, err)
	stored, err := f.keeper.GetParams(f.ctx)
	require.NoError(t, err)
	require.Equal(t, params, stored)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventParamsUpdated"), 1)

	// The bond denomination may change only while nothing is bonded.
	params.BondDenom = "unewdepin"
	_, err = f.msgServer.UpdateParams(f.ctx, &types.MsgUpdateParams{Authority: f.authority, Params: params})
	require.NoError(t, err)
	params.BondDenom = bondDenom
	_, err = f.msgServer.UpdateParams(f.ctx, &types.MsgUpdateParams{Authority: f.authority, Params: params})
	require.NoError(t, err)
}

func TestUpdateParamsRejections(t *testing.T) {
	f := newFixture(t)
	update := func(authority string, mutate func(*types.Params)) func() error {
		return func() error {
			params := types.DefaultParams()
			mutate(&params)
			_, err := f.msgServer.UpdateParams(f.ctx, &types.MsgUpdateParams{Authority: authority, Params: params})
			return err
		}
	}
	unchanged := func(*types.Params) {}

	err := f.requireRejected(types.ErrInvalidAuthority, update(f.addressText(account("mallory")), unchanged))
	require.ErrorContains(t, err, "expected "+f.authority)
	f.requireRejected(types.ErrInvalidAuthority, update("gov", unchanged))

	invalid := map[string]func(*types.Params){
		"bond_denom":                func(p *types.Params) { p.BondDenom = "1nvalid" },
		"min_bond_per_gpu":          func(p *types.Params) { p.MinBondPerGpu = math.ZeroInt() },
		"min_bond_per_gpu unset":    func(p *types.Params) { p.MinBondPerGpu = math.Int{} },
		"min_bond_per_gpu huge":     func(p *types.Params) { p.MinBondPerGpu = math.NewIntFromBigInt(new(big.Int).Lsh(big.NewInt(1), 129)) },
		"unbonding_period":          func(p *types.Params) { p.UnbondingPeriod = 0 },
		"unbonding_period too long": func(p *types.Params) { p.UnbondingPeriod = types.MaxUnbondingPeriod + 1 },
		"max_gpu_classes":           func(p *types.Params) { p.MaxGpuClasses = 0 },
		"max_unbondings_per_block":  func(p *types.Params) { p.MaxUnbondingsPerBlock = 0 },
		"max_unbonding_entries":     func(p *types.Params) { p.MaxUnbondingEntries = 0 },
	}
	for name, mutate := range invalid {
		err := f.requireRejected(types.ErrInvalidParams, update(f.authority, mutate))
		require.ErrorContains(t, err, strings.Fields(name)[0], name)
	}

	f.registerProvider("operator", 8_000_000, 8_000_000)
	err = f.requireRejected(types.ErrInvalidParams, update(f.authority, func(p *types.Params) { p.BondDenom = "unewdepin" }))
	require.ErrorContains(t, err, "bond_denom cannot change from udepin to unewdepin")
}
