package keeper_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"
	minttypes "github.com/cosmos/cosmos-sdk/x/mint/types"

	"github.com/depinchain/depinchain/x/shardregistry/keeper"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// derived dumps the state rebuilt at import rather than exported: deadline index,
// holder counts, shard holders, open slots and under-replicated shards.
func derived(t *testing.T, e *env) string {
	t.Helper()
	var b strings.Builder
	k := e.ShardRegistry
	require.NoError(t, k.Deadlines.Walk(e.Ctx, nil, func(key collections.Pair[int64, uint64]) (bool, error) {
		fmt.Fprintf(&b, "deadline %d %d\n", key.K1(), key.K2())
		return false, nil
	}))
	require.NoError(t, k.PieceHolders.Walk(e.Ctx, nil, func(key collections.Triple[string, uint32, uint32], n uint32) (bool, error) {
		fmt.Fprintf(&b, "holders %s %d %d = %d\n", key.K1(), key.K2(), key.K3(), n)
		return false, nil
	}))
	require.NoError(t, k.ShardHolders.Walk(e.Ctx, nil, func(key collections.Triple[string, uint32, []byte]) (bool, error) {
		fmt.Fprintf(&b, "shard holder %s %d %x\n", key.K1(), key.K2(), key.K3())
		return false, nil
	}))
	require.NoError(t, k.OpenSlots.Walk(e.Ctx, nil, func(key collections.Triple[string, uint32, uint32]) (bool, error) {
		fmt.Fprintf(&b, "open %s %d %d\n", key.K1(), key.K2(), key.K3())
		return false, nil
	}))
	require.NoError(t, k.UnderReplicated.Walk(e.Ctx, nil, func(key collections.Pair[string, uint32]) (bool, error) {
		fmt.Fprintf(&b, "under %s %d\n", key.K1(), key.K2())
		return false, nil
	}))
	return b.String()
}

// TestGenesisRoundTrip: after active, terminated and released replicas across two
// datasets, export → validate → import into a fresh chain gives the same export, the
// same derived indexes (rebuilt, not imported) and holding invariants.
func TestGenesisRoundTrip(t *testing.T) {
	e := newEnv(t)
	rsDS := newTestDataset(t, e.owner, "corpus-rs", rs(2, 1), 1000, 700)
	repDS := newTestDataset(t, e.owner, "corpus-rep", replicas(2), 500)
	e.register(rsDS)
	e.register(repDS)
	alpha, bravo, charlie := e.registerProvider("alpha"), e.registerProvider("bravo"), e.registerProvider("charlie")
	e.claim(alpha, rsDS, 0, 0)
	e.claim(bravo, rsDS, 0, 1)
	faulty := e.claim(charlie, rsDS, 1, 2)
	e.claim(alpha, repDS, 0, 0)
	released := e.claim(bravo, repDS, 0, 0)
	_, err := e.msg.DeclareFault(e.Ctx, &types.MsgDeclareFault{Holder: charlie.String(), ReplicaId: faulty})
	require.NoError(t, err)
	_, err = e.msg.ReleaseReplica(e.Ctx, &types.MsgReleaseReplica{Holder: bravo.String(), ReplicaId: released})
	require.NoError(t, err)
	e.AdvanceTo(t, 45) // some misses on the way

	exported, err := e.ShardRegistry.ExportGenesis(e.Ctx)
	require.NoError(t, err)
	require.NoError(t, exported.Validate())
	sx, err := e.StakingExt.ExportGenesis(e.Ctx)
	require.NoError(t, err)

	fresh := newEnvWith(t, exported)
	// The bonds behind the imported locks: fund stakingext's account as the bank genesis would.
	var bonded int64
	for _, p := range sx.Providers {
		bonded += p.Bond.Amount.Int64()
	}
	coins := sdk.NewCoins(coin(bonded))
	require.NoError(t, fresh.BankKeeper.MintCoins(fresh.Ctx, minttypes.ModuleName, coins))
	require.NoError(t, fresh.BankKeeper.SendCoinsFromModuleToModule(fresh.Ctx, minttypes.ModuleName, stakingexttypes.ModuleName, coins))
	require.NoError(t, fresh.StakingExt.InitGenesis(fresh.Ctx, sx))

	again, err := fresh.ShardRegistry.ExportGenesis(fresh.Ctx)
	require.NoError(t, err)
	require.Equal(t, e.Codec.MustMarshalJSON(exported), fresh.Codec.MustMarshalJSON(again))
	require.Equal(t, derived(t, e), derived(t, fresh))
	msg, broken := keeper.AllInvariants(fresh.ShardRegistry, keeper.StakingExtLocks(fresh.StakingExt.Locks))(fresh.Ctx)
	require.False(t, broken, msg)
}

func TestGenesisValidateRejects(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 1000)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	e.claim(alpha, ds, 0, 0)
	good, err := e.ShardRegistry.ExportGenesis(e.Ctx)
	require.NoError(t, err)
	require.NoError(t, good.Validate())

	cases := map[string]func(gs *types.GenesisState){
		"replica id at next_replica_id": func(gs *types.GenesisState) { gs.NextReplicaId = 1 },
		"replica of a missing piece":    func(gs *types.GenesisState) { gs.Replicas[0].Piece = 9 },
		"two holders of an RS piece": func(gs *types.GenesisState) {
			r := gs.Replicas[0]
			r.Id, r.Holder = 2, addr("bravo").String()
			gs.Replicas = append(gs.Replicas, r)
			gs.NextReplicaId = 3
		},
		"missing shard":             func(gs *types.GenesisState) { gs.Shards = nil },
		"tampered manifest":         func(gs *types.GenesisState) { gs.Datasets[0].ManifestRoot = make([]byte, 32) },
		"active without a deadline": func(gs *types.GenesisState) { gs.Replicas[0].NextDeadline = 0 },
		"bad params":                func(gs *types.GenesisState) { gs.Params.PeriodBlocks = 1 },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			var gs types.GenesisState
			e.Codec.MustUnmarshalJSON(e.Codec.MustMarshalJSON(good), &gs)
			damage(&gs)
			require.Error(t, gs.Validate())
		})
	}
}
