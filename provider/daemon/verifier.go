package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	game "github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/dispute"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// VerifierGrants are the messages a verifier sends on the operator's behalf,
// besides RequiredGrants.
var VerifierGrants = []string{"/depinchain.verify.v1.MsgChallenge", "/depinchain.verify.v1.MsgRespond", "/depinchain.verify.v1.MsgStep"}

// enqueueVerification asks the verifier to check another provider's checkpoint.
func (d *Daemon) enqueueVerification(ref checkpoint.Ref) {
	select {
	case d.verifyQueue <- ref:
	default:
		d.log.Warn("verification queue full; checkpoint not checked", "checkpoint", ref.String())
	}
}

// runVerifier checks queued checkpoints one at a time.
func (d *Daemon) runVerifier(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ref := <-d.verifyQueue:
			if err := d.verifyCheckpoint(ctx, ref); err != nil && ctx.Err() == nil {
				d.log.Warn("verification failed", "checkpoint", ref.String(), "err", err)
				d.noteError(err)
			}
		}
	}
}

// sampled decides, reproducibly from the verifier's seed, whether the
// policy checks a checkpoint: verifiers with different seeds check different
// checkpoints, and one verifier always decides the same way after a restart.
func sampled(cfg config.Verifier, ref checkpoint.Ref) bool {
	if cfg.Policy == config.PolicyAll {
		return true
	}
	var in [24]byte
	binary.BigEndian.PutUint64(in[0:], cfg.Seed)
	binary.BigEndian.PutUint64(in[8:], ref.LeaseID)
	binary.BigEndian.PutUint64(in[16:], ref.Index)
	h := sha256.Sum256(in[:])
	return float64(binary.BigEndian.Uint64(h[:8]))/math.Pow(2, 64) < cfg.SampleRate
}

// verifyCheckpoint re-executes another provider's reference checkpoint from
// its committed start state and challenges it when the result differs.
func (d *Daemon) verifyCheckpoint(ctx context.Context, ref checkpoint.Ref) error {
	var done bool
	if err := d.db.View(func(tx *db.Tx) error {
		rec, ok, err := tx.Verification(ref.LeaseID, ref.Index)
		done = ok && rec.Result != db.VerificationFailed
		return err
	}); err != nil || done {
		return err
	}
	cpRes, err := d.verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: ref.LeaseID, Index: ref.Index})
	if err != nil {
		return err
	}
	cp := cpRes.Checkpoint
	if cp.Provider == d.operator {
		return nil
	}
	jobRes, err := d.market.Job(ctx, &markettypes.QueryJobRequest{JobId: cp.JobId})
	if err != nil {
		return err
	}
	job := jobRes.Job
	rec := db.VerificationRecord{LeaseID: cp.LeaseId, Index: cp.Index, JobID: cp.JobId, Provider: cp.Provider, Height: cp.SubmittedHeight}
	switch {
	case job.Spec.Workload.Kind != markettypes.WORKLOAD_KIND_REFERENCE:
		rec.Result, rec.Detail = db.VerificationSkipped, "not a reference workload: it cannot be re-executed or adjudicated"
	case job.Spec.DatasetId != "":
		rec.Result, rec.Detail = db.VerificationSkipped, "trains on a dataset this verifier does not hold"
	case !sampled(d.cfg.Verifier, ref):
		rec.Result, rec.Detail = db.VerificationSkipped, fmt.Sprintf("not in this verifier's sample (rate %g)", d.cfg.Verifier.SampleRate)
	}
	if rec.Result == "" {
		if err := d.checkReexecution(ctx, cp, job, &rec); err != nil {
			rec.Result, rec.Detail = db.VerificationFailed, err.Error()
		}
	}
	d.metrics.Verification(string(rec.Result))
	d.log.Info("checkpoint verified", "lease", cp.LeaseId, "index", cp.Index, "provider", cp.Provider,
		"steps", fmt.Sprintf("%d..%d", cp.StartStep, cp.EndStep), "result", rec.Result, "detail", rec.Detail, "challenge", rec.ChallengeID)
	return d.db.Update(func(tx *db.Tx) error { return tx.PutVerification(rec) })
}

