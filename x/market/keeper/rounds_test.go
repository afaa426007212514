package keeper_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
	shardkeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// Rounds of a sync job in the tests: 3 workers, 3 rounds of 100 steps, 2 GPUs per worker
// at 3600 per GPU-hour and 100 steps per hour, so 72 per step and 7200 per round.
const (
	roundSteps   = 100
	roundCommit  = 20 // commit window in blocks
	roundPay     = 7200
	syncDeposit  = 10_000_000
	syncWorkers  = 3
	syncRounds   = 3
	custodyData  = 2
	custodyParty = 1
)

func syncSpec() types.JobSpec {
	s := spec()
	s.Workers = syncWorkers
	s.TotalSteps = syncRounds * roundSteps
	s.CheckpointInterval = roundSteps
	s.CheckpointDeadlineBlocks = 5_000
	y, err := diloco.SyncSpec{Every: roundSteps, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	if err != nil {
		panic(err)
	}
	s.Sync = types.NewSyncSpec(y, roundCommit)
	s.Custody = &types.CustodySpec{DataPieces: custodyData, ParityPieces: custodyParty, RetainCheckpoints: 720 * time.Hour}
	return s
}

// roundsEnv is a leased sync job: workers[w] serves slot w; two other providers hold
// the custody pieces of every round file.
type roundsEnv struct {
	*env
	jobID   uint64
	workers map[uint32]sdk.AccAddress
	holders []sdk.AccAddress
	pieces  map[string][][]byte
}

func newRoundsEnv(t *testing.T) *roundsEnv {
	t.Helper()
	e := newEnv(t)
	// Custody claims are seeded by the hash of their period's first block: record
	// height 1's, as a chain's first BeginBlock does.
	e.Ctx = e.Ctx.WithHeaderHash(keepers.BlockHash(1))
	require.NoError(t, e.Market.BeginBlocker(e.Ctx))
	sp := e.ShardRegistry.Params
	p, err := sp.Get(e.Ctx)
	require.NoError(t, err)
	p.PeriodBlocks, p.ProofWindowBlocks = 40, 10
	require.NoError(t, sp.Set(e.Ctx, p))
	r := &roundsEnv{env: e, workers: map[uint32]sdk.AccAddress{}, pieces: map[string][][]byte{}}
	var provs []sdk.AccAddress
	for i := 0; i < syncWorkers; i++ {
		provs = append(provs, e.registerProvider(fmt.Sprintf("worker-%d", i)))
	}
	r.holders = []sdk.AccAddress{e.registerProvider("holder-a"), e.registerProvider("holder-b")}
	r.jobID = e.submitJobWith(syncSpec(), syncDeposit)
	for _, p := range provs {
		e.bid(p, r.jobID, maxPrice)
	}
	e.closeAuction(r.jobID)
	for _, l := range e.activeLeasesOfJob(r.jobID) {
		r.workers[l.Worker] = sdk.MustAccAddressFromBech32(l.Provider)
	}
	require.Len(t, r.workers, syncWorkers)
	return r
}

func (r *roundsEnv) round(n uint64) types.Round {
	r.t.Helper()
	got, err := r.Market.GetRound(r.Ctx, r.jobID, n)
	require.NoError(r.t, err)
	return got
}

func (r *roundsEnv) leaseOf(w uint32) types.Lease {
	r.t.Helper()
	for _, l := range r.activeLeasesOfJob(r.jobID) {
		if l.Worker == w {
			return l
		}
	}
	r.t.Fatalf("slot %d has no active lease", w)
	return types.Lease{}
}

// file is a round file's bytes (3½ chunks, distinct per name), cut into custody pieces.
func (r *roundsEnv) file(id string) (root []byte, size uint64, pieceRoots [][]byte) {
	r.t.Helper()
	data := make([]byte, 3*custody.ChunkSize+custody.ChunkSize/2)
	seed := sha256.Sum256([]byte(id))
	for i := 0; i < len(data); i += 32 {
		h := sha256.Sum256(append(seed[:], binary.LittleEndian.AppendUint64(nil, uint64(i))...))
		copy(data[i:], h[:])
	}
	l, err := custody.NewLayout(uint64(len(data)), custodyData, custodyParty)
	require.NoError(r.t, err)
	outs := make([]*bytes.Buffer, l.Pieces())
	ws := make([]io.Writer, l.Pieces())
	for i := range outs {
		outs[i] = new(bytes.Buffer)
		ws[i] = outs[i]
	}
	roots, err := custody.Encode(bytes.NewReader(data), l, ws, 1)
	require.NoError(r.t, err)
	r.pieces[id] = nil
	for _, b := range outs {
		r.pieces[id] = append(r.pieces[id], b.Bytes())
	}
	dr := custody.DataRoot(roots[:custodyData])
	return dr[:], uint64(len(data)), merkle.HashesToBytes(roots)
}

func hash32(parts ...any) []byte {
	h := sha256.Sum256([]byte(fmt.Sprint(parts...)))
	return h[:]
}

func (r *roundsEnv) commitMsg(w uint32, round uint64) *types.MsgCommitRound {
	r.t.Helper()
	root, size, pieceRoots := r.file(types.PseudoGradientCustodyID(r.jobID, round, w))
	// The worker trained from the round's global (any root for a round that is not open).
	global := hash32("global", round)
	if rd, err := r.Market.GetRound(r.Ctx, r.jobID, round); err == nil {
		global = rd.GlobalRoot
	}
	return &types.MsgCommitRound{
		Provider: r.workers[w].String(), LeaseId: r.leaseOf(w).Id, Round: round,
		StartRoot: hash32("start", w, round), EndRoot: hash32("end", w, round),
		PseudoGradientRoot: root, PseudoGradientSize: size, PieceRoots: pieceRoots, GlobalRoot: global,
	}
}

// commit commits worker w's round and submits its round-end checkpoint's claim, as the
// sidecar's one transaction does (MsgCommitRound, then x/verify's MsgSubmitCheckpoint).
func (r *roundsEnv) commit(w uint32, round uint64) sdk.Coin {
	r.t.Helper()
	res, err := r.msg.CommitRound(r.Ctx, r.commitMsg(w, round))
	require.NoError(r.t, err)
	require.Equal(r.t, types.PseudoGradientCustodyID(r.jobID, round, w), res.CustodyId)
	claim, err := r.Market.OnCheckpointSubmitted(r.Ctx, r.leaseOf(w).Id, (round+1)*roundSteps)
	require.NoError(r.t, err)
	return claim
}

func (r *roundsEnv) globalMsg(w uint32, round uint64) *types.MsgCommitGlobal {
	r.t.Helper()
	root, size, pieceRoots := r.file(types.GlobalCustodyID(r.jobID, round+1))
	return &types.MsgCommitGlobal{
		Provider: r.workers[w].String(), JobId: r.jobID, Round: round, Entered: r.round(round).Entered,
		GlobalRoot: root, GlobalSize: size, PieceRoots: pieceRoots,
	}
}

func (r *roundsEnv) commitGlobal(w uint32, round uint64) {
	r.t.Helper()
	_, err := r.msg.CommitGlobal(r.Ctx, r.globalMsg(w, round))
	require.NoError(r.t, err)
}

// hold has the two holders claim the data pieces of a custody object (each claim
// proves the current period's challenge), which makes it held.
func (r *roundsEnv) hold(id string) {
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
	live, needed, err := r.ShardRegistry.CustodyHolders(r.Ctx, id)
	require.NoError(r.t, err)
	require.Equal(r.t, needed, live)
}

func (r *roundsEnv) holdRound(round uint64) {
	r.t.Helper()
	for _, w := range r.round(round).Entered {
		r.hold(types.PseudoGradientCustodyID(r.jobID, round, w))
	}
}

// untilDeadline runs blocks until the round's current deadline has been processed.
func (r *roundsEnv) untilDeadline(round uint64) {
	r.t.Helper()
	for d := r.round(round).Deadline; r.Ctx.BlockHeight() <= d; {
		r.nextBlock(blockTime)
	}
}

func (r *roundsEnv) withdrawable(w uint32) math.Int { return r.leaseOf(w).Withdrawable.Amount }

// snapshot adds x/shardregistry (where round files are registered) to what a rejected
// round message must leave alone.
func (r *roundsEnv) requireRejected(want error, call func() error) {
	r.t.Helper()
	keepers.RequireRejected(r.t, want, func() keepers.Snapshot {
		return r.Snapshot(r.t, append(append([]keepers.Part{r.MarketState(), r.StakingExtState(), r.ShardRegistryState(), r.Balances()},
			r.MarketDeadlines()...), r.ShardRegistryIndexes()...)...)
	}, call)
}

// A sync job's whole life with 3 workers: round 0 opens from the global the chain computes
// from the seed once every slot is leased; a slot that does not commit misses the round,
// which closes at its deadline with a quorum; the global opens round 1 at once; round 1
// closes as soon as all three commit; a global is final after its window once held, and
// only then are the entered workers paid exactly their 100 steps; the last round's final
// global completes the job.
func TestRoundsLifeOfASyncJob(t *testing.T) {
	r := newRoundsEnv(t)
	job := r.job(r.jobID)
	g, err := diloco.InitGlobal(exact.ReferenceConfig(), job.Spec.Sync.Diloco(), job.Seed)
	require.NoError(t, err)
	g0 := g.Root()
	r0 := r.round(0)
	require.Equal(t, types.ROUND_STATE_OPEN, r0.State)
	require.Equal(t, g0[:], r0.GlobalRoot, "round 0 starts from diloco.InitGlobal of the job's seed")
	require.Equal(t, uint64(len(g.Encode())), r0.GlobalSize)
	require.Equal(t, []uint32{0, 1, 2}, r0.Workers)
	require.Equal(t, []uint32{0, 0, 0}, job.MissedRounds)
	require.Len(t, typedEvents[*types.EventRoundOpened](r.env), 1)

	// Round 0: slots 0 and 1 commit, slot 2 misses; 2 of 3 is the quorum.
	require.Equal(t, coin(roundPay), r.commit(0, 0))
	require.Equal(t, coin(roundPay), r.commit(1, 0))
	require.Equal(t, types.ROUND_STATE_OPEN, r.round(0).State)
	r.untilDeadline(0)
	r0 = r.round(0)
	require.Equal(t, types.ROUND_STATE_AGGREGATING, r0.State)
	require.Equal(t, []uint32{0, 1}, r0.Entered)
	require.Equal(t, []uint32{2}, r0.Missed)
	require.Equal(t, []uint32{0, 0, 1}, r.job(r.jobID).MissedRounds)

	// The global needs every entered pseudo-gradient held first.
	r.requireRejected(types.ErrInvalidRoundCommit, func() error {
		_, err := r.msg.CommitGlobal(r.Ctx, r.globalMsg(0, 0))
		return err
	})
	r.holdRound(0)
	r.commitGlobal(0, 0)
	r0 = r.round(0)
	require.Equal(t, types.ROUND_STATE_CHALLENGE, r0.State)
	require.Equal(t, r.workers[0].String(), r0.Aggregator)
	require.Equal(t, r.leaseOf(0).Id, r0.AggregatorLeaseId)
	r1 := r.round(1)
	require.Equal(t, types.ROUND_STATE_OPEN, r1.State, "round 1 opens optimistically from the committed global")
	require.Equal(t, r0.NextGlobalRoot, r1.GlobalRoot)
	require.Equal(t, uint64(1), r.job(r.jobID).Round)

	// Round 1: all three commit, so it closes at once; slot 2's missed count resets.
	for w := uint32(0); w < syncWorkers; w++ {
		r.commit(w, 1)
	}
	require.Equal(t, types.ROUND_STATE_AGGREGATING, r.round(1).State)
	require.Equal(t, []uint32{0, 1, 2}, r.round(1).Entered)
	require.Equal(t, []uint32{0, 0, 0}, r.job(r.jobID).MissedRounds)

	// Nobody is paid before G_1 is final; then slots 0 and 1 get exactly 100 steps each.
	require.True(t, r.withdrawable(0).IsZero())
	r.hold(types.GlobalCustodyID(r.jobID, 1))
	r.untilDeadline(0)
	require.Equal(t, types.ROUND_STATE_FINAL, r.round(0).State)
	perRound := types.PayForSteps(math.NewInt(maxPrice), 2, testRate, roundSteps)
	require.Equal(t, int64(roundPay), perRound.Int64())
	require.Equal(t, perRound, r.withdrawable(0))
	require.Equal(t, perRound, r.withdrawable(1))
	require.True(t, r.withdrawable(2).IsZero(), "slot 2 did not train in round 0")
	final := typedEvents[*types.EventGlobalFinal](r.env)
	require.Len(t, final, 1)
	require.Equal(t, coin(2*roundPay), final[0].Paid)

	// Rounds 1 and 2 to the end: the last global completes the job.
	r.holdRound(1)
	r.commitGlobal(1, 1)
	for w := uint32(0); w < syncWorkers; w++ {
		r.commit(w, 2)
	}
	r.holdRound(2)
	r.commitGlobal(2, 2)
	_, err = r.Market.GetRound(r.Ctx, r.jobID, 3)
	require.ErrorIs(t, err, types.ErrRoundNotFound, "no round after the last")
	r.hold(types.GlobalCustodyID(r.jobID, 2))
	r.hold(types.GlobalCustodyID(r.jobID, 3))
	leases := r.activeLeasesOfJob(r.jobID)
	r.untilDeadline(2)
	for round := uint64(0); round < syncRounds; round++ {
		require.Equal(t, types.ROUND_STATE_FINAL, r.round(round).State)
	}
	done := r.job(r.jobID)
	require.Equal(t, types.JOB_STATE_COMPLETED, done.State)
	require.Contains(t, done.CloseReason, types.GlobalCustodyID(r.jobID, 3))
	for _, l := range leases {
		l = r.lease(l.Id)
		require.Equal(t, types.LEASE_CLOSE_REASON_COMPLETED, l.CloseReason)
		rounds := int64(3)
		if l.Worker == 2 {
			rounds = 2
		}
		require.Equal(t, perRound.MulRaw(rounds), l.Withdrawable.Amount, "worker %d", l.Worker)
		require.True(t, l.Pending.IsZero())
	}
}

// A slot that misses max_missed_rounds rounds in a row loses its lease for
// non-performance (a small slash), its slot is auctioned, and the replacement trains
// from the next round that opens.
func TestRoundsMissedSlotIsReplacedAtTheNextRound(t *testing.T) {
	r := newRoundsEnv(t)
	lost := r.leaseOf(2)
	bondBefore := r.provider(r.workers[2]).Bond
	r.commit(0, 0)
	r.commit(1, 0)
	r.untilDeadline(0)
	r.holdRound(0)
	r.commitGlobal(1, 0)
	require.Equal(t, []uint32{0, 1, 2}, r.round(1).Workers)
	r.commit(0, 1)
	r.commit(1, 1)
	r.untilDeadline(1)
	closed := r.lease(lost.Id)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, closed.CloseReason)
	require.True(t, r.provider(r.workers[2]).Bond.IsLT(bondBefore), "slashed for non-performance")
	job := r.job(r.jobID)
	require.Equal(t, types.JOB_STATE_OPEN, job.State, "slot 2 is re-auctioned")
	require.Equal(t, []uint32{0, 0, 0}, job.MissedRounds)
	require.Equal(t, []uint32{0, 1}, r.round(1).Entered)

	joiner := r.registerProvider("joiner")
	r.bid(joiner, r.jobID, maxPrice)
	r.closeAuction(r.jobID)
	r.workers[2] = joiner
	require.Equal(t, types.JOB_STATE_LEASED, r.job(r.jobID).State)
	r.holdRound(1)
	r.commitGlobal(0, 1)
	require.Equal(t, []uint32{0, 1, 2}, r.round(2).Workers, "the replacement joins round 2")
	claim := r.commit(2, 2)
	require.Equal(t, coin(roundPay), claim, "the joiner claims its round's 100 steps only")
}

