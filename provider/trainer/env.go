package trainer

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/depinchain/depinchain/pkg/exact"
)

// Names of the environment variables a trainer receives (see CONTRACT.md).
const (
	EnvJobID              = "DEPIN_JOB_ID"
	EnvLeaseID            = "DEPIN_LEASE_ID"
	EnvOutputDir          = "DEPIN_OUTPUT_DIR"
	EnvResumeFrom         = "DEPIN_RESUME_FROM"
	EnvDataDir            = "DEPIN_DATA_DIR"
	EnvStartStep          = "DEPIN_START_STEP"
	EnvTotalSteps         = "DEPIN_TOTAL_STEPS"
	EnvCheckpointInterval = "DEPIN_CHECKPOINT_INTERVAL"
	EnvJobSeed            = "DEPIN_JOB_SEED"
	EnvVisibleDevices     = "CUDA_VISIBLE_DEVICES"
	// EnvExactConfig is set for transformer workloads (kinds reference and transformer):
	// the exact configuration as JSON ({"model": {...}, "train": {...}}).
	EnvExactConfig = "DEPIN_EXACT_CONFIG"
	// EnvInitWeights is a fine-tuning job's safetensors file of initial float weights
	// (empty otherwise, and when resuming).
	EnvInitWeights = "DEPIN_INIT_WEIGHTS"
)

// CorpusFileName is the file in the data directory holding the training text
// of jobs that name no dataset: the corpus built into the reference workload,
// written there by the sidecar before the trainer starts.
const CorpusFileName = "corpus.txt"

// ErrInvalidEnv is wrapped by every Env validation and parsing error.
var ErrInvalidEnv = errors.New("trainer: invalid environment")

// Env is everything a trainer is told about its run. Steps are absolute job
// steps: the run trains from StartStep to TotalSteps and checkpoints at
// CheckpointSteps.
type Env struct {
	JobID   uint64
	LeaseID uint64
	// OutputDir receives the checkpoint folders, the metrics log and DONE.
	OutputDir string
	// ResumeFrom is the checkpoint folder (named step-<StartStep>) holding
	// the state at StartStep, or empty for a run that starts the job at
	// step 0.
	ResumeFrom string
	// DataDir holds the training data (CorpusFileName for jobs without a
	// dataset).
	DataDir            string
	StartStep          uint64
	TotalSteps         uint64
	CheckpointInterval uint64
	// JobSeed is the chain's seed of the job; it fixes data order and, for
	// the reference workload, the initial weights.
	JobSeed []byte
	// VisibleDevices are the leased GPUs, by UUID, as CUDA_VISIBLE_DEVICES
	// lists them. Empty means no GPU: the variable is then set to the empty
	// string, which hides every GPU from CUDA, rather than left unset, which
	// would show all of them.
	VisibleDevices []string
	// Exact is the transformer configuration of an exact workload (kinds reference and
	// transformer); nil for container jobs.
	Exact *exact.Config
	// InitWeights is the safetensors file step 0 starts from (fine-tuning), or empty.
	InitWeights string
}

// Validate checks that e describes a run a trainer can carry out.
func (e Env) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEnv, fmt.Sprintf(format, args...))
	}
	for _, dir := range []struct{ name, path string }{{EnvOutputDir, e.OutputDir}, {EnvDataDir, e.DataDir}} {
		if !filepath.IsAbs(dir.path) {
			return fail("%s must be an absolute path, got %q", dir.name, dir.path)
		}
	}
	if e.ResumeFrom != "" && !filepath.IsAbs(e.ResumeFrom) {
		return fail("%s must be an absolute path or empty, got %q", EnvResumeFrom, e.ResumeFrom)
	}
	// A run that starts mid-job has nothing to start from but a checkpoint,
	// and one at step 0 starts from the model's initial weights.
	if (e.StartStep > 0) != (e.ResumeFrom != "") {
		return fail("%s must name a checkpoint exactly when %s is positive (start step %d, resume from %q)",
			EnvResumeFrom, EnvStartStep, e.StartStep, e.ResumeFrom)
	}
	// The folder name is all that says which step a checkpoint ends at.
	if want := CheckpointDirPrefix + strconv.FormatUint(e.StartStep, 10); e.ResumeFrom != "" && filepath.Base(e.ResumeFrom) != want {
		return fail("%s must be a checkpoint folder named %s, got %q", EnvResumeFrom, want, e.ResumeFrom)
	}
	if e.StartStep >= e.TotalSteps {
		return fail("%s (%d) must be below %s (%d)", EnvStartStep, e.StartStep, EnvTotalSteps, e.TotalSteps)
	}
	if e.CheckpointInterval == 0 {
		return fail("%s must be positive", EnvCheckpointInterval)
	}
	if len(e.JobSeed) == 0 {
		return fail("%s must not be empty", EnvJobSeed)
	}
	if e.Exact != nil {
		if err := e.Exact.Validate(); err != nil {
			return fail("%s: %s", EnvExactConfig, err)
		}
	}
	if e.InitWeights != "" && (e.Exact == nil || e.ResumeFrom != "" || !filepath.IsAbs(e.InitWeights)) {
		return fail("%s is for an exact workload's step 0 and must be an absolute path, got %q (resume from %q)", EnvInitWeights, e.InitWeights, e.ResumeFrom)
	}
	for _, d := range e.VisibleDevices {
		if d == "" || strings.ContainsAny(d, ", \t\n") {
			return fail("%s entry %q must be a non-empty device id without commas or spaces", EnvVisibleDevices, d)
		}
	}
	return nil
}

