package simulation

import (
	"fmt"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	"github.com/cosmos/cosmos-sdk/x/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/staking_ext/keeper"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// Operation weights: the keys a simulation params file may set, and their defaults.
const (
	OpWeightMsgRegisterProvider = "op_weight_msg_register_provider"
	OpWeightMsgUpdateProvider   = "op_weight_msg_update_provider"
	OpWeightMsgBond             = "op_weight_msg_bond"
	OpWeightMsgUnbond           = "op_weight_msg_unbond"
	OpWeightMsgUnjail           = "op_weight_msg_unjail"

	DefaultWeightMsgRegisterProvider = 20
	DefaultWeightMsgUpdateProvider   = 5
	DefaultWeightMsgBond             = 10
	DefaultWeightMsgUnbond           = 10
	DefaultWeightMsgUnjail           = 10
)

// Deps are what the operations sign with and read.
type Deps struct {
	simutil.Signer
	Keeper keeper.Keeper
}

// WeightedOperations returns an operation for every message of x/stakingext except the
// authority-only MsgUpdateParams, which ProposalMsgs covers.
func WeightedOperations(appParams simtypes.AppParams, d Deps) simulation.WeightedOperations {
	d.Module = types.ModuleName
	return simutil.WeightedOperations(appParams,
		SimulateMsgRegisterProvider(d), SimulateMsgUpdateProvider(d), SimulateMsgBond(d), SimulateMsgUnbond(d), SimulateMsgUnjail(d),
		SimulateMsgRegisterVerifier(d), SimulateMsgBondVerifier(d), SimulateMsgUnbondVerifier(d), SimulateMsgActivateVerifier(d),
	)
}

func providersWhere(ctx sdk.Context, k keeper.Keeper, keep func(types.Provider) bool) ([]types.Provider, error) {
	all, err := k.AllProviders(ctx)
	if err != nil {
		return nil, err
	}
	var out []types.Provider
	for _, p := range all {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// SimulateMsgRegisterProvider registers an account that is not yet a provider with a
// random inventory and a bond above the minimum. One time in ten it sends a registration
// that must fail: a bond below the minimum, a class listed twice, or an operator that is
// already registered.
func SimulateMsgRegisterProvider(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgRegisterProvider, DefaultWeightMsgRegisterProvider, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgRegisterProvider{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		acc, _ := simtypes.RandomAcc(r, accs)
		exists, err := d.Keeper.Providers.Has(ctx, acc.Address)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		msg.Operator = acc.Address.String()
		msg.Moniker, msg.Endpoint, msg.Region = RandomDescription(r, fmt.Sprintf("p%d", r.Intn(1_000_000)))
		msg.Gpus = RandomGPUs(r, params.MaxGpuClasses)
		required := params.RequiredBond(types.Provider{Gpus: msg.Gpus}.TotalGPUs())
		spendable := o.Spendable(acc, params.BondDenom)

		if simutil.Chance(r, 10) {
			switch {
			case exists:
				msg.Bond = required
				return o.DeliverInvalid(acc, msg, types.ErrProviderExists, "operator already registered")
			case required.Amount.GT(math.OneInt()):
				msg.Bond = required.SubAmount(math.OneInt())
				return o.DeliverInvalid(acc, msg, types.ErrBondBelowMinimum, "bond one below the minimum")
			default:
				msg.Gpus = append(msg.Gpus, msg.Gpus[0])
				msg.Bond = required
				return o.DeliverInvalid(acc, msg, types.ErrInvalidGPU, "GPU class listed twice")
			}
		}
		if exists {
			return o.NoOp(msg, "%s is already a provider", acc.Address)
		}
		room := spendable.Amount.QuoRaw(2).Sub(required.Amount)
		if !room.IsPositive() {
			return o.NoOp(msg, "%s cannot afford the minimum bond %s", acc.Address, required)
		}
		msg.Bond = required.AddAmount(math.NewInt(r.Int63n(min(room.Int64(), 10_000_000) + 1)))
		return o.Deliver(acc, msg, sdk.NewCoins(msg.Bond))
	})
}

// SimulateMsgUpdateProvider replaces a provider's description and inventory; updating a
// tombstoned provider must fail.
func SimulateMsgUpdateProvider(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgUpdateProvider, DefaultWeightMsgUpdateProvider, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgUpdateProvider{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		all, err := d.Keeper.AllProviders(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		p, ok := simutil.Pick(r, all)
		if !ok {
			return o.NoOp(msg, "no providers")
		}
		acc, ok := o.Account(p.Operator)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", p.Operator)
		}
		msg.Operator = p.Operator
		msg.Moniker, msg.Endpoint, msg.Region = RandomDescription(r, fmt.Sprintf("u%d", r.Intn(1_000_000)))
		msg.Gpus = RandomGPUs(r, params.MaxGpuClasses)
		if p.Status == types.PROVIDER_STATUS_TOMBSTONED {
			return o.DeliverInvalid(acc, msg, types.ErrTombstoned, "tombstoned provider updates its record")
		}
		return o.Deliver(acc, msg, nil)
	})
}

// SimulateMsgBond adds to a provider's bond; bonding in another denomination must fail.
func SimulateMsgBond(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgBond, DefaultWeightMsgBond, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgBond{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		all, err := d.Keeper.AllProviders(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		p, ok := simutil.Pick(r, all)
		if !ok {
			return o.NoOp(msg, "no providers")
		}
		acc, ok := o.Account(p.Operator)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", p.Operator)
		}
		msg.Operator = p.Operator
		if simutil.Chance(r, 10) {
			msg.Amount = sdk.NewInt64Coin("notbonddenom", 1+r.Int63n(100))
			return o.DeliverInvalid(acc, msg, types.ErrInvalidDenom, "bond in another denomination")
		}
		if p.Status == types.PROVIDER_STATUS_TOMBSTONED {
			msg.Amount = sdk.NewInt64Coin(params.BondDenom, 1)
			return o.DeliverInvalid(acc, msg, types.ErrTombstoned, "tombstoned provider bonds more")
		}
		spendable := o.Spendable(acc, params.BondDenom)
		if spendable.Amount.LT(math.NewInt(4)) {
			return o.NoOp(msg, "%s has nothing to bond", p.Operator)
		}
		msg.Amount = sdk.NewCoin(params.BondDenom, math.NewInt(1+r.Int63n(min(spendable.Amount.QuoRaw(4).Int64(), 5_000_000))))
		return o.Deliver(acc, msg, sdk.NewCoins(msg.Amount))
	})
}