// Short of the quorum at the deadline the round stays open for another window; the
// silent slots count a miss each time.
func TestRoundsQuorumNotMetExtendsTheRound(t *testing.T) {
	r := newRoundsEnv(t)
	r.commit(0, 0)
	first := r.round(0).Deadline
	r.untilDeadline(0)
	r0 := r.round(0)
	require.Equal(t, types.ROUND_STATE_OPEN, r0.State)
	require.Greater(t, r0.Deadline, first)
	require.Equal(t, []uint32{0, 1, 1}, r.job(r.jobID).MissedRounds)
	ext := typedEvents[*types.EventRoundDeadlineExtended](r.env)
	require.Len(t, ext, 1)
	require.Equal(t, uint32(1), ext[0].Committed)
	require.Equal(t, uint32(2), ext[0].Quorum)
	r.commit(1, 0)
	r.untilDeadline(0)
	require.Equal(t, types.ROUND_STATE_AGGREGATING, r.round(0).State)
}

// x/verify excludes a convicted worker: a global already committed over it is voided
// with the round opened on it, the round aggregates again without it, and the excluded
// worker's claim goes back to the job while the others are paid.
func TestRoundsExcludeWorkerReaggregates(t *testing.T) {
	r := newRoundsEnv(t)
	for w := uint32(0); w < syncWorkers; w++ {
		r.commit(w, 0)
	}
	r.holdRound(0)
	r.commitGlobal(0, 0)
	r.commit(0, 1)
	escrow := r.job(r.jobID).Escrow

	require.NoError(t, r.Market.ExcludeRoundWorker(r.Ctx, r.jobID, 0, 1, "pseudo-gradient proven wrong"))
	r0 := r.round(0)
	require.Equal(t, types.ROUND_STATE_AGGREGATING, r0.State)
	require.Equal(t, []uint32{0, 2}, r0.Entered)
	require.Empty(t, r0.NextGlobalRoot)
	_, err := r.Market.GetRound(r.Ctx, r.jobID, 1)
	require.ErrorIs(t, err, types.ErrRoundNotFound, "the round opened on the voided global is gone")
	_, err = r.Market.GetRoundCommit(r.Ctx, r.jobID, 1, 0)
	require.ErrorIs(t, err, types.ErrRoundCommitNotFound)
	require.Equal(t, uint64(0), r.job(r.jobID).Round)
	require.Equal(t, escrow.AddAmount(math.NewInt(roundPay)), r.job(r.jobID).Escrow, "the voided round-1 claim is back in the escrow")
	c, err := r.Market.GetRoundCommit(r.Ctx, r.jobID, 0, 1)
	require.NoError(t, err)
	require.True(t, c.Excluded)
	require.Len(t, typedEvents[*types.EventGlobalRejected](r.env), 1)
	require.Len(t, typedEvents[*types.EventRoundWorkerExcluded](r.env), 1)

	r.nextBlock(blockTime) // x/shardregistry releases the voided objects
	r.commitGlobal(2, 0)
	// Round 1 is redone from the new global, and its steps are claimed again.
	for w := uint32(0); w < syncWorkers; w++ {
		require.Equal(t, coin(roundPay), r.commit(w, 1))
	}
	r.hold(types.GlobalCustodyID(r.jobID, 1))
	r.untilDeadline(0)
	require.Equal(t, types.ROUND_STATE_FINAL, r.round(0).State)
	require.Equal(t, int64(roundPay), r.withdrawable(0).Int64())
	require.True(t, r.withdrawable(1).IsZero(), "the excluded worker is not paid")
	require.Equal(t, int64(roundPay), r.withdrawable(2).Int64())
}

