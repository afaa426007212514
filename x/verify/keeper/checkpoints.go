package keeper

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

const (
	maxURILength        = 512
	maxMetricNameLength = 64
	maxMetricValueLen   = 64
)

// expectedStart is where a lease's next checkpoint must start: the previous checkpoint's
// end, or for the first one, the lease's resume point (the job's last final checkpoint
// for this worker, or the freshly initialised model).
func (k Keeper) expectedStart(ctx context.Context, lease markettypes.Lease, job markettypes.Job) (index, step uint64, hash []byte, err error) {
	last, ok, err := k.lastCheckpoint(ctx, lease.Id)
	if err != nil {
		return 0, 0, nil, err
	}
	if ok {
		index = last.Index + 1
		// Checkpoints discarded with the rounds they trained (DiscardRoundCheckpoints) keep
		// their index, but the redone rounds start where the last kept one ended.
		if last, ok, err = k.lastKeptCheckpoint(ctx, lease.Id, index); err != nil {
			return 0, 0, nil, err
		}
		if ok {
			return index, last.EndStep, last.FinalHash, nil
		}
	}
	if lease.ResumeStep > 0 {
		return index, lease.ResumeStep, lease.ResumeHash, nil
	}
	if root := job.Spec.Workload.InitStateRoot; len(root) != 0 {
		// A fine-tuning job starts from the owner's imported weights, whose root the spec
		// names: anyone can import them and check (x/market validated it is 32 bytes).
		return index, 0, root, nil
	}
	if job.Spec.Workload.Kind.Adjudicable() {
		h, err := k.initialStateHash(ctx, job)
		return index, 0, h, err
	}
	// A container job's initial state is whatever its image starts from; nothing on-chain
	// can compute it, and its checkpoints are never adjudicated.
	return index, 0, nil, nil
}