// Environ returns e as KEY=value strings for a process environment.
func (e Env) Environ() []string {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return []string{
		EnvJobID + "=" + u(e.JobID),
		EnvLeaseID + "=" + u(e.LeaseID),
		EnvOutputDir + "=" + e.OutputDir,
		EnvResumeFrom + "=" + e.ResumeFrom,
		EnvDataDir + "=" + e.DataDir,
		EnvStartStep + "=" + u(e.StartStep),
		EnvTotalSteps + "=" + u(e.TotalSteps),
		EnvCheckpointInterval + "=" + u(e.CheckpointInterval),
		EnvJobSeed + "=" + hex.EncodeToString(e.JobSeed),
		EnvVisibleDevices + "=" + strings.Join(e.VisibleDevices, ","),
		EnvExactConfig + "=" + e.exactJSON(),
		EnvInitWeights + "=" + e.InitWeights,
	}
}

// exactJSON is DEPIN_EXACT_CONFIG's value: the config as JSON, or empty.
func (e Env) exactJSON() string {
	if e.Exact == nil {
		return ""
	}
	b, err := json.Marshal(e.Exact)
	if err != nil {
		panic(err) // a struct of numbers and a string always marshals
	}
	return string(b)
}

// ParseEnv reads an Env through lookup (os.LookupEnv in a trainer) and
// validates it. Every variable must be set; DEPIN_RESUME_FROM and
// CUDA_VISIBLE_DEVICES may be empty.
func ParseEnv(lookup func(key string) (string, bool)) (Env, error) {
	var e Env
	var missing []string
	str := func(key string) string {
		v, ok := lookup(key)
		if !ok {
			missing = append(missing, key)
		}
		return v
	}
	var badNumber error
	num := func(key string) uint64 {
		s, ok := lookup(key)
		if !ok {
			missing = append(missing, key)
			return 0
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil && badNumber == nil {
			badNumber = fmt.Errorf("%w: %s must be a decimal integer, got %q", ErrInvalidEnv, key, s)
		}
		return n
	}
	e.JobID = num(EnvJobID)
	e.LeaseID = num(EnvLeaseID)
	e.OutputDir = str(EnvOutputDir)
	e.ResumeFrom = str(EnvResumeFrom)
	e.DataDir = str(EnvDataDir)
	e.StartStep = num(EnvStartStep)
	e.TotalSteps = num(EnvTotalSteps)
	e.CheckpointInterval = num(EnvCheckpointInterval)
	seed := str(EnvJobSeed)
	devices := str(EnvVisibleDevices)
	exactConfig, _ := lookup(EnvExactConfig)
	e.InitWeights, _ = lookup(EnvInitWeights)
	if len(missing) > 0 {
		return Env{}, fmt.Errorf("%w: not set: %s", ErrInvalidEnv, strings.Join(missing, ", "))
	}
	if badNumber != nil {
		return Env{}, badNumber
	}
	var err error
	if e.JobSeed, err = hex.DecodeString(seed); err != nil {
		return Env{}, fmt.Errorf("%w: %s must be hex: %w", ErrInvalidEnv, EnvJobSeed, err)
	}
	if devices != "" {
		e.VisibleDevices = strings.Split(devices, ",")
	}
	if exactConfig != "" {
		var cfg exact.Config
		if err := json.Unmarshal([]byte(exactConfig), &cfg); err != nil {
			return Env{}, fmt.Errorf("%w: %s: %w", ErrInvalidEnv, EnvExactConfig, err)
		}
		e.Exact = &cfg
	}
	if err := e.Validate(); err != nil {
		return Env{}, err
	}
	return e, nil
}

// NextCheckpointStep returns the step at which the checkpoint starting at
// step start ends: CheckpointInterval steps later, or TotalSteps if that
// comes first. This is the chain's rule (a checkpoint starts where the
// previous one ended and spans at most the interval), so a run checkpoints
// at StartStep+interval, StartStep+2·interval, ... and at TotalSteps.
func (e Env) NextCheckpointStep(start uint64) uint64 {
	if start >= e.TotalSteps || e.TotalSteps-start <= e.CheckpointInterval {
		return e.TotalSteps
	}
	return start + e.CheckpointInterval
}
