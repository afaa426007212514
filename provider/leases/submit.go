package leases

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// submitCheckpoint commits a completed checkpoint folder, starts serving it
// and submits its commitment as checkpoint index of the lease. If the chain
// already has that index (the sidecar died after broadcasting), it only
// records what the chain has.
//
// before, when set, goes into the same transaction ahead of the checkpoint (a
// training-together round's MsgCommitRound, whose start root the checkpoint starts from).
func (r *Role) submitCheckpoint(ctx context.Context, rec db.LeaseRecord, index uint64, cp trainer.Checkpoint, custodySpec *markettypes.CustodySpec, before sdk.Msg) error {
	started := time.Now()
	// The trace first: a test hook's may replace the state it commits to.
	tr, err := r.committedTrace(ctx, rec, cp)
	if err != nil {
		return err
	}
	commitment, err := r.commit(rec, index, cp)
	if err != nil {
		return err
	}
	root := tr.Root()
	record := db.CheckpointRecord{
		LeaseID: rec.LeaseID, Index: index, StartStep: cp.StartStep(), EndStep: cp.EndStep(),
		StateRoot: commitment.State.Root[:], TraceRoot: root[:], FinalHash: tr.Hashes[len(tr.Hashes)-1][:],
		Status: db.CheckpointSubmitted,
	}
	if known, err := r.onChainAlready(ctx, &record); known || err != nil {
		return err
	}
	final, proof, err := tr.Open(tr.End())
	if err != nil {
		return err
	}
	var stateSize uint64
	var pieceRoots [][]byte
	if custodySpec != nil {
		if stateSize, pieceRoots, err = r.writeCustodyPieces(rec.LeaseID, index, cp.StatePath(), custodySpec); err != nil {
			return fmt.Errorf("custody pieces of checkpoint %d of lease %d: %w", index, rec.LeaseID, err)
		}
	}
	if hook := r.opts.Hooks.BeforeCheckpoint; hook != nil {
		hook(ctx, rec.LeaseID, index)
	}
	msg := &verifytypes.MsgSubmitCheckpoint{
		Provider: r.opts.Operator, LeaseId: rec.LeaseID, Index: index, StartStep: cp.StartStep(), EndStep: cp.EndStep(),
		StateRoot: record.StateRoot, TraceRoot: record.TraceRoot, FinalHash: final[:], FinalHashProof: proof,
		Uri:       checkpoint.URI(r.opts.PublicURL, checkpoint.Ref{LeaseID: rec.LeaseID, Index: index}),
		Metrics:   checkpointMetrics(rec.OutputDir(), cp.EndStep()),
		StateSize: stateSize, PieceRoots: pieceRoots,
	}
	var res *chain.TxResult
	if before != nil {
		res, err = r.opts.SubmitTx(ctx, before, msg)
	} else {
		res, err = r.opts.Submit(ctx, msg)
	}
	if err != nil {
		r.opts.Metrics.Checkpoint(metrics.CheckpointFailed)
		return fmt.Errorf("submitting checkpoint %d of lease %d: %w", index, rec.LeaseID, err)
	}
	record.TxHash, record.Height = res.Hash, res.Height
	r.opts.Metrics.Checkpoint(metrics.CheckpointSubmitted)
	r.log.Info("checkpoint submitted", "lease", rec.LeaseID, "index", index, "steps", fmt.Sprintf("%d..%d", cp.StartStep(), cp.EndStep()),
		"state_root", commitment.State.Root.String(), "state_bytes", commitment.State.Size, "took", time.Since(started).Round(time.Millisecond),
		"height", res.Height, "tx", res.Hash)
	return r.recordCheckpoint(record)
}

// commit hashes a checkpoint folder and retains it in the catalog, which
// serves it from then on.
func (r *Role) commit(rec db.LeaseRecord, index uint64, cp trainer.Checkpoint) (checkpoint.Commitment, error) {
	commitment, err := checkpoint.Commit(cp, checkpoint.HashOptions{Progress: r.hashProgress(rec.LeaseID, index)})
	if err != nil {
		return commitment, err
	}
	r.opts.Metrics.CheckpointHashed(uint64(commitment.State.Size))
	ref := checkpoint.Ref{LeaseID: rec.LeaseID, Index: index}
	return commitment, r.opts.Catalog.Add(checkpoint.Entry{Ref: ref, JobID: rec.JobID, Dir: cp.Dir, Commitment: commitment})
}

