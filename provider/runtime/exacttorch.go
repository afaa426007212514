//go:build unix

package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/depinchain/depinchain/provider/trainer"
)

// ExactTorch runs the exact transformer workload (kinds reference and
// transformer) with its PyTorch implementation, pkg/exact/torch/train.py, as
// a Process: the operator's command with the trainer contract's environment
// (DEPIN_EXACT_CONFIG holding the job's configuration, CUDA_VISIBLE_DEVICES
// the leased GPUs), logs in Job.LogDir, SIGTERM on Stop. train.py is
// bit-identical to the Go trainer (Reference), so its checkpoints commit the
// same roots and pass the same checks; it trains on CUDA when torch sees the
// leased GPUs, data-parallel over DEPIN_TORCH_PROCS processes. Its process
// group is recorded in Job.LogDir (TrainerGroupFileName) for StopLeftover.
// It runs training-together rounds too (RunRound).
type ExactTorch struct {
	Process
}

// Name implements Runtime.
func (*ExactTorch) Name() string { return "exact-torch" }

// Start implements Runtime.
func (t *ExactTorch) Start(_ context.Context, job Job) (Handle, error) {
	if kind := job.Market.Spec.Workload.Kind; !kind.Adjudicable() {
		return nil, fmt.Errorf("runtime exact-torch: job %d is a %s workload", job.Market.Id, kind)
	}
	if _, err := job.Market.Spec.ExactConfig(); err != nil {
		return nil, fmt.Errorf("runtime exact-torch: job %d: %w", job.Market.Id, err)
	}
	env, err := prepare(job)
	if err != nil {
		return nil, err
	}
	return t.start(env, job.LogDir)
}

// RunRound runs a training-together round run (env.Round set; the rounds role's
// Trainer) with train.py, its logs and process group in logDir, and returns when it
// ended: nil when its round-end checkpoint is complete (trainer.CheckRun). Steps go to
// onStep as train.py logs them in metrics.jsonl. When ctx ends the trainer is stopped
// (SIGTERM, SIGKILL after 10 s) and ctx's error returned.
func (t *ExactTorch) RunRound(ctx context.Context, env trainer.Env, logDir string, onStep func(trainer.StepMetric)) error {
	if env.Round == nil || env.Exact == nil {
		return fmt.Errorf("runtime exact-torch: job %d: not a round run of the exact workload", env.JobID)
	}
	if err := env.Validate(); err != nil {
		return err
	}
	if !filepath.IsAbs(logDir) {
		return fmt.Errorf("runtime exact-torch: the log directory must be an absolute path, got %q", logDir)
	}
	for _, dir := range []string{env.OutputDir, logDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	h, err := t.start(env, logDir)
	if err != nil {
		return err
	}
	reported := env.StartStep
	report := func() {
		ms, err := trainer.ReadMetrics(env.OutputDir)
		if err != nil || onStep == nil {
			return // progress only: the checkpoint is what counts
		}
		for _, m := range ms {
			if m.Step > reported && m.Step <= env.TotalSteps {
				onStep(m)
				reported = m.Step
			}
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-h.Done():
			report()
			return h.Wait()
		case <-tick.C:
			report()
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.Stop(stop); err != nil {
				return err
			}
			return ctx.Err()
		}
	}
}

// start runs train.py with env and records its process group in logDir, so that a
// sidecar restarted after a crash stops this trainer before it trains the lease again
// (StopLeftover).
func (t *ExactTorch) start(env trainer.Env, logDir string) (Handle, error) {
	h, err := t.Process.start(env, logDir)
	if err != nil {
		return nil, err
	}
	if err := recordGroup(logDir, h.pgid); err != nil {
		select {
		case <-h.Done(): // it ended already: Wait says why
			return h, nil
		default:
		}
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.Stop(stop) //nolint:errcheck // the error that matters is the record's
		return nil, fmt.Errorf("runtime exact-torch: recording the trainer's process group: %w", err)
	}
	return h, nil
}
