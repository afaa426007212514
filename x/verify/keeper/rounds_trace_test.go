package keeper_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/testutil/keepers"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardkeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// traceRounds is a leased two-worker sync job of one round of 4 steps whose workers'
// round files are held in custody by two holders: worker 1 (cheat) trains its round on
// worker 0's shards — its commit and checkpoint are otherwise consistent (start h_0, end
// its trace's end, pseudo-gradient G_0 − end) — so only re-executing its trace on its
// own data catches it.
type traceRounds struct {
	*env
	job     markettypes.Job
	provs   [2]sdk.AccAddress
	leases  [2]markettypes.Lease
	runs    [2]*honestRun // runs[w]: the honest round of worker w, on its own shards
	holders []sdk.AccAddress
	pieces  map[string][][]byte
	g0      *diloco.GlobalState
	pgs     [2]*diloco.PseudoGradient
}

const traceRoundSteps = 4

func newTraceRounds(t *testing.T) *traceRounds { return newTraceRoundsOf(t, 1) }

// newTraceRoundsOf is traceRounds' job trained in `rounds` rounds of traceRoundSteps.
func newTraceRoundsOf(t *testing.T, rounds uint64) *traceRounds {
	e := newEnv(t)
	// Custody claims are seeded by the hash of their period's first block.
	e.Ctx = e.Ctx.WithHeaderHash(keepers.BlockHash(1))
	require.NoError(t, e.Market.BeginBlocker(e.Ctx))
	sp, err := e.ShardRegistry.Params.Get(e.Ctx)
	require.NoError(t, err)
	// One custody period outlasts the test: a holder's claim stays live without re-proving.
	sp.PeriodBlocks, sp.ProofWindowBlocks = 2000, 10
	require.NoError(t, e.ShardRegistry.Params.Set(e.Ctx, sp))
	r := &traceRounds{env: e, pieces: map[string][][]byte{}}
	r.holders = []sdk.AccAddress{e.registerProvider("holder-a", 1), e.registerProvider("holder-b", 1)}

	spec := referenceSpec(rounds*traceRoundSteps, traceRoundSteps)
	spec.Workers = 2
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}
	sync, err := diloco.SyncSpec{Every: traceRoundSteps, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	require.NoError(t, err)
	spec.Sync = &markettypes.SyncSpec{Every: traceRoundSteps, OuterLrQ30: uint64(sync.OuterLR), OuterMomentumQ30: uint64(sync.OuterMomentum)}
	res, err := e.mmsg.SubmitJob(e.Ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
	require.NoError(t, err)
	for i := range r.provs {
		r.provs[i] = e.registerProvider(fmt.Sprintf("worker-%d", i), 2)
		_, err = e.mmsg.PlaceBid(e.Ctx, &markettypes.MsgPlaceBid{Provider: r.provs[i].String(), JobId: res.JobId, PricePerGpuHour: coin(bidPrice), StepsPerHour: testRate})
		require.NoError(t, err)
	}
	for deadline := e.getJob(res.JobId).BiddingDeadline; e.Ctx.BlockHeight() <= deadline; {
		e.nextBlock()
	}
	for _, l := range e.ActiveLeasesOfJob(t, res.JobId) {
		r.leases[l.Worker] = l
		r.provs[l.Worker] = sdk.MustAccAddressFromBech32(l.Provider)
	}
	r.job = e.getJob(res.JobId)
	cfg, err := types.JobConfig(r.job)
	require.NoError(t, err)
	r.g0, err = diloco.InitGlobal(cfg, sync, r.job.Seed)
	require.NoError(t, err)
	for w := range uint32(2) {
		data, err := types.WorkerTrainingData(r.job, w, 0)
		require.NoError(t, err)
		r.runs[w] = computeRunOn(t, r.job, data, traceRoundSteps)
	}
	require.NotEqual(t, r.runs[0].hashes[traceRoundSteps], r.runs[1].hashes[traceRoundSteps], "the two slots' shards differ")
	return r
}

// encode cuts file into custody pieces (2 data + 1 parity), keeps them under id and
// returns their roots.
func (r *traceRounds) encode(id string, file []byte) (custody.Layout, [][]byte) {
	l, err := custody.NewLayout(uint64(len(file)), 2, 1)
	require.NoError(r.t, err)
	outs := make([]*bytes.Buffer, l.Pieces())
	ws := make([]io.Writer, l.Pieces())
	for i := range outs {
		outs[i] = new(bytes.Buffer)
		ws[i] = outs[i]
	}
	roots, err := custody.Encode(bytes.NewReader(file), l, ws, 1)
	require.NoError(r.t, err)
	r.pieces[id] = nil
	for _, b := range outs {
		r.pieces[id] = append(r.pieces[id], b.Bytes())
	}
	return l, merkle.HashesToBytes(roots)
}

// hold has the two holders claim the data pieces of custody object id, which makes it held.
func (r *traceRounds) hold(id string) {
	r.t.Helper()
	q, m := shardkeeper.NewQueryServerImpl(r.ShardRegistry), shardkeeper.NewMsgServerImpl(r.ShardRegistry)
	for piece, holder := range r.holders {
		res, err := q.ClaimChallenge(r.Ctx, &shardtypes.QueryClaimChallengeRequest{DatasetId: id, Shard: 0, Piece: uint32(piece), Holder: holder.String()})
		require.NoError(r.t, err)
		proofs, err := manifest.Prove(r.pieces[id][piece], custody.ChunkSize, res.Challenge.ChunkIndices)
		require.NoError(r.t, err)
		_, err = m.ClaimReplica(r.Ctx, &shardtypes.MsgClaimReplica{
			Holder: holder.String(), DatasetId: id, Shard: 0, Piece: uint32(piece), Period: res.Challenge.Period, Proofs: proofs,
		})
		require.NoError(r.t, err)
	}
}

// trained is worker w's round as it trained it: on its own shards, or (worker 1) on
// worker 0's.
func (r *traceRounds) trained(w uint32) *honestRun {
	if w == 1 {
		return r.runs[0]
	}
	return r.runs[w]
}

// commitRound commits worker w's round 0 and submits its checkpoint, as the sidecar's
// one transaction does, and holds its pseudo-gradient and end state in custody.
func (r *traceRounds) commitRound(w uint32) {
	r.t.Helper()
	run := r.trained(w)
	end := run.stateAt(r.t, traceRoundSteps)
	pg, err := diloco.NewPseudoGradient(r.g0, w, end)
	require.NoError(r.t, err)
	r.pgs[w] = pg
	pgFile := pg.EncodeDense()
	pgID := markettypes.PseudoGradientCustodyID(r.job.Id, 0, w)
	_, pieces := r.encode(pgID, pgFile)
	pgRoot, start, endRoot := merkle.RootOfBytes(pgFile, diloco.ChunkSize), r.g0.WorkerStart(nil).Root(), end.Root()
	gRoot := r.g0.Root()
	_, err = r.deliver(func(ctx sdk.Context) error {
		_, err := r.mmsg.CommitRound(ctx, &markettypes.MsgCommitRound{Provider: r.provs[w].String(), LeaseId: r.leases[w].Id, Round: 0,
			StartRoot: start[:], EndRoot: endRoot[:], PseudoGradientRoot: pgRoot[:], PseudoGradientSize: uint64(len(pgFile)), PieceRoots: pieces, GlobalRoot: gRoot[:]})
		return err
	})
	require.NoError(r.t, err)
	ck := checkpointMsg(newParty(r.provs[w], run.trace(0, traceRoundSteps), nil), r.leases[w].Id, 0)
	sl, stateRoots := r.encode(fmt.Sprintf("state/%d", w), end.Encode())
	ck.StateSize, ck.PieceRoots = sl.StateSize, stateRoots
	_, err = r.deliver(func(ctx sdk.Context) error { _, err := r.msg.SubmitCheckpoint(ctx, ck); return err })
	require.NoError(r.t, err, "worker %d's round-0 checkpoint", w)
	cp := r.checkpoint(r.leases[w].Id, 0)
	r.pieces[cp.CustodyId] = r.pieces[fmt.Sprintf("state/%d", w)]
	r.hold(pgID)
	r.hold(cp.CustodyId)
}

// commitGlobal has worker w aggregate round 0 over the entered workers (diloco.Aggregate)
// and commit it, its custody held.
func (r *traceRounds) commitGlobal(w uint32) []byte {
	r.t.Helper()
	round, err := r.Market.GetRound(r.Ctx, r.job.Id, 0)
	require.NoError(r.t, err)
	var pgs []*diloco.PseudoGradient
	for _, e := range round.Entered {
		pgs = append(pgs, r.pgs[e])
	}
	g1, err := diloco.Aggregate(r.g0, pgs)
	require.NoError(r.t, err)
	file := g1.Encode()
	id := markettypes.GlobalCustodyID(r.job.Id, 1)
	_, pieces := r.encode(id, file)
	root := merkle.RootOfBytes(file, diloco.ChunkSize)
	_, err = r.deliver(func(ctx sdk.Context) error {
		_, err := r.mmsg.CommitGlobal(ctx, &markettypes.MsgCommitGlobal{Provider: r.provs[w].String(), JobId: r.job.Id, Round: 0,
			Entered: round.Entered, GlobalRoot: root[:], GlobalSize: uint64(len(file)), PieceRoots: pieces})
		return err
	})
	require.NoError(r.t, err)
	r.hold(id)
	return root[:]
}

func (r *traceRounds) round0() markettypes.Round {
	r.t.Helper()
	round, err := r.Market.GetRound(r.Ctx, r.job.Id, 0)
	require.NoError(r.t, err)
	return round
}

// A round's global is not final while an entered worker's round checkpoint is pending:
// with the round's challenge window shorter than the checkpoints', the global waits past
// its own deadline until both checkpoints are final, and only then pays the workers.
func TestRoundGlobalWaitsForItsWorkersCheckpoints(t *testing.T) {
	r := newTraceRounds(t)
	mp, err := r.Market.Params.Get(r.Ctx)
	require.NoError(t, err)
	mp.RoundChallengeBlocks = 5
	require.NoError(t, r.Market.Params.Set(r.Ctx, mp))
	r.commitRound(0)
	r.commitRound(1)
	root := r.commitGlobal(0)
	rd := r.round0()
	require.Equal(t, markettypes.ROUND_STATE_CHALLENGE, rd.State)
	cpDeadline := r.checkpoint(r.leases[1].Id, 0).ChallengeDeadline
	require.Greater(t, cpDeadline, rd.ChallengeDeadline+10, "the checkpoints' window outlasts the round's")

	r.advanceTo(rd.ChallengeDeadline + 10)
	require.Equal(t, markettypes.ROUND_STATE_CHALLENGE, r.round0().State, "the global waits for the pending round checkpoints")
	require.True(t, r.getLease(r.leases[0].Id).Withdrawable.IsZero())
	pending, err := r.Verify.RoundCheckpointPending(r.Ctx, r.leases[1].Id, traceRoundSteps)
	require.NoError(t, err)
	require.True(t, pending)

	r.advanceTo(cpDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, r.checkpoint(r.leases[1].Id, 0).Status)
	for r.round0().State == markettypes.ROUND_STATE_CHALLENGE && r.Ctx.BlockHeight() < cpDeadline+30 {
		r.nextBlock()
	}
	rd = r.round0()
	require.Equal(t, markettypes.ROUND_STATE_FINAL, rd.State)
	require.Equal(t, root, rd.NextGlobalRoot)
	require.Equal(t, []uint32{0, 1}, rd.Entered, "nobody challenged worker 1 in time: its round stands")
	for w := range 2 {
		require.True(t, r.getLease(r.leases[w].Id).Withdrawable.IsPositive(), "worker %d is paid once the global is final", w)
	}
	r.requireInvariants()
}

// A worker that trains its round on another slot's shards loses the phase 1–3 game a
// verifier opens on its round checkpoint at the batch (the referee proves the data
// against the worker's own shards): x/market excludes it from the round, voids the global
// committed over it and the round is aggregated again without it; the worker is slashed
// exactly fraud_slash_fraction, tombstoned, its lease closed for fraud, and it is not paid
// for the round. Messages that would undo any of it are refused and change nothing.
func TestRoundWorkerConvictedInAGameIsExcludedAndTheRoundReaggregated(t *testing.T) {
	r := newTraceRounds(t)
	r.commitRound(0)
	r.commitRound(1)
	rejectedRoot := r.commitGlobal(0)
	require.Equal(t, markettypes.ROUND_STATE_CHALLENGE, r.round0().State)
	require.Equal(t, []uint32{0, 1}, r.round0().Entered)

	cheater, honest := r.trained(1), r.runs[1]
	verifier := r.account("verifier")
	chal := newParty(verifier, honest.trace(0, traceRoundSteps), func(step uint64) *exact.State { return honest.stateAt(t, step) })
	prov := newParty(r.provs[1], cheater.trace(0, traceRoundSteps), func(step uint64) *exact.State { return cheater.stateAt(t, step) })
	bond := r.provider(r.provs[1]).Bond.Amount
	before := r.Balance(verifier)
	id := r.openChallenge(chal, r.leases[1].Id, 0)
	g := r.game(id, prov, chal, chal)
	g.blocks = true
	ch := g.play(honest)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, ch.Outcome, ch.OutcomeReason)
	require.Equal(t, uint64(0), ch.Lo, "the traces part at the first step: its batch")

	commit, err := r.Market.GetRoundCommit(r.Ctx, r.job.Id, 0, 1)
	require.NoError(t, err)
	require.True(t, commit.Excluded)
	require.Contains(t, commit.ExcludedReason, fmt.Sprintf("proven wrong by challenge %d", id))
	rd := r.round0()
	require.Equal(t, markettypes.ROUND_STATE_AGGREGATING, rd.State)
	require.Equal(t, []uint32{0}, rd.Entered)
	require.Empty(t, rd.NextGlobalRoot)
	rejected := typedEvents[*markettypes.EventGlobalRejected](r.env)
	require.Len(t, rejected, 1)
	require.Equal(t, rejectedRoot, rejected[0].GlobalRoot)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_FRAUD, r.getLease(r.leases[1].Id).CloseReason)
	after := r.provider(r.provs[1])
	slash := r.verifyParams().FraudSlashFraction.MulInt(bond).TruncateInt()
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_TOMBSTONED, after.Status)
	require.True(t, after.Bond.Amount.Equal(bond.Sub(slash)), "bond %s → %s, want %s less", bond, after.Bond.Amount, slash)
	reward := r.verifyParams().WhistleblowerShare.MulInt(slash).TruncateInt()
	require.Equal(t, before.Add(reward), r.Balance(verifier), "the verifier gets its bond back and the whistleblower share")

	// Nothing puts the cheater back: the old entered list, and a second challenge of its
	// rejected checkpoint, are refused and change nothing.
	r.requireRejected(markettypes.ErrEnteredMismatch, func(ctx sdk.Context) error {
		_, err := r.mmsg.CommitGlobal(ctx, &markettypes.MsgCommitGlobal{Provider: r.provs[0].String(), JobId: r.job.Id, Round: 0,
			Entered: []uint32{0, 1}, GlobalRoot: rejectedRoot, GlobalSize: 1, PieceRoots: [][]byte{rejectedRoot}})
		return err
	})
	other := newParty(r.account("other-verifier"), honest.trace(0, traceRoundSteps), nil)
	r.requireRejected(types.ErrNotChallengeable, func(ctx sdk.Context) error {
		_, err := r.msg.Challenge(ctx, challengeMsg(other, r.leases[1].Id, 0))
		return err
	})

	// Worker 0 aggregates the round again without the cheater; once final, worker 0 is
	// paid and the cheater is not.
	r.nextBlock() // x/shardregistry releases the voided global's object
	root := r.commitGlobal(0)
	g1, err := diloco.Aggregate(r.g0, []*diloco.PseudoGradient{r.pgs[0]})
	require.NoError(t, err)
	want := g1.Root()
	require.Equal(t, want[:], root, "the new global is worker 0's alone")
	cpDeadline := r.checkpoint(r.leases[0].Id, 0).ChallengeDeadline
	for r.round0().State != markettypes.ROUND_STATE_FINAL && r.Ctx.BlockHeight() < max(cpDeadline, r.round0().ChallengeDeadline)+30 {
		r.nextBlock()
	}
	require.Equal(t, markettypes.ROUND_STATE_FINAL, r.round0().State)
	require.True(t, r.getLease(r.leases[0].Id).Withdrawable.IsPositive())
	require.True(t, r.getLease(r.leases[1].Id).Withdrawable.IsZero(), "the convicted worker is not paid for the round")
	require.True(t, math.ZeroInt().Equal(r.getLease(r.leases[1].Id).Pending.Amount))
	r.requireInvariants()
}
