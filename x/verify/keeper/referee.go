package keeper

import (
	"context"
	"fmt"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// CheckAdjudicable reports whether a dispute over a step of cfg can be decided on chain
// (x/market asks before it escrows a job; see markettypes.WorkloadReferee): by the
// one-step referee when a step is within max_step_macs, otherwise by phases 2–3, whose
// every move must fit types.MaxMoveGas (computed from the graph, without running it) and
// whose descents must fit MaxRecordRounds and MaxChunkRounds.
func (k Keeper) CheckAdjudicable(ctx context.Context, cfg exact.Config) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if macs := uint64(cfg.MACsPerStep()); macs <= params.MaxStepMacs {
		return nil
	}
	w := tiles.NewStep(cfg).WorstCase(func(c tiles.Cost) uint64 { return types.TileMoveGas(params, c) })
	if g := types.MoveGasBound(params, w.Cost); g > types.MaxMoveGas || w.RecordRounds > types.MaxRecordRounds || w.ChunkRounds > types.MaxChunkRounds {
		return errorsmod.Wrapf(types.ErrStepTooExpensive,
			"workload.model: a step is %d multiply-accumulates, more than the one-step referee can re-execute (max_step_macs %d), and its costliest tile move (%s) needs %d gas, more than %d (%d%% of the assumed block gas limit %d), or its descents are too deep (%d, %d)",
			cfg.MACsPerStep(), params.MaxStepMacs, w.Kind, g, types.MaxMoveGas, types.MaxMoveGasPercent, types.BlockGasLimit, w.RecordRounds, w.ChunkRounds)
	}
	return nil
}

// chargeStep charges a step's work to the tx gas meter before the referee runs it: its
// multiply-accumulates and the elements of its other operators, both exact functions of
// the configuration, so a referee step costs what it computes.
func chargeStep(ctx sdk.Context, params types.Params, cfg exact.Config) uint64 {
	macs := uint64(cfg.MACsPerStep())
	ctx.GasMeter().ConsumeGas(macs*params.GasPerMac, "exact step multiply-accumulates")
	ctx.GasMeter().ConsumeGas(uint64(cfg.ElementsPerStep())*params.GasPerMac, "exact step elementwise work")
	return macs
}

// executeStep is the one-step referee: it checks the pre-state against the agreed h_lo,
// proves the step's batch against the job's data root, re-executes step lo of the
// reference workload and compares the result with the provider's h_hi.
func (k Keeper) executeStep(ctx sdk.Context, msg *types.MsgStep) (types.ChallengeOutcome, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	ch, err := k.GetChallenge(ctx, msg.ChallengeId)
	if err != nil {
		return 0, err
	}
	if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED || ch.Turn != types.GAME_TURN_ONE_STEP {
		return 0, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is not at the one-step phase (turn %s)", ch.Id, ch.Turn)
	}
	if err := checkInTime(ctx, ch); err != nil {
		return 0, err
	}
	cp, err := k.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex)
	if err != nil {
		return 0, err
	}
	if err := checkPending(ch, cp); err != nil {
		return 0, err
	}
	if cp.WorkloadVersion != types.ExactWorkloadVersion {
		return 0, errorsmod.Wrapf(types.ErrNotAdjudicable, "workload version %d", cp.WorkloadVersion)
	}
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil {
		return 0, err
	}
	layout, err := k.dataLayout(ctx, job, cp.Worker, cp.StartStep)
	if err != nil {
		return 0, err
	}
	agreed, ok, err := k.traceHashAt(ctx, cp, ch.Lo)
	if err != nil {
		return 0, err
	}
	claimed, ok2, err := k.traceHashAt(ctx, cp, ch.Hi)
	if err != nil {
		return 0, err
	}
	if !ok || !ok2 {
		return 0, fmt.Errorf("challenge %d: trace hashes at %d or %d missing in the one-step phase", ch.Id, ch.Lo, ch.Hi)
	}

	cfg, err := types.JobConfig(job)
	if err != nil {
		return 0, err
	}
	if macs := uint64(cfg.MACsPerStep()); macs > params.MaxStepMacs {
		return 0, errorsmod.Wrapf(types.ErrStepTooExpensive, "%d MACs > max_step_macs %d", macs, params.MaxStepMacs)
	}
	ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(len(msg.PreState)), "pre-state bytes")
	ctx.GasMeter().ConsumeGas(params.GasPerHash*2*uint64(merkle.ChunkCount(int64(len(msg.PreState)), exact.ChunkSize)), "pre-state root")
	if got := exact.StateRoot(msg.PreState); !sameHash(got[:], agreed) {
		return 0, errorsmod.Wrapf(types.ErrInvalidPreState, "pre_state's root is %x, not the agreed h_%d %x", got[:], ch.Lo, agreed)
	}
	pre, err := exact.Decode(msg.PreState)
	if err != nil {
		return 0, keeperutil.WrapCause(types.ErrInvalidPreState, err, "")
	}
	if pre.Step != ch.Lo {
		return 0, errorsmod.Wrapf(types.ErrInvalidPreState, "pre_state is at step %d, want %d", pre.Step, ch.Lo)
	}
	if pre.Config.Hyper() != cfg.Hyper() {
		return 0, errorsmod.Wrapf(types.ErrInvalidPreState, "pre_state's model config is not job %d's", job.Id)
	}
	batch, err := k.provenBatch(ctx, params, cfg, job.Seed, ch.Lo, layout, msg.Data)
	if err != nil {
		return 0, err
	}
	macs := chargeStep(ctx, params, cfg)
	_, info, err := exact.Step(pre, batch)
	if err != nil {
		return 0, keeperutil.WrapCause(types.ErrInvalidData, err, "re-executing step %d", ch.Lo)
	}
	computed := info.Root
	if err := keeperutil.Emit(ctx, &types.EventStepExecuted{
		ChallengeId: ch.Id, Step: ch.Lo, ComputedHash: computed[:], ProviderHash: claimed, Macs: macs,
	}); err != nil {
		return 0, err
	}
	if sameHash(computed[:], claimed) {
		return types.CHALLENGE_OUTCOME_PROVIDER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_PROVIDER_WON,
			fmt.Sprintf("re-executing step %d reproduced the provider's h_%d", ch.Lo, ch.Hi), false)
	}
	return types.CHALLENGE_OUTCOME_CHALLENGER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_CHALLENGER_WON,
		fmt.Sprintf("re-executing step %d gave %x, not the provider's h_%d %x", ch.Lo, computed[:], ch.Hi, claimed), false)
}

