package keeper

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// roundFault is what a round fault convicts — a checked MsgProveRoundFault, or a worker
// that withheld a file query's answer: the part of round `round` of job jobID it accuses
// (kind, chunk; worker unless an aggregation), and a lease (its provider is slashed
// through punishFraud) at the height its wrong commitment was made.
type roundFault struct {
	jobID    uint64
	round    uint64
	worker   uint32
	kind     types.RoundFault
	chunk    uint64
	leaseID  uint64
	provider string
	height   int64
	reason   string
}

// proveRoundFault checks a one-chunk fraud proof about a training round
// (MsgProveRoundFault) and convicts the commitment's author when it holds: the accused
// chunk and every chunk it depends on are opened against the roots x/market holds (the
// round's global roots, the worker's start, end and pseudo-gradient roots), the chunk is
// recomputed with pkg/diloco's chunk functions and compared. Gas is charged per byte and
// per hash before anything is hashed. A proof that proves nothing — a bad opening, or a
// chunk that is right — fails and changes nothing.
//
// A convicted worker is excluded from the round (x/market re-aggregates without it) and a
// convicted aggregation is rejected (x/market voids G_{r+1} and the rounds built on it);
// then its lease is punished as any fraud: its pending checkpoints rejected, its pay
// refunded, its bond slashed, the prover rewarded, the provider tombstoned.
func (k Keeper) proveRoundFault(ctx sdk.Context, prover sdk.AccAddress, msg *types.MsgProveRoundFault) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	ctx.GasMeter().ConsumeGas(params.GasPerByte*roundProofBytes(msg), "round fault openings")
	job, err := k.marketKeeper.GetJob(ctx, msg.JobId)
	if err != nil {
		return err
	}
	cfg, err := types.JobConfig(job)
	if err != nil {
		return err
	}
	sync, err := types.JobSync(job)
	if err != nil {
		return err
	}
	round, err := k.marketKeeper.GetRound(ctx, msg.JobId, msg.Round)
	if err != nil {
		return err
	}
	l := diloco.NewLayout(cfg)
	fault := roundFault{jobID: msg.JobId, round: msg.Round, worker: msg.Worker, kind: msg.Kind, chunk: msg.Chunk}
	switch msg.Kind {
	case types.ROUND_FAULT_START, types.ROUND_FAULT_PSEUDO_GRADIENT:
		commit, err := k.marketKeeper.GetRoundCommit(ctx, msg.JobId, msg.Round, msg.Worker)
		if err != nil {
			return err
		}
		if commit.Excluded {
			return errorsmod.Wrapf(types.ErrInvalidRoundProof, "job %d round %d worker %d was already excluded (%s)", msg.JobId, msg.Round, msg.Worker, commit.ExcludedReason)
		}
		check := k.checkStartChunk
		if msg.Kind == types.ROUND_FAULT_PSEUDO_GRADIENT {
			check = k.checkPseudoGradientChunk
		}
		reason, err := check(ctx, params, l, sync, round, commit, msg)
		if err != nil {
			return err
		}
		fault.leaseID, fault.provider, fault.height, fault.reason = commit.LeaseId, commit.Provider, commit.CommittedHeight, reason
	case types.ROUND_FAULT_AGGREGATION:
		reason, err := k.checkAggregationChunk(ctx, params, l, sync, round, msg)
		if err != nil {
			return err
		}
		fault.leaseID, fault.provider, fault.height, fault.reason = round.AggregatorLeaseId, round.Aggregator, round.OpenedHeight, reason
	default:
		return errorsmod.Wrapf(types.ErrInvalidRoundProof, "kind: %s is not a round fault", msg.Kind)
	}
	if err := k.convictRoundFault(ctx, params, prover, msg.Prover, fault); err != nil {
		return err
	}
	if msg.Kind == types.ROUND_FAULT_AGGREGATION {
		return nil
	}
	// Often the proof of a chunk a file query revealed: the query's challenger gets its
	// deposit back now rather than at the query's deadline, and the round need not wait.
	return k.endCommitFileQueries(ctx, msg.JobId, msg.Round, msg.Worker, fmt.Sprintf("the worker was convicted: %s", fault.reason))
}

