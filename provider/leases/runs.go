package leases

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// Lease runs are retried this often before the lease is left flagged: a
// trainer that keeps failing the same way would only burn the GPUs.
const maxLeaseAttempts = 3

// progressLogEvery is how many steps of a run pass between progress lines.
const progressLogEvery = 25

// errPermanent marks lease failures that retrying cannot fix.
var errPermanent = errors.New("cannot be retried")

// leaseRun is the goroutine serving one lease.
type leaseRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startLease starts serving a lease unless it is served already.
func (r *Role) startLease(ctx context.Context, leaseID uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, running := r.runs[leaseID]; running {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	run := &leaseRun{cancel: cancel, done: make(chan struct{})}
	r.runs[leaseID] = run
	go func() {
		defer close(run.done)
		defer cancel()
		r.serveUntilDone(ctx, leaseID)
	}()
}

// stopLease stops a lease's trainer, e.g. because the chain closed the lease.
// It does not wait: the trainer is stopped gracefully in the background.
func (r *Role) stopLease(leaseID uint64) {
	r.mu.Lock()
	run, ok := r.runs[leaseID]
	delete(r.runs, leaseID)
	delete(r.progress, leaseID)
	r.mu.Unlock()
	if ok {
		run.cancel()
	}
}

// stopAll stops every trainer and waits until they have stopped.
func (r *Role) stopAll() {
	r.mu.Lock()
	runs := make([]*leaseRun, 0, len(r.runs))
	for id, run := range r.runs {
		runs = append(runs, run)
		delete(r.runs, id)
	}
	r.mu.Unlock()
	for _, run := range runs {
		run.cancel()
		<-run.done
	}
}

func (r *Role) onTrainingProgress(p runtime.Progress) {
	r.mu.Lock()
	r.progress[p.LeaseID] = p.Step
	r.mu.Unlock()
	r.opts.Metrics.SetTrainingStep(p.LeaseID, p.Step)
	if p.Step%progressLogEvery == 0 || p.Step == p.TotalSteps {
		r.log.Info("training", "lease", p.LeaseID, "step", p.Step, "total_steps", p.TotalSteps, "loss", fmt.Sprintf("%.4f", p.Loss))
	}
}

// serveUntilDone serves a lease, retrying failed runs from their last
// checkpoint, until every checkpoint is submitted, the lease closes or the
// role stops.
func (r *Role) serveUntilDone(ctx context.Context, leaseID uint64) {
	for attempt := 1; ; attempt++ {
		err := r.serve(ctx, leaseID)
		if err == nil || ctx.Err() != nil {
			return
		}
		r.lastErr.Note(err)
		r.flagLease(leaseID, err.Error())
		if errors.Is(err, errPermanent) || attempt >= maxLeaseAttempts {
			r.log.Error("giving up on lease", "lease", leaseID, "attempts", attempt, "err", err)
			return
		}
		wait := time.Duration(attempt) * 5 * time.Second
		r.log.Warn("lease run failed; resuming from its last checkpoint", "lease", leaseID, "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// lease is one attempt at serving a lease: what the database, the chain
// and the runtime say about it.
type lease struct {
	rec   db.LeaseRecord
	chain markettypes.Lease
	job   markettypes.Job
	rt    runtime.Runtime
	// next is the index the next checkpoint is submitted as.
	next uint64
}

func (l *lease) out() string     { return l.rec.OutputDir() }
func (l *lease) dataDir() string { return filepath.Join(l.rec.Dir, "data") }
func (l *lease) logDir() string  { return filepath.Join(l.rec.Dir, "logs") }

// weightsFile is where a fine-tuning job's initial weights are put together.
func (l *lease) weightsFile() string { return filepath.Join(l.rec.Dir, "init-weights.safetensors") }

// serve makes one attempt at a lease: it submits local checkpoints the
// chain does not have yet, restarts the trainer from the newest one and
// submits each further checkpoint as the trainer completes it.
func (r *Role) serve(ctx context.Context, leaseID uint64) error {
	l, err := r.prepare(ctx, leaseID)
	if err != nil || l == nil {
		return err
	}
	// A trainer a crashed sidecar left running must not write into the
	// folders this attempt reads and rewrites.
	if err := runtime.StopLeftover(l.logDir()); err != nil {
		return err
	}
	if l.job.Spec.Sync != nil {
		return r.serveRounds(ctx, l)
	}
	chainEnd, err := r.catchUp(ctx, l)
	if err != nil {
		return err
	}
	if chainEnd >= l.job.Spec.TotalSteps {
		// A restart after the last checkpoint was submitted: the lease
		// waits for finality, with nothing left to train.
		r.log.Info("every checkpoint of the lease is submitted", "lease", leaseID, "steps", l.job.Spec.TotalSteps)
		return nil
	}
	env := trainer.Env{
		JobID: l.job.Id, LeaseID: leaseID, OutputDir: l.out(), DataDir: l.dataDir(), StartStep: chainEnd,
		TotalSteps: l.job.Spec.TotalSteps, CheckpointInterval: l.job.Spec.CheckpointInterval, JobSeed: l.job.Seed,
		Exact: exactConfigOf(l.job),
	}
	if chainEnd > 0 {
		env.ResumeFrom = trainer.CheckpointDir(l.out(), chainEnd)
	}
	watcher, err := trainer.NewWatcher(env)
	if err != nil {
		return fmt.Errorf("%w: %v", errPermanent, err)
	}
	// Checkpoints completed before a restart go first; the trainer resumes
	// from the newest of them.
	local, err := watcher.Poll()
	if err != nil {
		return fmt.Errorf("%w: %v", errPermanent, err)
	}
	resumeStep := chainEnd
	for _, cp := range local {
		if err := r.submitNext(ctx, l, cp); err != nil {
			return err
		}
		resumeStep = cp.EndStep()
	}
	if watcher.Finished() {
		r.log.Info("every checkpoint of the lease is submitted", "lease", leaseID, "steps", l.job.Spec.TotalSteps)
		return nil
	}
	if err := r.prepareData(ctx, l); err != nil {
		return err
	}
	return r.train(ctx, l, watcher, resumeStep)
}

// prepareData puts a dataset-backed job's training data in the lease's data
// folder: the pieces of the shards assigned to the lease's worker, fetched
// and checked by Options.Data (a folder already complete is reused). Jobs
// without a dataset get the built-in corpus from the runtime. The trainer
// does not start without its data.
func (r *Role) prepareData(ctx context.Context, l *lease) error {
	if err := r.prepareInitWeights(ctx, l); err != nil {
		return err
	}
	if l.job.Spec.DatasetId == "" {
		return nil
	}
	if r.opts.Data == nil {
		return fmt.Errorf("%w: job %d trains on dataset %q and this sidecar has no dataset fetcher", errPermanent, l.job.Id, l.job.Spec.DatasetId)
	}
	if _, err := r.opts.Data.Prepare(ctx, l.job, l.chain.Worker, l.dataDir()); err != nil {
		return fmt.Errorf("training data of worker %d (dataset %q): %w", l.chain.Worker, l.job.Spec.DatasetId, err)
	}
	return nil
}

// prepare reads what an attempt needs; a nil lease means there is nothing
// to serve (the lease closed).
func (r *Role) prepare(ctx context.Context, leaseID uint64) (*lease, error) {
	l := &lease{}
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		l.rec, _, err = tx.Lease(leaseID)
		return err
	}); err != nil {
		return nil, err
	}
	if l.rec.Status != db.LeaseActive {
		return nil, nil
	}
	leaseRes, err := r.opts.Chain.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: leaseID})
	if err != nil {
		return nil, fmt.Errorf("reading lease: %w", err)
	}
	if l.chain = leaseRes.Lease; l.chain.State != markettypes.LEASE_STATE_ACTIVE {
		return nil, nil // its EventLeaseClosed is on the way
	}
	jobRes, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: l.chain.JobId})
	if err != nil {
		return nil, fmt.Errorf("reading job: %w", err)
	}
	l.job = jobRes.Job
	if l.rt, err = r.runtimes.forJob(ctx, l.job); err != nil {
		return nil, fmt.Errorf("%w: %v", errPermanent, err)
	}
	for _, dir := range []string{l.out(), l.dataDir(), l.logDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", errPermanent, err)
		}
	}
	if l.rec.Runtime != l.rt.Name() {
		if err := r.updateLease(leaseID, func(rec *db.LeaseRecord) { rec.Runtime = l.rt.Name() }); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// catchUp brings the lease's folder level with the chain: it records the
// checkpoints the chain has and the database lacks, and puts the checkpoint
// the lease resumes from in place. It returns the step the chain's
// checkpoints end at, where training continues.
func (r *Role) catchUp(ctx context.Context, l *lease) (chainEnd uint64, _ error) {
	onChain, err := r.chainCheckpoints(ctx, l.rec.LeaseID)
	if err != nil {
		return 0, err
	}
	if err := r.adoptChainCheckpoints(l.rec, onChain); err != nil {
		return 0, err
	}
	l.next, chainEnd = uint64(len(onChain)), l.chain.ResumeStep
	if n := len(onChain); n > 0 {
		chainEnd = onChain[n-1].EndStep
	}
	if chainEnd > 0 && !complete(l.out(), chainEnd) {
		if chainEnd != l.chain.ResumeStep {
			return 0, fmt.Errorf("%w: the local checkpoint at step %d, which the chain has, is gone", errPermanent, chainEnd)
		}
		if err := r.fetchResumeCheckpoint(ctx, l.chain, l.job, l.out()); err != nil {
			return 0, fmt.Errorf("fetching the resume checkpoint: %w", err)
		}
	}
	return chainEnd, nil
}

// submitNext submits cp as the lease's next checkpoint.
func (r *Role) submitNext(ctx context.Context, l *lease, cp trainer.Checkpoint) error {
	if err := r.submitCheckpoint(ctx, l.rec, l.next, cp, custodySpecOf(l.job), nil); err != nil {
		return err
	}
	l.next++
	return nil
}

// train starts the trainer at resumeStep and submits each checkpoint it
// completes, until the last is in or the trainer ends.
func (r *Role) train(ctx context.Context, l *lease, watcher *trainer.Watcher, resumeStep uint64) error {
	handle, err := r.startTrainer(ctx, l, resumeStep)
	if err != nil {
		return err
	}
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
	if l.rt != runtime.Runtime(r.runtimes.reference) {
		go r.followMetricsLog(watchCtx, l.rec.LeaseID, l.out(), l.job.Spec.TotalSteps)
	}
	watchErr := watcher.Watch(watchCtx, 250*time.Millisecond, func(cp trainer.Checkpoint) error { return r.submitNext(ctx, l, cp) })
	if watchErr == nil { // Watch ends without an error only once every checkpoint is in
		r.log.Info("every checkpoint of the lease is submitted", "lease", l.rec.LeaseID, "steps", l.job.Spec.TotalSteps)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !errors.Is(watchErr, context.Canceled) {
		// A checkpoint or its submission failed; the watcher may have read the last
		// one all the same, so Finished does not say the lease is done.
		return watchErr
	}
	select {
	case <-handle.Done():
		if err := handle.Wait(); err != nil {
			return err
		}
		return fmt.Errorf("the trainer ended before step %d without error", l.job.Spec.TotalSteps)
	default:
		return watchErr
	}
}

// prepareInitWeights fetches a fine-tuning job's weights dataset whole, imports it and
// checks that the import's root is the spec's init_state_root (the chain's h_0): weights
// that do not import to it would train a model nobody could dispute, so the lease does not
// start. The file stays for the trainer (DEPIN_INIT_WEIGHTS).
func (r *Role) prepareInitWeights(ctx context.Context, l *lease) error {
	w := l.job.Spec.Workload
	if w.InitWeights == "" {
		return nil
	}
	if r.opts.Data == nil {
		return fmt.Errorf("%w: job %d starts from the weights of dataset %q and this sidecar has no dataset fetcher", errPermanent, l.job.Id, w.InitWeights)
	}
	dir := l.weightsFile() + ".d"
	if _, err := r.opts.Data.PrepareWhole(ctx, w.InitWeights, dir); err != nil {
		return fmt.Errorf("initial weights (dataset %q): %w", w.InitWeights, err)
	}
	raw, err := exact.ReadStreamDir(dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.weightsFile(), raw, 0o644); err != nil {
		return err
	}
	cfg, err := l.job.Spec.ExactConfig()
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	s, err := exact.ImportSafetensors(cfg, l.weightsFile())
	if err != nil {
		return fmt.Errorf("%w: the weights of dataset %q do not import into job %d's model: %w", errPermanent, w.InitWeights, l.job.Id, err)
	}
	if root := s.Root(); !bytes.Equal(root[:], w.InitStateRoot) {
		return fmt.Errorf("%w: the weights of dataset %q import to root %x, not the spec's init_state_root %x", errPermanent, w.InitWeights, root, w.InitStateRoot)
	}
	return nil
}

func (r *Role) startTrainer(ctx context.Context, l *lease, resumeStep uint64) (runtime.Handle, error) {
	run := runtime.Job{
		Market: l.job, LeaseID: l.rec.LeaseID, StartStep: resumeStep,
		OutputDir: l.out(), DataDir: l.dataDir(), LogDir: l.logDir(), GPUs: l.rec.GPUs,
	}
	if resumeStep == 0 && l.job.Spec.Workload.InitWeights != "" {
		run.InitWeights = l.weightsFile()
	}
	if resumeStep > 0 {
		run.ResumeFrom = trainer.CheckpointDir(l.out(), resumeStep)
	}
	if r.opts.SimulatedGPUs && l.rt == runtime.Runtime(r.runtimes.container) {
		// A simulated GPU has no device node: asking the Engine for it
		// would fail every container.
		run.GPUs = nil
	}
	handle, err := l.rt.Start(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("starting the %s runtime: %w", l.rt.Name(), err)
	}
	r.log.Info("training started", "lease", l.rec.LeaseID, "job", l.job.Id, "runtime", l.rt.Name(), "from_step", resumeStep,
		"total_steps", l.job.Spec.TotalSteps, "checkpoint_every", l.job.Spec.CheckpointInterval, "gpus", l.rec.GPUs)
	return handle, nil
}

func complete(outputDir string, step uint64) bool {
	_, err := os.Stat(filepath.Join(trainer.CheckpointDir(outputDir, step), trainer.CompleteMarkerName))
	return err == nil
}

// followMetricsLog reports the progress of trainers outside the process
// (which cannot call back) from their metrics log.
func (r *Role) followMetricsLog(ctx context.Context, leaseID uint64, out string, total uint64) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		ms, err := trainer.ReadMetrics(out)
		if err != nil || len(ms) == 0 || ms[len(ms)-1].Step == last {
			continue
		}
		m := ms[len(ms)-1]
		last = m.Step
		r.onTrainingProgress(runtime.Progress{LeaseID: leaseID, Step: m.Step, TotalSteps: total, Loss: m.Loss})
	}
}
