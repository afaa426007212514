package simutil

import (
	"math/rand"

	"github.com/cosmos/cosmos-sdk/baseapp"
	"github.com/cosmos/cosmos-sdk/client"
	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	"github.com/cosmos/cosmos-sdk/x/simulation"
)

// Signer is what every module's operations sign and deliver with. A module's Deps embed
// it, next to the keepers its operations read.
type Signer struct {
	TxGen client.TxConfig
	AK    AccountKeeper
	BK    BankKeeper
	// Module names the module in the operations' results.
	Module string
}

// Op starts one call of an operation: the framework's arguments plus what signing needs.
func (s Signer) Op(r *rand.Rand, app *baseapp.BaseApp, ctx sdk.Context, accs []simtypes.Account, chainID string) Op {
	return Op{R: r, App: app, Ctx: ctx, Accs: accs, ChainID: chainID, TxGen: s.TxGen, AK: s.AK, BK: s.BK, Module: s.Module}
}

// Weighted is one operation with the app-params key of its weight and the weight it has
// when a simulation params file does not set that key.
type Weighted struct {
	Key     string
	Default int
	Op      simtypes.Operation
}

// Weighted makes run an operation of the signer's module, weighted by the app params'
// key (def when a simulation params file does not set it). Every call gets its Op.
func (s Signer) Weighted(key string, def int, run func(o Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error)) Weighted {
	return Weighted{Key: key, Default: def, Op: func(r *rand.Rand, app *baseapp.BaseApp, ctx sdk.Context, accs []simtypes.Account, chainID string) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		return run(s.Op(r, app, ctx, accs, chainID))
	}}
}

// WeightedOperations gives every operation the weight the app params set for its key, or
// its default.
func WeightedOperations(appParams simtypes.AppParams, ops ...Weighted) simulation.WeightedOperations {
	out := make(simulation.WeightedOperations, 0, len(ops))
	for _, op := range ops {
		var w int
		appParams.GetOrGenerate(op.Key, &w, nil, func(*rand.Rand) { w = op.Default })
		out = append(out, simulation.NewWeightedOperation(w, op.Op))
	}
	return out
}

// DefaultWeightMsgUpdateParams is the weight of every module's params proposal.
const DefaultWeightMsgUpdateParams = 20

// OpWeightMsgUpdateParams is the app-params key of module's params proposal weight,
// e.g. "op_weight_msg_market_update_params".
func OpWeightMsgUpdateParams(module string) string {
	return "op_weight_msg_" + module + "_update_params"
}

// ParamsProposal is the one governance proposal each module contributes: its
// MsgUpdateParams, from the gov module account, with params msg draws, weighted
// DefaultWeightMsgUpdateParams under OpWeightMsgUpdateParams(module).
func ParamsProposal(module string, msg func(r *rand.Rand, ctx sdk.Context, authority string) sdk.Msg) []simtypes.WeightedProposalMsg {
	return []simtypes.WeightedProposalMsg{
		simulation.NewWeightedProposalMsg(OpWeightMsgUpdateParams(module), DefaultWeightMsgUpdateParams,
			func(r *rand.Rand, ctx sdk.Context, _ []simtypes.Account) sdk.Msg {
				return msg(r, ctx, authtypes.NewModuleAddress(govtypes.ModuleName).String())
			}),
	}
}

// DenomOr is the denomination the current params name, or the SDK's default bond denom
// when they could not be read (err), for drawing new params in the same denomination.
func DenomOr(denom string, err error) string {
	if err != nil {
		return sdk.DefaultBondDenom
	}
	return denom
}