// initialStateHash computes h_0, the root of the job's freshly initialised state, charging
// the hashing of its chunks like any other hashing the module does: the state of a large
// model is tens of megabytes, and its first checkpoint's sender pays for it.
func (k Keeper) initialStateHash(ctx context.Context, job markettypes.Job) ([]byte, error) {
	cfg, err := types.JobConfig(job)
	if err != nil {
		return nil, err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	chunks := uint64(cfg.StateBytes()) / trace.CheckpointChunkSize
	sdk.UnwrapSDKContext(ctx).GasMeter().ConsumeGas(params.GasPerHash*2*chunks, "initial state root")
	return types.InitialStateHash(job)
}

// submitCheckpoint checks a provider's checkpoint against its lease and the previous
// checkpoint, stores it pending for the challenge window and moves its payment claim
// in x/market (MsgSubmitCheckpoint).
func (k Keeper) submitCheckpoint(ctx sdk.Context, msg *types.MsgSubmitCheckpoint) (types.Checkpoint, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Checkpoint{}, err
	}
	lease, err := k.marketKeeper.GetLease(ctx, msg.LeaseId)
	if err != nil {
		return types.Checkpoint{}, err
	}
	if lease.Provider != msg.Provider {
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrNotLeaseProvider, "lease %d is served by %s", lease.Id, lease.Provider)
	}
	if lease.State != markettypes.LEASE_STATE_ACTIVE {
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrLeaseNotActive, "lease %d was closed (%s)", lease.Id, lease.CloseReason)
	}
	job, err := k.marketKeeper.GetJob(ctx, lease.JobId)
	if err != nil {
		return types.Checkpoint{}, err
	}
	index, start, startHash, err := k.expectedStart(ctx, lease, job)
	if err != nil {
		return types.Checkpoint{}, err
	}
	if job.Spec.Sync != nil {
		if startHash, err = k.roundCheckpointStart(ctx, job, lease, start, startHash, msg); err != nil {
			return types.Checkpoint{}, err
		}
		start = msg.StartStep
	}
	if msg.Index != index {
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrWrongIndex, "lease %d expects checkpoint %d next, got %d", lease.Id, index, msg.Index)
	}
	if msg.StartStep != start {
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrWrongRange, "checkpoint %d must start at step %d (where the previous one ended), got %d", index, start, msg.StartStep)
	}
	maxEnd := min(start+job.Spec.CheckpointInterval, job.Spec.TotalSteps)
	if msg.EndStep <= msg.StartStep || msg.EndStep > maxEnd {
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrWrongRange, "end_step must be in (%d, %d] (checkpoint every %d of %d steps), got %d",
			start, maxEnd, job.Spec.CheckpointInterval, job.Spec.TotalSteps, msg.EndStep)
	}
	adjudicable := job.Spec.Workload.Kind.Adjudicable()
	if adjudicable && msg.EndStep-msg.StartStep > markettypes.MaxCheckpointInterval {
		// A longer checkpoint would allow a longer dispute than the unbonding period
		// covers (jobs from before the spec's bound existed may ask for one).
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrWrongRange, "a checkpoint spans at most %d steps, got %d: checkpoint more often",
			markettypes.MaxCheckpointInterval, msg.EndStep-msg.StartStep)
	}
	if _, err := hashFromBytes("state_root", msg.StateRoot); err != nil {
		return types.Checkpoint{}, err
	}
	size := msg.EndStep - msg.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "final_hash", msg.TraceRoot, size-1, size, msg.FinalHash, msg.FinalHashProof); err != nil {
		return types.Checkpoint{}, err
	}
	if adjudicable && !sameHash(msg.FinalHash, msg.StateRoot) {
		// An exact state's hash h_i is its Merkle root, so the trace's last leaf is the
		// state the pieces and the resume path serve: a state that is not the trace's end
		// could be paid for and never be disputed.
		return types.Checkpoint{}, errorsmod.Wrapf(types.ErrInvalidCheckpoint,
			"state_root %x is not the trace's final hash %x: a transformer state's hash is its root", msg.StateRoot, msg.FinalHash)
	}
	if err := validateCheckpointText(params, msg); err != nil {
		return types.Checkpoint{}, err
	}
	if err := checkCustodyFields(job, msg); err != nil {
		return types.Checkpoint{}, err
	}

	claim, err := k.marketKeeper.OnCheckpointSubmitted(ctx, lease.Id, msg.EndStep)
	if err != nil {
		return types.Checkpoint{}, err
	}
	version, auditors := uint32(0), uint32(0)
	if adjudicable {
		version = types.ExactWorkloadVersion
		auditors = min(job.Spec.Auditors(), types.MaxAuditors)
	}
	cp := types.Checkpoint{
		LeaseId:           lease.Id,
		Index:             msg.Index,
		JobId:             job.Id,
		Worker:            lease.Worker,
		Provider:          lease.Provider,
		StartStep:         msg.StartStep,
		EndStep:           msg.EndStep,
		StartHash:         startHash,
		FinalHash:         msg.FinalHash,
		StateRoot:         msg.StateRoot,
		TraceRoot:         msg.TraceRoot,
		Uri:               msg.Uri,
		Metrics:           msg.Metrics,
		Status:            types.CHECKPOINT_STATUS_PENDING,
		SubmittedHeight:   ctx.BlockHeight(),
		ChallengeDeadline: ctx.BlockHeight() + int64(params.ChallengeWindow),
		Claim:             claim,
		WorkloadVersion:   version,
		AuditRequested:    auditors,
		AuditFee:          sdk.NewCoin(params.AuditFeePerStep.Denom, math.ZeroInt()),
	}
	if err := k.registerCustody(ctx, params, job, msg, &cp); err != nil {
		return types.Checkpoint{}, err
	}
	if err := k.saveCheckpoint(ctx, cp); err != nil {
		return types.Checkpoint{}, err
	}
	if err := k.FinalizationQueue.Set(ctx, collections.Join3(cp.ChallengeDeadline, cp.LeaseId, cp.Index)); err != nil {
		return types.Checkpoint{}, err
	}
	if auditors > 0 {
		// Drawn at the end of the next block, from its hash.
		if err := k.AuditDrawQueue.Set(ctx, collections.Join3(cp.SubmittedHeight+1, cp.LeaseId, cp.Index)); err != nil {
			return types.Checkpoint{}, err
		}
	}
	return cp, nil
}

