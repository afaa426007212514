package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Lease runs are retried this often before the lease is left flagged: a
// trainer that keeps failing the same way would only burn the GPUs.
const maxLeaseAttempts = 3

// maxResumeStateBytes bounds a resume checkpoint downloaded from another provider.
const maxResumeStateBytes = 64 << 30

// errPermanent marks lease failures that retrying cannot fix.
var errPermanent = errors.New("cannot be retried")

// leaseRun is the goroutine serving one lease.
type leaseRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func outputDir(leaseDir string) string { return filepath.Join(leaseDir, "output") }

// startLease starts serving a lease unless it is served already.
func (d *Daemon) startLease(ctx context.Context, leaseID uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, running := d.leases[leaseID]; running {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	run := &leaseRun{cancel: cancel, done: make(chan struct{})}
	d.leases[leaseID] = run
	go func() {
		defer close(run.done)
		defer cancel()
		d.serveLeaseUntilDone(ctx, leaseID)
	}()
}

// stopLease stops a lease's trainer, e.g. because the chain closed the lease.
// It does not wait: the trainer is stopped gracefully in the background.
func (d *Daemon) stopLease(leaseID uint64) {
	d.mu.Lock()
	run, ok := d.leases[leaseID]
	delete(d.leases, leaseID)
	delete(d.progress, leaseID)
	d.mu.Unlock()
	if ok {
		run.cancel()
	}
}

// stopLeases stops every trainer and waits until they have stopped, their
// completed checkpoints safe on disk for the next start.
func (d *Daemon) stopLeases() {
	d.mu.Lock()
	runs := make([]*leaseRun, 0, len(d.leases))
	for id, run := range d.leases {
		runs = append(runs, run)
		delete(d.leases, id)
	}
	d.mu.Unlock()
	for _, run := range runs {
		run.cancel()
		<-run.done
	}
}

func (d *Daemon) onTrainingProgress(p runtime.Progress) {
	d.mu.Lock()
	d.progress[p.LeaseID] = p.Step
	d.mu.Unlock()
	d.metrics.SetTrainingStep(p.LeaseID, p.Step)
	if p.Step%progressLogEvery == 0 || p.Step == p.TotalSteps {
		d.log.Info("training", "lease", p.LeaseID, "step", p.Step, "total_steps", p.TotalSteps, "loss", fmt.Sprintf("%.4f", p.Loss))
	}
}

// progressLogEvery is how many steps of a reference run pass between progress lines.
const progressLogEvery = 25

// serveLeaseUntilDone serves a lease, retrying failed runs from their last
// checkpoint, until every checkpoint is submitted, the lease closes or the
// daemon stops.
func (d *Daemon) serveLeaseUntilDone(ctx context.Context, leaseID uint64) {
	for attempt := 1; ; attempt++ {
		err := d.serveLease(ctx, leaseID)
		if err == nil || ctx.Err() != nil {
			return
		}
		d.noteError(err)
		d.flagLease(leaseID, err.Error())
		if errors.Is(err, errPermanent) || attempt >= maxLeaseAttempts {
			d.log.Error("giving up on lease", "lease", leaseID, "attempts", attempt, "err", err)
			return
		}
		wait := time.Duration(attempt) * 5 * time.Second
		d.log.Warn("lease run failed; resuming from its last checkpoint", "lease", leaseID, "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// serveLease makes one attempt at a lease: it submits local checkpoints the
// chain does not have yet, restarts the trainer from the newest one and
// submits each further checkpoint as the trainer completes it.
func (d *Daemon) serveLease(ctx context.Context, leaseID uint64) error {
	var rec db.LeaseRecord
	if err := d.db.View(func(tx *db.Tx) error {
		var err error
		rec, _, err = tx.Lease(leaseID)
		return err
	}); err != nil {
		return err
	}
	if rec.Status != db.LeaseActive {
		return nil
	}
	leaseRes, err := d.market.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: leaseID})
	if err != nil {
		return fmt.Errorf("reading lease: %w", err)
	}
	lease := leaseRes.Lease
	if lease.State != markettypes.LEASE_STATE_ACTIVE {
		return nil // its EventLeaseClosed is on the way
	}
	jobRes, err := d.market.Job(ctx, &markettypes.QueryJobRequest{JobId: lease.JobId})
	if err != nil {
		return fmt.Errorf("reading job: %w", err)
	}
	job := jobRes.Job
	rt, err := d.runtimes.forJob(ctx, job)
	if err != nil {
		return fmt.Errorf("%w: %v", errPermanent, err)
	}
	out := outputDir(rec.Dir)
	for _, dir := range []string{out, filepath.Join(rec.Dir, "data"), filepath.Join(rec.Dir, "logs")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: %v", errPermanent, err)
		}
	}
	if rec.Runtime != rt.Name() {
		if err := d.updateLease(leaseID, func(l *db.LeaseRecord) { l.Runtime = rt.Name() }); err != nil {
			return err
		}
	}

	// Where the chain stands: the next index and the step it starts at.
	onChain, err := d.chainCheckpoints(ctx, leaseID)
	if err != nil {
		return err
	}
	if err := d.adoptChainCheckpoints(rec, onChain); err != nil {
		return err
	}
	nextIndex, chainEnd := uint64(len(onChain)), lease.ResumeStep
	if n := len(onChain); n > 0 {
		chainEnd = onChain[n-1].EndStep
	}
	if chainEnd > 0 && !complete(out, chainEnd) {
		if chainEnd != lease.ResumeStep {
			return fmt.Errorf("%w: the local checkpoint at step %d, which the chain has, is gone", errPermanent, chainEnd)
		}
		if err := d.fetchResumeCheckpoint(ctx, lease, out); err != nil {
			return fmt.Errorf("fetching the resume checkpoint: %w", err)
		}
	}

	env := trainer.Env{
		JobID: job.Id, LeaseID: leaseID, OutputDir: out, DataDir: filepath.Join(rec.Dir, "data"),
		StartStep: chainEnd, TotalSteps: job.Spec.TotalSteps, CheckpointInterval: job.Spec.CheckpointInterval, JobSeed: job.Seed,
	}
	if chainEnd > 0 {
		env.ResumeFrom = trainer.CheckpointDir(out, chainEnd)
	}
	watcher, err := trainer.NewWatcher(env)
	if err != nil {
		return fmt.Errorf("%w: %v", errPermanent, err)
	}
	submit := func(cp trainer.Checkpoint) error {
		err := d.submitCheckpoint(ctx, rec, nextIndex, cp)
		if err == nil {
			nextIndex++
		}
		return err
	}
	// Checkpoints completed before a restart go first; the trainer resumes
	// from the newest of them.
	local, err := watcher.Poll()
	if err != nil {
		return fmt.Errorf("%w: %v", errPermanent, err)
	}
	resumeStep := chainEnd
	for _, cp := range local {
		if err := submit(cp); err != nil {
			return err
		}
		resumeStep = cp.EndStep()
	}
	if watcher.Finished() {
		d.log.Info("every checkpoint of the lease is submitted", "lease", leaseID, "steps", job.Spec.TotalSteps)
		return nil
	}

	run := runtime.Job{
		Market: job, LeaseID: leaseID, StartStep: resumeStep,
		OutputDir: out, DataDir: env.DataDir, LogDir: filepath.Join(rec.Dir, "logs"), GPUs: rec.GPUs,
	}
	if resumeStep > 0 {
		run.ResumeFrom = trainer.CheckpointDir(out, resumeStep)
	}
	if d.simulatedGPUs() && rt == runtime.Runtime(d.runtimes.container) {
		// A simulated GPU has no device node: asking the Engine for it
		// would fail every container.
		run.GPUs = nil
	}
	handle, err := rt.Start(ctx, run)
	if err != nil {
		return fmt.Errorf("starting the %s runtime: %w", rt.Name(), err)
	}
	d.log.Info("training started", "lease", leaseID, "job", job.Id, "runtime", rt.Name(), "from_step", resumeStep,
		"total_steps", job.Spec.TotalSteps, "checkpoint_every", job.Spec.CheckpointInterval, "gpus", rec.GPUs)
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		handle.Stop(stop) //nolint:errcheck // a finished run stops at once
	}()

	// Watch until the last checkpoint is in or the trainer ends; a final
	// poll after it ends catches checkpoints it completed on the way out.
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go func() {
		select {
		case <-handle.Done():
			stopWatching()
		case <-watchCtx.Done():
		}
	}()
	if rt != runtime.Runtime(d.runtimes.reference) {
		go d.followMetricsLog(watchCtx, leaseID, out, job.Spec.TotalSteps)
	}
	watchErr := watcher.Watch(watchCtx, 250*time.Millisecond, submit)
	if watcher.Finished() {
		d.log.Info("every checkpoint of the lease is submitted", "lease", leaseID, "steps", job.Spec.TotalSteps)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-handle.Done():
		if err := handle.Wait(); err != nil {
			return err
		}
		return fmt.Errorf("the trainer ended before step %d without error", job.Spec.TotalSteps)
	default:
		return watchErr
	}
}

