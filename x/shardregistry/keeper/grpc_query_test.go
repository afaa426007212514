package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// TestChallengeComesFromTheStoredBlockHash: the schedule query's chunk indices are
// types.ChallengeIndices over the block hash x/market stored at the period's start and
// the replica key; the challenge is closed until that block exists.
func TestChallengeComesFromTheStoredBlockHash(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 4000)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	id := e.claim(alpha, ds, 0, 0)

	res, err := e.query.ChallengeSchedule(e.Ctx, &types.QueryChallengeScheduleRequest{ReplicaId: id})
	require.NoError(t, err)
	require.False(t, res.Challenge.Open, "period 1's seed block does not exist yet")
	require.Empty(t, res.Challenge.ChunkIndices)
	require.Equal(t, int64(periodBlocks+1), res.Challenge.SeedHeight)

	e.advanceToOpen(id)
	res, err = e.query.ChallengeSchedule(e.Ctx, &types.QueryChallengeScheduleRequest{ReplicaId: id})
	require.NoError(t, err)
	require.True(t, res.Challenge.Open)
	hash, err := e.Market.BlockHash(e.Ctx, res.Challenge.SeedHeight)
	require.NoError(t, err)
	require.Equal(t, keepers.BlockHash(res.Challenge.SeedHeight), hash)
	key := types.ReplicaKey(ds.id, 0, 0, alpha)
	want, _ := types.ChallengeIndices(hash, key, res.Challenge.Period, res.Challenge.ChunkCount, 4)
	require.Equal(t, want, res.Challenge.ChunkIndices)
	require.Len(t, want, 4)
	require.Equal(t, types.PieceCID(ds.msg.Shards[0].Pieces[0].Root), res.Challenge.PieceCid)

	// The same query again gives the same indices; another holder gets others.
	again, err := e.query.ChallengeSchedule(e.Ctx, &types.QueryChallengeScheduleRequest{ReplicaId: id})
	require.NoError(t, err)
	require.Equal(t, res.Challenge.ChunkIndices, again.Challenge.ChunkIndices)
	claim, err := e.query.ClaimChallenge(e.Ctx, &types.QueryClaimChallengeRequest{DatasetId: ds.id, Shard: 0, Piece: 0, Holder: addr("bravo").String()})
	require.NoError(t, err)
	require.NotEqual(t, res.Challenge.ChunkIndices, claim.Challenge.ChunkIndices)
}

func TestQueries(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 300, 300, 300)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	var ids []uint64
	for s := uint32(0); s < 3; s++ {
		ids = append(ids, e.claim(alpha, ds, s, 1))
	}

	// Paginate alpha's replicas one by one.
	var got []uint64
	var key []byte
	for {
		res, err := e.query.Replicas(e.Ctx, &types.QueryReplicasRequest{Holder: alpha.String(), Pagination: &query.PageRequest{Key: key, Limit: 1}})
		require.NoError(t, err)
		for _, r := range res.Replicas {
			got = append(got, r.Id)
		}
		if key = res.Pagination.NextKey; key == nil {
			break
		}
	}
	require.Equal(t, ids, got)
	byDataset, err := e.query.Replicas(e.Ctx, &types.QueryReplicasRequest{DatasetId: ds.id, ActiveOnly: true})
	require.NoError(t, err)
	require.Len(t, byDataset.Replicas, 3)

	under, err := e.query.UnderReplicatedShards(e.Ctx, &types.QueryUnderReplicatedShardsRequest{DatasetId: ds.id, Pagination: &query.PageRequest{Limit: 2, CountTotal: true}})
	require.NoError(t, err)
	require.Len(t, under.Shards, 2)
	require.Equal(t, uint64(3), under.Pagination.Total)
	require.Equal(t, types.ShardHealth{DatasetId: ds.id, Shard: 0, Live: 1, Target: 3, MinLive: 2, Recoverable: false}, under.Shards[0])

	slots, err := e.query.RepairSlots(e.Ctx, &types.QueryRepairSlotsRequest{Pagination: &query.PageRequest{CountTotal: true}})
	require.NoError(t, err)
	require.Equal(t, uint64(6), slots.Pagination.Total)

	shard, err := e.query.Shard(e.Ctx, &types.QueryShardRequest{DatasetId: ds.id, Index: 2})
	require.NoError(t, err)
	require.Equal(t, uint32(1), shard.Shard.Live)
	require.Len(t, shard.Replicas, 1)
	require.Equal(t, uint32(1), shard.Shard.Pieces[1].LiveHolders)

	for _, err := range []error{
		func() error {
			_, err := e.query.Dataset(e.Ctx, &types.QueryDatasetRequest{DatasetId: "nope"})
			return err
		}(),
		func() error {
			_, err := e.query.Shard(e.Ctx, &types.QueryShardRequest{DatasetId: ds.id, Index: 9})
			return err
		}(),
		func() error { _, err := e.query.Replica(e.Ctx, &types.QueryReplicaRequest{ReplicaId: 99}); return err }(),
		func() error {
			_, err := e.query.Assignment(e.Ctx, &types.QueryAssignmentRequest{JobId: 99})
			return err
		}(),
	} {
		require.Equal(t, codes.NotFound, status.Code(err), err)
	}
	_, err = e.query.Replicas(e.Ctx, &types.QueryReplicasRequest{})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = e.query.Datasets(e.Ctx, &types.QueryDatasetsRequest{Owner: "not-an-address"})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

func TestUpdateParams(t *testing.T) {
	e := newEnv(t)
	p := testParams()
	p.ChallengesPerPeriod = 8
	_, err := e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.owner.String(), Params: p})
	require.ErrorIs(t, err, types.ErrInvalidAuthority)
	bad := p
	bad.DeclaredFaultSlashFraction = bad.MissSlashFraction.MulInt64(2)
	_, err = e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: bad})
	require.ErrorIs(t, err, types.ErrInvalidParams)
	require.Contains(t, err.Error(), "must not exceed miss_slash_fraction")
	_, err = e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: p})
	require.NoError(t, err)
	got, err := e.query.Params(e.Ctx, &types.QueryParamsRequest{})
	require.NoError(t, err)
	require.Equal(t, uint32(8), got.Params.ChallengesPerPeriod)
}