// roundCheckpointStart is where a checkpoint of a job that trains in rounds starts. Such a
// lease checkpoints each round it commits in x/market, once: steps [r·every, (r+1)·every)
// of a round r at or after where its previous checkpoint ended (a round it missed has no
// checkpoint). The checkpoint starts from the worker's start state of round r — its
// RoundCommit's start_root, which a round fault proves against G_r and its carry; round
// 0's is h_0, which WorkerStart(nil) of G_0 is — and must end at the commit's end_root, so
// the trace a challenger disputes is the one the pseudo-gradient was computed from.
func (k Keeper) roundCheckpointStart(ctx sdk.Context, job markettypes.Job, lease markettypes.Lease, next uint64, nextHash []byte, msg *types.MsgSubmitCheckpoint) ([]byte, error) {
	sync, err := types.JobSync(job)
	if err != nil {
		return nil, err
	}
	every := uint64(sync.Every)
	if msg.StartStep < next || msg.StartStep%every != 0 || msg.EndStep != msg.StartStep+every {
		return nil, errorsmod.Wrapf(types.ErrWrongRange,
			"job %d trains in rounds of %d steps: a checkpoint covers one round [r·%d, (r+1)·%d) from step %d on, got [%d, %d)",
			job.Id, every, every, every, next, msg.StartStep, msg.EndStep)
	}
	round := sync.RoundOf(msg.StartStep)
	commit, err := k.marketKeeper.GetRoundCommit(ctx, job.Id, round, lease.Worker)
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return nil, err
		}
		return nil, keeperutil.WrapCause(types.ErrInvalidCheckpoint, err, "worker %d has no commit in round %d: commit the round (MsgCommitRound) first", lease.Worker, round)
	}
	if commit.LeaseId != lease.Id {
		return nil, errorsmod.Wrapf(types.ErrInvalidCheckpoint, "round %d's commit of worker %d is lease %d's, not lease %d's", round, lease.Worker, commit.LeaseId, lease.Id)
	}
	if !sameHash(msg.FinalHash, commit.EndRoot) {
		return nil, errorsmod.Wrapf(types.ErrInvalidCheckpoint, "final_hash %x is not round %d's committed end_root %x", msg.FinalHash, round, commit.EndRoot)
	}
	if round == 0 {
		return nextHash, nil
	}
	return commit.StartRoot, nil
}

// updateParams replaces the params; only the authority may (MsgUpdateParams).
func (k Keeper) updateParams(ctx context.Context, msg *types.MsgUpdateParams) error {
	if msg.Authority != k.authority {
		return errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", k.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return keeperutil.WrapCause(types.ErrInvalidParams, err, "")
	}
	if err := k.checkUnbondingCover(ctx, msg.Params); err != nil {
		return err
	}
	return k.Params.Set(ctx, msg.Params)
}

// checkUnbondingCover holds params to the rule that spans x/verify and x/stakingext: an
// unbonding must stay slashable (x/stakingext's unbonding_blocks) for at least the
// challenge window plus the longest dispute, or an operator could unbond after
// committing fraud and be paid out before a conviction reaches the entry.
func (k Keeper) checkUnbondingCover(ctx context.Context, params types.Params) error {
	staking, err := k.providerKeeper.GetParams(ctx)
	if err != nil {
		return err
	}
	if required := params.RequiredUnbondingBlocks(); staking.UnbondingBlocks < required {
		return errorsmod.Wrapf(types.ErrInvalidParams,
			"challenge_window %d + the longest dispute (%d moves: %d bisection rounds of 2, the one-step proof or %d moves of phases 2–3, each within move_timeout %d) is %d blocks, above x/stakingext's unbonding_blocks %d",
			params.ChallengeWindow, types.MaxGameMoves, types.MaxBisectionRounds, types.MaxTileMoves, params.MoveTimeout, required, staking.UnbondingBlocks)
	}
	return nil
}

