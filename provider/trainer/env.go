package trainer

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/depinchain/depinchain/pkg/diloco"
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
	// A training-together job's round run (docs/training-together.md): the worker slot,
	// the job's worker count, the round, G_r's file and the sync spec as
	// "every,outer_lr_q30,outer_momentum_q30,top_k". All empty for other runs.
	EnvWorkerIndex = "DEPIN_WORKER_INDEX"
	EnvWorldSize   = "DEPIN_WORLD_SIZE"
	EnvRound       = "DEPIN_ROUND"
	EnvGlobalState = "DEPIN_GLOBAL_STATE"
	EnvSync        = "DEPIN_SYNC"
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
	// Round describes a training-together job's round run; nil for any other run.
	Round *RoundEnv
}

// RoundEnv is a round run of a training-together job: the trainer starts from
// GlobalState's WorkerStart with the Adam moments of ResumeFrom (the worker's carry:
// its end state of the last round it entered; empty for a joiner), trains steps
// Round·every … (Round+1)·every − 1 (StartStep and TotalSteps) on its data of the round
// (DataDir holds just that: the shards diloco.Assign gives the slot in the round, of the
// built-in corpus or of the job's dataset), and writes the one checkpoint at TotalSteps.
type RoundEnv struct {
	Worker  uint32
	Workers uint32
	Round   uint64
	// GlobalState is the path of G_Round's file (diloco.GlobalState.Encode).
	GlobalState string
	Sync        diloco.Sync
}

// syncString is DEPIN_SYNC's value.
func (r *RoundEnv) syncString() string {
	return fmt.Sprintf("%d,%d,%d,%d", r.Sync.Every, r.Sync.OuterLR, r.Sync.OuterMomentum, r.Sync.TopK)
}

// validate checks a round run against the rest of its environment.
func (r *RoundEnv) validate(e Env) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEnv, fmt.Sprintf(format, args...))
	}
	if err := r.Sync.Check(); err != nil {
		return fail("%s: %s", EnvSync, err)
	}
	switch {
	case e.Exact == nil:
		return fail("a round run (%s set) trains the exact transformer: %s must be set", EnvRound, EnvExactConfig)
	case e.InitWeights != "":
		return fail("a round run starts from %s, not %s", EnvGlobalState, EnvInitWeights)
	case r.Workers == 0 || r.Workers > diloco.MaxWorkers || r.Worker >= r.Workers:
		return fail("%s (%d) must be below %s (%d), which is in [1, %d]", EnvWorkerIndex, r.Worker, EnvWorldSize, r.Workers, diloco.MaxWorkers)
	case !filepath.IsAbs(r.GlobalState):
		return fail("%s must be an absolute path, got %q", EnvGlobalState, r.GlobalState)
	case e.StartStep != r.Sync.RoundStart(r.Round) || e.TotalSteps != r.Sync.RoundStart(r.Round+1):
		return fail("round %d of every %d trains steps %d to %d, not %s %d to %s %d", r.Round, r.Sync.Every,
			r.Sync.RoundStart(r.Round), r.Sync.RoundStart(r.Round+1), EnvStartStep, e.StartStep, EnvTotalSteps, e.TotalSteps)
	case e.CheckpointInterval != uint64(r.Sync.Every):
		return fail("%s must be the round's %d steps, got %d", EnvCheckpointInterval, r.Sync.Every, e.CheckpointInterval)
	}
	return nil
}

// Validate checks that e describes a run a trainer can carry out.
func (e Env) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEnv, fmt.Sprintf(format, args...))
	}
	if e.Round != nil {
		if err := e.Round.validate(e); err != nil {
			return err
		}
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
	// and one at step 0 starts from the model's initial weights. (A round run
	// starts from the global state; its checkpoint, the carry, may be of an
	// earlier round, and a joiner has none: RunExact checks its step.)
	if e.Round == nil && (e.StartStep > 0) != (e.ResumeFrom != "") {
		return fail("%s must name a checkpoint exactly when %s is positive (start step %d, resume from %q)",
			EnvResumeFrom, EnvStartStep, e.StartStep, e.ResumeFrom)
	}
	// The folder name is all that says which step a checkpoint ends at.
	if want := CheckpointDirPrefix + strconv.FormatUint(e.StartStep, 10); e.Round == nil && e.ResumeFrom != "" && filepath.Base(e.ResumeFrom) != want {
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
	env := []string{
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
	if e.Round == nil {
		return append(env, EnvWorkerIndex+"=", EnvWorldSize+"=", EnvRound+"=", EnvGlobalState+"=", EnvSync+"=")
	}
	return append(env, EnvWorkerIndex+"="+u(uint64(e.Round.Worker)), EnvWorldSize+"="+u(uint64(e.Round.Workers)),
		EnvRound+"="+u(e.Round.Round), EnvGlobalState+"="+e.Round.GlobalState, EnvSync+"="+e.Round.syncString())
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
	round, err := parseRoundEnv(lookup)
	if err != nil {
		return Env{}, err
	}
	e.Round = round
	if len(missing) > 0 {
		return Env{}, fmt.Errorf("%w: not set: %s", ErrInvalidEnv, strings.Join(missing, ", "))
	}
	if badNumber != nil {
		return Env{}, badNumber
	}
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

// parseRoundEnv reads the round variables: all empty (or unset, for trainers older than
// rounds) is no round run; otherwise every one must be set.
func parseRoundEnv(lookup func(key string) (string, bool)) (*RoundEnv, error) {
	keys := []string{EnvWorkerIndex, EnvWorldSize, EnvRound, EnvGlobalState, EnvSync}
	vals := make([]string, len(keys))
	set := 0
	for i, k := range keys {
		if vals[i], _ = lookup(k); vals[i] != "" {
			set++
		}
	}
	if set == 0 {
		return nil, nil
	}
	if set != len(keys) {
		return nil, fmt.Errorf("%w: a round run needs every one of %s", ErrInvalidEnv, strings.Join(keys, ", "))
	}
	nums := make([]uint64, 3)
	for i := range nums {
		n, err := strconv.ParseUint(vals[i], 10, 64)
		if err != nil || (i < 2 && n > diloco.MaxWorkers) {
			return nil, fmt.Errorf("%w: %s must be a decimal integer, got %q", ErrInvalidEnv, keys[i], vals[i])
		}
		nums[i] = n
	}
	fields := strings.Split(vals[4], ",")
	sv := make([]int64, 4)
	if len(fields) != len(sv) {
		return nil, fmt.Errorf("%w: %s must be every,outer_lr_q30,outer_momentum_q30,top_k, got %q", ErrInvalidEnv, EnvSync, vals[4])
	}
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s must be every,outer_lr_q30,outer_momentum_q30,top_k, got %q", ErrInvalidEnv, EnvSync, vals[4])
		}
		sv[i] = n
	}
	return &RoundEnv{Worker: uint32(nums[0]), Workers: uint32(nums[1]), Round: nums[2], GlobalState: vals[3],
		Sync: diloco.Sync{Every: sv[0], OuterLR: sv[1], OuterMomentum: sv[2], TopK: sv[3]}}, nil
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