func complete(outputDir string, step uint64) bool {
	_, err := os.Stat(filepath.Join(trainer.CheckpointDir(outputDir, step), trainer.CompleteMarkerName))
	return err == nil
}

// chainCheckpoints lists the lease's checkpoints on chain, in index order.
func (d *Daemon) chainCheckpoints(ctx context.Context, leaseID uint64) ([]verifytypes.Checkpoint, error) {
	res, err := d.verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leaseID})
	if err != nil {
		return nil, fmt.Errorf("reading the lease's checkpoints: %w", err)
	}
	cps := res.Checkpoints
	slices.SortFunc(cps, func(a, b verifytypes.Checkpoint) int { return int(a.Index) - int(b.Index) })
	return cps, nil
}

// submitCheckpoint commits a completed checkpoint folder, starts serving it
// and submits its commitment as checkpoint index of the lease. If the chain
// already has that index (the sidecar died after broadcasting), it only
// records what the chain has.
func (d *Daemon) submitCheckpoint(ctx context.Context, rec db.LeaseRecord, index uint64, cp trainer.Checkpoint) error {
	started := time.Now()
	commitment, err := checkpoint.Commit(cp, checkpoint.HashOptions{Progress: d.hashProgress(rec.LeaseID, index)})
	if err != nil {
		return err
	}
	d.metrics.CheckpointHashed(uint64(commitment.State.Size))
	ref := checkpoint.Ref{LeaseID: rec.LeaseID, Index: index}
	if err := d.catalog.Add(checkpoint.Entry{Ref: ref, JobID: rec.JobID, Dir: cp.Dir, Commitment: commitment}); err != nil {
		return err
	}
	record := db.CheckpointRecord{
		LeaseID: rec.LeaseID, Index: index, StartStep: cp.StartStep(), EndStep: cp.EndStep(),
		StateRoot: commitment.State.Root[:], TraceRoot: commitment.TraceRoot[:], FinalHash: commitment.FinalHash[:],
		Status: db.CheckpointSubmitted,
	}
	if existing, err := d.verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: rec.LeaseID, Index: index}); err == nil {
		c := existing.Checkpoint
		if !slices.Equal(c.FinalHash, record.FinalHash) || c.EndStep != record.EndStep {
			return fmt.Errorf("%w: the chain's checkpoint %d of lease %d ends at step %d with %x, the local one at %d with %x",
				errPermanent, index, rec.LeaseID, c.EndStep, c.FinalHash, record.EndStep, record.FinalHash)
		}
		record.Height, record.Status = c.SubmittedHeight, checkpointStatus(c.Status)
		return d.recordCheckpoint(record)
	}

	tr := cp.Trace
	if d.cheatFrom > cp.StartStep() && d.cheatFrom <= cp.EndStep() {
		if tr, err = d.fabricate(cp); err != nil {
			return err
		}
		root := tr.Root()
		record.TraceRoot, record.FinalHash = root[:], tr.Hashes[len(tr.Hashes)-1][:]
	}
	final, proof, err := tr.Open(tr.End())
	if err != nil {
		return err
	}
	root := tr.Root()
	msg := &verifytypes.MsgSubmitCheckpoint{
		Provider: d.operator, LeaseId: rec.LeaseID, Index: index, StartStep: cp.StartStep(), EndStep: cp.EndStep(),
		StateRoot: commitment.State.Root[:], TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
		Uri: d.checkpointURI(ref), Metrics: checkpointMetrics(outputDir(rec.Dir), cp.EndStep()),
	}
	res, err := d.submit(ctx, msg)
	if err != nil {
		d.metrics.Checkpoint(metrics.CheckpointFailed)
		return fmt.Errorf("submitting checkpoint %d of lease %d: %w", index, rec.LeaseID, err)
	}
	record.TxHash, record.Height = res.Hash, res.Height
	d.metrics.Checkpoint(metrics.CheckpointSubmitted)
	d.log.Info("checkpoint submitted", "lease", rec.LeaseID, "index", index, "steps", fmt.Sprintf("%d..%d", cp.StartStep(), cp.EndStep()),
		"state_root", commitment.State.Root.String(), "state_bytes", commitment.State.Size, "took", time.Since(started).Round(time.Millisecond),
		"height", res.Height, "tx", res.Hash)
	return d.recordCheckpoint(record)
}