// convictRoundFault applies a proven round fault: x/market leaves the worker out of the
// round (or voids the aggregation), then the fraud path punishes the lease and rewards
// prover (proverText is its address as the event names it).
func (k Keeper) convictRoundFault(ctx sdk.Context, params types.Params, prover sdk.AccAddress, proverText string, f roundFault) error {
	convicted, err := k.addressCodec.StringToBytes(f.provider)
	if err != nil {
		return err
	}
	if sdk.AccAddress(convicted).Equals(prover) {
		return errorsmod.Wrapf(types.ErrSelfChallenge, "%s made the commitment of job %d round %d", f.provider, f.jobID, f.round)
	}
	fraud := fmt.Sprintf("job %d round %d: %s (proven by %s)", f.jobID, f.round, f.reason, proverText)
	if f.kind == types.ROUND_FAULT_AGGREGATION {
		if _, err := k.marketKeeper.RejectGlobal(ctx, f.jobID, f.round); err != nil {
			return err
		}
	} else if err := k.marketKeeper.ExcludeRoundWorker(ctx, f.jobID, f.round, f.worker, fraud); err != nil {
		return err
	}
	// The fraud path works on a checkpoint: the lease's, at the commitment's height. No
	// checkpoint has this index, so no audit is settled as this one's.
	cp := types.Checkpoint{LeaseId: f.leaseID, JobId: f.jobID, Index: math.MaxUint64, Provider: f.provider, SubmittedHeight: f.height}
	p, err := k.punishFraud(ctx, params, cp, prover, convicted, fraud, false)
	if err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventRoundFaultProven{
		JobId: f.jobID, Round: f.round, Worker: f.worker, Kind: f.kind, Chunk: f.chunk, LeaseId: f.leaseID,
		Convicted: f.provider, Prover: proverText, Reason: f.reason,
		Slashed: p.slashed, Reward: p.reward, OwnerCompensation: p.compensation, CommunityPool: p.communityPool,
	})
}

// roundProofBytes is the bytes a round fault proof carries: charged before anything is
// checked, so a large proof pays for its size whether it proves anything or not.
func roundProofBytes(msg *types.MsgProveRoundFault) uint64 {
	n := 0
	add := func(cs ...types.FileChunk) {
		for _, c := range cs {
			n += len(c.Data) + merkle.HashSize*len(c.Proof)
		}
	}
	add(msg.Claimed...)
	add(msg.Global...)
	add(msg.Source...)
	for _, c := range []*types.FileChunk{msg.Header, msg.ErrorIn, msg.ErrorOut, msg.PreviousHeader} {
		if c != nil {
			add(*c)
		}
	}
	for _, w := range msg.PseudoGradients {
		add(w.Chunks...)
	}
	return uint64(n)
}

// openChunks checks that cs are exactly the chunks want (in order) of the file of size
// chunks whose root is root, and returns their bytes. field names the opening in errors.
func openChunks(ctx sdk.Context, params types.Params, field string, root []byte, size uint64, want []uint64, cs []types.FileChunk) ([][]byte, error) {
	rootHash, err := merkle.HashFromBytes(root)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: the committed root is not a hash", field)
	}
	if len(cs) != len(want) {
		return nil, errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: want chunks %v, got %d chunks", field, want, len(cs))
	}
	out := make([][]byte, len(cs))
	for i, c := range cs {
		if c.Index != want[i] {
			return nil, errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: opening %d is chunk %d, want chunk %d", field, i, c.Index, want[i])
		}
		if len(c.Data) > diloco.ChunkSize {
			return nil, errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: chunk %d has %d bytes, a chunk at most %d", field, c.Index, len(c.Data), diloco.ChunkSize)
		}
		f := fmt.Sprintf("%s chunk %d", field, c.Index)
		if err := verifyInclusion(ctx, params, f, rootHash, c.Index, size, merkle.LeafHash(c.Data), c.Proof); err != nil {
			return nil, errorsmod.Wrap(types.ErrInvalidRoundProof, err.Error())
		}
		out[i] = c.Data
	}
	return out, nil
}

