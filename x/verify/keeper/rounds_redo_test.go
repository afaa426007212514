package keeper_test

import (
	"fmt"
	"testing"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// redoRun is a worker's round as it trained it: from G_q and its carry.
type redoRun struct {
	end *exact.State
	pg  *diloco.PseudoGradient
}

// trainRound has worker w train round q from global g (and carry, its end state of the
// last round it entered) on its own shards of round q, commit it and submit its
// checkpoint `index`, as the sidecar's one transaction does; its pseudo-gradient and end
// state are held in custody.
func (r *traceRounds) trainRound(w uint32, q, index uint64, g *diloco.GlobalState, carry *exact.State) redoRun {
	r.t.Helper()
	start := g.WorkerStart(carry)
	sync, err := types.JobSync(r.job)
	require.NoError(r.t, err)
	data, err := types.WorkerTrainingData(r.job, w, sync.RoundStart(q))
	require.NoError(r.t, err)
	hashes := []merkle.Hash{start.Root()}
	end, err := exact.Run(start, data.Bytes, r.job.Seed, traceRoundSteps, func(_ uint64, info exact.StepInfo) error {
		hashes = append(hashes, info.Root)
		return nil
	})
	require.NoError(r.t, err)
	pg, err := diloco.NewPseudoGradient(g, w, end)
	require.NoError(r.t, err)
	pgFile := pg.EncodeDense()
	pgID := markettypes.PseudoGradientCustodyID(r.job.Id, q, w)
	_, pieces := r.encode(pgID, pgFile)
	pgRoot, startRoot, endRoot, gRoot := merkle.RootOfBytes(pgFile, diloco.ChunkSize), start.Root(), end.Root(), g.Root()
	_, err = r.deliver(func(ctx sdk.Context) error {
		_, err := r.mmsg.CommitRound(ctx, &markettypes.MsgCommitRound{Provider: r.provs[w].String(), LeaseId: r.leases[w].Id, Round: q,
			StartRoot: startRoot[:], EndRoot: endRoot[:], PseudoGradientRoot: pgRoot[:], PseudoGradientSize: uint64(len(pgFile)), PieceRoots: pieces, GlobalRoot: gRoot[:]})
		return err
	})
	require.NoError(r.t, err, "worker %d's commit of round %d", w, q)
	ck := checkpointMsg(newParty(r.provs[w], trace.New(sync.RoundStart(q), hashes), nil), r.leases[w].Id, index)
	stateID := fmt.Sprintf("state/%d/%d", w, index)
	sl, stateRoots := r.encode(stateID, end.Encode())
	ck.StateSize, ck.PieceRoots = sl.StateSize, stateRoots
	_, err = r.deliver(func(ctx sdk.Context) error { _, err := r.msg.SubmitCheckpoint(ctx, ck); return err })
	require.NoError(r.t, err, "worker %d's round-%d checkpoint %d", w, q, index)
	cp := r.checkpoint(r.leases[w].Id, index)
	r.pieces[cp.CustodyId] = r.pieces[stateID]
	r.hold(pgID)
	r.hold(cp.CustodyId)
	return redoRun{end: end, pg: pg}
}

// aggregate has worker w commit round q's global over the runs of the entered workers
// (wrong: one weight off), its custody held; it returns the global and its file.
func (r *traceRounds) aggregate(w uint32, q uint64, g *diloco.GlobalState, runs map[uint32]redoRun, wrong bool) (*diloco.GlobalState, []byte) {
	r.t.Helper()
	round, err := r.Market.GetRound(r.Ctx, r.job.Id, q)
	require.NoError(r.t, err)
	var pgs []*diloco.PseudoGradient
	for _, e := range round.Entered {
		pgs = append(pgs, runs[e].pg)
	}
	next, err := diloco.Aggregate(g, pgs)
	require.NoError(r.t, err)
	if wrong {
		next.Weights[0]++
	}
	file := next.Encode()
	id := markettypes.GlobalCustodyID(r.job.Id, q+1)
	_, pieces := r.encode(id, file)
	root := merkle.RootOfBytes(file, diloco.ChunkSize)
	_, err = r.deliver(func(ctx sdk.Context) error {
		_, err := r.mmsg.CommitGlobal(ctx, &markettypes.MsgCommitGlobal{Provider: r.provs[w].String(), JobId: r.job.Id, Round: q,
			Entered: round.Entered, GlobalRoot: root[:], GlobalSize: uint64(len(file)), PieceRoots: pieces})
		return err
	})
	require.NoError(r.t, err, "worker %d's global of round %d", w, q)
	r.hold(id)
	return next, file
}

func (r *traceRounds) round(q uint64) markettypes.Round {
	r.t.Helper()
	round, err := r.Market.GetRound(r.Ctx, r.job.Id, q)
	require.NoError(r.t, err)
	return round
}

// runUntil runs blocks until done or limit more blocks have passed.
func (r *traceRounds) runUntil(limit int64, done func() bool) {
	r.t.Helper()
	for stop := r.Ctx.BlockHeight() + limit; !done() && r.Ctx.BlockHeight() < stop; {
		r.nextBlock()
	}
	require.True(r.t, done(), "not done by height %d", r.Ctx.BlockHeight())
}

// Round 1 opens as soon as G_1 is committed, and both workers train it and checkpoint
// it. Their round-1 checkpoints do not finalize while G_1 can still be voided, even past
// their own challenge window. G_1 is proven wrong (an aggregation proof): x/market deletes
// round 1 and x/verify discards its checkpoints with no penalty, so the honest worker
// commits its redo of round 1 from the new G_1 with a fresh checkpoint starting at step 4,
// and the job completes: the honest worker is paid both rounds exactly, missed nothing,
// and its lease completes. Every checkpoint waits for its start global, every global for
// its workers' checkpoints of the round before it: no cycle.
func TestRoundRedoneAfterItsStartGlobalIsProvenWrong(t *testing.T) {
	r := newTraceRoundsOf(t, 2)
	mp, err := r.Market.Params.Get(r.Ctx)
	require.NoError(t, err)
	mp.RoundChallengeBlocks = r.verifyParams().ChallengeWindow + 20 // G_1 outlives the checkpoints' windows
	require.NoError(t, r.Market.Params.Set(r.Ctx, mp))

	round0 := map[uint32]redoRun{0: r.trainRound(0, 0, 0, r.g0, nil), 1: r.trainRound(1, 0, 0, r.g0, nil)}
	badG1, badFile := r.aggregate(0, 0, r.g0, round0, true)
	require.Equal(t, markettypes.ROUND_STATE_OPEN, r.round(1).State, "round 1 opens on the committed G_1")
	for w := range uint32(2) {
		r.trainRound(w, 1, 1, badG1, round0[w].end)
	}
	honest := r.leases[1].Id
	claim0, claim1 := r.checkpoint(honest, 0).Claim, r.checkpoint(honest, 1).Claim
	require.True(t, claim1.IsPositive())

	// The round-1 checkpoints' window passes; G_1 is still in its challenge window.
	r.advanceTo(r.checkpoint(honest, 1).ChallengeDeadline + 2)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, r.checkpoint(honest, 0).Status, "round 0's start global G_0 is final")
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, r.checkpoint(honest, 1).Status, "round 1's checkpoint waits for G_1")
	require.Equal(t, markettypes.ROUND_STATE_CHALLENGE, r.round(0).State)

	cfg, err := types.JobConfig(r.job)
	require.NoError(t, err)
	proof, err := dispute.AggregationFault(r.account("prover").String(), r.job.Id, 0, diloco.NewLayout(cfg), r.g0.Sync, r.g0.Encode(), badFile,
		[]uint32{0, 1}, [][]byte{round0[0].pg.EncodeDense(), round0[1].pg.EncodeDense()})
	require.NoError(t, err)
	require.NotNil(t, proof)
	_, err = r.deliver(func(ctx sdk.Context) error { _, err := r.msg.ProveRoundFault(ctx, proof); return err })
	require.NoError(t, err)

	_, err = r.Market.GetRound(r.Ctx, r.job.Id, 1)
	require.Error(t, err, "round 1 was deleted with G_1")
	discarded := typedEvents[*types.EventCheckpointsDiscarded](r.env)
	require.Len(t, discarded, 2)
	for _, ev := range discarded {
		require.Equal(t, uint64(traceRoundSteps), ev.FromStep)
		require.Equal(t, uint64(1), ev.FirstIndex)
		require.Equal(t, uint64(1), ev.LastIndex)
		require.Contains(t, ev.Reason, "round 1 of job")
	}
	require.Empty(t, typedEvents[*types.EventCheckpointRejected](r.env), "nothing is rejected: the aggregator's round-0 checkpoint is final")
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, r.checkpoint(honest, 1).Status)
	lease := r.getLease(honest)
	require.Equal(t, markettypes.LEASE_STATE_ACTIVE, lease.State, "the honest worker keeps its lease")
	require.Equal(t, claim0, lease.Pending, "round 1's claim went back to the job; round 0's stands")
	require.True(t, lease.Withdrawable.IsZero())
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_FRAUD, r.getLease(r.leases[0].Id).CloseReason, "the aggregator is convicted")

	// The honest worker aggregates round 0 again and redoes round 1 from the new G_1.
	r.nextBlock() // x/shardregistry releases the voided objects
	g1, _ := r.aggregate(1, 0, r.g0, round0, false)
	require.Equal(t, markettypes.ROUND_STATE_OPEN, r.round(1).State)
	redo := r.trainRound(1, 1, 2, g1, round0[1].end)
	cp := r.checkpoint(honest, 2)
	require.Equal(t, uint64(traceRoundSteps), cp.StartStep, "the redo starts where round 0's checkpoint ended")
	require.Equal(t, claim1, cp.Claim, "the redone steps are claimed at the same price")
	require.Equal(t, markettypes.ROUND_STATE_AGGREGATING, r.round(1).State, "every active slot committed: the round closes")
	r.aggregate(1, 1, g1, map[uint32]redoRun{1: redo}, false)

	r.runUntil(3*int64(mp.RoundChallengeBlocks)+3*int64(r.verifyParams().ChallengeWindow), func() bool {
		return r.getJob(r.job.Id).State == markettypes.JOB_STATE_COMPLETED
	})
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, r.checkpoint(honest, 2).Status)
	lease = r.getLease(honest)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_COMPLETED, lease.CloseReason)
	require.Equal(t, claim0.Add(claim1), lease.Withdrawable, "paid both rounds, exactly")
	require.True(t, math.ZeroInt().Equal(lease.Pending.Amount))
	require.Equal(t, markettypes.ROUND_STATE_FINAL, r.round(1).State)
	require.Equal(t, []uint32{1}, r.round(1).Entered)
	require.Zero(t, r.getJob(r.job.Id).MissedRounds[1], "the honest worker missed no round")
	r.requireInvariants()
}