// adoptChainCheckpoints records the lease's checkpoints the chain has but the
// store does not: the sidecar died after broadcasting one and before
// recording it. Their folders are served again.
func (d *Daemon) adoptChainCheckpoints(rec db.LeaseRecord, onChain []verifytypes.Checkpoint) error {
	for _, c := range onChain {
		var known bool
		if err := d.db.View(func(tx *db.Tx) (err error) {
			_, known, err = tx.Checkpoint(c.LeaseId, c.Index)
			return err
		}); err != nil {
			return err
		}
		if known {
			continue
		}
		err := d.recordCheckpoint(db.CheckpointRecord{
			LeaseID: c.LeaseId, Index: c.Index, StartStep: c.StartStep, EndStep: c.EndStep,
			StateRoot: c.StateRoot, TraceRoot: c.TraceRoot, FinalHash: c.FinalHash,
			Height: c.SubmittedHeight, Status: checkpointStatus(c.Status),
		})
		if err != nil {
			return err
		}
		if _, retained := d.catalog.Lookup(checkpoint.Ref{LeaseID: c.LeaseId, Index: c.Index}); !retained {
			if err := d.retain(rec, c.EndStep, c.Index); err != nil {
				d.log.Warn("a checkpoint on chain has no local folder to serve", "lease", c.LeaseId, "index", c.Index, "err", err)
			} else if c.Status == verifytypes.CHECKPOINT_STATUS_FINAL {
				d.catalog.MarkFinal(checkpoint.Ref{LeaseID: c.LeaseId, Index: c.Index}, time.Now()) //nolint:errcheck // just added
			}
		}
		d.log.Info("recorded a checkpoint the chain already had", "lease", c.LeaseId, "index", c.Index, "status", c.Status.String())
	}
	return nil
}

