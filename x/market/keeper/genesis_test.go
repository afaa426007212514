package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// busyMarket builds a market with jobs in every state, bids, active and closed leases,
// progress, committed and withdrawable balances.
func busyMarket(e *env) {
	e.t.Helper()
	alice, bob, carol := e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")

	leased, l := e.leaseJob(alice, 1000) // LEASED, with released and committed payment
	e.advance(10)
	claim, err := e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 100)
	require.NoError(e.t, err)
	require.NoError(e.t, e.Market.OnCheckpointFinal(e.Ctx, l.Id, claim, 100, []byte("h100"), "s3://100", ""))
	e.advance(3)
	_, err = e.Market.OnCheckpointSubmitted(e.Ctx, l.Id, 200)
	require.NoError(e.t, err)
	_ = leased

	expired := e.submitJob() // EXPIRED
	e.closeAuction(expired)

	cancelled, cl := e.leaseJob(bob, 1500) // CANCELLED, with committed pending left on its lease
	e.advance(4)
	_, err = e.Market.OnCheckpointSubmitted(e.Ctx, cl.Id, 100)
	require.NoError(e.t, err)
	_, err = e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: e.owner.String(), JobId: cancelled})
	require.NoError(e.t, err)

	s := spec()
	s.Workers = 2
	partial := e.submitJobWith(s, jobDeposit) // OPEN in round 2 with one active lease and a bid
	e.bid(carol, partial, 1200)
	e.closeAuction(partial)
	e.bid(bob, partial, 1100)

	open := e.submitJob() // OPEN with two bids
	e.bid(alice, open, 900)
	e.bid(bob, open, 800)
	e.advance(1)
}

func TestGenesisExportImportRoundTrip(t *testing.T) {
	e := newEnv(t)
	busyMarket(e)
	src := e.snapshot()
	exported, err := e.Market.ExportGenesis(e.Ctx)
	require.NoError(t, err)
	require.NoError(t, exported.Validate())
	require.NotEmpty(t, exported.Bids)
	require.NotEmpty(t, exported.Leases)

	// Through JSON, as a genesis file carries it.
	var market types.GenesisState
	require.NoError(t, e.Codec.UnmarshalJSON([]byte(src.Text("market state")), &market))
	var stakingext stakingexttypes.GenesisState
	require.NoError(t, e.Codec.UnmarshalJSON([]byte(src.Text("stakingext state")), &stakingext))
	var bank banktypes.GenesisState
	require.NoError(t, e.Codec.UnmarshalJSON([]byte(src.Text("balances")), &bank))

	f := keepers.New(t)
	f.Ctx = f.Ctx.WithBlockHeader(e.Ctx.BlockHeader()).WithHeaderHash(e.Ctx.HeaderHash())
	f.BankKeeper.InitGenesis(f.Ctx, &bank)
	require.NoError(t, f.StakingExt.InitGenesis(f.Ctx, &stakingext))
	require.NoError(t, f.Market.InitGenesis(f.Ctx, &market))
	imported := &env{Fixture: f, t: t, msg: e.msg, query: e.query}
	imported.requireInvariants()

	dst := imported.snapshot()
	require.Equal(t, src.Text("market state"), dst.Text("market state"), keepers.JSONDiff(src.Text("market state"), dst.Text("market state")))
	require.Equal(t, src.Text("stakingext state"), dst.Text("stakingext state"))
	require.Equal(t, src.Text("balances"), dst.Text("balances"))
	require.Equal(t, e.dumpIndexes(), imported.dumpIndexes(), "InitGenesis rebuilds the deadline indexes")

	// Both chains go on identically: every deadline is found in the imported state.
	for i := 0; i < 60; i++ {
		e.NextBlock(t, blockTime)
		f.NextBlock(t, blockTime)
	}
	after := e.snapshot()
	require.NotEqual(t, src.Text("market state"), after.Text("market state"), "the scenario has deadlines in the next 60 blocks")
	importedAfter := imported.snapshot()
	require.Equal(t, after.Text("market state"), importedAfter.Text("market state"), keepers.JSONDiff(after.Text("market state"), importedAfter.Text("market state")))
	require.Equal(t, after.Text("stakingext state"), importedAfter.Text("stakingext state"))
	require.Equal(t, after.Text("balances"), importedAfter.Text("balances"))
	imported.requireInvariants()
}

func TestInitGenesisRejectsMalformedBidProvider(t *testing.T) {
	f := keepers.New(t)
	gs := types.DefaultGenesis()
	gs.Jobs = []types.Job{{Id: 1, Owner: addr("owner").String(), Spec: spec(), State: types.JOB_STATE_OPEN, Escrow: coin(0), Deposited: coin(0)}}
	gs.Bids = []types.Bid{{JobId: 1, Provider: "not-an-address", PricePerGpuHour: coin(1), StepsPerHour: testRate, Sequence: 1}}
	gs.NextJobId, gs.NextBidSequence = 2, 2
	require.Error(t, f.Market.InitGenesis(f.Ctx, gs))
}
