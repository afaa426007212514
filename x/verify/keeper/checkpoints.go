package keeper

import (
	"bytes"
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

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
		return last.Index + 1, last.EndStep, last.FinalHash, nil
	}
	if lease.ResumeStep > 0 {
		return 0, lease.ResumeStep, lease.ResumeHash, nil
	}
	if job.Spec.Workload.Kind == markettypes.WORKLOAD_KIND_REFERENCE {
		h, err := types.InitialStateHash(job.Seed)
		return 0, 0, h, err
	}
	// A container job's initial state is whatever its image starts from; nothing on-chain
	// can compute it, and its checkpoints are never adjudicated.
	return 0, 0, nil, nil
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
	if _, err := hashFromBytes("state_root", msg.StateRoot); err != nil {
		return types.Checkpoint{}, err
	}
	size := msg.EndStep - msg.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "final_hash", msg.TraceRoot, size-1, size, msg.FinalHash, msg.FinalHashProof); err != nil {
		return types.Checkpoint{}, err
	}
	if err := validateCheckpointText(params, msg); err != nil {
		return types.Checkpoint{}, err
	}

	claim, err := k.marketKeeper.OnCheckpointSubmitted(ctx, lease.Id)
	if err != nil {
		return types.Checkpoint{}, err
	}
	version := uint32(0)
	if job.Spec.Workload.Kind == markettypes.WORKLOAD_KIND_REFERENCE {
		version = types.ReferenceWorkloadVersion
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
	}
	if err := k.saveCheckpoint(ctx, cp); err != nil {
		return types.Checkpoint{}, err
	}
	if err := k.FinalizationQueue.Set(ctx, collections.Join3(cp.ChallengeDeadline, cp.LeaseId, cp.Index)); err != nil {
		return types.Checkpoint{}, err
	}
	return cp, nil
}

// updateParams replaces the params; only the authority may (MsgUpdateParams).
func (k Keeper) updateParams(ctx context.Context, msg *types.MsgUpdateParams) error {
	if msg.Authority != k.authority {
		return errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", k.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return keeperutil.WrapCause(types.ErrInvalidParams, err, "")
	}
	return k.Params.Set(ctx, msg.Params)
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
		windowOpen := ctx.BlockHeight() < cp.ChallengeDeadline || (ctx.BlockHeight() == cp.ChallengeDeadline && !endOfBlock)
		if cp.Status != types.CHECKPOINT_STATUS_PENDING || cp.OpenChallenges > 0 || windowOpen {
			return nil
		}
		if index > 0 {
			prev, err := k.GetCheckpoint(ctx, leaseID, index-1)
			if err != nil {
				return err
			}
			if prev.Status != types.CHECKPOINT_STATUS_FINAL {
				return nil
			}
		}
		cp.Status = types.CHECKPOINT_STATUS_FINAL
		if err := k.saveCheckpoint(ctx, cp); err != nil {
			return err
		}
		if err := k.marketKeeper.OnCheckpointFinal(ctx, cp.LeaseId, cp.Claim, cp.EndStep, cp.FinalHash, cp.Uri); err != nil {
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

// rejectPending rejects every pending checkpoint of a lease once one of them is proven
// wrong: the provider is a proven cheat, so none of its unfinalized work is paid, and the
// job resumes from its last final checkpoint. Games on them end as moot.
func (k Keeper) rejectPending(ctx sdk.Context, leaseID uint64, reason string) error {
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID))
	if err != nil {
		return err
	}
	pending, err := iter.Values()
	if err != nil {
		return err
	}
	for _, cp := range pending {
		if cp.Status != types.CHECKPOINT_STATUS_PENDING {
			continue
		}
		cp.Status = types.CHECKPOINT_STATUS_REJECTED
		if err := k.saveCheckpoint(ctx, cp); err != nil {
			return err
		}
		if err := keeperutil.Emit(ctx, &types.EventCheckpointRejected{LeaseId: cp.LeaseId, Index: cp.Index, Reason: reason}); err != nil {
			return err
		}
	}
	return nil
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
