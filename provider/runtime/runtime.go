// Package runtime starts and stops the trainer of a won lease. Three
// runtimes speak the one trainer contract (package trainer): Reference runs
// the chain's deterministic reference workload in process, Process runs an
// operator-installed trainer as a subprocess, and Container runs the job's
// image, pinned by digest, through the Docker Engine API. Whatever runs,
// the rest of the sidecar finds the same checkpoint folders in the job's
// output directory.
package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Runtime starts trainers.
type Runtime interface {
	// Name is the runtime's name in configuration and logs.
	Name() string
	// Start starts job's trainer and returns once it runs. ctx bounds the
	// starting only; the run lasts until it ends or Handle.Stop.
	Start(ctx context.Context, job Job) (Handle, error)
}

// Handle controls a started trainer.
type Handle interface {
	// Wait blocks until the run ends. It returns nil when the trainer
	// fulfilled the contract (its final checkpoint is complete and it
	// exited with status 0 or wrote DONE), a *trainer.RunError when it did
	// not, and an error wrapping ErrStopped after Stop.
	Wait() error
	// Done is closed when the run has ended.
	Done() <-chan struct{}
	// Stop asks the trainer to end and returns once it has: gracefully
	// first, forcibly when ctx is done. Checkpoints completed before then
	// stay valid, so a later run can resume from the last one.
	Stop(ctx context.Context) error
}

// ErrStopped is wrapped by Wait's error for a run ended by Stop.
var ErrStopped = errors.New("runtime: stopped")

// Job is one lease's training run.
type Job struct {
	// Market is the chain's job: its id, spec (workload, resources, steps)
	// and seed.
	Market markettypes.Job
	// LeaseID is the lease being served.
	LeaseID uint64
	// StartStep is where this run starts; ResumeFrom is then the checkpoint
	// folder (named step-<StartStep>) holding that state. Both are zero at
	// the job's start.
	StartStep  uint64
	ResumeFrom string
	// OutputDir receives the trainer's checkpoints and metrics, DataDir
	// holds its data, LogDir its stdout and stderr (Process and Container).
	OutputDir string
	DataDir   string
	LogDir    string
	// GPUs are the leased GPUs' UUIDs.
	GPUs []string
	// InitWeights is the safetensors file a fine-tuning job's step 0 is
	// imported from (checked against the spec's init_state_root); empty
	// for the seed's initial weights and for a resumed run.
	InitWeights string
}

// Env returns the trainer contract's environment for j, with host paths.
func (j Job) Env() trainer.Env {
	var cfg *exact.Config
	if c, err := j.Market.Spec.ExactConfig(); err == nil {
		cfg = &c
	}
	return trainer.Env{
		Exact:              cfg,
		InitWeights:        j.InitWeights,
		JobID:              j.Market.Id,
		LeaseID:            j.LeaseID,
		OutputDir:          j.OutputDir,
		ResumeFrom:         j.ResumeFrom,
		DataDir:            j.DataDir,
		StartStep:          j.StartStep,
		TotalSteps:         j.Market.Spec.TotalSteps,
		CheckpointInterval: j.Market.Spec.CheckpointInterval,
		JobSeed:            j.Market.Seed,
		VisibleDevices:     j.GPUs,
	}
}

// Names of the trainer's log files in Job.LogDir.
const (
	StdoutLogName = "trainer.stdout.log"
	StderrLogName = "trainer.stderr.log"
)

// stderrTailBytes is how much of the trainer's stderr a failure reports.
const stderrTailBytes = 4 << 10

// prepare validates job for a trainer outside this process, creates its
// directories and, for a job without a dataset, writes the built-in corpus
// to DataDir/corpus.txt.
func prepare(job Job) (trainer.Env, error) {
	env := job.Env()
	if err := env.Validate(); err != nil {
		return trainer.Env{}, err
	}
	if !filepath.IsAbs(job.LogDir) {
		return trainer.Env{}, fmt.Errorf("runtime: the log directory must be an absolute path, got %q", job.LogDir)
	}
	for _, dir := range []string{job.OutputDir, job.DataDir, job.LogDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return trainer.Env{}, err
		}
	}
	if job.Market.Spec.DatasetId == "" {
		data, err := verifytypes.JobTrainingData(job.Market)
		if err != nil {
			return trainer.Env{}, err
		}
		if err := os.WriteFile(filepath.Join(job.DataDir, trainer.CorpusFileName), data.Bytes, 0o644); err != nil {
			return trainer.Env{}, err
		}
	}
	return env, nil
}

// openLogs opens (appending) the trainer's stdout and stderr logs in dir.
func openLogs(dir string) (stdout, stderr *os.File, err error) {
	open := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	}
	if stdout, err = open(StdoutLogName); err != nil {
		return nil, nil, err
	}
	if stderr, err = open(StderrLogName); err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// logTail returns the last stderrTailBytes of the log at path, starting at
// a line boundary where there is one; "" if it cannot be read.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	offset := max(0, info.Size()-stderrTailBytes)
	tail, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil {
		return ""
	}
	if i := bytes.IndexByte(tail, '\n'); offset > 0 && i >= 0 {
		tail = tail[i+1:]
	}
	return string(tail)
}

// run is the end-of-run bookkeeping shared by the handles: Done's channel
// and Wait's result.
type run struct {
	done chan struct{}
	err  error
}

func newRun() *run { return &run{done: make(chan struct{})} }

// finish records the run's result and wakes every Wait.
func (r *run) finish(err error) {
	r.err = err
	close(r.done)
}

func (r *run) Done() <-chan struct{} { return r.done }

func (r *run) Wait() error {
	<-r.done
	return r.err
}
