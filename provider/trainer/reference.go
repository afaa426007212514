package trainer

import (
	"context"
	"fmt"
	"os"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// RunReference trains the chain's reference workload (pkg/reftrainer
// with verifytypes.ReferenceConfig of the job seed) on data as the contract
// asks of any trainer: from the initial weights or the resume checkpoint,
// one checkpoint folder per interval, a metrics line per step, and DONE at
// the end. onStep, if set, sees every step's metric. It stops between steps
// when ctx is done and returns ctx's error; checkpoints completed before
// then stay valid.
func RunReference(ctx context.Context, env Env, data []byte, onStep func(StepMetric)) error {
	if err := env.Validate(); err != nil {
		return err
	}
	state, err := referenceStartState(env)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(env.OutputDir, 0o755); err != nil {
		return err
	}
	metrics, err := OpenMetricsLog(env.OutputDir)
	if err != nil {
		return err
	}
	err = trainReference(ctx, env, state, data, metrics, onStep)
	if closeErr := metrics.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return err
	}
	return MarkDone(env.OutputDir)
}

// trainReference trains from state to env.TotalSteps, writing a checkpoint
// at each of env's checkpoint steps and a metrics line per step.
func trainReference(ctx context.Context, env Env, state *reftrainer.State, data []byte, metrics *MetricsLog, onStep func(StepMetric)) error {
	for start := env.StartStep; start < env.TotalSteps; {
		end := env.NextCheckpointStep(start)
		trace := []merkle.Hash{state.Hash()}
		var err error
		state, err = reftrainer.Run(state, data, env.JobSeed, end-start, func(step uint64, h [32]byte, m reftrainer.StepMetrics) error {
			trace = append(trace, h)
			metric := StepMetric{Step: step, Loss: float64(m.MeanLoss) / float64(reftrainer.One)}
			if err := metrics.Append(metric); err != nil {
				return err
			}
			if onStep != nil {
				onStep(metric)
			}
			return ctx.Err()
		})
		if err != nil {
			return err
		}
		// The metrics of a checkpoint's steps are on disk before it is.
		if err := metrics.Flush(); err != nil {
			return err
		}
		if _, err := WriteCheckpoint(env.OutputDir, end, state.Encode(), trace); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// referenceStartState returns the state env's run starts from: the job's
// initial weights, or the resume checkpoint's state, which must be the
// reference model of this job at env.StartStep.
func referenceStartState(env Env) (*reftrainer.State, error) {
	cfg := verifytypes.ReferenceConfig(env.JobSeed)
	if env.ResumeFrom == "" {
		return reftrainer.Init(cfg)
	}
	resume, err := ReadCheckpoint(env.ResumeFrom, env.StartStep)
	if err != nil {
		return nil, fmt.Errorf("resume checkpoint: %w", err)
	}
	encoded, err := os.ReadFile(resume.StatePath())
	if err != nil {
		return nil, err
	}
	state, err := reftrainer.Decode(encoded)
	if err != nil {
		return nil, fmt.Errorf("resume checkpoint %s: %w", resume.Dir, err)
	}
	if state.Config != cfg {
		return nil, fmt.Errorf("%w %s: it is not this job's reference model (config %+v, want %+v)", ErrInvalidCheckpoint, resume.Dir, state.Config, cfg)
	}
	if state.Step != env.StartStep {
		return nil, fmt.Errorf("%w %s: its state is at step %d, want %d", ErrInvalidCheckpoint, resume.Dir, state.Step, env.StartStep)
	}
	return state, nil
}
