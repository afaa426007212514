package simulation

import (
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// Operation weights of the verifier messages.
const (
	OpWeightMsgRegisterVerifier = "op_weight_msg_register_verifier"
	OpWeightMsgBondVerifier     = "op_weight_msg_bond_verifier"
	OpWeightMsgUnbondVerifier   = "op_weight_msg_unbond_verifier"
	OpWeightMsgActivateVerifier = "op_weight_msg_activate_verifier"

	DefaultWeightMsgRegisterVerifier = 10
	DefaultWeightMsgBondVerifier     = 5
	DefaultWeightMsgUnbondVerifier   = 5
	DefaultWeightMsgActivateVerifier = 10
)

func (d Deps) verifiers(ctx sdk.Context, keep func(types.Verifier) bool) ([]types.Verifier, error) {
	var out []types.Verifier
	err := d.Keeper.Verifiers.Walk(ctx, nil, func(_ sdk.AccAddress, v types.Verifier) (bool, error) {
		if keep(v) {
			out = append(out, v)
		}
		return false, nil
	})
	return out, err
}

// SimulateMsgRegisterVerifier registers an account as a verifier with a bond above
// min_verifier_bond; a bond below it, or an operator already registered, must fail.
func SimulateMsgRegisterVerifier(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgRegisterVerifier, DefaultWeightMsgRegisterVerifier, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgRegisterVerifier{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		acc, _ := simtypes.RandomAcc(r, accs)
		exists, err := d.Keeper.Verifiers.Has(ctx, acc.Address)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		msg.Operator = acc.Address.String()
		msg.Bond = sdk.NewCoin(params.BondDenom, params.MinVerifierBond.Add(math.NewInt(r.Int63n(100_000))))
		if exists {
			return o.DeliverInvalid(acc, msg, types.ErrVerifierExists, "operator already a verifier")
		}
		if simutil.Chance(r, 10) && params.MinVerifierBond.GT(math.OneInt()) {
			msg.Bond.Amount = params.MinVerifierBond.SubRaw(1)
			return o.DeliverInvalid(acc, msg, types.ErrVerifierBondTooLow, "verifier bond below the minimum")
		}
		if o.Spendable(acc, params.BondDenom).Amount.LT(msg.Bond.Amount.MulRaw(2)) {
			return o.NoOp(msg, "%s cannot afford a verifier bond", msg.Operator)
		}
		return o.Deliver(acc, msg, sdk.NewCoins(msg.Bond))
	})
}

// SimulateMsgBondVerifier adds to a verifier's bond; a tombstoned verifier must be refused.
func SimulateMsgBondVerifier(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgBondVerifier, DefaultWeightMsgBondVerifier, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgBondVerifier{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		all, err := d.verifiers(ctx, func(types.Verifier) bool { return true })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		v, ok := simutil.Pick(r, all)
		if !ok {
			return o.NoOp(msg, "no verifiers")
		}
		acc, ok := o.Account(v.Operator)
		if !ok {
			return o.NoOp(msg, "verifier %s is not a simulated account", v.Operator)
		}
		msg.Operator, msg.Amount = v.Operator, sdk.NewCoin(params.BondDenom, math.NewInt(1+r.Int63n(100_000)))
		if v.Status == types.VERIFIER_STATUS_TOMBSTONED {
			return o.DeliverInvalid(acc, msg, types.ErrVerifierTombstoned, "tombstoned verifier bonds")
		}
		if o.Spendable(acc, params.BondDenom).Amount.LT(msg.Amount.Amount.MulRaw(2)) {
			return o.NoOp(msg, "%s cannot afford it", v.Operator)
		}
		return o.Deliver(acc, msg, sdk.NewCoins(msg.Amount))
	})
}

// SimulateMsgUnbondVerifier unbonds part (sometimes all) of a verifier's bond, which
// can take it out of the audit set; more than its bond must fail.
func SimulateMsgUnbondVerifier(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgUnbondVerifier, DefaultWeightMsgUnbondVerifier, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgUnbondVerifier{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		all, err := d.verifiers(ctx, func(types.Verifier) bool { return true })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		v, ok := simutil.Pick(r, all)
		if !ok {
			return o.NoOp(msg, "no verifiers")
		}
		acc, ok := o.Account(v.Operator)
		if !ok {
			return o.NoOp(msg, "verifier %s is not a simulated account", v.Operator)
		}
		msg.Operator = v.Operator
		if simutil.Chance(r, 10) {
			msg.Amount = v.Bond.AddAmount(math.OneInt())
			return o.DeliverInvalid(acc, msg, types.ErrInsufficientFreeBond, "unbond more than the verifier bond")
		}
		if !v.Bond.IsPositive() {
			return o.NoOp(msg, "%s has no verifier bond", v.Operator)
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
			return o.NoOp(msg, "unbonding entry limit reached")
		}
		amount := v.Bond.Amount
		if !simutil.Chance(r, 20) {
			amount = math.NewInt(1 + r.Int63n(max(1, v.Bond.Amount.QuoRaw(10).Int64())))
		}
		msg.Amount = sdk.NewCoin(params.BondDenom, amount)
		return o.Deliver(acc, msg, nil)
	})
}

// SimulateMsgActivateVerifier puts an inactive verifier back into the audit set; an
// active one, or one whose bond fell below the minimum, must be refused.
func SimulateMsgActivateVerifier(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgActivateVerifier, DefaultWeightMsgActivateVerifier, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgActivateVerifier{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		all, err := d.verifiers(ctx, func(v types.Verifier) bool { return v.Status != types.VERIFIER_STATUS_TOMBSTONED })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		v, ok := simutil.Pick(r, all)
		if !ok {
			return o.NoOp(msg, "no verifiers")
		}
		acc, ok := o.Account(v.Operator)
		if !ok {
			return o.NoOp(msg, "verifier %s is not a simulated account", v.Operator)
		}
		msg.Operator = v.Operator
		switch {
		case v.Status == types.VERIFIER_STATUS_ACTIVE:
			return o.DeliverInvalid(acc, msg, types.ErrVerifierActive, "active verifier activates")
		case v.Bond.Amount.LT(params.MinVerifierBond):
			return o.DeliverInvalid(acc, msg, types.ErrVerifierBondTooLow, "verifier bond below the minimum")
		}
		return o.Deliver(acc, msg, nil)
	})
}