// fabricate is the cheating mode: it replaces the trainer's hashes from
// d.cheatFrom on with made-up ones, as a provider that skipped the work
// would, and keeps them beside the honest trace so the cheater defends what
// it committed.
func (d *Daemon) fabricate(cp trainer.Checkpoint) (trace.Trace, error) {
	hashes := slices.Clone(cp.Trace.Hashes)
	for i := d.cheatFrom - cp.StartStep(); i < uint64(len(hashes)); i++ {
		hashes[i] = sha256.Sum256([]byte(fmt.Sprintf("fabricated h_%d", cp.StartStep()+i)))
	}
	f, err := os.Create(filepath.Join(cp.Dir, CommittedTraceFileName))
	if err != nil {
		return trace.Trace{}, err
	}
	if err := errors.Join(trace.Write(f, hashes), f.Close()); err != nil {
		return trace.Trace{}, err
	}
	d.log.Warn("CHEATING: committing fabricated hashes", "from_step", d.cheatFrom, "checkpoint_steps", fmt.Sprintf("%d..%d", cp.StartStep(), cp.EndStep()))
	return trace.New(cp.StartStep(), hashes), nil
}

func (d *Daemon) recordCheckpoint(cp db.CheckpointRecord) error {
	return d.db.Update(func(tx *db.Tx) error {
		if prev, ok, err := tx.Checkpoint(cp.LeaseID, cp.Index); err != nil {
			return err
		} else if ok && prev.Status != db.CheckpointSubmitted {
			// The follower got there first (e.g. finalized during a restart).
			cp.Status = prev.Status
		}
		if err := tx.PutCheckpoint(cp); err != nil {
			return err
		}
		l, ok, err := tx.Lease(cp.LeaseID)
		if err != nil || !ok {
			return err
		}
		l.LastCheckpointStep = max(l.LastCheckpointStep, cp.EndStep)
		return tx.PutLease(l)
	})
}