func validateCheckpointText(params types.Params, msg *types.MsgSubmitCheckpoint) error {
	if msg.Uri == "" || len(msg.Uri) > maxURILength {
		return errorsmod.Wrapf(types.ErrInvalidCheckpoint, "uri: required, at most %d characters", maxURILength)
	}
	if len(msg.Metrics) > int(params.MaxMetrics) {
		return errorsmod.Wrapf(types.ErrInvalidCheckpoint, "metrics: at most %d, got %d", params.MaxMetrics, len(msg.Metrics))
	}
	for i, m := range msg.Metrics {
		if m.Name == "" || len(m.Name) > maxMetricNameLength || len(m.Value) > maxMetricValueLen {
			return errorsmod.Wrapf(types.ErrInvalidCheckpoint, "metrics[%d]: name required (≤ %d chars), value ≤ %d chars", i, maxMetricNameLength, maxMetricValueLen)
		}
	}
	return nil
}

// tryFinalize makes a checkpoint FINAL once its window has passed, no challenge on it is
// open and its predecessor is final; then it tries the lease's next checkpoint, so a
// chain of checkpoints frozen behind a dispute finalizes in order once it resolves.
//
// The window includes the whole block at challenge_deadline: a transaction of that block
// (a game resolved by MsgStep) must not finalize it ahead of a challenge later in the same
// block, so only the end blocker (endOfBlock) finalizes at the deadline height itself;
// the finalization queue entry of that height is still due then.
func (k Keeper) tryFinalize(ctx sdk.Context, leaseID, index uint64, endOfBlock bool) error {
	for {
		cp, found, err := keeperutil.Optional(k.Checkpoints.Get(ctx, collections.Join(leaseID, index)))
		if err != nil {
			return err
		}
		if !found {
			return nil // the end of the lease's chain of checkpoints
		}
		if cp.Status == types.CHECKPOINT_STATUS_REJECTED {
			// Discarded with the round it trained (a lease whose checkpoint was rejected
			// for fraud is closed and has no later ones): the chain goes on past it.
			index++
			continue
		}
		windowOpen := ctx.BlockHeight() < cp.ChallengeDeadline || (ctx.BlockHeight() == cp.ChallengeDeadline && !endOfBlock)
		if cp.Status != types.CHECKPOINT_STATUS_PENDING || cp.OpenChallenges > 0 || windowOpen {
			return nil
		}
		if prev, ok, err := k.lastKeptCheckpoint(ctx, leaseID, index); err != nil || (ok && prev.Status != types.CHECKPOINT_STATUS_FINAL) {
			return err
		}
		params, err := k.Params.Get(ctx)
		if err != nil {
			return err
		}
		if params.Withheld(cp.UnavailableReports, cp.Auditors) {
			return k.withhold(ctx, cp, fmt.Sprintf("%d of the %d auditors of checkpoint %d/%d could not fetch the state it starts from",
				cp.UnavailableReports, cp.Auditors, cp.LeaseId, cp.Index))
		}
		if ready, err := k.custodyReady(ctx, params, cp); !ready || err != nil {
			return err
		}
		if ready, err := k.roundStartFinal(ctx, cp); !ready || err != nil {
			if err != nil {
				return err
			}
			return k.CustodyQueue.Set(ctx, collections.Join3(ctx.BlockHeight()+int64(params.CustodyRecheckBlocks), cp.LeaseId, cp.Index))
		}
		cp.Status = types.CHECKPOINT_STATUS_FINAL
		if err := k.saveCheckpoint(ctx, cp); err != nil {
			return err
		}
		if err := k.settleAudits(ctx, cp, false); err != nil {
			return err
		}
		if err := k.marketKeeper.OnCheckpointFinal(ctx, cp.LeaseId, cp.Claim, cp.EndStep, cp.FinalHash, cp.Uri, cp.CustodyId); err != nil {
			return err
		}
		if err := keeperutil.Emit(ctx, &types.EventCheckpointFinalized{
			LeaseId: cp.LeaseId, Index: cp.Index, EndStep: cp.EndStep, FinalHash: cp.FinalHash, Released: cp.Claim,
		}); err != nil {
			return err
		}
		index++
	}
}

