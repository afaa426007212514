package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/verify/types"
)

// wipeVerify deletes every piece of x/verify state, as a fresh chain would start.
func (e *env) wipeVerify() {
	e.t.Helper()
	ctx := e.Ctx
	cpKeys, err := e.Verify.Checkpoints.Iterate(ctx, nil)
	require.NoError(e.t, err)
	keys, err := cpKeys.Keys()
	require.NoError(e.t, err)
	for _, k := range keys {
		require.NoError(e.t, e.Verify.Checkpoints.Remove(ctx, k))
	}
	chIter, err := e.Verify.Challenges.Iterate(ctx, nil)
	require.NoError(e.t, err)
	ids, err := chIter.Keys()
	require.NoError(e.t, err)
	for _, id := range ids {
		require.NoError(e.t, e.Verify.Challenges.Remove(ctx, id))
	}
	opIter, err := e.Verify.Openings.Iterate(ctx, nil)
	require.NoError(e.t, err)
	ops, err := opIter.Keys()
	require.NoError(e.t, err)
	for _, k := range ops {
		require.NoError(e.t, e.Verify.Openings.Remove(ctx, k))
	}
	var fq []collections.Triple[int64, uint64, uint64]
	require.NoError(e.t, e.Verify.FinalizationQueue.Walk(ctx, nil, func(k collections.Triple[int64, uint64, uint64]) (bool, error) {
		fq = append(fq, k)
		return false, nil
	}))
	for _, k := range fq {
		require.NoError(e.t, e.Verify.FinalizationQueue.Remove(ctx, k))
	}
	var md []collections.Pair[int64, uint64]
	require.NoError(e.t, e.Verify.MoveDeadlines.Walk(ctx, nil, func(k collections.Pair[int64, uint64]) (bool, error) {
		md = append(md, k)
		return false, nil
	}))
	for _, k := range md {
		require.NoError(e.t, e.Verify.MoveDeadlines.Remove(ctx, k))
	}
	require.NoError(e.t, e.Verify.TileGames.Clear(ctx, nil))
	require.NoError(e.t, e.Verify.Params.Remove(ctx))
	require.NoError(e.t, e.Verify.NextChallengeID.Set(ctx, 0))
	gs, err := e.Verify.ExportGenesis(ctx)
	require.Error(e.t, err, "params are gone")
	_ = gs
}

// Export mid-game, wipe the module, import, and finish the games: nothing is lost, the
// deadline indexes are rebuilt, and the dispute ends as it would have.
func TestGenesisRoundTripMidGame(t *testing.T) {
	s := newScenario(t, 64, 32)
	liar := s.liar(s.prov, 0, 32, 13, true)
	s.submitCheckpoint(liar, s.lease.Id, 0)
	s.advance(2)
	liar1 := newParty(s.prov, s.run.garbageFrom(32, 64, 32), nil)
	s.submitCheckpoint(liar1, s.lease.Id, 1)
	a := s.verifier("verifier-a", 0, 32)
	b := s.verifier("verifier-b", 0, 32)
	ida := s.openChallenge(a, s.lease.Id, 0)
	ga := s.game(ida, liar, a, a)
	for i := 0; i < 5; i++ {
		require.True(t, ga.move(s.run))
	}
	s.nextBlock()
	idb := s.openChallenge(b, s.lease.Id, 0) // reuses A's openings
	fc := s.beforeFraud(a, b)

	exported, err := s.Verify.ExportGenesis(s.Ctx)
	require.NoError(t, err)
	require.NoError(t, exported.Validate())
	require.Len(t, exported.Checkpoints, 2)
	require.Len(t, exported.Challenges, 2)
	require.NotEmpty(t, exported.Openings)
	require.Equal(t, idb+1, exported.NextChallengeId)
	// Through JSON, as a genesis file carries it.
	bz, err := s.Codec.MarshalJSON(exported)
	require.NoError(t, err)
	var imported types.GenesisState
	require.NoError(t, s.Codec.UnmarshalJSON(bz, &imported))
	indexes := s.dumpIndexes()

	// Into a fresh chain: it validates and exports the same.
	fresh := keepers.New(t)
	require.NoError(t, fresh.Verify.InitGenesis(fresh.Ctx, &imported))
	again, err := fresh.Verify.ExportGenesis(fresh.Ctx)
	require.NoError(t, err)
	require.Equal(t, exported, again)

	// In place: wipe and re-import; state and indexes are back as they were.
	s.wipeVerify()
	require.NoError(t, s.Verify.InitGenesis(s.Ctx, &imported))
	again, err = s.Verify.ExportGenesis(s.Ctx)
	require.NoError(t, err)
	require.Equal(t, exported, again)
	require.Equal(t, indexes, s.dumpIndexes())
	s.requireInvariants()

	// The games go on: B has a next move, A wins at the referee, B ends moot.
	require.Equal(t, types.GAME_TURN_CHALLENGER, s.challenge(idb).Turn)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, ga.play(s.run).Outcome)
	s.requireFraudPunished(fc, ida, a)
	require.Equal(t, types.CHALLENGE_OUTCOME_UNSPECIFIED, s.challenge(idb).Outcome, "B ends moot when it next moves or times out")
	_, err = s.msg.ClaimTimeout(s.Ctx, &types.MsgClaimTimeout{Sender: a.addr.String(), ChallengeId: idb})
	require.NoError(t, err)
	require.Equal(t, types.CHALLENGE_OUTCOME_MOOT, s.challenge(idb).Outcome)
	// New challenge ids continue after the imported ones.
	require.Equal(t, idb+1, func() uint64 { n, err := s.Verify.NextChallengeID.Peek(s.Ctx); require.NoError(t, err); return n }())
}