// openChunk is openChunks of one chunk, from an optional field.
func openChunk(ctx sdk.Context, params types.Params, field string, root []byte, size, want uint64, c *types.FileChunk) ([]byte, error) {
	if c == nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: missing (chunk %d)", field, want)
	}
	cs, err := openChunks(ctx, params, field, root, size, []uint64{want}, []types.FileChunk{*c})
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// refuseExtra rejects openings a kind does not read, so every proof has one form.
func refuseExtra(kind types.RoundFault, fields map[string]bool) error {
	for name, present := range fields {
		if present {
			return errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: a %s proof has no %s", name, kind, name)
		}
	}
	return nil
}

// sectionChunk checks a section chunk index against the layout.
func sectionChunk(l diloco.Layout, chunk uint64) (int, error) {
	if chunk >= uint64(l.Chunks) {
		return 0, errorsmod.Wrapf(types.ErrInvalidRoundProof, "chunk: section chunk %d out of range (%d chunks)", chunk, l.Chunks)
	}
	return int(chunk), nil
}

// previousEntered returns the worker's commit of the last round before `round` whose
// aggregation it entered under lease leaseID: its end state is the worker's carry (Adam
// moments) and its pseudo-gradient's error_out the error buffer it starts from. ok is
// false for a worker without one (a joiner, or round 0): zero moments and error buffer.
// The walk stops at the slot's first entered round under another lease, so it is bounded
// by the rounds a lease may miss before it is closed.
func (k Keeper) previousEntered(ctx sdk.Context, jobID, round uint64, worker uint32, leaseID uint64) (markettypes.RoundCommit, bool, error) {
	for r := round; r > 0; {
		r--
		rd, err := k.marketKeeper.GetRound(ctx, jobID, r)
		if err != nil {
			return markettypes.RoundCommit{}, false, err
		}
		if !slices.Contains(rd.Entered, worker) {
			continue
		}
		c, err := k.marketKeeper.GetRoundCommit(ctx, jobID, r, worker)
		if err != nil {
			return markettypes.RoundCommit{}, false, err
		}
		return c, c.LeaseId == leaseID, nil
	}
	return markettypes.RoundCommit{}, false, nil
}

// checkStartChunk: chunk msg.Chunk of the worker's start state against its source.
func (k Keeper) checkStartChunk(ctx sdk.Context, params types.Params, l diloco.Layout, sync diloco.Sync, round markettypes.Round, commit markettypes.RoundCommit, msg *types.MsgProveRoundFault) (string, error) {
	if err := refuseExtra(msg.Kind, map[string]bool{"header": msg.Header != nil, "error_in": msg.ErrorIn != nil, "error_out": msg.ErrorOut != nil,
		"previous_header": msg.PreviousHeader != nil, "pseudo_gradients": len(msg.PseudoGradients) > 0}); err != nil {
		return "", err
	}
	c := msg.Chunk
	src, section, err := l.StartSourceOf(c)
	if err != nil {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "chunk: %v", err)
	}
	states := l.StateChunks()
	claimed, err := openChunks(ctx, params, "claimed (start state)", commit.StartRoot, states, []uint64{c}, msg.Claimed)
	if err != nil {
		return "", err
	}
	var source []byte
	what := "the round's fixed header"
	switch src {
	case diloco.StartWeights:
		if len(msg.Source) > 0 {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "source: state chunk %d is a weights chunk, opened from global", c)
		}
		g, err := openChunks(ctx, params, "global", round.GlobalRoot, l.GlobalFileChunks(), []uint64{diloco.WeightsChunk(section)}, msg.Global)
		if err != nil {
			return "", err
		}
		source, what = g[0], fmt.Sprintf("G_%d's weights chunk %d", msg.Round, section)
	case diloco.StartMoments:
		if len(msg.Global) > 0 {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "global: state chunk %d is a moments chunk, opened from source", c)
		}
		prev, ok, err := k.previousEntered(ctx, msg.JobId, msg.Round, msg.Worker, commit.LeaseId)
		if err != nil {
			return "", err
		}
		what = "zero moments (the worker's first round)"
		if ok {
			s, err := openChunks(ctx, params, "source (carry state)", prev.EndRoot, states, []uint64{c}, msg.Source)
			if err != nil {
				return "", err
			}
			source, what = s[0], fmt.Sprintf("chunk %d of its round-%d end state", c, prev.Round)
		} else if len(msg.Source) > 0 {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "source: worker %d has no earlier entered round under lease %d: its moments start at zero", msg.Worker, commit.LeaseId)
		}
	default:
		if len(msg.Global) > 0 || len(msg.Source) > 0 {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "global, source: state chunk %d is a header chunk, which has no source", c)
		}
	}
	ctx.GasMeter().ConsumeGas(params.GasPerByte*diloco.ChunkSize, "start chunk")
	want, err := l.StartChunk(sync, msg.Round, c, source)
	if err != nil {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "%v", err)
	}
	if bytes.Equal(want, claimed[0]) {
		return "", errorsmod.Wrapf(types.ErrRoundConsistent, "start state chunk %d of worker %d is %s", c, msg.Worker, what)
	}
	return fmt.Sprintf("worker %d's start state chunk %d is not %s", msg.Worker, c, what), nil
}