// A global proven wrong is voided and its aggregator returned; a round without a global
// in its window cannot be rejected.
func TestRoundsRejectGlobal(t *testing.T) {
	r := newRoundsEnv(t)
	for w := uint32(0); w < syncWorkers; w++ {
		r.commit(w, 0)
	}
	r.holdRound(0)
	r.commitGlobal(2, 0)
	aggregator, err := r.Market.RejectGlobal(r.Ctx, r.jobID, 0)
	require.NoError(t, err)
	require.Equal(t, r.workers[2].String(), aggregator)
	require.Equal(t, types.ROUND_STATE_AGGREGATING, r.round(0).State)
	require.Equal(t, []uint32{0, 1, 2}, r.round(0).Entered, "the workers stay entered")
	_, err = r.Market.RejectGlobal(r.Ctx, r.jobID, 0)
	require.ErrorIs(t, err, types.ErrWrongRound)
}

// Every refused round message names what is wrong and changes nothing.
func TestRoundsRejectedMessagesChangeNothing(t *testing.T) {
	r := newRoundsEnv(t)
	stranger := r.registerProvider("stranger")
	plain, plainLease := r.leaseJob(stranger, maxPrice)
	_ = plain

	msg := func(change func(m *types.MsgCommitRound)) func() error {
		return func() error {
			m := r.commitMsg(0, 0)
			change(m)
			_, err := r.msg.CommitRound(r.Ctx, m)
			return err
		}
	}
	r.requireRejected(types.ErrNotSyncJob, msg(func(m *types.MsgCommitRound) { m.Provider, m.LeaseId = stranger.String(), plainLease.Id }))
	r.requireRejected(types.ErrWrongRound, msg(func(m *types.MsgCommitRound) { m.Round = 1 }))
	r.requireRejected(types.ErrNotLeaseProvider, msg(func(m *types.MsgCommitRound) { m.Provider = r.workers[1].String() }))
	r.requireRejected(types.ErrInvalidRoundCommit, msg(func(m *types.MsgCommitRound) { m.EndRoot = m.EndRoot[:31] }))
	r.requireRejected(types.ErrInvalidRoundCommit, msg(func(m *types.MsgCommitRound) { m.PseudoGradientRoot = hash32("other") }))
	r.requireRejected(types.ErrInvalidRoundCommit, msg(func(m *types.MsgCommitRound) { m.PieceRoots = m.PieceRoots[:2] }))
	r.requireRejected(types.ErrInvalidRoundCommit, msg(func(m *types.MsgCommitRound) { m.PseudoGradientSize = 0 }))
	r.requireRejected(types.ErrInvalidRoundCommit, msg(func(m *types.MsgCommitRound) { m.GlobalRoot = nil }))
	// Trained from another global (one voided while the worker trained): refused.
	r.requireRejected(types.ErrStaleGlobal, msg(func(m *types.MsgCommitRound) { m.GlobalRoot = hash32("voided global") }))
	r.requireRejected(types.ErrRoundNotAggregating, func() error {
		_, err := r.msg.CommitGlobal(r.Ctx, r.globalMsg(0, 0))
		return err
	})
	r.commit(0, 0)
	r.requireRejected(types.ErrInvalidRoundCommit, msg(func(*types.MsgCommitRound) {}))
	_, err := r.Market.OnCheckpointSubmitted(r.Ctx, r.leaseOf(0).Id, roundSteps)
	require.ErrorIs(t, err, types.ErrInvalidRoundCommit, "a round is claimed once")
	_, err = r.Market.OnCheckpointSubmitted(r.Ctx, r.leaseOf(1).Id, roundSteps)
	require.ErrorIs(t, err, types.ErrRoundCommitNotFound, "a checkpoint needs its round's commit first")
	r.commit(1, 0)
	r.commit(2, 0)
	require.Equal(t, types.ROUND_STATE_AGGREGATING, r.round(0).State)
	r.requireRejected(types.ErrRoundNotOpen, func() error {
		_, err := r.msg.CommitRound(r.Ctx, r.commitMsg(0, 0))
		return err
	})
	r.holdRound(0)
	global := func(change func(m *types.MsgCommitGlobal)) func() error {
		return func() error {
			m := r.globalMsg(0, 0)
			change(m)
			_, err := r.msg.CommitGlobal(r.Ctx, m)
			return err
		}
	}
	r.requireRejected(types.ErrEnteredMismatch, global(func(m *types.MsgCommitGlobal) { m.Entered = []uint32{0, 1} }))
	r.requireRejected(types.ErrEnteredMismatch, global(func(m *types.MsgCommitGlobal) { m.Entered = []uint32{2, 1, 0} }))
	r.requireRejected(types.ErrNotLeaseProvider, global(func(m *types.MsgCommitGlobal) { m.Provider = stranger.String() }))
	r.requireRejected(types.ErrWrongRound, global(func(m *types.MsgCommitGlobal) { m.Round = 5 }))
	r.requireRejected(types.ErrNotSyncJob, global(func(m *types.MsgCommitGlobal) { m.JobId = plain }))
	r.requireRejected(types.ErrInvalidRoundCommit, global(func(m *types.MsgCommitGlobal) { m.GlobalRoot = hash32("forged") }))
	r.requireRejected(types.ErrInvalidRoundCommit, global(func(m *types.MsgCommitGlobal) { m.GlobalSize = 0 }))
	r.commitGlobal(0, 0)
	r.requireRejected(types.ErrRoundNotAggregating, global(func(*types.MsgCommitGlobal) {}))
}

