package exact

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// Names of a trainer's output (provider/trainer/CONTRACT.md).
const (
	CheckpointsDirName  = "checkpoints"
	CheckpointDirPrefix = "step-"
	StateFileName       = "state"
	TraceFileName       = "trace.txt"
	CompleteMarkerName  = "COMPLETE"
	MetricsFileName     = "metrics.jsonl"
	DoneMarkerName      = "DONE"
)

// TrainOptions describe a training run in the trainer contract's terms.
type TrainOptions struct {
	Config Config
	Seed   []byte
	// Stream is the training data (see ReadStreamDir).
	Stream []byte
	// OutputDir receives checkpoints/step-N/{state,trace.txt,COMPLETE},
	// metrics.jsonl and DONE.
	OutputDir string
	// ResumeFrom is a checkpoint folder holding the state at StartStep, or
	// empty to start at step 0 from Init(Config, Seed) or Initial.
	ResumeFrom string
	// Initial, when set (and ResumeFrom is empty), is the state at StartStep
	// to start from instead of Init: weights imported with ImportSafetensors
	// (step 0), or a training-together round's WorkerStart state.
	Initial            *State
	StartStep          uint64
	TotalSteps         uint64
	CheckpointInterval uint64
	// Workers is the executor's goroutine count (GOMAXPROCS when 0).
	Workers int
	// Progress, when set, is called after every step.
	Progress func(step uint64, loss int64, root merkle.Hash)
}

// CheckpointDir is the folder of the checkpoint ending at step.
func CheckpointDir(outputDir string, step uint64) string {
	return filepath.Join(outputDir, CheckpointsDirName, CheckpointDirPrefix+strconv.FormatUint(step, 10))
}

// LoadCheckpointState reads and decodes dir/state.
func LoadCheckpointState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// Train runs steps StartStep..TotalSteps and writes a checkpoint every
// CheckpointInterval steps and at TotalSteps; h_i in each trace is the
// Merkle root of the state after step i (State.Root). A resumed run writes
// exactly the files an uninterrupted one would from that step on. It stops
// between steps when ctx is cancelled, returning ctx's error.
func Train(ctx context.Context, o TrainOptions) error {
	if o.CheckpointInterval == 0 || o.StartStep >= o.TotalSteps {
		return fmt.Errorf("exact: train: need start step (%d) < total steps (%d) and a positive interval", o.StartStep, o.TotalSteps)
	}
	var s *State
	var err error
	switch {
	case o.ResumeFrom != "":
		if s, err = LoadCheckpointState(o.ResumeFrom); err != nil {
			return fmt.Errorf("exact: train: resume: %w", err)
		}
		if s.Step != o.StartStep {
			return fmt.Errorf("exact: train: resume state is at step %d, the run starts at %d", s.Step, o.StartStep)
		}
		if s.Config.Hyper() != o.Config.WithDefaults().Hyper() {
			return fmt.Errorf("exact: train: resume state has a different config")
		}
	case o.Initial != nil:
		s = o.Initial
		if s.Step != o.StartStep || s.Config.Hyper() != o.Config.WithDefaults().Hyper() {
			return fmt.Errorf("exact: train: initial state must be a step-%d state of the job's config", o.StartStep)
		}
	case o.StartStep != 0:
		return fmt.Errorf("exact: train: start step %d needs a checkpoint to resume from", o.StartStep)
	default:
		if s, err = Init(o.Config, o.Seed); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(o.OutputDir, CheckpointsDirName), 0o755); err != nil {
		return err
	}
	metrics, err := os.OpenFile(filepath.Join(o.OutputDir, MetricsFileName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer metrics.Close()
	mw := bufio.NewWriter(metrics)
	ex := &Executor{Workers: o.Workers}
	trace := []merkle.Hash{s.Root()}
	next := min(s.Step+o.CheckpointInterval, o.TotalSteps)
	for s.Step < o.TotalSteps {
		if err := ctx.Err(); err != nil {
			mw.Flush()
			return err
		}
		batch, err := StepBatch(s.Config, o.Seed, s.Step, o.Stream)
		if err != nil {
			return err
		}
		var info StepInfo
		if s, info, err = ex.Step(s, batch); err != nil {
			return err
		}
		trace = append(trace, info.Root)
		line, _ := json.Marshal(map[string]any{"step": s.Step, "loss": LossNats(info.Loss), "loss_q30": info.Loss, "root": info.Root.Hex()})
		mw.Write(append(line, '\n'))
		if o.Progress != nil {
			o.Progress(s.Step, info.Loss, info.Root)
		}
		if s.Step == next {
			if err := mw.Flush(); err != nil {
				return err
			}
			if err := metrics.Sync(); err != nil {
				return err
			}
			if err := writeCheckpoint(CheckpointDir(o.OutputDir, s.Step), s, trace); err != nil {
				return err
			}
			trace = []merkle.Hash{info.Root}
			next = min(s.Step+o.CheckpointInterval, o.TotalSteps)
		}
	}
	return writeSynced(filepath.Join(o.OutputDir, DoneMarkerName), nil)
}

func writeCheckpoint(dir string, s *State, trace []merkle.Hash) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeSynced(filepath.Join(dir, StateFileName), s.Encode()); err != nil {
		return err
	}
	var tb []byte
	for _, h := range trace {
		tb = append(tb, h.Hex()+"\n"...)
	}
	if err := writeSynced(filepath.Join(dir, TraceFileName), tb); err != nil {
		return err
	}
	return writeSynced(filepath.Join(dir, CompleteMarkerName), nil)
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
