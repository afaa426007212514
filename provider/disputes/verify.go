package disputes

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// checkQueued verifies a queued checkpoint, after any audit assignment the audits
// role has queued: assignments are paid and missed ones slashed, samples are neither.
func (r *Role) checkQueued(ctx context.Context, ref checkpoint.Ref) {
	if p := r.opts.Priority; p != nil {
		if err := p.Yield(ctx); err != nil {
			return
		}
	}
	if err := r.verifyCheckpoint(ctx, ref); err != nil && ctx.Err() == nil {
		r.log.Warn("verification failed", "checkpoint", ref.String(), "err", err)
		r.lastErr.Note(err)
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
func (r *Role) verifyCheckpoint(ctx context.Context, ref checkpoint.Ref) error {
	var done bool
	if err := r.opts.DB.View(func(tx *db.Tx) error {
		rec, ok, err := tx.Verification(ref.LeaseID, ref.Index)
		done = ok && rec.Result != db.VerificationFailed && rec.Result != db.VerificationUnavailable && rec.DeferredBehind == 0
		return err
	}); err != nil || done {
		return err
	}
	_, err := r.check(ctx, ref, true)
	return err
}

// check re-executes checkpoint ref (if it is in the sample, or whatever the sample when
// sample is false: an audit assignment) and challenges it when the result differs; it
// records and returns what it found. It returns no record for the operator's own
// checkpoints.
func (r *Role) check(ctx context.Context, ref checkpoint.Ref, sample bool) (*db.VerificationRecord, error) {
	cpRes, err := r.opts.Chain.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: ref.LeaseID, Index: ref.Index})
	if err != nil {
		return nil, err
	}
	cp := cpRes.Checkpoint
	if cp.Provider == r.opts.Operator {
		return nil, nil
	}
	jobRes, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: cp.JobId})
	if err != nil {
		return nil, err
	}
	rec := db.VerificationRecord{LeaseID: cp.LeaseId, Index: cp.Index, JobID: cp.JobId, Provider: cp.Provider, Height: cp.SubmittedHeight}
	if sample {
		rec.Result, rec.Detail = r.skipReason(jobRes.Job, ref)
	} else {
		rec.Result, rec.Detail = r.unverifiable(jobRes.Job)
	}
	if rec.Result == "" {
		if err := r.checkReexecution(ctx, cp, jobRes.Job, &rec); err != nil {
			rec.Result, rec.Detail = db.VerificationFailed, err.Error()
			if errors.Is(err, ErrStartStateUnavailable) {
				rec.Result = db.VerificationUnavailable
			}
		}
	}
	r.opts.Metrics.Verification(string(rec.Result))
	r.log.Info("checkpoint verified", "lease", cp.LeaseId, "index", cp.Index, "provider", cp.Provider,
		"steps", fmt.Sprintf("%d..%d", cp.StartStep, cp.EndStep), "result", rec.Result, "detail", rec.Detail,
		"challenge", rec.ChallengeID, "audit", !sample)
	return &rec, r.opts.DB.Update(func(tx *db.Tx) error { return tx.PutVerification(rec) })
}

// skipReason says why the verifier does not check a checkpoint of job, or
// returns "" when it does.
func (r *Role) skipReason(job markettypes.Job, ref checkpoint.Ref) (db.VerificationResult, string) {
	if result, detail := r.unverifiable(job); result != "" {
		return result, detail
	}
	if !sampled(r.opts.Verifier, ref) {
		return db.VerificationSkipped, fmt.Sprintf("%s (rate %g)", notSampled, r.opts.Verifier.SampleRate)
	}
	return "", ""
}

// notSampled begins the detail of a checkpoint left out of the verifier's sample: an
// audit assignment checks it all the same.
const notSampled = "not in this verifier's sample"

// unverifiable says why no checkpoint of job can be re-executed here, or "" when one can.
// A dataset-backed job is re-executed on its worker's data pieces fetched from their
// holders (trainingData); one that cannot be fetched now fails the check, to be tried
// again, with what could not be had.
func (r *Role) unverifiable(job markettypes.Job) (db.VerificationResult, string) {
	switch {
	case !job.Spec.Workload.Kind.Adjudicable():
		return db.VerificationSkipped, "not an exact transformer workload: it cannot be re-executed or adjudicated"
	case job.Spec.DatasetId != "" && r.opts.Datasets == nil:
		return db.VerificationSkipped, "trains on a dataset and this sidecar has no dataset fetcher"
	}
	return "", ""
}

