package trainer

import (
	"context"
	"fmt"
	"runtime"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// RunExact trains the exact transformer workload (pkg/exact, env.Exact's
// configuration) on stream with Go on every core, as the contract asks of
// any trainer: from the seed's initial weights or the resume checkpoint, one
// checkpoint folder per interval (h_i = the state's Merkle root), a metrics
// line per step, and DONE at the end. onStep, if set, sees every step's
// metric. It stops between steps when ctx is done and returns ctx's error;
// checkpoints completed before then stay valid.
func RunExact(ctx context.Context, env Env, stream []byte, onStep func(StepMetric)) error {
	if err := env.Validate(); err != nil {
		return err
	}
	if env.Exact == nil {
		return fmt.Errorf("%w: %s is not set: not an exact workload", ErrInvalidEnv, EnvExactConfig)
	}
	if err := checkExactResume(env); err != nil {
		return err
	}
	var progress func(uint64, int64, merkle.Hash)
	if onStep != nil {
		progress = func(step uint64, loss int64, _ merkle.Hash) {
			onStep(StepMetric{Step: step, Loss: exact.LossNats(loss)})
		}
	}
	var initial *exact.State
	if env.InitWeights != "" {
		s, err := exact.ImportSafetensors(*env.Exact, env.InitWeights)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidEnv, EnvInitWeights, err)
		}
		initial = s
	}
	return exact.Train(ctx, exact.TrainOptions{
		Initial: initial,
		Config:  *env.Exact, Seed: env.JobSeed, Stream: stream, OutputDir: env.OutputDir,
		ResumeFrom: env.ResumeFrom, StartStep: env.StartStep, TotalSteps: env.TotalSteps,
		CheckpointInterval: env.CheckpointInterval, Workers: runtime.GOMAXPROCS(0), Progress: progress,
	})
}

// checkExactResume refuses a resume checkpoint that is not this job's model at the start
// step: a state of another configuration or step would train on, but not as the job.
func checkExactResume(env Env) error {
	if env.ResumeFrom == "" {
		return nil
	}
	s, err := exact.LoadCheckpointState(env.ResumeFrom)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidCheckpoint, env.ResumeFrom, err)
	}
	if s.Config.Hyper() != env.Exact.WithDefaults().Hyper() {
		return fmt.Errorf("%w %s: its state is not of this job's model configuration", ErrInvalidCheckpoint, env.ResumeFrom)
	}
	if s.Step != env.StartStep {
		return fmt.Errorf("%w %s: its state is at step %d, want %d", ErrInvalidCheckpoint, env.ResumeFrom, s.Step, env.StartStep)
	}
	return nil
}
