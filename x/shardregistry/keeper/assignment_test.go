package keeper_test

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// TestAssignmentOfAJob: the assignment query and WorkerShards give every worker of a
// market job the shards types.AssignShards picks from the job's seed, every shard to
// exactly one worker, with the shards' piece roots for x/verify's referee.
func TestAssignmentOfAJob(t *testing.T) {
	e := newEnv(t)
	sizes := make([]int, 24)
	for i := range sizes {
		sizes[i] = 200
	}
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), sizes...)
	e.register(ds)
	seed := sha256.Sum256([]byte("job seed"))
	job := markettypes.Job{Id: 7, Owner: e.owner.String(), State: markettypes.JOB_STATE_LEASED, Seed: seed[:],
		Spec: markettypes.JobSpec{Workers: 4, DatasetId: ds.id}}
	require.NoError(t, e.Market.Jobs.Set(e.Ctx, job.Id, job))
	require.NoError(t, e.Market.Jobs.Set(e.Ctx, 8, markettypes.Job{Id: 8, Owner: e.owner.String(), Seed: seed[:], Spec: markettypes.JobSpec{Workers: 2}}))

	res, err := e.query.Assignment(e.Ctx, &types.QueryAssignmentRequest{JobId: 7, Epoch: 3})
	require.NoError(t, err)
	require.Equal(t, ds.id, res.DatasetId)
	require.Len(t, res.Workers, 4)
	want := types.AssignShards(seed[:], 3, 24, 4)
	seen := map[uint32]bool{}
	for w, wa := range res.Workers {
		require.Equal(t, uint32(w), wa.Worker)
		require.Equal(t, want[w], wa.Shards)
		shards, err := e.ShardRegistry.WorkerShards(e.Ctx, 7, uint32(w), 3)
		require.NoError(t, err)
		require.Len(t, shards, len(wa.Shards))
		for i, s := range shards {
			require.Equal(t, wa.Shards[i], s.Index)
			require.Equal(t, ds.msg.Shards[s.Index].Pieces[0].Root, s.Pieces[0].Root)
			require.False(t, seen[s.Index])
			seen[s.Index] = true
		}
	}
	require.Len(t, seen, 24)

	other, err := e.query.Assignment(e.Ctx, &types.QueryAssignmentRequest{JobId: 7, Epoch: 4})
	require.NoError(t, err)
	require.NotEqual(t, res.Workers, other.Workers, "every epoch reshuffles")

	gasBefore := e.Ctx.GasMeter().GasConsumed()
	_, err = e.ShardRegistry.WorkerShards(e.Ctx, 7, 0, 3)
	require.NoError(t, err)
	require.GreaterOrEqual(t, e.Ctx.GasMeter().GasConsumed()-gasBefore, testParams().GasPerHash*24*4, "shards × workers hashes are charged")

	_, err = e.ShardRegistry.WorkerShards(e.Ctx, 7, 4, 3)
	require.ErrorIs(t, err, types.ErrInvalidWorker)
	_, err = e.ShardRegistry.WorkerShards(e.Ctx, 8, 0, 3)
	require.ErrorIs(t, err, types.ErrNoDataset)
	_, err = e.ShardRegistry.WorkerShards(e.Ctx, 99, 0, 3)
	require.ErrorIs(t, err, types.ErrJobNotFound)
}