// ErrStartStateUnavailable: the provider did not serve the state a checkpoint starts
// from, or served one that is not it. An auditor reports it on chain.
var ErrStartStateUnavailable = errors.New("the start state is not available")

// checkReexecution re-executes cp and, on a mismatch, opens a challenge.
func (r *Role) checkReexecution(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job, rec *db.VerificationRecord) error {
	exec, err := r.reexecute(ctx, cp, job)
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
	if h := r.opts.Height(); h > cp.ChallengeDeadline {
		rec.Detail += fmt.Sprintf("; too late to challenge (window ended at %d)", cp.ChallengeDeadline)
		return nil
	}
	behind, err := r.openChallengeBefore(ctx, cp.LeaseId, cp.Index)
	if err != nil {
		return err
	}
	if behind != nil {
		// One game per lease: the earliest wrong checkpoint convicts the provider,
		// which closes the lease and rejects this one with it. A second game would
		// only race the first (whichever ends first leaves the other moot) and
		// lock a second bond. If that game does not convict, its end queues this
		// checkpoint again (HandleEvent).
		rec.DeferredBehind = behind.ChallengeID
		rec.Detail += fmt.Sprintf("; not challenged while challenge %d of checkpoint %d of this lease is open: its conviction rejects this one too",
			behind.ChallengeID, behind.Index)
		return nil
	}
	msg, err := dispute.Challenge(r.opts.Operator, cp, exec.Trace)
	if err != nil {
		return err
	}
	res, err := r.opts.Submit(ctx, msg)
	if err != nil {
		return fmt.Errorf("%s; challenging failed: %w", rec.Detail, err)
	}
	id, err := challengeIDOf(res)
	if err != nil {
		return err
	}
	rec.ChallengeID = id
	r.mu.Lock()
	r.executions[id] = exec
	r.mu.Unlock()
	r.log.Warn("challenge opened", "challenge", id, "lease", cp.LeaseId, "index", cp.Index, "provider", cp.Provider, "detail", rec.Detail)
	r.enqueueGame(id)
	return nil
}

// openChallengeBefore returns the verification record of an earlier checkpoint of
// lease whose challenge by this verifier is still open on chain, or nil.
func (r *Role) openChallengeBefore(ctx context.Context, lease, index uint64) (*db.VerificationRecord, error) {
	var earlier []db.VerificationRecord
	if err := r.opts.DB.View(func(tx *db.Tx) error {
		all, err := tx.Verifications()
		for _, v := range all {
			if v.LeaseID == lease && v.Index < index && v.ChallengeID != 0 && v.Outcome == "" {
				earlier = append(earlier, v)
			}
		}
		return err
	}); err != nil {
		return nil, err
	}
	for _, v := range earlier {
		// The chain, not the record: the record learns the outcome only when the
		// follower reaches the resolving block.
		res, err := r.opts.Chain.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: v.ChallengeID})
		if err != nil {
			return nil, fmt.Errorf("reading challenge %d: %w", v.ChallengeID, err)
		}
		if res.Challenge.Outcome == verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			return &v, nil
		}
	}
	return nil, nil
}

// challengeIDOf reads the id of the challenge a MsgChallenge opened.
func challengeIDOf(res *chain.TxResult) (uint64, error) {
	for _, ev := range res.Events {
		if ev.Type != "depinchain.verify.v1.EventChallengeOpened" {
			continue
		}
		for _, a := range ev.Attributes {
			if a.Key == "challenge_id" {
				return strconv.ParseUint(strings.Trim(a.Value, `"`), 10, 64)
			}
		}
	}
	return 0, errors.New("no EventChallengeOpened in the transaction")
}

// challengerEvidence is the verifier's own execution of a challenged
// checkpoint, recomputed after a restart.
func (r *Role) challengerEvidence(ctx context.Context, id uint64, g dispute.Game) (dispute.Evidence, error) {
	r.mu.Lock()
	exec, ok := r.executions[id]
	r.mu.Unlock()
	var err error
	if !ok {
		if exec, err = r.reexecute(ctx, g.Checkpoint, g.Job); err != nil {
			return dispute.Evidence{}, err
		}
		r.mu.Lock()
		r.executions[id] = exec
		r.mu.Unlock()
	}
	ev := exec.Evidence()
	ev.Tiles = func(g dispute.Game) (*tiles.Party, error) { return r.tileParty(g, exec.Trace, exec.stateAt) }
	if ev.PreferTiles, err = r.beyondOneStep(ctx, g); err != nil {
		return dispute.Evidence{}, err
	}
	return ev, nil
}