// checkPseudoGradientChunk: section chunk msg.Chunk of the worker's pseudo-gradient (and
// with top_k its error feedback) against G_r's and its end state's weights.
func (k Keeper) checkPseudoGradientChunk(ctx sdk.Context, params types.Params, l diloco.Layout, sync diloco.Sync, round markettypes.Round, commit markettypes.RoundCommit, msg *types.MsgProveRoundFault) (string, error) {
	if len(msg.PseudoGradients) > 0 {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "pseudo_gradients: a %s proof has none", msg.Kind)
	}
	sec, err := sectionChunk(l, msg.Chunk)
	if err != nil {
		return "", err
	}
	valid := l.Valid(sec)
	g, err := openChunks(ctx, params, "global", round.GlobalRoot, l.GlobalFileChunks(), []uint64{diloco.WeightsChunk(sec)}, msg.Global)
	if err != nil {
		return "", err
	}
	endChunk, err := l.StateWeightsChunk(sec)
	if err != nil {
		return "", errorsmod.Wrap(types.ErrInvalidRoundProof, err.Error())
	}
	end, err := openChunks(ctx, params, "source (end state)", commit.EndRoot, l.StateChunks(), []uint64{endChunk}, msg.Source)
	if err != nil {
		return "", err
	}
	ctx.GasMeter().ConsumeGas(params.GasPerByte*2*diloco.ChunkSize, "pseudo-gradient chunk")
	if sync.TopK == 0 {
		if err := refuseExtra(msg.Kind, map[string]bool{"header": msg.Header != nil, "error_in": msg.ErrorIn != nil,
			"error_out": msg.ErrorOut != nil, "previous_header": msg.PreviousHeader != nil}); err != nil {
			return "", err
		}
		claimed, err := openChunks(ctx, params, "claimed (pseudo-gradient)", commit.PseudoGradientRoot, l.DenseFileChunks(), []uint64{diloco.WeightsChunk(sec)}, msg.Claimed)
		if err != nil {
			return "", err
		}
		want, err := diloco.PseudoGradientChunk(g[0], end[0], valid)
		if err != nil {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "%v", err)
		}
		if bytes.Equal(want, claimed[0]) {
			return "", errorsmod.Wrapf(types.ErrRoundConsistent, "pseudo-gradient chunk %d of worker %d is G_%d − its end state", sec, msg.Worker, msg.Round)
		}
		return fmt.Sprintf("worker %d's pseudo-gradient chunk %d is not G_%d's weights minus its end state's", msg.Worker, sec, msg.Round), nil
	}
	return k.checkCompressedChunk(ctx, params, l, sync, commit, msg, sec, g[0], end[0])
}

