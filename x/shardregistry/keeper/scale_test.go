package keeper_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

const (
	bigShards    = 2_500 // × Reed-Solomon 2+2 = 10,000 pieces, one replica each
	bigReplicas  = bigShards * 4
	bigCap       = 50
	bigProviders = 4
)

// bigEnv imports a dataset of 2,500 shards × 4 pieces with 10,000 active replicas,
// provider j holding piece j of every shard, each replica's collateral locked in
// stakingext, and schedule(key) as each replica's due challenge.
func bigEnv(t *testing.T, params types.Params, schedule func(key []byte) types.Schedule) (*env, []sdk.AccAddress) {
	t.Helper()
	chainparams.SetAddressPrefixes()
	params.MaxDeadlinesPerBlock = bigCap
	params.MaxShardsPerDataset = bigShards
	params.MinReplicaCollateral = coin(100)
	enc := rs(2, 2)
	gs := &types.GenesisState{Params: params, NextReplicaId: bigReplicas + 1}
	providers := make([]sdk.AccAddress, bigProviders)
	for j := range providers {
		providers[j] = addr("storage-" + string(rune('a'+j)))
	}
	shards := make([]types.Shard, bigShards)
	for i := range shards {
		s := types.Shard{DatasetId: "big", Index: uint32(i), SampleStart: uint64(i), SampleEnd: uint64(i + 1), SizeBytes: 128}
		for j := 0; j < 4; j++ {
			var seed [8]byte
			binary.BigEndian.PutUint64(seed[:], uint64(i*4+j))
			root := sha256.Sum256(seed[:])
			s.Pieces = append(s.Pieces, types.Piece{Index: uint32(j), Root: root[:], SizeBytes: 64, ChunkCount: 1})
			key := types.ReplicaKey("big", uint32(i), uint32(j), providers[j])
			sched := schedule(key)
			gs.Replicas = append(gs.Replicas, types.Replica{
				Id: uint64(i*4 + j + 1), DatasetId: "big", Shard: uint32(i), Piece: uint32(j), Holder: providers[j].String(),
				Status: types.REPLICA_STATUS_ACTIVE, ClaimedHeight: 1, NextPeriod: sched.Period, NextSeedHeight: sched.SeedHeight,
				NextDeadline: sched.Deadline, Collateral: coin(100), ProofsAccepted: 1,
			})
		}
		shards[i] = s
	}
	root := types.ManifestRoot(enc, chunkSize, 128*bigShards, shards)
	gs.Datasets = []types.Dataset{{Id: "big", Owner: addr("owner").String(), ManifestRoot: root[:], Encoding: enc, ChunkSize: chunkSize,
		TotalSize: 128 * bigShards, ShardCount: bigShards, SampleCount: bigShards, CreatedHeight: 1}}
	gs.Shards = shards
	e := newEnvWith(t, gs)
	for j, op := range providers {
		e.Fund(t, op, providerFunds)
		_, err := e.sxMsg.RegisterProvider(e.Ctx, newProviderMsg(op, providerBond))
		require.NoError(t, err, j)
	}
	for _, r := range gs.Replicas {
		holder := providers[r.Piece]
		require.NoError(t, e.StakingExt.LockCollateral(e.Ctx, holder, types.ReplicaCollateralRef(r.Id), r.Collateral))
	}
	return e, providers
}

// TestEndBlockWorkIsBounded: with all 10,000 deadlines in one block, EndBlock processes
// exactly max_deadlines_per_block of them per block, lowest id first, and carries the
// rest over in order; nothing is processed twice or skipped.
func TestEndBlockWorkIsBounded(t *testing.T) {
	const due = 10
	e, _ := bigEnv(t, testParams(), func([]byte) types.Schedule {
		return types.Schedule{Period: 0, SeedHeight: 1, Deadline: due}
	})
	e.AdvanceTo(t, due)
	for block := 0; block < 6; block++ {
		e.NextBlock(t)
		h := int64(due + block)
		require.Equal(t, bigCap, e.Processed[h], "block %d", h)
		missed := typedEvents[*types.EventDeadlineMissed](t, e.EventsAt[h])
		require.Len(t, missed, bigCap)
		for i, ev := range missed {
			require.Equal(t, uint64(block*bigCap+i+1), ev.ReplicaId, "backlog is processed in (deadline, id) order")
			require.Equal(t, int64(due), ev.Deadline)
			require.Greater(t, ev.NextDeadline, h, "the next challenge is in the future")
		}
	}
	require.Equal(t, uint32(0), e.replica(6*bigCap+1).ConsecutiveMisses, "not reached yet")
	require.Equal(t, int64(due), e.replica(6*bigCap+1).NextDeadline)
	require.Equal(t, uint32(1), e.replica(6*bigCap).ConsecutiveMisses)
}

// TestDeadlinesSpreadOverThePeriod: with real schedules, the 10,000 deadlines of a
// period spread over its blocks (no block holds more than a small multiple of the
// mean), and each block processes exactly those due in it.
func TestDeadlinesSpreadOverThePeriod(t *testing.T) {
	params := testParams()
	params.PeriodBlocks, params.ProofWindowBlocks = 1000, 100
	e, _ := bigEnv(t, params, func(key []byte) types.Schedule {
		p := params
		p.MaxDeadlinesPerBlock, p.MaxShardsPerDataset, p.MinReplicaCollateral = bigCap, bigShards, coin(100)
		return types.ScheduleFor(1, key, p)
	})
	perHeight := map[int64]int{}
	require.NoError(t, e.ShardRegistry.Deadlines.Walk(e.Ctx, nil, func(k collPairI64U64) (bool, error) {
		perHeight[k.K1()]++
		return false, nil
	}))
	first, last := types.PeriodStart(1, 1000)+100, types.PeriodStart(2, 1000)-1
	maxDue := 0
	for h, n := range perHeight {
		require.GreaterOrEqual(t, h, first)
		require.LessOrEqual(t, h, last)
		maxDue = max(maxDue, n)
	}
	mean := float64(bigReplicas) / float64(last-first+1)
	t.Logf("10,000 deadlines over %d blocks: mean %.1f per block, max %d, cap %d", last-first+1, mean, maxDue, bigCap)
	require.Less(t, float64(maxDue), 3*mean)
	require.Less(t, maxDue, bigCap)

	// Process the first 60 blocks of deadlines: each block does exactly what is due in it.
	e.JumpTo(t, first-1) // nothing is due before first
	e.NextBlock(t)
	for h := first; h < first+60; h++ {
		e.NextBlock(t)
		require.Equal(t, perHeight[h], e.Processed[h], "height %d", h)
	}
}