// reexecute trains cp's range honestly from the state the chain agrees the
// checkpoint started from: the initial weights, the verifier's own state
// from the lease's previous checkpoint, or that checkpoint's state
// downloaded from its provider and checked against its commitment.
func (r *Role) reexecute(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job) (*Execution, error) {
	start, err := r.startState(ctx, cp, job)
	if err != nil {
		return nil, err
	}
	data, err := r.trainingData(ctx, job, cp.Worker, cp.StartStep)
	if err != nil {
		return nil, err
	}
	exec, err := Reexecute(job, data, start, cp.StartStep, cp.EndStep, r.stepExec())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.verified[cp.LeaseId] = exec.End
	r.mu.Unlock()
	return exec, nil
}

func (r *Role) startState(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job) (*exact.State, error) {
	if cp.StartStep == 0 {
		return InitialState(job)
	}
	if job.Spec.Sync != nil {
		return r.roundStartState(ctx, cp, job)
	}
	r.mu.Lock()
	cached := r.verified[cp.LeaseId]
	r.mu.Unlock()
	if cached != nil {
		if h := cached.Root(); slices.Equal(h[:], cp.StartHash) {
			return cached, nil
		}
	}
	uri, err := r.startURI(ctx, cp)
	if err != nil {
		return nil, err
	}
	return r.servedState(ctx, uri, cp.StartHash, job)
}

// servedState is the checkpoint state served at uri whose root is want: rebuilt from its
// custody holders, or downloaded from its trainer.
func (r *Role) servedState(ctx context.Context, uri string, want []byte, job markettypes.Job) (*exact.State, error) {
	if st, err := r.startFromCustody(ctx, uri, want, job); st != nil || err != nil {
		return st, err
	}
	client, ref, from, err := r.fetcher.At(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStartStateUnavailable, uri, err)
	}
	raw, err := r.fetcher.State(ctx, client, ref, from)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint %s at %s: %w", ErrStartStateUnavailable, ref, uri, err)
	}
	if h := exact.StateRoot(raw); !slices.Equal(h[:], want) {
		return nil, fmt.Errorf("%w: the served state's root is not %x", ErrStartStateUnavailable, want)
	}
	return exact.Decode(raw)
}

// startURI is where the state at cp's start step is served: the end of the
// lease's previous checkpoint, or of the checkpoint the lease resumed from.
func (r *Role) startURI(ctx context.Context, cp verifytypes.Checkpoint) (string, error) {
	if cp.Index > 0 {
		prev, err := r.opts.Chain.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: cp.LeaseId, Index: cp.Index - 1})
		if err != nil {
			return "", err
		}
		return prev.Checkpoint.Uri, nil
	}
	lease, err := r.opts.Chain.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: cp.LeaseId})
	if err != nil {
		return "", err
	}
	return lease.Lease.ResumeUri, nil
}

// startFromCustody rebuilds the state whose root is want from the custody holders of the
// checkpoint uri names, when the job keeps its states in custody and k pieces are held: the trainer
// that served it may be gone (a replacement lease's first checkpoint starts from a
// departed trainer's state), and an auditor must not report a held state unavailable.
// It returns nil and no error when custody cannot serve it, for the URI to be tried.
func (r *Role) startFromCustody(ctx context.Context, uri string, want []byte, job markettypes.Job) (*exact.State, error) {
	if r.opts.Custody == nil || job.Spec.Custody == nil {
		return nil, nil
	}
	_, ref, err := checkpoint.ParseURI(uri)
	if err != nil {
		return nil, nil
	}
	tmp, err := os.CreateTemp(r.opts.WorkDir, "custody-start-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := r.opts.Custody.Rebuild(ctx, ref.LeaseID, ref.Index, tmp); err != nil {
		r.log.Info("start state not rebuilt from custody; asking its trainer", "checkpoint", ref, "err", err)
		return nil, nil
	}
	raw, err := os.ReadFile(tmp.Name())
	if err != nil {
		return nil, err
	}
	if h := exact.StateRoot(raw); !slices.Equal(h[:], want) {
		return nil, nil // another checkpoint's state: the URI decides
	}
	return exact.Decode(raw)
}