// The round collections go through genesis and come back with their deadline index;
// both chains then run on identically.
func TestRoundsGenesisRoundTrip(t *testing.T) {
	r := newRoundsEnv(t)
	for w := uint32(0); w < syncWorkers; w++ {
		r.commit(w, 0)
	}
	r.holdRound(0)
	r.commitGlobal(0, 0)
	r.commit(1, 1)
	exported, err := r.Market.ExportGenesis(r.Ctx)
	require.NoError(t, err)
	require.NoError(t, exported.Validate())
	require.Len(t, exported.Rounds, 2)
	require.Len(t, exported.RoundCommits, 4)

	f := keepers.New(t)
	f.Ctx = f.Ctx.WithBlockHeader(r.Ctx.BlockHeader()).WithHeaderHash(r.Ctx.HeaderHash())
	require.NoError(t, f.Market.InitGenesis(f.Ctx, exported))
	again, err := f.Market.ExportGenesis(f.Ctx)
	require.NoError(t, err)
	require.Equal(t, exported.Rounds, again.Rounds)
	require.Equal(t, exported.RoundCommits, again.RoundCommits)
	imported := &env{Fixture: f, t: t}
	require.Equal(t, r.dumpIndexes(), imported.dumpIndexes(), "InitGenesis rebuilds the round deadlines")
}

