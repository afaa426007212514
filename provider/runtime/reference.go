package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/trainer"
)

// Progress is one step of a reference run, for logs and metrics.
type Progress struct {
	LeaseID    uint64
	Step       uint64
	TotalSteps uint64
	// Loss is the step's training loss in nats.
	Loss float64
}

// Reference runs the exact transformer workload (kinds reference and
// transformer) in the sidecar's process with Go on every core: the same
// package the chain's referee re-executes, on the job's training data (the
// files of Job.DataDir). It needs no GPU and ignores Job.LogDir and Job.GPUs.
type Reference struct {
	// Progress, if set, is called after every step, from the run's
	// goroutine.
	Progress func(Progress)
}

// Name implements Runtime.
func (*Reference) Name() string { return "reference" }

// Start implements Runtime. The run stops between two steps when stopped.
func (r *Reference) Start(_ context.Context, job Job) (Handle, error) {
	if kind := job.Market.Spec.Workload.Kind; !kind.Adjudicable() {
		return nil, fmt.Errorf("runtime reference: job %d is a %s workload", job.Market.Id, kind)
	}
	env, err := prepare(job)
	if err != nil {
		return nil, err
	}
	stream, err := trainingStream(env)
	if err != nil {
		return nil, err
	}
	// The Go trainer logs a line per step, as an external trainer prints
	// one, so owners can follow it (provider/logs serves the file).
	stdout, stderr, err := openLogs(job.LogDir)
	if err != nil {
		return nil, err
	}
	stderr.Close()
	fmt.Fprintf(stdout, "%s reference trainer: lease %d, job %d, steps %d..%d\n",
		time.Now().UTC().Format(time.RFC3339), job.LeaseID, job.Market.Id, env.StartStep, env.TotalSteps)
	onStep := func(m trainer.StepMetric) {
		fmt.Fprintf(stdout, "%s step %d/%d loss %.6f\n", time.Now().UTC().Format(time.RFC3339), m.Step, env.TotalSteps, m.Loss)
		if r.Progress != nil {
			r.Progress(Progress{LeaseID: job.LeaseID, Step: m.Step, TotalSteps: env.TotalSteps, Loss: m.Loss})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &referenceHandle{run: newRun(), cancel: cancel}
	go func() {
		defer stdout.Close()
		err := trainer.RunExact(ctx, env, stream, onStep)
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: reference run of lease %d", ErrStopped, job.LeaseID)
		}
		h.finish(err)
	}()
	return h, nil
}

// RunRound runs a training-together round run (env.Round set; the rounds role's
// Trainer) in process, as Start runs any other: the Go exact trainer on the stream of
// env.DataDir, every step to onStep. It has no logs (logDir is unused) and returns when
// the round-end checkpoint is complete, or ctx's error between two steps.
func (*Reference) RunRound(ctx context.Context, env trainer.Env, _ string, onStep func(trainer.StepMetric)) error {
	if env.Round == nil {
		return fmt.Errorf("runtime reference: job %d: not a round run (%s is empty)", env.JobID, trainer.EnvRound)
	}
	stream, err := trainingStream(env)
	if err != nil {
		return err
	}
	return trainer.RunExact(ctx, env, stream, onStep)
}

// trainingStream reads the job's training data from its data folder, as any trainer of
// the contract would: the built-in corpus prepare (or the rounds role) wrote there, or
// the verified pieces of the worker's dataset shards the leases role fetched.
func trainingStream(env trainer.Env) ([]byte, error) {
	data, err := exact.ReadStreamDir(env.DataDir)
	if err != nil {
		return nil, fmt.Errorf("runtime reference: reading the training data of job %d: %w", env.JobID, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("runtime reference: job %d's data folder %s is empty", env.JobID, env.DataDir)
	}
	return data, nil
}

type referenceHandle struct {
	*run
	cancel context.CancelFunc
}

// Stop implements Handle. The run ends after the step in progress, which
// takes milliseconds, so ctx only bounds the wait.
func (h *referenceHandle) Stop(ctx context.Context) error {
	h.cancel()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
