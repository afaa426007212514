// Package simulation is x/market's part of the app simulation: randomized params,
// operations for every message (jobs, bids, cancellations, top-ups, withdrawals), and
// governance proposals changing the params.
package simulation

import (
	"fmt"
	"math/rand"
	"strings"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
	stakingextsim "github.com/depinchain/depinchain/x/staking_ext/simulation"
)

// RandomParams draws valid params in denom: short bidding windows and checkpoint
// deadlines, so that a run of a few dozen blocks sees auctions close and leases miss
// deadlines; small deadline caps, so that EndBlock's per-block cap is exercised. The
// block hash retention stays above x/shardregistry's simulated period.
func RandomParams(r *rand.Rand, denom string) types.Params {
	minWindow := uint64(1 + r.Intn(3))
	// Often a tiny cap, so that due entries queue up behind it and wait for later blocks.
	capPerBlock := uint32(1 + r.Intn(50))
	if r.Intn(3) == 0 {
		capPerBlock = uint32(1 + r.Intn(2))
	}
	return types.Params{
		Denom:                           denom,
		CollateralRatio:                 math.LegacyNewDecWithPrec(r.Int63n(51), 2),
		NonPerformanceSlashFraction:     math.LegacyNewDecWithPrec(r.Int63n(6), 2),
		DefaultCheckpointDeadlineBlocks: uint64(3 + r.Intn(28)),
		MinBiddingWindowBlocks:          minWindow,
		MaxBiddingWindowBlocks:          minWindow + uint64(r.Intn(20)),
		MaxWorkers:                      uint32(1 + r.Intn(4)),
		MaxBidsPerJob:                   uint32(1 + r.Intn(20)),
		MaxDeadlinesPerBlock:            capPerBlock,
		MinDeposit:                      sdk.NewInt64Coin(denom, 1+r.Int63n(1000)),
		BlockHashRetention:              uint64(50 + r.Intn(951)),
		NonPerformanceJailDuration:      time.Duration(r.Int63n(6*3600)) * time.Second,
	}
}

// ProposalMsgs are the governance proposals x/market contributes: new random params in
// the current denomination (jobs, bids and escrow are all in it).
func ProposalMsgs(k keeper.Keeper) []simtypes.WeightedProposalMsg {
	return simutil.ParamsProposal(types.ModuleName, func(r *rand.Rand, ctx sdk.Context, authority string) sdk.Msg {
		p, err := k.Params.Get(ctx)
		return &types.MsgUpdateParams{Authority: authority, Params: RandomParams(r, simutil.DenomOr(p.Denom, err))}
	})
}

// RandomSpec draws a job spec that is valid under params: mostly reference-workload
// jobs of a few steps (each simulated checkpoint re-runs the reference trainer), GPUs
// the simulated providers register, and sometimes a dataset (datasetIDs lists
// registered ones; a job may also name one that does not exist, which the market does
// not check but the referee then cannot adjudicate).
func RandomSpec(r *rand.Rand, params types.Params, datasetIDs []string) types.JobSpec {
	classes := stakingextsim.GPUClasses
	var models []string
	for _, i := range r.Perm(len(classes))[:r.Intn(3)] {
		models = append(models, classes[i].Model)
	}
	vram := []uint64{16, 24, 40, 80}[r.Intn(4)]
	totalSteps := uint64(2 + r.Intn(11))
	spec := types.JobSpec{
		Name:      fmt.Sprintf("sim-job-%d", r.Intn(1_000_000)),
		Gpu:       types.GPURequirement{Models: models, MinVramGib: vram, PerWorker: uint32(1 + r.Intn(4))},
		Workers:   uint32(1 + r.Intn(int(min(params.MaxWorkers, 2)))),
		Resources: types.Resources{CpuMillis: uint64(1000 * (1 + r.Intn(32))), MemoryMib: uint64(1024 * (1 + r.Intn(64))), DiskGib: uint64(10 + r.Intn(500))},
		Workload:  types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE},
		// A few steps per checkpoint, so that jobs complete within a short run.
		TotalSteps:          totalSteps,
		CheckpointInterval:  uint64(1 + r.Intn(int(min(totalSteps, 4)))),
		MaxPricePerGpuHour:  sdk.NewInt64Coin(params.Denom, 1+r.Int63n(1000)),
		MaxDuration:         time.Duration(24+r.Intn(10*24)) * time.Hour,
		BiddingWindowBlocks: params.MinBiddingWindowBlocks + uint64(r.Intn(int(min(params.MaxBiddingWindowBlocks-params.MinBiddingWindowBlocks, 5))+1)),
	}
	if r.Intn(2) == 0 {
		spec.CheckpointDeadlineBlocks = uint64(3 + r.Intn(18))
	}
	if r.Intn(4) == 0 {
		spec.Workload = types.Workload{
			Kind:    types.WORKLOAD_KIND_CONTAINER,
			Image:   "ghcr.io/depinchain/sim-trainer:1.0",
			Digest:  "sha256:" + strings.Repeat(fmt.Sprintf("%02x", r.Intn(256)), 32),
			Command: []string{"python", "train.py", fmt.Sprintf("--steps=%d", totalSteps)},
		}
	}
	switch n := r.Intn(20); {
	case n < 8 && len(datasetIDs) > 0:
		spec.DatasetId = datasetIDs[r.Intn(len(datasetIDs))]
	case n == 8:
		spec.DatasetId = "sim-no-such-dataset"
	}
	return spec
}

// RandomizedGenState writes x/market's genesis: random params, no jobs (they need
// escrow; simulated accounts submit them).
func RandomizedGenState(simState *module.SimulationState) {
	gs := types.DefaultGenesis()
	gs.Params = RandomParams(simState.Rand, simState.BondDenom)
	simState.GenState[types.ModuleName] = simState.Cdc.MustMarshalJSON(gs)
}