// provenBatch assembles the batch of step `step` from data chunks the sender supplied,
// each proven against its segment's root in the worker's committed data layout. Which
// windows make the batch is fixed by the job seed and the step index, so the sender
// chooses nothing but the (proven) bytes.
func (k Keeper) provenBatch(ctx sdk.Context, params types.Params, cfg exact.Config, jobSeed []byte, step uint64, layout traindata.Layout, chunks []types.DataChunk) ([][]byte, error) {
	windows, err := exact.BatchWindows(cfg, jobSeed, step, layout.Size())
	if err != nil {
		return nil, keeperutil.WrapCause(types.ErrInvalidData, err, "")
	}
	proven, err := k.provenDataChunks(ctx, params, layout, chunks)
	if err != nil {
		return nil, err
	}
	batch := make([][]byte, len(windows))
	for i, w := range windows {
		window, err := readProven(layout, proven, w.Start, w.Start+w.Length)
		if err != nil {
			return nil, errorsmod.Wrapf(err, "batch window %d", i)
		}
		batch[i] = window
	}
	return batch, nil
}

// provenDataChunks checks each data chunk against its segment's root in the worker's
// data layout and returns them by chunk index.
func (k Keeper) provenDataChunks(ctx sdk.Context, params types.Params, layout traindata.Layout, chunks []types.DataChunk) (map[uint64][]byte, error) {
	proven := make(map[uint64][]byte, len(chunks))
	for i, c := range chunks {
		if _, dup := proven[c.Index]; dup {
			return nil, errorsmod.Wrapf(types.ErrInvalidData, "data[%d]: chunk %d supplied twice", i, c.Index)
		}
		seg, local, start, end, ok := layout.Chunk(c.Index)
		if !ok {
			return nil, errorsmod.Wrapf(types.ErrInvalidData, "data[%d]: chunk %d out of range (%d chunks)", i, c.Index, layout.Chunks())
		}
		if uint64(len(c.Data)) != end-start {
			return nil, errorsmod.Wrapf(types.ErrInvalidData, "data[%d]: chunk %d must be %d bytes, got %d", i, c.Index, end-start, len(c.Data))
		}
		ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(len(c.Data)), "data chunk bytes")
		field := fmt.Sprintf("data[%d] (chunk %d)", i, c.Index)
		if err := verifyInclusion(ctx, params, field, seg.Root, local, seg.Chunks(), merkle.LeafHash(c.Data), c.Proof); err != nil {
			return nil, err
		}
		proven[c.Index] = c.Data
	}
	return proven, nil
}

// readProven returns stream bytes [off, stop) from proven chunks.
func readProven(layout traindata.Layout, proven map[uint64][]byte, off, stop uint64) ([]byte, error) {
	out := make([]byte, 0, stop-off)
	for off < stop {
		n, _ := layout.ChunkAt(off)
		chunk, ok := proven[n]
		if !ok {
			return nil, errorsmod.Wrapf(types.ErrInvalidData, "needs data chunk %d, which was not supplied", n)
		}
		_, _, start, end, _ := layout.Chunk(n)
		take := min(end, stop) - off
		out = append(out, chunk[off-start:off-start+take]...)
		off += take
	}
	return out, nil
}