func TestDefaultGenesisRoundTrip(t *testing.T) {
	e := newEnv(t)
	gs, err := e.Verify.ExportGenesis(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, types.DefaultGenesis(), gs)
}

// The end blocker handles at most max_deadlines_per_block deadlines per block, timeouts
// first, and the rest in later blocks in (height, lease, index) order.
func TestEndBlockerPerBlockCap(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	type lease struct {
		id  uint64
		run *honestRun
	}
	var leases []lease
	for i := 0; i < 3; i++ {
		job, l := e.leaseJob(prov, referenceSpec(16, 16))
		leases = append(leases, lease{l.Id, computeRun(t, job, 16)})
	}
	e.setVerifyParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 1; p.ChallengeWindow = 50; p.MoveTimeout = 10 })
	provs := make([]*party, 3)
	var deadline int64
	for i, l := range leases {
		provs[i] = newParty(prov, l.run.trace(0, 16), nil)
		deadline = e.submitCheckpoint(provs[i], l.id, 0).ChallengeDeadline
	}
	// A liar challenges the last lease's checkpoint so that its answer falls due at the
	// same height as the three finalizations; it never answers.
	e.advanceTo(deadline - 10)
	liar := newParty(e.account("liar"), leases[2].run.garbageFrom(0, 16, 3), nil)
	id := e.openChallenge(liar, leases[2].id, 0)
	g := e.game(id, provs[2], liar, nil)
	require.True(t, g.move(leases[2].run))
	require.Equal(t, deadline, e.challenge(id).Deadline)

	status := func() []types.CheckpointStatus {
		var out []types.CheckpointStatus
		for _, l := range leases {
			out = append(out, e.checkpoint(l.id, 0).Status)
		}
		return out
	}
	P, F := types.CHECKPOINT_STATUS_PENDING, types.CHECKPOINT_STATUS_FINAL
	e.advanceTo(deadline)
	require.Equal(t, []types.CheckpointStatus{P, P, P}, status())
	e.nextBlock() // the timeout takes the block's budget (and finalizes the third checkpoint)
	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, e.challenge(id).Outcome)
	require.Equal(t, []types.CheckpointStatus{P, P, F}, status())
	e.nextBlock()
	require.Equal(t, []types.CheckpointStatus{F, P, F}, status())
	e.nextBlock()
	require.Equal(t, []types.CheckpointStatus{F, F, F}, status())
	e.nextBlock() // the third entry is processed, to no effect
	require.Equal(t, "", func() string {
		var left string
		require.NoError(t, e.Verify.FinalizationQueue.Walk(e.Ctx, nil, func(collections.Triple[int64, uint64, uint64]) (bool, error) {
			left = "entries left"
			return true, nil
		}))
		return left
	}())
}

// A deadline whose processing fails is dropped, not retried every block where it would
// starve every later deadline of the per-block budget.
func TestEndBlockerDropsFailingDeadline(t *testing.T) {
	s := newScenario(t, 16, 16)
	s.setVerifyParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 1 })
	cp := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
	// A game on a checkpoint that does not exist (as a buggy import could leave): its
	// timeout cannot be processed.
	broken := types.Challenge{
		Id: 99, LeaseId: 77, Challenger: addr("ghost").String(), Provider: s.prov.String(),
		Bond: coin(0), Lo: 0, Hi: 16, Mid: 8, Turn: types.GAME_TURN_CHALLENGER, Deadline: cp.ChallengeDeadline,
	}
	require.NoError(t, s.Verify.Challenges.Set(s.Ctx, broken.Id, broken))
	require.NoError(t, s.Verify.MoveDeadlines.Set(s.Ctx, collections.Join(broken.Deadline, broken.Id)))

	s.advanceTo(cp.ChallengeDeadline + 1) // the broken timeout takes the budget, and fails
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)
	s.nextBlock()
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	has, err := s.Verify.MoveDeadlines.Has(s.Ctx, collections.Join(broken.Deadline, broken.Id))
	require.NoError(t, err)
	require.False(t, has)
	// Remove the ghost so the invariants describe a sane state.
	require.NoError(t, s.Verify.Challenges.Remove(s.Ctx, broken.Id))
}
