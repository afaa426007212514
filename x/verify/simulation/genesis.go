// Package simulation is x/verify's part of the app simulation: randomized params,
// operations that play the whole verification protocol (honest and lying checkpoints
// computed with the real reference trainer, challenges, reveals, responses and one-step
// re-execution), and governance proposals changing the params.
//
// Every party's trace is derived from chain state alone: the honest trace is recomputed
// from the job's seed and training data, and a liar's trace is a deterministic function
// of the honest one, the checkpoint and the liar, so an operation recognizes which trace
// a provider or challenger committed by comparing Merkle roots. Nothing is remembered
// between operations.
package simulation

import (
	"math/rand"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// ProposalMsgs are the governance proposals x/verify contributes: new random params, the
// challenger bond in the current denomination.
func ProposalMsgs(k keeper.Keeper) []simtypes.WeightedProposalMsg {
	return simutil.ParamsProposal(types.ModuleName, func(r *rand.Rand, ctx sdk.Context, authority string) sdk.Msg {
		p, err := k.Params.Get(ctx)
		return &types.MsgUpdateParams{Authority: authority, Params: RandomParams(r, simutil.DenomOr(p.ChallengerBond.Denom, err))}
	})
}

// MaxRequiredUnbondingBlocks is the most RandomParams can ask of x/stakingext's
// unbonding_blocks (its challenge window plus longest dispute); the x/stakingext
// simulation draws unbonding_blocks above it, so every proposal either module makes
// passes the rule that spans them.
var MaxRequiredUnbondingBlocks = maxChallengeWindow + types.MaxGameMoves*maxMoveTimeout

const (
	maxChallengeWindow = 10
	maxMoveTimeout     = 8
)

// RandomParams draws valid params whose challenger bond, audit fee and file query
// deposit are in denom.
// Windows and move timeouts are a few blocks, so that a short run finalizes checkpoints
// and plays games to their end (by moves or by timeouts). The referee's cost cap always
// admits the reference workload, so honest challengers can win.
func RandomParams(r *rand.Rand, denom string) types.Params {
	providerShare := r.Int63n(50)
	grace := uint64(1 + r.Intn(200))
	return types.Params{
		ChallengeWindow:         uint64(2 + r.Intn(maxChallengeWindow-1)),
		MoveTimeout:             uint64(2 + r.Intn(maxMoveTimeout-1)),
		ChallengerBond:          sdk.NewInt64Coin(denom, 1+r.Int63n(1_000_000)),
		FraudSlashFraction:      math.LegacyNewDecWithPrec(1+r.Int63n(100), 2),
		WhistleblowerShare:      math.LegacyNewDecWithPrec(r.Int63n(101), 2),
		MaxStepMacs:             1 << 26,
		GasPerMac:               uint64(1 + r.Intn(2)),
		GasPerHash:              uint64(1 + r.Intn(100)),
		GasPerByte:              uint64(1 + r.Intn(3)),
		MaxDeadlinesPerBlock:    uint32(1 + r.Intn(50)),
		MaxMetrics:              uint32(1 + r.Intn(8)),
		LostBondProviderShare:   math.LegacyNewDecWithPrec(providerShare, 2),
		LostBondOwnerShare:      math.LegacyNewDecWithPrec(r.Int63n(101-providerShare), 2),
		OwnerCompensationRatio:  math.LegacyNewDecWithPrec(r.Int63n(301), 2),
		AuditFeePerStep:         sdk.NewInt64Coin(denom, r.Int63n(1000)),
		AuditFraudSlashFraction: math.LegacyNewDecWithPrec(1+r.Int63n(100), 2),
		AuditMissSlashFraction:  math.LegacyNewDecWithPrec(1+r.Int63n(10), 2),
		WithheldThreshold:       math.LegacyNewDecWithPrec(r.Int63n(100), 2),
		CustodyGraceBlocks:      grace,
		CustodyRecheckBlocks:    uint64(1 + r.Int63n(int64(grace))),
		FileQueryDeposit:        sdk.NewInt64Coin(denom, 1+r.Int63n(1_000_000)),
	}
}

// RandomizedGenState writes x/verify's genesis: random params (checkpoints need leases,
// which simulated accounts win in x/market).
func RandomizedGenState(simState *module.SimulationState) {
	gs := types.DefaultGenesis()
	gs.Params = RandomParams(simState.Rand, simState.BondDenom)
	simState.GenState[types.ModuleName] = simState.Cdc.MustMarshalJSON(gs)
}