// checkCompressedChunk is the top_k half of checkPseudoGradientChunk: the error buffer the
// worker started from must be the one its previous entered round left (or zero), and
// record k and error-buffer chunk k must be CompressChunk of Δ chunk k and that buffer.
func (k Keeper) checkCompressedChunk(ctx sdk.Context, params types.Params, l diloco.Layout, sync diloco.Sync, commit markettypes.RoundCommit, msg *types.MsgProveRoundFault, sec int, global, end []byte) (string, error) {
	topK := int(sync.TopK)
	files := l.CompressedFileChunks(topK)
	header, err := openChunk(ctx, params, "header", commit.PseudoGradientRoot, files, 0, msg.Header)
	if err != nil {
		return "", err
	}
	errIn, errOut, err := diloco.CompressedErrorRoots(header)
	if err != nil {
		// The worker committed a file whose header is not a compressed pseudo-gradient's.
		return fmt.Sprintf("worker %d's pseudo-gradient header is malformed: %v", msg.Worker, err), nil
	}
	prev, ok, err := k.previousEntered(ctx, msg.JobId, msg.Round, msg.Worker, commit.LeaseId)
	if err != nil {
		return "", err
	}
	wantIn := l.ZeroErrorBufferRoot()
	if ok {
		ph, err := openChunk(ctx, params, "previous_header", prev.PseudoGradientRoot, files, 0, msg.PreviousHeader)
		if err != nil {
			return "", err
		}
		if _, wantIn, err = diloco.CompressedErrorRoots(ph); err != nil {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "previous_header: round %d's header: %v (prove that round's fault)", prev.Round, err)
		}
	} else if msg.PreviousHeader != nil {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "previous_header: worker %d has no earlier entered round under lease %d", msg.Worker, commit.LeaseId)
	}
	if errIn != wantIn {
		return fmt.Sprintf("worker %d's pseudo-gradient starts from error buffer %s, not %s (the one its last entered round left, or zero)", msg.Worker, errIn, wantIn), nil
	}
	claimed, err := openChunks(ctx, params, "claimed (record)", commit.PseudoGradientRoot, files, diloco.RecordChunks(topK, sec), msg.Claimed)
	if err != nil {
		return "", err
	}
	record, err := diloco.RecordFromChunks(topK, sec, claimed)
	if err != nil {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "claimed: %v", err)
	}
	in, err := openChunk(ctx, params, "error_in", errIn[:], uint64(l.Chunks), uint64(sec), msg.ErrorIn)
	if err != nil {
		return "", err
	}
	out, err := openChunk(ctx, params, "error_out", errOut[:], uint64(l.Chunks), uint64(sec), msg.ErrorOut)
	if err != nil {
		return "", err
	}
	ctx.GasMeter().ConsumeGas(params.GasPerByte*2*diloco.ChunkSize, "compressed chunk")
	wantRecord, wantOut, err := diloco.CompressedChunk(global, end, in, topK, l.Valid(sec))
	if err != nil {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "%v", err)
	}
	switch {
	case !bytes.Equal(wantRecord, record):
		return fmt.Sprintf("worker %d's record %d is not the top-%d of its pseudo-gradient chunk plus error buffer", msg.Worker, sec, topK), nil
	case !bytes.Equal(wantOut, out):
		return fmt.Sprintf("worker %d's error buffer chunk %d is not what its record %d leaves", msg.Worker, sec, sec), nil
	}
	return "", errorsmod.Wrapf(types.ErrRoundConsistent, "record %d and error buffer chunk %d of worker %d are its compression", sec, sec, msg.Worker)
}