// SimulateMsgUnbond starts unbonding part of a provider's free bond; unbonding more than
// the free bond must fail.
func SimulateMsgUnbond(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgUnbond, DefaultWeightMsgUnbond, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgUnbond{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		all, err := d.Keeper.AllProviders(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		p, ok := simutil.Pick(r, all)
		if !ok {
			return o.NoOp(msg, "no providers")
		}
		acc, ok := o.Account(p.Operator)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", p.Operator)
		}
		msg.Operator = p.Operator
		free := p.FreeBond()
		if simutil.Chance(r, 15) {
			msg.Amount = free.AddAmount(math.NewInt(1 + r.Int63n(1000)))
			return o.DeliverInvalid(acc, msg, types.ErrInsufficientFreeBond, "unbond more than the free bond")
		}
		if !free.IsPositive() {
			return o.NoOp(msg, "%s has no free bond", p.Operator)
		}
		iter, err := d.Keeper.Unbondings.Indexes.Operator.MatchExact(ctx, acc.Address)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		queued, err := iter.PrimaryKeys()
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		if uint32(len(queued)) >= params.MaxUnbondingEntries {
			msg.Amount = sdk.NewCoin(params.BondDenom, math.OneInt())
			return o.DeliverInvalid(acc, msg, types.ErrTooManyUnbondings, "unbonding entry limit reached")
		}
		// Mostly small amounts, so that providers keep bidding; sometimes all of it.
		amount := free.Amount
		if !simutil.Chance(r, 10) {
			amount = math.NewInt(1 + r.Int63n(max(1, min(free.Amount.QuoRaw(5).Int64(), 1_000_000))))
		}
		msg.Amount = sdk.NewCoin(params.BondDenom, amount)
		return o.Deliver(acc, msg, nil)
	})
}

// SimulateMsgUnjail unjails a provider whose jail time is over; unjailing an active
// provider, or one still jailed, must fail.
func SimulateMsgUnjail(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgUnjail, DefaultWeightMsgUnjail, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgUnjail{}
		jailed, err := providersWhere(ctx, d.Keeper, func(p types.Provider) bool { return p.Status == types.PROVIDER_STATUS_JAILED })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		if p, ok := simutil.Pick(r, jailed); ok {
			acc, ok := o.Account(p.Operator)
			if !ok {
				return o.NoOp(msg, "provider %s is not a simulated account", p.Operator)
			}
			msg.Operator = p.Operator
			if ctx.BlockTime().Before(p.JailedUntil) {
				return o.DeliverInvalid(acc, msg, types.ErrStillJailed, "provider still jailed")
			}
			return o.Deliver(acc, msg, nil)
		}
		active, err := providersWhere(ctx, d.Keeper, func(p types.Provider) bool { return p.Status == types.PROVIDER_STATUS_ACTIVE })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		p, ok := simutil.Pick(r, active)
		if !ok || !simutil.Chance(r, 20) {
			return o.NoOp(msg, "no jailed provider")
		}
		acc, ok := o.Account(p.Operator)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", p.Operator)
		}
		msg.Operator = p.Operator
		return o.DeliverInvalid(acc, msg, types.ErrNotJailed, "active provider unjails")
	})
}