func checkpointStatus(s verifytypes.CheckpointStatus) db.CheckpointStatus {
	switch s {
	case verifytypes.CHECKPOINT_STATUS_FINAL:
		return db.CheckpointFinalized
	case verifytypes.CHECKPOINT_STATUS_REJECTED:
		return db.CheckpointRejected
	default:
		return db.CheckpointSubmitted
	}
}

// checkpointURI is where others download checkpoint ref from this provider.
func (d *Daemon) checkpointURI(ref checkpoint.Ref) string {
	return fmt.Sprintf("%s/checkpoints/%d/%d", strings.TrimRight(d.cfg.Checkpoints.PublicURL, "/"), ref.LeaseID, ref.Index)
}

// parseCheckpointURI splits a checkpoint URI into its server and reference.
func parseCheckpointURI(uri string) (base string, ref checkpoint.Ref, err error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", ref, err
	}
	parts := strings.Split(strings.TrimRight(u.Path, "/"), "/")
	if len(parts) < 3 || parts[len(parts)-3] != "checkpoints" {
		return "", ref, fmt.Errorf("checkpoint URI %q does not end in /checkpoints/<lease>/<index>", uri)
	}
	if ref.LeaseID, err = strconv.ParseUint(parts[len(parts)-2], 10, 64); err != nil {
		return "", ref, fmt.Errorf("checkpoint URI %q: lease: %w", uri, err)
	}
	if ref.Index, err = strconv.ParseUint(parts[len(parts)-1], 10, 64); err != nil {
		return "", ref, fmt.Errorf("checkpoint URI %q: index: %w", uri, err)
	}
	u.Path = strings.Join(parts[:len(parts)-3], "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), ref, nil
}

// fetchResumeCheckpoint puts the job's last final checkpoint, where a
// re-leased job resumes, into the lease's output as the checkpoint at
// lease.ResumeStep: from this provider's own catalog when it trained that
// part, else downloaded from the provider that did and verified against the
// roots on chain.
func (d *Daemon) fetchResumeCheckpoint(ctx context.Context, lease markettypes.Lease, out string) error {
	client, ref, onChain, err := d.checkpointAt(ctx, lease.ResumeUri)
	if err != nil {
		return err
	}
	// The folder needs h_(step-1) besides h_step: a checkpoint's trace holds
	// at least the step before its state.
	var state []byte
	var before merkle.Hash
	if entry, ok := d.catalog.Lookup(ref); ok && slices.Equal(entry.Commitment.State.Root[:], onChain.StateRoot) {
		local, err := trainer.ReadCheckpoint(entry.Dir, onChain.EndStep)
		if err != nil {
			return err
		}
		before = local.Trace.Hashes[len(local.Trace.Hashes)-2]
		if state, err = os.ReadFile(local.StatePath()); err != nil {
			return err
		}
	} else {
		if state, err = d.downloadState(ctx, client, ref, onChain); err != nil {
			return err
		}
		traceRoot, err := merkle.HashFromBytes(onChain.TraceRoot)
		if err != nil {
			return err
		}
		if before, err = client.TraceHash(ctx, ref, onChain.EndStep-1, traceRoot, onChain.StartStep, onChain.EndStep); err != nil {
			return err
		}
	}
	h := merkle.Hash(sha256.Sum256(state))
	if !slices.Equal(h[:], lease.ResumeHash) {
		return fmt.Errorf("checkpoint %s: its state hashes to %s, the lease resumes from %x", ref, h, lease.ResumeHash)
	}
	if _, err := trainer.WriteCheckpoint(out, lease.ResumeStep, state, []merkle.Hash{before, h}); err != nil {
		return err
	}
	d.log.Info("resume checkpoint fetched", "lease", lease.Id, "step", lease.ResumeStep, "from", lease.ResumeUri, "bytes", len(state))
	return nil
}

