// Package simulation is x/stakingext's part of the app simulation: randomized params and
// a genesis with bonded providers, operations for every message, and governance
// proposals changing the params.
package simulation

import (
	"fmt"
	"math/rand"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/staking_ext/keeper"
	"github.com/depinchain/depinchain/x/staking_ext/types"
	verifysim "github.com/depinchain/depinchain/x/verify/simulation"
)

// GPUClass is a GPU model with its VRAM, as the simulation registers and asks for them.
type GPUClass struct {
	Model   string
	VramMib uint64
}

// GPUClasses are the GPU models simulated providers own and simulated jobs ask for.
var GPUClasses = []GPUClass{
	{"H100-SXM5-80GB", 80 * 1024},
	{"A100-SXM4-40GB", 40 * 1024},
	{"A100-SXM4-80GB", 80 * 1024},
	{"L4", 24 * 1024},
	{"RTX-4090", 24 * 1024},
}

// RandomParams draws valid params in bondDenom. Unbonding periods are hours, not weeks:
// the simulator advances block time by 1.4 to 2.8 hours per block. unbonding_blocks is
// above what x/verify's random params can ask (its challenge window plus its longest
// dispute), so entries queued during a run stay slashable for its whole length; the
// genesis entries are created with small completion heights, so that payouts happen in
// a short run too.
func RandomParams(r *rand.Rand, bondDenom string) types.Params {
	return types.Params{
		BondDenom:             bondDenom,
		MinBondPerGpu:         math.NewInt(1 + r.Int63n(10_000)),
		UnbondingPeriod:       time.Duration(1+r.Int63n(48)) * time.Hour,
		MaxGpuClasses:         uint32(1 + r.Intn(8)),
		MaxUnbondingsPerBlock: uint32(1 + r.Intn(20)),
		MaxUnbondingEntries:   uint32(1 + r.Intn(7)),
		UnbondingBlocks:       verifysim.MaxRequiredUnbondingBlocks + uint64(r.Intn(100)),
		MinVerifierBond:       math.NewInt(1 + r.Int63n(100_000)),
	}
}

// RandomGPUs draws an inventory of up to maxClasses distinct classes (at least one).
func RandomGPUs(r *rand.Rand, maxClasses uint32) []types.GPUInventory {
	n := 1 + r.Intn(int(min(maxClasses, 3)))
	var gpus []types.GPUInventory
	for _, i := range r.Perm(len(GPUClasses))[:n] {
		c := GPUClasses[i]
		gpus = append(gpus, types.GPUInventory{Model: c.Model, VramMib: c.VramMib, Count: uint32(1 + r.Intn(8))})
	}
	return gpus
}

// RandomDescription draws a valid moniker, endpoint and region.
func RandomDescription(r *rand.Rand, label string) (moniker, endpoint, region string) {
	regions := []string{"eu-west", "us-east", "ap-south", "sa-east"}
	return fmt.Sprintf("gpu-farm-%s", label), fmt.Sprintf("https://%s.provider.example.com:%d", label, 8000+r.Intn(1000)),
		regions[r.Intn(len(regions))]
}

