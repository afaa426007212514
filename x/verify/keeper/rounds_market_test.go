package keeper_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// custodyRoots cuts a file into custody pieces (2 data + 1 parity) and returns their roots.
func custodyRoots(t *testing.T, file []byte) (custody.Layout, [][]byte) {
	l, err := custody.NewLayout(uint64(len(file)), 2, 1)
	require.NoError(t, err)
	outs := make([]io.Writer, l.Pieces())
	for i := range outs {
		outs[i] = io.Discard
	}
	roots, err := custody.Encode(bytes.NewReader(file), l, outs, 1)
	require.NoError(t, err)
	return l, merkle.HashesToBytes(roots)
}

// The whole path on the real x/market rounds, as the workers' sidecars drive it: a
// two-worker sync job leased, round 0 opened by the chain at diloco.InitGlobal's root,
// each worker commits its round (MsgCommitRound with its pseudo-gradient's custody pieces)
// and submits the round's checkpoint from h_0 to its end_root; worker 1's pseudo-gradient
// is fabricated (one element). An honest worker's chunk cannot be convicted; worker 1's is:
// x/market marks its commit excluded, its lease is closed for fraud, its provider
// tombstoned, the prover paid.
func TestRoundFaultOnRealRounds(t *testing.T) {
	e := newEnv(t)
	spec := referenceSpec(4, 2)
	spec.Workers = 2
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}
	sync, err := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	require.NoError(t, err)
	spec.Sync = &markettypes.SyncSpec{Every: 2, OuterLrQ30: uint64(sync.OuterLR), OuterMomentumQ30: uint64(sync.OuterMomentum)}
	res, err := e.mmsg.SubmitJob(e.Ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
	require.NoError(t, err)
	var provs [2]sdk.AccAddress
	for i := range provs {
		provs[i] = e.registerProvider(fmt.Sprintf("worker-%d", i), 2)
		_, err = e.mmsg.PlaceBid(e.Ctx, &markettypes.MsgPlaceBid{Provider: provs[i].String(), JobId: res.JobId, PricePerGpuHour: coin(bidPrice), StepsPerHour: testRate})
		require.NoError(t, err)
	}
	for deadline := e.getJob(res.JobId).BiddingDeadline; e.Ctx.BlockHeight() <= deadline; {
		e.nextBlock()
	}
	var leases [2]markettypes.Lease
	for _, l := range e.ActiveLeasesOfJob(t, res.JobId) {
		leases[l.Worker] = l
	}
	job := e.getJob(res.JobId)
	round, err := e.Market.GetRound(e.Ctx, job.Id, 0)
	require.NoError(t, err)
	require.Equal(t, markettypes.ROUND_STATE_OPEN, round.State)
	cfg, err := types.JobConfig(job)
	require.NoError(t, err)
	g, err := diloco.InitGlobal(cfg, sync, job.Seed)
	require.NoError(t, err)
	gRoot := g.Root()
	require.Equal(t, gRoot[:], round.GlobalRoot, "round 0 starts from diloco.InitGlobal")
	l := diloco.NewLayout(cfg)

	files := map[string][]byte{"g0": g.Encode()}
	for w := range uint32(2) {
		start := g.WorkerStart(nil)
		hashes := []merkle.Hash{start.Root()}
		data, err := types.WorkerTrainingData(job, w, 0)
		require.NoError(t, err)
		end, err := exact.Run(start, data.Bytes, job.Seed, 2, func(_ uint64, info exact.StepInfo) error {
			hashes = append(hashes, info.Root)
			return nil
		})
		require.NoError(t, err)
		pg, err := diloco.NewPseudoGradient(g, w, end)
		require.NoError(t, err)
		if w == 1 {
			pg.Delta[3]++ // fabricated
		}
		pgFile, endFile := pg.EncodeDense(), end.Encode()
		files[fmt.Sprintf("pg/%d", w)], files[fmt.Sprintf("end/%d", w)] = pgFile, endFile
		pgRoot, endRoot, startRoot := merkle.RootOfBytes(pgFile, diloco.ChunkSize), end.Root(), start.Root()
		_, pieces := custodyRoots(t, pgFile)
		_, err = e.deliver(func(ctx sdk.Context) error {
			_, err := e.mmsg.CommitRound(ctx, &markettypes.MsgCommitRound{Provider: provs[w].String(), LeaseId: leases[w].Id, Round: 0,
				StartRoot: startRoot[:], EndRoot: endRoot[:], PseudoGradientRoot: pgRoot[:], PseudoGradientSize: uint64(len(pgFile)), PieceRoots: pieces, GlobalRoot: gRoot[:]})
			return err
		})
		require.NoError(t, err)
		ck := checkpointMsg(newParty(provs[w], trace.New(0, hashes), nil), leases[w].Id, 0)
		sl, stateRoots := custodyRoots(t, endFile)
		ck.StateSize, ck.PieceRoots = sl.StateSize, stateRoots
		_, err = e.deliver(func(ctx sdk.Context) error { _, err := e.msg.SubmitCheckpoint(ctx, ck); return err })
		require.NoError(t, err, "worker %d's round-0 checkpoint", w)
	}
	h0, err := types.InitialStateHash(job)
	require.NoError(t, err)
	require.Equal(t, h0, e.checkpoint(leases[1].Id, 0).StartHash)

	open := func(name string, i uint64) []types.FileChunk {
		b := files[name]
		proof, err := merkle.InclusionProof(merkle.LeafHashesOfBytes(b, diloco.ChunkSize), i)
		require.NoError(t, err)
		return []types.FileChunk{{Index: i, Data: b[i*diloco.ChunkSize : min(uint64(len(b)), (i+1)*diloco.ChunkSize)], Proof: merkle.HashesToBytes(proof)}}
	}
	endChunk, err := l.StateWeightsChunk(0)
	require.NoError(t, err)
	prover := e.account("prover")
	proof := func(w uint32) *types.MsgProveRoundFault {
		return &types.MsgProveRoundFault{Prover: prover.String(), JobId: job.Id, Round: 0, Worker: w, Kind: types.ROUND_FAULT_PSEUDO_GRADIENT, Chunk: 0,
			Global: open("g0", diloco.WeightsChunk(0)), Source: open(fmt.Sprintf("end/%d", w), endChunk), Claimed: open(fmt.Sprintf("pg/%d", w), diloco.WeightsChunk(0))}
	}
	err = e.requireRejected(types.ErrRoundConsistent, func(ctx sdk.Context) error { _, err := e.msg.ProveRoundFault(ctx, proof(0)); return err })
	require.ErrorContains(t, err, "is G_0 − its end state")

	// The builder a sidecar uses finds nothing in worker 0's file and worker 1's fabricated chunk.
	none, err := dispute.PseudoGradientFault(prover.String(), job.Id, 0, 0, l, files["g0"], files["end/0"], files["pg/0"])
	require.NoError(t, err)
	require.Nil(t, none)
	built, err := dispute.PseudoGradientFault(prover.String(), job.Id, 0, 1, l, files["g0"], files["end/1"], files["pg/1"])
	require.NoError(t, err)
	require.Equal(t, proof(1), built)

	bond, balance := e.provider(provs[1]).Bond.Amount, e.Balance(prover)
	_, err = e.deliver(func(ctx sdk.Context) error { _, err := e.msg.ProveRoundFault(ctx, built); return err })
	require.NoError(t, err)
	commit, err := e.Market.RoundCommits.Get(e.Ctx, collections.Join3(job.Id, uint64(0), uint32(1)))
	require.NoError(t, err)
	require.True(t, commit.Excluded)
	require.Contains(t, commit.ExcludedReason, "pseudo-gradient chunk 0")
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_FRAUD, e.getLease(leases[1].Id).CloseReason)
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_TOMBSTONED, e.provider(provs[1]).Status)
	slashed := e.verifyParams().FraudSlashFraction.MulInt(bond).TruncateInt()
	require.Equal(t, balance.Add(e.verifyParams().WhistleblowerShare.MulInt(slashed).TruncateInt()), e.Balance(prover))
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, e.checkpoint(leases[1].Id, 0).Status, "the fabricating worker's pending checkpoint goes with its lease")
	e.requireInvariants()
}
