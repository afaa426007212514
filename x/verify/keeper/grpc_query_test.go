package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/x/verify/types"
)

func requireCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "not a gRPC status: %v", err)
	require.Equal(t, code, st.Code(), st.Message())
}

func TestQueries(t *testing.T) {
	s := newScenario(t, 64, 16)
	q := s.query
	var cps []types.Checkpoint
	for i := uint64(0); i < 3; i++ {
		cps = append(cps, s.submitCheckpoint(s.honest(16*i, 16*(i+1)), s.lease.Id, i))
		s.nextBlock()
	}
	for i := range cps {
		cps[i] = s.checkpoint(s.lease.Id, uint64(i)) // as the audit draws left them
	}

	params, err := q.Params(s.Ctx, &types.QueryParamsRequest{})
	require.NoError(t, err)
	require.Equal(t, types.DefaultParams(), params.Params)

	// Checkpoint and Checkpoints.
	one, err := q.Checkpoint(s.Ctx, &types.QueryCheckpointRequest{LeaseId: s.lease.Id, Index: 1})
	require.NoError(t, err)
	require.Equal(t, s.checkpoint(s.lease.Id, 1), one.Checkpoint)
	require.True(t, one.Checkpoint.AuditDrawn, "the audit draw ran at the block after submission")
	_, err = q.Checkpoint(s.Ctx, &types.QueryCheckpointRequest{LeaseId: s.lease.Id, Index: 7})
	requireCode(t, err, codes.NotFound)
	_, err = q.Checkpoint(s.Ctx, nil)
	requireCode(t, err, codes.InvalidArgument)

	all, err := q.Checkpoints(s.Ctx, &types.QueryCheckpointsRequest{LeaseId: s.lease.Id})
	require.NoError(t, err)
	require.Equal(t, cps, all.Checkpoints)
	page, err := q.Checkpoints(s.Ctx, &types.QueryCheckpointsRequest{LeaseId: s.lease.Id, Pagination: &query.PageRequest{Limit: 2, CountTotal: true}})
	require.NoError(t, err)
	require.Equal(t, cps[:2], page.Checkpoints)
	require.Equal(t, uint64(3), page.Pagination.Total)
	page, err = q.Checkpoints(s.Ctx, &types.QueryCheckpointsRequest{LeaseId: s.lease.Id, Pagination: &query.PageRequest{Key: page.Pagination.NextKey}})
	require.NoError(t, err)
	require.Equal(t, cps[2:], page.Checkpoints)
	none, err := q.Checkpoints(s.Ctx, &types.QueryCheckpointsRequest{LeaseId: s.lease.Id + 1})
	require.NoError(t, err)
	require.Empty(t, none.Checkpoints)

	// Challenge and Challenges: two on checkpoint 0 (one ends), one on checkpoint 1.
	prov0 := s.honest(0, 16)
	l1 := s.liar(s.account("liar-1"), 0, 16, 5, false)
	l2 := s.liar(s.account("liar-2"), 0, 16, 9, false)
	l3 := s.liar(s.account("liar-3"), 16, 32, 20, false)
	id1 := s.openChallenge(l1, s.lease.Id, 0)
	id2 := s.openChallenge(l2, s.lease.Id, 0)
	id3 := s.openChallenge(l3, s.lease.Id, 1)
	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, s.game(id1, prov0, l1, l1).play(s.run).Outcome)

	ch, err := q.Challenge(s.Ctx, &types.QueryChallengeRequest{ChallengeId: id2})
	require.NoError(t, err)
	require.Equal(t, s.challenge(id2), ch.Challenge)
	require.Equal(t, types.GAME_TURN_CHALLENGER, ch.Challenge.Turn, "h_8 was revealed in game 1")
	_, err = q.Challenge(s.Ctx, &types.QueryChallengeRequest{ChallengeId: 42})
	requireCode(t, err, codes.NotFound)

	ids := func(req *types.QueryChallengesRequest) []uint64 {
		t.Helper()
		res, err := q.Challenges(s.Ctx, req)
		require.NoError(t, err)
		var out []uint64
		for _, c := range res.Challenges {
			out = append(out, c.Id)
		}
		return out
	}
	require.Equal(t, []uint64{id1, id2, id3}, ids(&types.QueryChallengesRequest{}))
	require.Equal(t, []uint64{id2, id3}, ids(&types.QueryChallengesRequest{OpenOnly: true}))
	require.Equal(t, []uint64{id1, id2}, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id, CheckpointIndex: 0}))
	require.Equal(t, []uint64{id2}, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id, CheckpointIndex: 0, OpenOnly: true}))
	require.Equal(t, []uint64{id3}, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id, CheckpointIndex: 1}))
	require.Empty(t, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id, CheckpointIndex: 2}))
	require.Empty(t, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id + 1}))
	// A lease's challenges on every checkpoint, not only on checkpoint 0.
	require.Equal(t, []uint64{id1, id2, id3}, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id, AllCheckpoints: true}))
	require.Equal(t, []uint64{id2, id3}, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id, AllCheckpoints: true, OpenOnly: true}))
	require.Empty(t, ids(&types.QueryChallengesRequest{LeaseId: s.lease.Id + 1, AllCheckpoints: true}))
	_, err = q.Challenges(s.Ctx, &types.QueryChallengesRequest{AllCheckpoints: true})
	requireCode(t, err, codes.InvalidArgument)
	_, err = q.Challenges(s.Ctx, &types.QueryChallengesRequest{LeaseId: s.lease.Id, CheckpointIndex: 1, AllCheckpoints: true})
	requireCode(t, err, codes.InvalidArgument)
	limited, err := q.Challenges(s.Ctx, &types.QueryChallengesRequest{Pagination: &query.PageRequest{Limit: 1}})
	require.NoError(t, err)
	require.Len(t, limited.Challenges, 1)
	require.NotEmpty(t, limited.Pagination.NextKey)
	_, err = q.Challenges(s.Ctx, nil)
	requireCode(t, err, codes.InvalidArgument)

	// DataRoot: the Merkle root of the built-in corpus in DataChunkSize chunks.
	corpus := traindata.BuiltinCorpus()
	dr, err := q.DataRoot(s.Ctx, &types.QueryDataRootRequest{JobId: s.job.Id})
	require.NoError(t, err)
	root := merkle.RootOfBytes(corpus, types.DataChunkSize)
	require.Equal(t, root[:], dr.Root)
	require.Equal(t, uint64(len(corpus)), dr.DataSize)
	require.Equal(t, uint64(types.DataChunkSize), dr.ChunkSize)
	require.Equal(t, (uint64(len(corpus))+types.DataChunkSize-1)/types.DataChunkSize, dr.Chunks)
	_, err = q.DataRoot(s.Ctx, &types.QueryDataRootRequest{JobId: 999})
	requireCode(t, err, codes.NotFound)
}