// checkAggregationChunk: section chunk msg.Chunk of the committed G_{r+1} (weights, or
// momentum) against G_r's chunks and every entered pseudo-gradient's chunk.
func (k Keeper) checkAggregationChunk(ctx sdk.Context, params types.Params, l diloco.Layout, sync diloco.Sync, round markettypes.Round, msg *types.MsgProveRoundFault) (string, error) {
	if err := refuseExtra(msg.Kind, map[string]bool{"source": len(msg.Source) > 0, "header": msg.Header != nil, "error_in": msg.ErrorIn != nil,
		"error_out": msg.ErrorOut != nil, "previous_header": msg.PreviousHeader != nil}); err != nil {
		return "", err
	}
	if msg.Worker != 0 {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "worker: an aggregation proof accuses the aggregator, not worker %d", msg.Worker)
	}
	if round.State != markettypes.ROUND_STATE_CHALLENGE || len(round.NextGlobalRoot) == 0 {
		// Before its challenge window there is nothing to prove wrong; after it, G_{r+1}
		// is final (a wrong aggregation must be proven within the window).
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "job %d round %d has no committed aggregation in its challenge window (state %s)", msg.JobId, msg.Round, round.State)
	}
	sec, err := sectionChunk(l, msg.Chunk)
	if err != nil {
		return "", err
	}
	valid := l.Valid(sec)
	g, err := openChunks(ctx, params, "global", round.GlobalRoot, l.GlobalFileChunks(), []uint64{diloco.WeightsChunk(sec), l.MomentumChunk(sec)}, msg.Global)
	if err != nil {
		return "", err
	}
	which, at := "weights", diloco.WeightsChunk(sec)
	if msg.Momentum {
		which, at = "momentum", l.MomentumChunk(sec)
	}
	claimed, err := openChunks(ctx, params, "claimed (next global)", round.NextGlobalRoot, l.GlobalFileChunks(), []uint64{at}, msg.Claimed)
	if err != nil {
		return "", err
	}
	if len(msg.PseudoGradients) != len(round.Entered) {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "pseudo_gradients: round %d entered workers %v, got %d", msg.Round, round.Entered, len(msg.PseudoGradients))
	}
	deltas := make([][]byte, len(round.Entered))
	for i, w := range round.Entered {
		pg := msg.PseudoGradients[i]
		if pg.Worker != w {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "pseudo_gradients[%d]: worker %d, the entered list says %d", i, pg.Worker, w)
		}
		commit, err := k.marketKeeper.GetRoundCommit(ctx, msg.JobId, msg.Round, w)
		if err != nil {
			return "", err
		}
		field := fmt.Sprintf("pseudo_gradients[%d] (worker %d)", i, w)
		if sync.TopK == 0 {
			cs, err := openChunks(ctx, params, field, commit.PseudoGradientRoot, l.DenseFileChunks(), []uint64{diloco.WeightsChunk(sec)}, pg.Chunks)
			if err != nil {
				return "", err
			}
			deltas[i] = cs[0]
			continue
		}
		topK := int(sync.TopK)
		cs, err := openChunks(ctx, params, field, commit.PseudoGradientRoot, l.CompressedFileChunks(topK), diloco.RecordChunks(topK, sec), pg.Chunks)
		if err != nil {
			return "", err
		}
		record, err := diloco.RecordFromChunks(topK, sec, cs)
		if err != nil {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: %v", field, err)
		}
		if deltas[i], err = diloco.DecompressChunk(record, topK, valid); err != nil {
			return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "%s: record %d is malformed, the worker's fault, not the aggregator's (prove a pseudo-gradient fault): %v", field, sec, err)
		}
	}
	ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(2+len(deltas))*diloco.ChunkSize, "aggregation chunk")
	w, u, err := diloco.AggregateChunk(sync, valid, g[0], g[1], deltas)
	if err != nil {
		return "", errorsmod.Wrapf(types.ErrInvalidRoundProof, "%v", err)
	}
	want := w
	if msg.Momentum {
		want = u
	}
	if bytes.Equal(want, claimed[0]) {
		return "", errorsmod.Wrapf(types.ErrRoundConsistent, "G_%d's %s chunk %d is the aggregation of workers %v", msg.Round+1, which, sec, round.Entered)
	}
	return fmt.Sprintf("the aggregator's G_%d %s chunk %d is not the aggregation of workers %v", msg.Round+1, which, sec, round.Entered), nil
}

// excludeRoundOfCheckpoint: a sync job's checkpoint is the trace of one round the worker's
// pseudo-gradient was computed from (roundCheckpointStart). Proven wrong in a game, the
// worker leaves that round as after a proven round fault: x/market excludes its commit
// and aggregates the round again without it (ExcludeRoundWorker), before the fraud path
// punishes the lease. A checkpoint whose commit is gone or is not its own (the round was
// taken back and redone) or already excluded changes no round.
func (k Keeper) excludeRoundOfCheckpoint(ctx sdk.Context, cp types.Checkpoint, reason string) error {
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil {
		return err
	}
	if job.Spec.Sync == nil {
		return nil
	}
	sync, err := types.JobSync(job)
	if err != nil {
		return err
	}
	r := sync.RoundOf(cp.StartStep)
	commit, err := k.marketKeeper.GetRoundCommit(ctx, cp.JobId, r, cp.Worker)
	if err != nil {
		if keeperutil.IsRefusal(err) {
			return nil
		}
		return err
	}
	if commit.LeaseId != cp.LeaseId || !sameHash(commit.EndRoot, cp.FinalHash) || commit.Excluded {
		return nil
	}
	return k.marketKeeper.ExcludeRoundWorker(ctx, cp.JobId, r, cp.Worker, reason)
}