// withhold ends a checkpoint whose state was not handed out — its auditors reported its
// start state unavailable, or too few storage holders proved its custody pieces by its
// custody deadline: it is WITHHELD, never final; the lease's later pending checkpoints
// build on it and are rejected; and x/market closes the lease for non-performance (its
// provider is slashed and jailed as for a missed checkpoint deadline) and refunds its
// pending pay.
func (k Keeper) withhold(ctx sdk.Context, cp types.Checkpoint, reason string) error {
	cp.Status = types.CHECKPOINT_STATUS_WITHHELD
	if err := k.saveCheckpoint(ctx, cp); err != nil {
		return err
	}
	if cp.CustodyId != "" {
		if err := k.shardKeeper.ReleaseCustodyNow(ctx, cp.CustodyId); err != nil {
			return err
		}
	}
	if err := keeperutil.Emit(ctx, &types.EventCheckpointWithheld{
		LeaseId: cp.LeaseId, Index: cp.Index, Reports: cp.UnavailableReports, Auditors: cp.Auditors,
	}); err != nil {
		return err
	}
	if err := k.settleAudits(ctx, cp, false); err != nil {
		return err
	}
	later, err := k.rejectPending(ctx, cp.LeaseId, "an earlier checkpoint was withheld: "+reason)
	if err != nil {
		return err
	}
	for _, r := range later {
		if err := k.settleAudits(ctx, r, false); err != nil {
			return err
		}
	}
	return k.marketKeeper.OnCheckpointWithheld(ctx, cp.LeaseId, reason)
}

// rejectPending rejects every pending checkpoint of a lease once one of them is proven
// wrong (or withheld): none of its provider's unfinalized work is paid, and the job
// resumes from its last final checkpoint. Games on them end moot when they next move or
// time out. Pending checkpoints are the lease's last ones (they finalize in order), so
// the walk goes back from the newest and stops at the first that is not pending: its
// cost is the number of pending checkpoints, not the lease's history. It returns them,
// oldest first.
func (k Keeper) rejectPending(ctx sdk.Context, leaseID uint64, reason string) ([]types.Checkpoint, error) {
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID).Descending())
	if err != nil {
		return nil, err
	}
	var pending []types.Checkpoint
	for ; iter.Valid(); iter.Next() {
		cp, err := iter.Value()
		if err != nil {
			iter.Close()
			return nil, err
		}
		if cp.Status == types.CHECKPOINT_STATUS_REJECTED {
			continue // discarded with the round it trained (DiscardRoundCheckpoints)
		}
		if cp.Status != types.CHECKPOINT_STATUS_PENDING {
			break
		}
		pending = append(pending, cp)
	}
	iter.Close()
	slices.Reverse(pending)
	for i := range pending {
		pending[i].Status = types.CHECKPOINT_STATUS_REJECTED
		if err := k.saveCheckpoint(ctx, pending[i]); err != nil {
			return nil, err
		}
		if pending[i].CustodyId != "" {
			if err := k.shardKeeper.ReleaseCustodyNow(ctx, pending[i].CustodyId); err != nil {
				return nil, err
			}
		}
		if err := keeperutil.Emit(ctx, &types.EventCheckpointRejected{LeaseId: leaseID, Index: pending[i].Index, Reason: reason}); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

// traceHashAt is the provider's claimed h_step for a checkpoint: its fixed start and final
// hashes, or a midpoint hash it revealed and proved.
func (k Keeper) traceHashAt(ctx context.Context, cp types.Checkpoint, step uint64) ([]byte, bool, error) {
	switch step {
	case cp.StartStep:
		return cp.StartHash, len(cp.StartHash) > 0, nil
	case cp.EndStep:
		return cp.FinalHash, true, nil
	}
	return keeperutil.Optional(k.Openings.Get(ctx, collections.Join3(cp.LeaseId, cp.Index, step)))
}

func sameHash(a, b []byte) bool { return len(a) == 32 && bytes.Equal(a, b) }
