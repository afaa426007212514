// Package workload is depinchaind's offline `workload` command: train the
// exact transformer workload of a job spec locally with the code the chain's
// referee runs (pkg/exact), sample text from a trained state, and export a
// state as safetensors with a Hugging Face-style config. It needs no node
// and signs nothing. docs/workloads.md is its guide.
package workload

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/depinchain/depinchain/pkg/exact"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// DefaultSeedHex is the seed of `workload run` and `workload sample` when
// --seed is not given: the bytes of "depinchain", in hex. A real job's seed
// is the chain's (`depinchaind q market job ID` shows it, base64 in JSON).
const DefaultSeedHex = "646570696e636861696e"

const (
	flagSpec            = "spec"
	flagJob             = "job"
	flagSteps           = "steps"
	flagOut             = "out"
	flagDatasetDir      = "dataset-dir"
	flagInitWeights     = "init-weights"
	flagSeed            = "seed"
	flagCheckpointEvery = "checkpoint-every"
	flagWorkers         = "workers"
	flagJSON            = "json"
	flagState           = "state"
	flagPrompt          = "prompt"
	flagTokens          = "tokens"
	flagTemperature     = "temperature"
)

// NewCmd returns the `workload` command with run, sample and export.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workload",
		Short: "Train a job spec's exact transformer locally, sample from and export its states (offline)",
		Long: `Try the verified workload before paying for it. 'run' trains a job spec's transformer
(or reference) workload with pkg/exact, the code the chain's referee re-executes, and writes
the checkpoints a provider would commit; 'sample' generates text from a state; 'export' writes
a state as model.safetensors + config.json. See docs/workloads.md.`,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRunCmd(), newSampleCmd(), newExportCmd())
	return cmd
}

// loadSpecConfig reads a job spec file and returns its exact workload config
// (defaults applied) and the parsed spec.
func loadSpecConfig(path string) (exact.Config, markettypes.JobSpec, error) {
	if path == "" {
		return exact.Config{}, markettypes.JobSpec{}, fmt.Errorf("--%s is required: the job spec YAML", flagSpec)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return exact.Config{}, markettypes.JobSpec{}, fmt.Errorf("--%s: %w", flagSpec, fileErr(err))
	}
	spec, err := markettypes.ParseJobSpecYAML(b)
	if err != nil {
		return exact.Config{}, markettypes.JobSpec{}, fmt.Errorf("--%s %s: %w", flagSpec, path, err)
	}
	cfg, err := specConfig(spec)
	if err != nil {
		return exact.Config{}, spec, fmt.Errorf("--%s %s: %w", flagSpec, path, err)
	}
	return cfg, spec, nil
}

// specConfig returns the exact workload config of a transformer or
// reference job spec (defaults applied).
func specConfig(spec markettypes.JobSpec) (exact.Config, error) {
	switch spec.Workload.Kind {
	case markettypes.WORKLOAD_KIND_TRANSFORMER, markettypes.WORKLOAD_KIND_REFERENCE:
	default:
		return exact.Config{}, fmt.Errorf("workload.kind is %s; only transformer and reference jobs run the exact workload locally",
			strings.ToLower(strings.TrimPrefix(spec.Workload.Kind.String(), "WORKLOAD_KIND_")))
	}
	cfg, err := spec.ExactConfig()
	if err != nil {
		return exact.Config{}, err
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return exact.Config{}, err
	}
	return cfg, nil
}

// fileErr turns a missing file into a short sentence that names it.
func fileErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: no such file or directory", pe.Path)
	}
	return err
}

// statePath accepts a state file or a checkpoint folder holding one.
func statePath(p string) string {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return filepath.Join(p, exact.StateFileName)
	}
	return p
}

// loadState reads and decodes --state; with want set, the state must be of
// that config.
func loadState(p string, want *exact.Config) (*exact.State, string, error) {
	if p == "" {
		return nil, "", fmt.Errorf("--%s is required: a state file (a checkpoint's %s) or its checkpoint folder", flagState, exact.StateFileName)
	}
	p = statePath(p)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, p, fmt.Errorf("--%s: %w", flagState, fileErr(err))
	}
	s, err := exact.Decode(b)
	if err != nil {
		return nil, p, fmt.Errorf("--%s %s: not a state of the exact workload: %w", flagState, p, err)
	}
	if want != nil {
		if err := sameConfig(s.Config, *want); err != nil {
			return nil, p, fmt.Errorf("--%s %s is a state of another config than --%s: %w", flagState, p, flagSpec, err)
		}
	}
	return s, p, nil
}

// sameConfig reports how got differs from want (nil when their integer
// forms, which a state commits to, are equal).
func sameConfig(got, want exact.Config) error {
	if got.Hyper() == want.Hyper() {
		return nil
	}
	if got.Model != want.Model {
		return fmt.Errorf("model %s, want %s", describeModel(got.Model), describeModel(want.Model))
	}
	return fmt.Errorf("same model, train hyperparameters %+v, want %+v", got.WithDefaults().Train, want.WithDefaults().Train)
}

func describeModel(m exact.ModelConfig) string {
	return fmt.Sprintf("{layers %d, d_model %d, heads %d, d_ff %d, context %d, vocab %d}", m.Layers, m.DModel, m.Heads, m.DFF, m.Context, m.Vocab)
}

func parseSeed(text string) ([]byte, error) {
	seed, err := hex.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: must be hex (the job seed, e.g. %s): %w", flagSeed, text, DefaultSeedHex, err)
	}
	if len(seed) == 0 {
		return nil, fmt.Errorf("--%s: must not be empty", flagSeed)
	}
	return seed, nil
}

func workers(cmd *cobra.Command) int {
	n, _ := cmd.Flags().GetInt(flagWorkers)
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}

// stateFromFlags loads the state --state names, checked against the workload of the spec
// --spec names when it is given (sample and export).
func stateFromFlags(f *pflag.FlagSet) (*exact.State, string, error) {
	var want *exact.Config
	if p, _ := f.GetString(flagSpec); p != "" {
		cfg, _, err := loadSpecConfig(p)
		if err != nil {
			return nil, "", err
		}
		want = &cfg
	}
	statePath, _ := f.GetString(flagState)
	return loadState(statePath, want)
}