func TestDataRootOfDatasetJob(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	spec := referenceSpec(16, 16)
	spec.DatasetId = "ds-fineweb-10b"
	job, _ := e.leaseJob(prov, spec)
	_, err := e.query.DataRoot(e.Ctx, &types.QueryDataRootRequest{JobId: job.Id})
	requireCode(t, err, codes.FailedPrecondition)
}

// The lease filters read the challenges-by-checkpoint index under the lease's prefix:
// every checkpoint of that lease, no challenge of its neighbours (the lease ids next to
// it, the largest one), each page continuing where the last one stopped.
func TestChallengesOfOneLease(t *testing.T) {
	e := newEnv(t)
	const last = ^uint64(0)
	var id uint64
	put := func(lease, index uint64) uint64 {
		id++
		require.NoError(t, e.Verify.Challenges.Set(e.Ctx, id, types.Challenge{Id: id, LeaseId: lease, CheckpointIndex: index}))
		return id
	}
	put(6, 0)
	a := put(7, 3)
	b := put(7, 0)
	c := put(7, 3)
	d := put(7, 1<<40)
	put(8, 0)
	z := put(last, 2)
	t.Cleanup(func() { // they belong to no checkpoint, which the invariants would report
		for i := uint64(1); i <= id; i++ {
			require.NoError(t, e.Verify.Challenges.Remove(e.Ctx, i))
		}
	})

	all := func(req *types.QueryChallengesRequest) []uint64 {
		t.Helper()
		var out []uint64
		for {
			res, err := e.query.Challenges(e.Ctx, req)
			require.NoError(t, err)
			for _, ch := range res.Challenges {
				out = append(out, ch.Id)
			}
			if len(res.Pagination.NextKey) == 0 {
				return out
			}
			req.Pagination = &query.PageRequest{Key: res.Pagination.NextKey, Limit: req.Pagination.Limit}
		}
	}
	// In (checkpoint, id) order, one page of two at a time.
	require.Equal(t, []uint64{b, a, c, d}, all(&types.QueryChallengesRequest{LeaseId: 7, AllCheckpoints: true, Pagination: &query.PageRequest{Limit: 2}}))
	require.Equal(t, []uint64{a, c}, all(&types.QueryChallengesRequest{LeaseId: 7, CheckpointIndex: 3, Pagination: &query.PageRequest{Limit: 1}}))
	require.Equal(t, []uint64{b}, all(&types.QueryChallengesRequest{LeaseId: 7}))
	require.Equal(t, []uint64{z}, all(&types.QueryChallengesRequest{LeaseId: last, AllCheckpoints: true}))
	require.Empty(t, all(&types.QueryChallengesRequest{LeaseId: 9, AllCheckpoints: true}))
}