// checkpointAt names the checkpoint a URI serves and reads its commitment on
// chain, which is what everything downloaded from the URI is checked against.
func (d *Daemon) checkpointAt(ctx context.Context, uri string) (checkpoint.Client, checkpoint.Ref, verifytypes.Checkpoint, error) {
	base, ref, err := parseCheckpointURI(uri)
	if err != nil {
		return checkpoint.Client{}, ref, verifytypes.Checkpoint{}, err
	}
	res, err := d.verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: ref.LeaseID, Index: ref.Index})
	if err != nil {
		return checkpoint.Client{}, ref, verifytypes.Checkpoint{}, fmt.Errorf("reading checkpoint %s on chain: %w", ref, err)
	}
	return checkpoint.Client{BaseURL: base}, ref, res.Checkpoint, nil
}

// downloadState fetches a checkpoint's state from its provider, every chunk
// verified against the state_root on chain as it arrives.
func (d *Daemon) downloadState(ctx context.Context, client checkpoint.Client, ref checkpoint.Ref, onChain verifytypes.Checkpoint) ([]byte, error) {
	root, err := merkle.HashFromBytes(onChain.StateRoot)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(d.cfg.Storage.WorkDir, "download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, trainer.StateFileName)
	if _, err := client.DownloadState(ctx, ref, root, path, maxResumeStateBytes); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// checkpointMetrics reports the training loss at a checkpoint's end step, as
// the trainer logged it.
func checkpointMetrics(out string, endStep uint64) []verifytypes.Metric {
	metrics, err := trainer.ReadMetrics(out)
	if err != nil {
		return nil
	}
	for i := len(metrics) - 1; i >= 0; i-- {
		if m := metrics[i]; m.Step == endStep && !math.IsNaN(m.Loss) && !math.IsInf(m.Loss, 0) {
			return []verifytypes.Metric{{Name: "loss", Value: strconv.FormatFloat(m.Loss, 'f', 6, 64)}}
		}
	}
	return nil
}

// followMetricsLog reports the progress of trainers outside the process
// (which cannot call back) from their metrics log.
func (d *Daemon) followMetricsLog(ctx context.Context, leaseID uint64, out string, total uint64) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		metrics, err := trainer.ReadMetrics(out)
		if err != nil || len(metrics) == 0 || metrics[len(metrics)-1].Step == last {
			continue
		}
		m := metrics[len(metrics)-1]
		last = m.Step
		d.onTrainingProgress(runtime.Progress{LeaseID: leaseID, Step: m.Step, TotalSteps: total, Loss: m.Loss})
	}
}

// hashProgress logs the hashing of large state files about every 5 seconds.
func (d *Daemon) hashProgress(leaseID, index uint64) func(hashed, total int64) {
	last := time.Now()
	return func(hashed, total int64) {
		if time.Since(last) < 5*time.Second {
			return
		}
		last = time.Now()
		d.log.Info("hashing checkpoint", "lease", leaseID, "index", index, "hashed_bytes", hashed, "total_bytes", total)
	}
}

func (d *Daemon) updateLease(leaseID uint64, change func(*db.LeaseRecord)) error {
	return d.db.Update(func(tx *db.Tx) error {
		l, ok, err := tx.Lease(leaseID)
		if err != nil || !ok {
			return err
		}
		change(&l)
		return tx.PutLease(l)
	})
}

// flagLease records a problem with a lease, shown by the status API.
func (d *Daemon) flagLease(leaseID uint64, problem string) {
	err := d.updateLease(leaseID, func(l *db.LeaseRecord) {
		if !slices.Contains(l.Problems, problem) {
			l.Problems = append(l.Problems, problem)
		}
	})
	if err != nil {
		d.log.Error("recording a lease problem failed", "lease", leaseID, "problem", problem, "err", err)
	}
}
