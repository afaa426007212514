package types_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

func udepin(amount int64) sdk.Coin { return sdk.NewInt64Coin("udepin", amount) }

// validGenesis has an open job with a bid, a leased job with a lease, and a block hash.
func validGenesis() types.GenesisState {
	spec := validSpec()
	gs := *types.DefaultGenesis()
	gs.Jobs = []types.Job{
		{Id: 1, Owner: "depin1owner", Spec: spec, State: types.JOB_STATE_OPEN, BiddingDeadline: 30, Escrow: udepin(100), Deposited: udepin(100)},
		{Id: 2, Owner: "depin1owner", Spec: spec, State: types.JOB_STATE_LEASED, Escrow: udepin(50), Deposited: udepin(100), TimeDeadline: time.Unix(1e9, 0)},
	}
	gs.Bids = []types.Bid{{JobId: 1, Provider: "depin1alice", PricePerGpuHour: udepin(10), Sequence: 1}}
	gs.Leases = []types.Lease{{
		Id: 1, JobId: 2, Provider: "depin1alice", State: types.LEASE_STATE_ACTIVE,
		Accrued: udepin(50), Pending: udepin(50), Committed: udepin(20), Withdrawable: udepin(0), Withdrawn: udepin(0),
	}}
	gs.BlockHashes = []types.BlockHash{{Height: 5, Hash: []byte{1, 2, 3}}}
	gs.NextJobId, gs.NextLeaseId, gs.NextBidSequence = 3, 2, 2
	return gs
}