// The YAML `sync:` section becomes the Q30 integers pkg/diloco computes; every wrong
// field is named.
func TestSyncSpecFromYAML(t *testing.T) {
	base := `name: together
gpu: {models: [H100-SXM5-80GB], min_vram_gib: 80, per_worker: 1}
workers: 3
workload: {kind: reference}
total_steps: 64
checkpoint_every: 8
max_price_per_gpu_hour: 2000000udepin
max_duration: 24h
bidding_window_blocks: 10
custody: {data_pieces: 2, parity_pieces: 1, retain_checkpoints: 24h}
`
	s, err := types.ParseJobSpecYAML([]byte(base + "sync: {every: 8, outer_lr: 0.7, outer_momentum: 0.9, top_k: 0, commit_blocks: 30}\n"))
	require.NoError(t, err)
	want, err := diloco.SyncSpec{Every: 8, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	require.NoError(t, err)
	require.Equal(t, want, s.Sync.Diloco())
	require.Equal(t, uint64(30), s.Sync.CommitBlocks)
	require.Equal(t, uint64(8), s.Rounds())

	for _, c := range []struct{ yaml, want string }{
		{base + "sync: {outer_lr: 0.7, outer_momentum: 0.9}\n", "sync.every: required"},
		{base + "sync: {every: 8, outer_lr: 1.5, outer_momentum: 0.9}\n", "sync.outer_lr: must be in (0, 1]"},
		{base + "sync: {every: 8, outer_lr: 0.7, outer_momentum: 0.9, top_k: 5000}\n", "sync.top_k"},
		{base + "sync: {every: 16, outer_lr: 0.7, outer_momentum: 0.9}\n", "checkpoint_every: a sync job checkpoints once per round"},
		{strings.Replace(base, "total_steps: 64", "total_steps: 68", 1) + "sync: {every: 8, outer_lr: 0.7, outer_momentum: 0.9}\n", "total_steps: a sync job trains whole rounds"},
		{strings.Replace(base, "custody: {data_pieces: 2, parity_pieces: 1, retain_checkpoints: 24h}\n", "", 1) + "sync: {every: 8, outer_lr: 0.7, outer_momentum: 0.9}\n", "sync: needs a custody section"},
	} {
		_, err := types.ParseJobSpecYAML([]byte(c.yaml))
		require.ErrorContains(t, err, c.want)
	}
	s.Workers = types.DefaultParams().MaxSyncWorkers + 1
	require.ErrorContains(t, s.ValidateWithParams(types.DefaultParams()), "max_sync_workers")
}

// RoundsInvariant catches a round whose entered worker never committed, and a deadline
// entry that points at no round.
func TestRoundsInvariantDetectsCorruption(t *testing.T) {
	r := newRoundsEnv(t)
	r.commit(0, 0)
	inv := keeper.RoundsInvariant(r.Market)
	_, broken := inv(r.Ctx)
	require.False(t, broken)

	r0 := r.round(0)
	good := r0
	r0.Entered = []uint32{1}
	require.NoError(t, r.Market.Rounds.Set(r.Ctx, collections.Join(r.jobID, uint64(0)), r0))
	msg, broken := inv(r.Ctx)
	require.True(t, broken)
	require.Contains(t, msg, "entered without a live commit")
	require.NoError(t, r.Market.Rounds.Set(r.Ctx, collections.Join(r.jobID, uint64(0)), good))

	stray := collections.Join3(int64(999), r.jobID, uint64(7))
	require.NoError(t, r.Market.RoundDeadlines.Set(r.Ctx, stray))
	msg, broken = inv(r.Ctx)
	require.True(t, broken)
	require.Contains(t, msg, "matches no round")
	require.NoError(t, r.Market.RoundDeadlines.Remove(r.Ctx, stray))
}

// Migrate4to5 gives a v4 chain's params the round defaults and keeps the rest.
func TestMigrate4to5RoundParams(t *testing.T) {
	e := newEnv(t)
	p := e.params()
	p.RoundQuorum = math.LegacyDec{}
	p.MaxMissedRounds, p.DefaultRoundCommitBlocks, p.RoundAggregateBlocks, p.RoundChallengeBlocks, p.MaxSyncWorkers = 0, 0, 0, 0, 0
	p.MaxWorkers = 17
	require.NoError(t, e.Market.Params.Set(e.Ctx, p))
	require.NoError(t, keeper.NewMigrator(e.Market).Migrate4to5(e.Ctx))
	got, d := e.params(), types.DefaultParams()
	require.NoError(t, got.Validate())
	require.True(t, d.RoundQuorum.Equal(got.RoundQuorum))
	require.Equal(t, d.MaxMissedRounds, got.MaxMissedRounds)
	require.Equal(t, d.DefaultRoundCommitBlocks, got.DefaultRoundCommitBlocks)
	require.Equal(t, d.RoundAggregateBlocks, got.RoundAggregateBlocks)
	require.Equal(t, d.RoundChallengeBlocks, got.RoundChallengeBlocks)
	require.Equal(t, d.MaxSyncWorkers, got.MaxSyncWorkers)
	require.Equal(t, uint32(17), got.MaxWorkers, "a param governance chose is kept")
}

// A slot that was vacant when a round opened sits that round out: its new lease is
// refused in it and trains from the next one.
func TestRoundsJoinerWaitsForTheNextRound(t *testing.T) {
	r := newRoundsEnv(t)
	r.commit(0, 0)
	r.commit(1, 0)
	r.untilDeadline(0)
	r.holdRound(0)
	r.commitGlobal(0, 0)
	r.commit(0, 1)
	r.commit(1, 1)
	r.untilDeadline(1) // slot 2's second miss: its lease is closed, the slot re-auctioned
	r.holdRound(1)
	r.commitGlobal(0, 1)
	require.Equal(t, []uint32{0, 1}, r.round(2).Workers, "round 2 opened while slot 2 was vacant")

	joiner := r.registerProvider("joiner")
	r.bid(joiner, r.jobID, maxPrice)
	r.closeAuction(r.jobID)
	r.workers[2] = joiner
	r.requireRejected(types.ErrNotRoundWorker, func() error {
		_, err := r.msg.CommitRound(r.Ctx, r.commitMsg(2, 2))
		return err
	})
}