// committedTrace is the trace a checkpoint commits: its trainer's, unless a
// test hook says otherwise, in which case it is kept beside the trainer's.
func (r *Role) committedTrace(ctx context.Context, rec db.LeaseRecord, cp trainer.Checkpoint) (trace.Trace, error) {
	if r.opts.Hooks.CommitTrace == nil {
		return cp.Trace, nil
	}
	job, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: rec.JobID})
	if err != nil {
		return trace.Trace{}, fmt.Errorf("reading job %d: %w", rec.JobID, err)
	}
	tr, err := r.opts.Hooks.CommitTrace(job.Job, cp)
	if err != nil || tr.Root() == cp.Trace.Root() {
		return tr, err
	}
	return tr, checkpoint.WriteCommittedTrace(cp.Dir, tr)
}

// onChainAlready records the chain's version of a checkpoint it already has
// and reports whether it had it. A chain checkpoint that is not the local
// one cannot be served and is a permanent error.
func (r *Role) onChainAlready(ctx context.Context, record *db.CheckpointRecord) (bool, error) {
	existing, err := r.opts.Chain.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: record.LeaseID, Index: record.Index})
	if err != nil {
		return false, nil
	}
	c := existing.Checkpoint
	if !slices.Equal(c.FinalHash, record.FinalHash) || c.EndStep != record.EndStep {
		return true, fmt.Errorf("%w: the chain's checkpoint %d of lease %d ends at step %d with %x, the local one at %d with %x",
			errPermanent, record.Index, record.LeaseID, c.EndStep, c.FinalHash, record.EndStep, record.FinalHash)
	}
	record.Height, record.Status = c.SubmittedHeight, checkpointStatus(c.Status)
	return true, r.recordCheckpoint(*record)
}

// chainCheckpoints lists the lease's checkpoints on chain, in index order.
func (r *Role) chainCheckpoints(ctx context.Context, leaseID uint64) ([]verifytypes.Checkpoint, error) {
	res, err := r.opts.Chain.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leaseID})
	if err != nil {
		return nil, fmt.Errorf("reading the lease's checkpoints: %w", err)
	}
	cps := res.Checkpoints
	slices.SortFunc(cps, func(a, b verifytypes.Checkpoint) int { return int(a.Index) - int(b.Index) })
	return cps, nil
}

// adoptChainCheckpoints records the lease's checkpoints the chain has but the
// database does not: the sidecar died after broadcasting one and before
// recording it. Their folders are served again.
func (r *Role) adoptChainCheckpoints(rec db.LeaseRecord, onChain []verifytypes.Checkpoint) error {
	for _, c := range onChain {
		var known bool
		if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
			_, known, err = tx.Checkpoint(c.LeaseId, c.Index)
			return err
		}); err != nil {
			return err
		}
		if known {
			continue
		}
		err := r.recordCheckpoint(db.CheckpointRecord{
			LeaseID: c.LeaseId, Index: c.Index, StartStep: c.StartStep, EndStep: c.EndStep,
			StateRoot: c.StateRoot, TraceRoot: c.TraceRoot, FinalHash: c.FinalHash,
			Height: c.SubmittedHeight, Status: checkpointStatus(c.Status),
		})
		if err != nil {
			return err
		}
		ref := checkpoint.Ref{LeaseID: c.LeaseId, Index: c.Index}
		if _, retained := r.opts.Catalog.Lookup(ref); !retained {
			if err := r.retain(rec, c.EndStep, c.Index); err != nil {
				r.log.Warn("a checkpoint on chain has no local folder to serve", "lease", c.LeaseId, "index", c.Index, "err", err)
			} else if c.Status == verifytypes.CHECKPOINT_STATUS_FINAL {
				r.opts.Catalog.MarkFinal(ref, time.Now()) //nolint:errcheck // just added
			}
		}
		r.log.Info("recorded a checkpoint the chain already had", "lease", c.LeaseId, "index", c.Index, "status", c.Status.String())
	}
	return nil
}

// checkpointMetrics reports the training loss at a checkpoint's end step, as
// the trainer logged it.
func checkpointMetrics(out string, endStep uint64) []verifytypes.Metric {
	ms, err := trainer.ReadMetrics(out)
	if err != nil {
		return nil
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if m := ms[i]; m.Step == endStep && !math.IsNaN(m.Loss) && !math.IsInf(m.Loss, 0) {
			return []verifytypes.Metric{{Name: "loss", Value: strconv.FormatFloat(m.Loss, 'f', 6, 64)}}
		}
	}
	return nil
}

// hashProgress logs the hashing of large state files about every 5 seconds.
func (r *Role) hashProgress(leaseID, index uint64) func(hashed, total int64) {
	last := time.Now()
	return func(hashed, total int64) {
		if time.Since(last) < 5*time.Second {
			return
		}
		last = time.Now()
		r.log.Info("hashing checkpoint", "lease", leaseID, "index", index, "hashed_bytes", hashed, "total_bytes", total)
	}
}
