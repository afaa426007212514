package leases

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// custodySpecOf is the job's custody section when its states are kept in custody.
func custodySpecOf(job markettypes.Job) *markettypes.CustodySpec {
	if job.Spec.Workload.Kind.Adjudicable() {
		return job.Spec.Custody
	}
	return nil
}

// writeCustodyPieces cuts a committed state into its custody pieces under CustodyDir,
// where the public server serves them to the storage holders, and returns the state's
// size and every piece's root for the checkpoint's commitment.
func (r *Role) writeCustodyPieces(leaseID, index uint64, statePath string, spec *markettypes.CustodySpec) (uint64, [][]byte, error) {
	if r.opts.CustodyDir == "" {
		return 0, nil, fmt.Errorf("the job keeps its checkpoints in custody and this sidecar has no custody folder")
	}
	id := shardtypes.CustodyDatasetID(leaseID, index)
	started := time.Now()
	l, roots, err := pieces.WriteCustodyObject(r.opts.CustodyDir, id, statePath, spec.DataPieces, spec.ParityPieces, r.opts.Hooks.CustodyPieces)
	if err != nil {
		return 0, nil, err
	}
	r.log.Info("custody pieces written", "lease", leaseID, "index", index, "object", id, "data_pieces", l.DataPieces,
		"parity_pieces", l.ParityPieces, "piece_bytes", l.PieceSize, "took", time.Since(started).Round(time.Millisecond))
	return l.StateSize, merkle.HashesToBytes(roots), nil
}

// resumeFromCustody rebuilds the checkpoint a lease resumes from out of any k of its
// custody pieces, fetched in parallel from the storage holders and checked against the
// roots on chain, streaming into the state file (memory stays at a few blocks per piece).
func (r *Role) resumeFromCustody(ctx context.Context, lease markettypes.Lease, ref checkpoint.Ref, onChain verifytypes.Checkpoint, out string) error {
	if r.opts.Custody == nil {
		return fmt.Errorf("%w: the job keeps its checkpoints in custody and this sidecar cannot fetch from custody", errPermanent)
	}
	started := time.Now()
	dir := trainer.CheckpointDir(out, lease.ResumeStep)
	if err := os.MkdirAll(r.opts.WorkDir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(r.opts.WorkDir, "custody-resume-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	obj, err := r.opts.Custody.Rebuild(ctx, ref.LeaseID, ref.Index, tmp)
	if err != nil {
		return fmt.Errorf("rebuilding checkpoint %s from its custody holders: %w", ref, err)
	}
	if !slices.Equal(obj.Custody.StateRoot, lease.ResumeHash) {
		return fmt.Errorf("custody object %s holds the state with root %x, the lease resumes from %x", obj.DatasetID, obj.Custody.StateRoot, lease.ResumeHash)
	}
	// custody.Rebuild checked every data piece against its root, and the data pieces'
	// roots make the state root the chain checked at submission: the file is the state.
	state, err := os.ReadFile(tmp.Name())
	if err != nil {
		return err
	}
	h, err := merkle.HashFromBytes(lease.ResumeHash)
	if err != nil {
		return err
	}
	// The folder's trace needs the hash of the step before the state; only the old
	// trainer can tell it, and nothing of this lease reads it (its checkpoints commit
	// h_resume onward), so it is asked for but not required.
	before := h
	if traceRoot, err := merkle.HashFromBytes(onChain.TraceRoot); err == nil {
		client, _, _, err := r.fetcher.At(ctx, lease.ResumeUri)
		if err == nil {
			askCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if hb, err := client.TraceHash(askCtx, ref, onChain.EndStep-1, traceRoot, onChain.StartStep, onChain.EndStep); err == nil {
				before = hb
			}
			cancel()
		}
	}
	if _, err := trainer.WriteCheckpoint(out, lease.ResumeStep, state, []merkle.Hash{before, h}); err != nil {
		return err
	}
	r.log.Info("resume checkpoint rebuilt from custody", "lease", lease.Id, "step", lease.ResumeStep, "object", obj.DatasetID,
		"holders", obj.Live(), "of", obj.Layout.Pieces(), "bytes", len(state), "dir", dir, "took", time.Since(started).Round(time.Millisecond))
	return nil
}