// RandomizedGenState writes x/stakingext's genesis: random params and, for about a
// third of the accounts, a registered provider (some jailed, a few tombstoned) with a
// bond and sometimes a queued unbonding. The bonded tokens move from the accounts'
// balances in x/bank's genesis (generated before this one) to the module account, so
// the supply is unchanged and InitGenesis finds the module account backing the bonds.
func RandomizedGenState(simState *module.SimulationState) {
	r := simState.Rand
	params := RandomParams(r, simState.BondDenom)
	gs := types.GenesisState{Params: params, NextUnbondingId: 1}

	bankRaw, hasBank := simState.GenState[banktypes.ModuleName]
	if hasBank && len(simState.Accounts) > 0 {
		var bankGen banktypes.GenesisState
		simState.Cdc.MustUnmarshalJSON(bankRaw, &bankGen)
		balances := map[string]int{}
		for i, b := range bankGen.Balances {
			balances[b.Address] = i
		}
		moduleTotal := math.ZeroInt()
		for i, acc := range simState.Accounts {
			if r.Intn(3) != 0 || i >= 60 {
				continue
			}
			addr := acc.Address.String()
			bi, ok := balances[addr]
			if !ok {
				continue
			}
			available := bankGen.Balances[bi].Coins.AmountOf(params.BondDenom)
			provider := randomGenesisProvider(r, simState, params, addr, i)
			required := params.RequiredBond(provider.TotalGPUs()).Amount
			bond := required.Add(math.NewInt(r.Int63n(1_000_000)))
			var unbonding math.Int
			if r.Intn(4) == 0 {
				unbonding = math.NewInt(1 + r.Int63n(100_000))
			} else {
				unbonding = math.ZeroInt()
			}
			if bond.Add(unbonding).MulRaw(2).GT(available) {
				continue
			}
			provider.Bond = sdk.NewCoin(params.BondDenom, bond)
			gs.Providers = append(gs.Providers, provider)
			if unbonding.IsPositive() {
				gs.Unbondings = append(gs.Unbondings, types.Unbonding{
					Id:               gs.NextUnbondingId,
					Operator:         addr,
					Amount:           sdk.NewCoin(params.BondDenom, unbonding),
					CreationHeight:   0,
					CompletionTime:   simState.GenTimestamp.Add(time.Duration(1+r.Int63n(24)) * time.Hour).UTC(),
					CompletionHeight: r.Int63n(20),
				})
				gs.NextUnbondingId++
			}
			moved := sdk.NewCoins(sdk.NewCoin(params.BondDenom, bond.Add(unbonding)))
			bankGen.Balances[bi].Coins = bankGen.Balances[bi].Coins.Sub(moved...)
			moduleTotal = moduleTotal.Add(bond).Add(unbonding)
		}
		// About a fifth of the accounts (providers or not) are verifiers, mostly active.
		for i, acc := range simState.Accounts {
			if r.Intn(5) != 0 || i >= 60 {
				continue
			}
			addr := acc.Address.String()
			bi, ok := balances[addr]
			if !ok {
				continue
			}
			bond := params.MinVerifierBond.Add(math.NewInt(r.Int63n(100_000)))
			if bond.MulRaw(4).GT(bankGen.Balances[bi].Coins.AmountOf(params.BondDenom)) {
				continue
			}
			v := types.Verifier{Operator: addr, Bond: sdk.NewCoin(params.BondDenom, bond), Status: types.VERIFIER_STATUS_ACTIVE}
			if r.Intn(6) == 0 {
				v.Status, v.StatusReason = types.VERIFIER_STATUS_INACTIVE, "missed an audit before genesis"
			} else {
				gs.AuditSet = append(gs.AuditSet, addr)
			}
			gs.Verifiers = append(gs.Verifiers, v)
			bankGen.Balances[bi].Coins = bankGen.Balances[bi].Coins.Sub(v.Bond)
			moduleTotal = moduleTotal.Add(bond)
		}
		if moduleTotal.IsPositive() {
			bankGen.Balances = append(bankGen.Balances, banktypes.Balance{
				Address: authtypes.NewModuleAddress(types.ModuleName).String(),
				Coins:   sdk.NewCoins(sdk.NewCoin(params.BondDenom, moduleTotal)),
			})
			simState.GenState[banktypes.ModuleName] = simState.Cdc.MustMarshalJSON(&bankGen)
		}
	}
	simState.GenState[types.ModuleName] = simState.Cdc.MustMarshalJSON(&gs)
}

func randomGenesisProvider(r *rand.Rand, simState *module.SimulationState, params types.Params, operator string, i int) types.Provider {
	moniker, endpoint, region := RandomDescription(r, fmt.Sprintf("g%d", i))
	p := types.Provider{
		Operator: operator,
		Moniker:  moniker,
		Endpoint: endpoint,
		Region:   region,
		Gpus:     RandomGPUs(r, params.MaxGpuClasses),
		Locked:   sdk.NewCoin(params.BondDenom, math.ZeroInt()),
		Status:   types.PROVIDER_STATUS_ACTIVE,
		Reputation: types.Reputation{
			LeasesCompleted: uint64(r.Intn(20)),
			LeasesFailed:    uint64(r.Intn(3)),
			Slashes:         uint64(r.Intn(2)),
		},
	}
	switch n := r.Intn(10); {
	case n == 0:
		p.Status = types.PROVIDER_STATUS_TOMBSTONED
	case n <= 2:
		p.Status = types.PROVIDER_STATUS_JAILED
		p.JailedUntil = simState.GenTimestamp.Add(time.Duration(r.Int63n(12)) * time.Hour).UTC()
	}
	return p
}

// ProposalMsgs are the governance proposals x/stakingext contributes: new random params
// in the current bond denomination (which cannot change while anything is bonded).
func ProposalMsgs(k keeper.Keeper) []simtypes.WeightedProposalMsg {
	return simutil.ParamsProposal(types.ModuleName, func(r *rand.Rand, ctx sdk.Context, authority string) sdk.Msg {
		p, err := k.Params.Get(ctx)
		return &types.MsgUpdateParams{Authority: authority, Params: RandomParams(r, simutil.DenomOr(p.BondDenom, err))}
	})
}