// RoundCheckpointPending reports whether lease's checkpoint ending at endStep is pending
// (x/market's RoundTraceKeeper: a round's global waits for it). The walk goes back from
// the lease's newest checkpoint and stops at the first that ends at or before endStep:
// the checkpoints of the rounds after it, a few while a round's global waits.
func (k Keeper) RoundCheckpointPending(ctx context.Context, leaseID, endStep uint64) (bool, error) {
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID).Descending())
	if err != nil {
		return false, err
	}
	defer iter.Close()
	for ; iter.Valid(); iter.Next() {
		cp, err := iter.Value()
		if err != nil {
			return false, err
		}
		if cp.EndStep <= endStep {
			return cp.EndStep == endStep && cp.Status == types.CHECKPOINT_STATUS_PENDING, nil
		}
	}
	return false, nil
}

// DiscardRoundCheckpoints sets aside the lease's pending checkpoints from fromStep on
// (x/market's RoundTraceKeeper): x/market deleted the rounds they trained, their start
// global having been voided, and the lease redoes them from the new global. Nobody did
// anything wrong: no penalty, their pay went back with the rounds' claims (x/market), the
// auditors' work is paid as for a checkpoint rejected through no fault of theirs, games on
// them end moot, their custody is released now. They keep their index as REJECTED (a game
// or audit names them by it); the lease's next checkpoint starts where its last
// checkpoint before fromStep ended (expectedStart). None of them is final: a round's
// checkpoint waits for its start global to be final (roundStartFinal).
func (k Keeper) DiscardRoundCheckpoints(ctx context.Context, leaseID, fromStep uint64, reason string) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID).Descending())
	if err != nil {
		return err
	}
	var discarded []types.Checkpoint
	for ; iter.Valid(); iter.Next() {
		cp, err := iter.Value()
		if err != nil {
			iter.Close()
			return err
		}
		if cp.StartStep < fromStep {
			break
		}
		if cp.Status == types.CHECKPOINT_STATUS_PENDING {
			discarded = append(discarded, cp)
		}
	}
	iter.Close()
	if len(discarded) == 0 {
		return nil
	}
	slices.Reverse(discarded)
	for _, cp := range discarded {
		cp.Status = types.CHECKPOINT_STATUS_REJECTED
		if err := k.saveCheckpoint(ctx, cp); err != nil {
			return err
		}
		if err := k.FinalizationQueue.Remove(ctx, collections.Join3(cp.ChallengeDeadline, cp.LeaseId, cp.Index)); err != nil {
			return err
		}
		if err := k.AuditDrawQueue.Remove(ctx, collections.Join3(cp.SubmittedHeight+1, cp.LeaseId, cp.Index)); err != nil {
			return err
		}
		if cp.CustodyId != "" {
			if err := k.shardKeeper.ReleaseCustodyNow(ctx, cp.CustodyId); err != nil {
				return err
			}
		}
		if err := k.settleAudits(sdkCtx, cp, false); err != nil {
			return err
		}
	}
	return keeperutil.Emit(sdkCtx, &types.EventCheckpointsDiscarded{
		LeaseId: leaseID, FromStep: fromStep, FirstIndex: discarded[0].Index, LastIndex: discarded[len(discarded)-1].Index, Reason: reason,
	})
}

// roundStartFinal reports whether a checkpoint may finalize as far as its round goes: a
// checkpoint of round q ≥ 1 of a job that trains in rounds starts from G_q, which a
// round fault or a conviction can still void (and x/market then deletes round q and
// this checkpoint with it) until round q-1 is final. No cycle with x/market's rule that
// round q-1 waits for its workers' round-(q-1) checkpoints: those wait for G_{q-1}.
func (k Keeper) roundStartFinal(ctx sdk.Context, cp types.Checkpoint) (bool, error) {
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil || job.Spec.Sync == nil {
		return err == nil, err
	}
	sync, err := types.JobSync(job)
	if err != nil {
		return false, err
	}
	q := sync.RoundOf(cp.StartStep)
	if q == 0 {
		return true, nil
	}
	prev, err := k.marketKeeper.GetRound(ctx, cp.JobId, q-1)
	if err != nil {
		return false, err
	}
	return prev.State == markettypes.ROUND_STATE_FINAL, nil
}