// checkReexecution re-executes cp and, on a mismatch, opens a challenge.
func (d *Daemon) checkReexecution(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job, rec *db.VerificationRecord) error {
	exec, err := d.reexecute(ctx, cp, job)
	if err != nil {
		return err
	}
	root, final := exec.Trace.Root(), exec.Trace.Hashes[len(exec.Trace.Hashes)-1]
	if slices.Equal(root[:], cp.TraceRoot) && slices.Equal(final[:], cp.FinalHash) {
		rec.Result = db.VerificationMatched
		return nil
	}
	rec.Result = db.VerificationMismatched
	rec.Detail = fmt.Sprintf("re-execution ends at h_%d = %s, the provider committed %x", cp.EndStep, final, cp.FinalHash)
	if h := d.follower.Status().ChainHeight; h > cp.ChallengeDeadline {
		rec.Detail += fmt.Sprintf("; too late to challenge (window ended at %d)", cp.ChallengeDeadline)
		return nil
	}
	msg, err := game.Challenge(d.operator, cp, exec.Trace)
	if err != nil {
		return err
	}
	res, err := d.submit(ctx, msg)
	if err != nil {
		return fmt.Errorf("%s; challenging failed: %w", rec.Detail, err)
	}
	id, err := challengeIDOf(res)
	if err != nil {
		return err
	}
	rec.ChallengeID = id
	d.mu.Lock()
	d.executions[id] = exec
	d.mu.Unlock()
	d.log.Warn("challenge opened", "challenge", id, "lease", cp.LeaseId, "index", cp.Index, "provider", cp.Provider, "detail", rec.Detail)
	d.enqueueDispute(id)
	return nil
}

// challengerEvidence is the verifier's own execution of a challenged
// checkpoint, recomputed after a restart.
func (d *Daemon) challengerEvidence(ctx context.Context, id uint64, cp verifytypes.Checkpoint) (game.Evidence, error) {
	d.mu.Lock()
	exec, ok := d.executions[id]
	d.mu.Unlock()
	if !ok {
		jobRes, err := d.market.Job(ctx, &markettypes.QueryJobRequest{JobId: cp.JobId})
		if err != nil {
			return game.Evidence{}, err
		}
		if exec, err = d.reexecute(ctx, cp, jobRes.Job); err != nil {
			return game.Evidence{}, err
		}
		d.mu.Lock()
		d.executions[id] = exec
		d.mu.Unlock()
	}
	return exec.Evidence(), nil
}

// reexecute trains cp's range honestly from the state the chain agrees the
// checkpoint started from: the initial weights, the verifier's own state
// from the lease's previous checkpoint, or that checkpoint's state
// downloaded from its provider and checked against its commitment.
func (d *Daemon) reexecute(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job) (*dispute.Execution, error) {
	start, err := d.startState(ctx, cp, job)
	if err != nil {
		return nil, err
	}
	exec, err := dispute.Reexecute(job, start, cp.StartStep, cp.EndStep)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.verifiedStates[cp.LeaseId] = exec.End
	d.mu.Unlock()
	return exec, nil
}

func (d *Daemon) startState(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job) (*reftrainer.State, error) {
	if cp.StartStep == 0 {
		return dispute.InitialState(job)
	}
	d.mu.Lock()
	cached := d.verifiedStates[cp.LeaseId]
	d.mu.Unlock()
	if cached != nil {
		if h := cached.Hash(); slices.Equal(h[:], cp.StartHash) {
			return cached, nil
		}
	}
	// The state at start_step is the end of the lease's previous checkpoint,
	// or of the checkpoint the lease resumed from.
	var uri string
	if cp.Index > 0 {
		prev, err := d.verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: cp.LeaseId, Index: cp.Index - 1})
		if err != nil {
			return nil, err
		}
		uri = prev.Checkpoint.Uri
	} else {
		lease, err := d.market.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: cp.LeaseId})
		if err != nil {
			return nil, err
		}
		uri = lease.Lease.ResumeUri
	}
	client, ref, from, err := d.checkpointAt(ctx, uri)
	if err != nil {
		return nil, err
	}
	raw, err := d.downloadState(ctx, client, ref, from)
	if err != nil {
		return nil, fmt.Errorf("the start state (checkpoint %s at %s) is not available: %w", ref, uri, err)
	}
	if h := sha256.Sum256(raw); !slices.Equal(h[:], cp.StartHash) {
		return nil, errors.New("the served start state does not hash to the checkpoint's start hash")
	}
	return reftrainer.Decode(raw)
}