func TestGenesisValidate(t *testing.T) {
	require.NoError(t, types.DefaultGenesis().Validate())
	require.NoError(t, validGenesis().Validate())

	cases := []struct {
		name   string
		change func(*types.GenesisState)
		want   string
	}{
		{"invalid params", func(g *types.GenesisState) { g.Params.MaxBidsPerJob = 0 }, "params: max_bids_per_job"},
		{"job id zero", func(g *types.GenesisState) { g.Jobs[0].Id = 0 }, "job 0: id must be in"},
		{"job id at next_job_id", func(g *types.GenesisState) { g.NextJobId = 2 }, "job 2: id must be in"},
		{"duplicate job id", func(g *types.GenesisState) { g.Jobs[1].Id = 1 }, "job 1: duplicate id"},
		{"invalid job spec", func(g *types.GenesisState) { g.Jobs[1].Spec.TotalSteps = 0 }, "job 2: total_steps"},
		{"escrow in another denom", func(g *types.GenesisState) { g.Jobs[0].Escrow = sdk.NewInt64Coin("uatom", 1) }, "job 1: escrow"},
		{"negative escrow", func(g *types.GenesisState) { g.Jobs[0].Escrow = sdk.Coin{Denom: "udepin", Amount: math.NewInt(-1)} }, "job 1: escrow"},
		{"deposited in another denom", func(g *types.GenesisState) { g.Jobs[0].Deposited = sdk.NewInt64Coin("uatom", 1) }, "job 1: escrow"},
		{"bid on unknown job", func(g *types.GenesisState) { g.Bids[0].JobId = 9 }, "unknown job 9"},
		{"bid on a job that is not open", func(g *types.GenesisState) { g.Bids[0].JobId = 2 }, "job is not open"},
		{"duplicate bid", func(g *types.GenesisState) {
			g.Bids = append(g.Bids, g.Bids[0])
			g.Bids[1].Sequence = 1
		}, "duplicate"},
		{"bid sequence zero", func(g *types.GenesisState) { g.Bids[0].Sequence = 0 }, "sequence must be in"},
		{"bid sequence at next_bid_sequence", func(g *types.GenesisState) { g.NextBidSequence = 1 }, "sequence must be in"},
		{"lease id zero", func(g *types.GenesisState) { g.Leases[0].Id = 0 }, "lease 0: id must be in"},
		{"lease id at next_lease_id", func(g *types.GenesisState) { g.NextLeaseId = 1 }, "lease 1: id must be in"},
		{"duplicate lease", func(g *types.GenesisState) {
			g.Leases = append(g.Leases, g.Leases[0])
			g.NextLeaseId = 3
		}, "lease 1: duplicate id"},
		{"lease of unknown job", func(g *types.GenesisState) { g.Leases[0].JobId = 9 }, "lease 1: unknown job 9"},
		{"lease committed above pending", func(g *types.GenesisState) { g.Leases[0].Committed = udepin(51) }, "committed <= pending"},
		{"lease negative withdrawable", func(g *types.GenesisState) {
			g.Leases[0].Withdrawable = sdk.Coin{Denom: "udepin", Amount: math.NewInt(-1)}
		}, "non-negative"},
		{"block hash at height zero", func(g *types.GenesisState) { g.BlockHashes[0].Height = 0 }, "block hash at height 0"},
		{"empty block hash", func(g *types.GenesisState) { g.BlockHashes[0].Hash = nil }, "block hash at height 5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gs := validGenesis()
			tc.change(&gs)
			err := gs.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParamsValidate(t *testing.T) {
	require.NoError(t, types.DefaultParams().Validate())
	cases := []struct {
		name   string
		change func(*types.Params)
		want   string
	}{
		{"empty denom", func(p *types.Params) { p.Denom = "" }, "denom"},
		{"nil collateral ratio", func(p *types.Params) { p.CollateralRatio = math.LegacyDec{} }, "collateral_ratio"},
		{"negative collateral ratio", func(p *types.Params) { p.CollateralRatio = math.LegacyNewDec(-1) }, "collateral_ratio"},
		{"collateral ratio above 10", func(p *types.Params) { p.CollateralRatio = math.LegacyNewDec(11) }, "collateral_ratio"},
		{"nil slash fraction", func(p *types.Params) { p.NonPerformanceSlashFraction = math.LegacyDec{} }, "non_performance_slash_fraction"},
		{"slash fraction above 1", func(p *types.Params) { p.NonPerformanceSlashFraction = math.LegacyNewDecWithPrec(101, 2) }, "non_performance_slash_fraction"},
		{"zero checkpoint deadline", func(p *types.Params) { p.DefaultCheckpointDeadlineBlocks = 0 }, "default_checkpoint_deadline_blocks"},
		{"zero min bidding window", func(p *types.Params) { p.MinBiddingWindowBlocks = 0 }, "bidding window"},
		{"min bidding window above max", func(p *types.Params) { p.MinBiddingWindowBlocks = p.MaxBiddingWindowBlocks + 1 }, "bidding window"},
		{"zero max workers", func(p *types.Params) { p.MaxWorkers = 0 }, "max_workers"},
		{"zero max bids", func(p *types.Params) { p.MaxBidsPerJob = 0 }, "max_bids_per_job"},
		{"zero max deadlines per block", func(p *types.Params) { p.MaxDeadlinesPerBlock = 0 }, "max_deadlines_per_block"},
		{"min deposit in another denom", func(p *types.Params) { p.MinDeposit = sdk.NewInt64Coin("uatom", 1) }, "min_deposit"},
		{"block hash retention below 2", func(p *types.Params) { p.BlockHashRetention = 1 }, "block_hash_retention"},
		{"negative jail duration", func(p *types.Params) { p.NonPerformanceJailDuration = -time.Second }, "non_performance_jail_duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := types.DefaultParams()
			tc.change(&p)
			err := p.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	edges := types.DefaultParams()
	edges.CollateralRatio = math.LegacyZeroDec()
	edges.NonPerformanceSlashFraction = math.LegacyOneDec()
	edges.MinBiddingWindowBlocks = edges.MaxBiddingWindowBlocks
	edges.NonPerformanceJailDuration = 0
	require.NoError(t, edges.Validate())
}
