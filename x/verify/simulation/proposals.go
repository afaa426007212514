package simulation

import (
	"math/rand"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	"github.com/cosmos/cosmos-sdk/x/simulation"

	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// OpWeightMsgUpdateParams is the app params key of the update-params proposal's weight.
const (
	OpWeightMsgUpdateParams      = "op_weight_msg_verify_update_params"
	DefaultWeightMsgUpdateParams = 20
)

// ProposalMsgs are the governance proposals x/verify contributes: new random params, the
// challenger bond in the current denomination.
func ProposalMsgs(k keeper.Keeper) []simtypes.WeightedProposalMsg {
	return []simtypes.WeightedProposalMsg{
		simulation.NewWeightedProposalMsg(OpWeightMsgUpdateParams, DefaultWeightMsgUpdateParams,
			func(r *rand.Rand, ctx sdk.Context, _ []simtypes.Account) sdk.Msg {
				denom := sdk.DefaultBondDenom
				if p, err := k.Params.Get(ctx); err == nil {
					denom = p.ChallengerBond.Denom
				}
				return &types.MsgUpdateParams{
					Authority: authtypes.NewModuleAddress(govtypes.ModuleName).String(),
					Params:    RandomParams(r, denom),
				}
			}),
	}
}