// Worker 1 trains round 0 on worker 0's shards; G_1 is committed over both and both
// workers train and checkpoint round 1 on it. A verifier's game convicts worker 1's round-0
// checkpoint: x/market excludes it, voids G_1 and deletes round 1, and x/verify discards
// both workers' round-1 checkpoints (no penalty) and rejects the cheater's round-0 one
// (behind its discarded round-1 checkpoint). Honest worker 0 aggregates round 0 again,
// redoes round 1 from the new G_1 with a fresh checkpoint, and the job completes: worker
// 0 is paid both rounds exactly, missed no round and keeps its lease to the end.
func TestRoundRedoneAfterAWorkerOfThePreviousRoundIsConvicted(t *testing.T) {
	r := newTraceRoundsOf(t, 2)
	r.commitRound(0)
	r.commitRound(1)
	r.commitGlobal(0)
	g1, err := diloco.Aggregate(r.g0, r.pgs[:])
	require.NoError(t, err)
	carry0 := r.runs[0].stateAt(t, traceRoundSteps)
	require.Equal(t, markettypes.ROUND_STATE_OPEN, r.round(1).State)
	r.trainRound(0, 1, 1, g1, carry0)
	r.trainRound(1, 1, 1, g1, r.trained(1).stateAt(t, traceRoundSteps))
	honest := r.leases[0].Id
	claim0, claim1 := r.checkpoint(honest, 0).Claim, r.checkpoint(honest, 1).Claim

	cheater, own := r.trained(1), r.runs[1]
	chal := newParty(r.account("verifier"), own.trace(0, traceRoundSteps), func(step uint64) *exact.State { return own.stateAt(t, step) })
	prov := newParty(r.provs[1], cheater.trace(0, traceRoundSteps), func(step uint64) *exact.State { return cheater.stateAt(t, step) })
	id := r.openChallenge(chal, r.leases[1].Id, 0)
	g := r.game(id, prov, chal, chal)
	g.blocks = true
	ch := g.play(own)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, ch.Outcome, ch.OutcomeReason)

	_, err = r.Market.GetRound(r.Ctx, r.job.Id, 1)
	require.Error(t, err, "round 1 was deleted with G_1")
	discarded := typedEvents[*types.EventCheckpointsDiscarded](r.env)
	require.Len(t, discarded, 2)
	for _, ev := range discarded {
		require.Equal(t, uint64(traceRoundSteps), ev.FromStep)
		require.Equal(t, uint64(1), ev.FirstIndex)
	}
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, r.checkpoint(honest, 1).Status)
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, r.checkpoint(r.leases[1].Id, 0).Status, "the cheater's round-0 checkpoint goes with its lease")
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, r.checkpoint(honest, 0).Status)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_FRAUD, r.getLease(r.leases[1].Id).CloseReason)
	lease := r.getLease(honest)
	require.Equal(t, markettypes.LEASE_STATE_ACTIVE, lease.State)
	require.Equal(t, claim0, lease.Pending, "round 1's claim went back to the job; round 0's stands")

	r.nextBlock() // x/shardregistry releases the voided objects
	r.commitGlobal(0)
	newG1, err := diloco.Aggregate(r.g0, []*diloco.PseudoGradient{r.pgs[0]})
	require.NoError(t, err)
	require.Equal(t, markettypes.ROUND_STATE_OPEN, r.round(1).State)
	redo := r.trainRound(0, 1, 2, newG1, carry0)
	require.Equal(t, uint64(traceRoundSteps), r.checkpoint(honest, 2).StartStep)
	require.Equal(t, claim1, r.checkpoint(honest, 2).Claim)
	require.Equal(t, markettypes.ROUND_STATE_AGGREGATING, r.round(1).State)
	r.aggregate(0, 1, newG1, map[uint32]redoRun{0: redo}, false)

	mp, err := r.Market.Params.Get(r.Ctx)
	require.NoError(t, err)
	r.runUntil(3*int64(mp.RoundChallengeBlocks)+3*int64(r.verifyParams().ChallengeWindow), func() bool {
		return r.getJob(r.job.Id).State == markettypes.JOB_STATE_COMPLETED
	})
	job := r.getJob(r.job.Id)
	require.Zero(t, job.MissedRounds[0], "the honest worker missed no round")
	lease = r.getLease(honest)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_COMPLETED, lease.CloseReason)
	require.Equal(t, claim0.Add(claim1), lease.Withdrawable, "paid both rounds, exactly")
	require.True(t, math.ZeroInt().Equal(lease.Pending.Amount))
	require.True(t, r.getLease(r.leases[1].Id).Withdrawable.IsZero(), "the cheater is paid nothing")
	r.requireInvariants()
}
