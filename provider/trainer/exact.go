package trainer

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/depinchain/depinchain/pkg/diloco"
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
	if env.Round != nil {
		var err error
		if initial, stream, err = roundStart(env, stream); err != nil {
			return err
		}
	}
	if env.InitWeights != "" {
		s, err := exact.ImportSafetensors(*env.Exact, env.InitWeights)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidEnv, EnvInitWeights, err)
		}
		initial = s
	}
	resume := env.ResumeFrom
	if env.Round != nil {
		resume = "" // the carry's moments are in initial already
	}
	return exact.Train(ctx, exact.TrainOptions{
		Initial: initial,
		Config:  *env.Exact, Seed: env.JobSeed, Stream: stream, OutputDir: env.OutputDir,
		ResumeFrom: resume, StartStep: env.StartStep, TotalSteps: env.TotalSteps,
		CheckpointInterval: env.CheckpointInterval, Workers: runtime.GOMAXPROCS(0), Progress: progress,
	})
}

// roundStart is a round run's start state and data: G_r's WorkerStart with the carry's
// Adam moments (none for a joiner), and stream as it is — the sidecar put the worker's
// data of round r in DEPIN_DATA_DIR: its assigned shards (diloco.WorkerData), of the
// built-in corpus or of the job's dataset.
func roundStart(env Env, stream []byte) (*exact.State, []byte, error) {
	r := env.Round
	raw, err := os.ReadFile(r.GlobalState)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalidEnv, EnvGlobalState, err)
	}
	g, err := diloco.DecodeGlobal(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrInvalidEnv, EnvGlobalState, err)
	}
	switch {
	case g.Round != r.Round:
		return nil, nil, fmt.Errorf("%w: %s is the global state of round %d, the run is round %d", ErrInvalidEnv, EnvGlobalState, g.Round, r.Round)
	case g.Sync != r.Sync:
		return nil, nil, fmt.Errorf("%w: %s was made under another sync spec than %s", ErrInvalidEnv, EnvGlobalState, EnvSync)
	case g.Config.Hyper() != env.Exact.WithDefaults().Hyper():
		return nil, nil, fmt.Errorf("%w: %s is not of this job's model configuration", ErrInvalidEnv, EnvGlobalState)
	}
	var carry *exact.State
	if env.ResumeFrom != "" {
		if carry, err = exact.LoadCheckpointState(env.ResumeFrom); err != nil {
			return nil, nil, fmt.Errorf("%w %s: %w", ErrInvalidCheckpoint, env.ResumeFrom, err)
		}
		if carry.Config.Hyper() != g.Config.Hyper() || carry.Step > env.StartStep || carry.Step%uint64(r.Sync.Every) != 0 {
			return nil, nil, fmt.Errorf("%w %s: a carry must be a round-end state of this job before step %d, got step %d",
				ErrInvalidCheckpoint, env.ResumeFrom, env.StartStep, carry.Step)
		}
	}
	if len(stream) == 0 {
		return nil, nil, fmt.Errorf("%w: %s holds no data for worker %d in round %d", ErrInvalidEnv, EnvDataDir, r.Worker, r.Round)
	}
	return g.WorkerStart(carry), stream, nil
}

// checkExactResume refuses a resume checkpoint that is not this job's model at the start
// step: a state of another configuration or step would train on, but not as the job.
func checkExactResume(env Env) error {
	if env.ResumeFrom == "" || env.Round != nil {
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
