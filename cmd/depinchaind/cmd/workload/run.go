package workload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/client/flags"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Files `workload run` writes into --out beside the trainer contract's
// checkpoints/, metrics.jsonl and DONE.
const (
	// RunFileName records what a run folder was trained from (config
	// digest, seed, data, h_0), so a later run into the same folder resumes
	// only the same training.
	RunFileName = "run.json"
	// ConfigFileName is the workload config as JSON (defaults applied):
	// what `train.py --config @FILE` and DEPIN_EXACT_CONFIG read.
	ConfigFileName = "workload.json"
	// DataDirName holds the built-in corpus (corpus.txt) when the run
	// names no --dataset-dir, so the PyTorch trainer can read the same data.
	DataDirName = "data"
)

// runRecord is run.json.
type runRecord struct {
	ConfigDigest string `json:"config_digest"`
	Seed         string `json:"seed"`
	DataDir      string `json:"data_dir"`
	DataBytes    int    `json:"data_bytes"`
	DataSHA256   string `json:"data_sha256"`
	InitWeights  string `json:"init_weights,omitempty"`
	H0           string `json:"h0"`
}

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run (--spec job.yaml | --job ID) --out DIR [--steps N] [--dataset-dir DIR] [--init-weights FILE] [--seed HEX]",
		Short: "Train a job spec's exact transformer locally and print every step's loss and state root",
		Long: `Train the spec's transformer (or reference) workload with pkg/exact on all cores: the
code the chain's referee re-executes and the sidecar's reference runtime runs. The output
folder gets what a provider commits (checkpoints/step-N/{state,trace.txt,COMPLETE},
metrics.jsonl, DONE) and each line printed is a step's loss and h_i, the Merkle root of its
state, which is also a checkpoint's state_root.

--job ID instead of --spec reads a job's spec and seed from a node (--node or --grpc-addr):
the roots it prints are those the job's provider must commit.

Data: the files of --dataset-dir concatenated in name order, or the built-in corpus (written
to DIR/data/corpus.txt) for a spec without a dataset. --seed is the job seed (hex; default
` + DefaultSeedHex + `, the bytes of "depinchain"); a real job's seed is on chain. --steps
defaults to the spec's total_steps, --checkpoint-every to its checkpoint_every.
--init-weights starts step 0 from float weights (safetensors), quantized as the spec says;
the printed h_0 is that imported state's root.

Running again into the same --out with more --steps continues from its last checkpoint
with the hashes of an uninterrupted run (config, seed, data and h_0 must be the same).
--json prints only train.py's 'steps' lines ({"step", "loss" (Q30), "root"}, h_0 first),
so the output can be compared with 'python3 pkg/exact/torch/train.py steps' by diff.`,
		Example: `depinchaind workload run --spec job.yaml --steps 50 --out ./run1
depinchaind workload run --spec job.yaml --steps 100 --out ./run1      # continues from step 50
depinchaind workload run --spec finetune.yaml --init-weights base/model.safetensors --out ./ft
depinchaind workload run --job 7 --node tcp://localhost:26657 --steps 100 --out ./job7`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE:         runRun,
	}
	f := cmd.Flags()
	f.String(flagSpec, "", "job spec YAML (workload kind transformer or reference); required unless --job")
	f.Uint64(flagJob, 0, "train job ID's spec with its seed, both read from a node (--node, or --grpc-addr) instead of --spec and --seed")
	f.String(flagOut, "", "output folder for checkpoints/, metrics.jsonl, run.json (required)")
	f.Uint64(flagSteps, 0, "train up to this step (0: the spec's total_steps)")
	f.Uint64(flagCheckpointEvery, 0, "steps between checkpoints (0: the spec's checkpoint_every)")
	f.String(flagDatasetDir, "", "training data: a folder whose regular files are concatenated in name order (default: the built-in corpus)")
	f.String(flagInitWeights, "", "start step 0 from these float weights (safetensors, e.g. a 'workload export')")
	f.String(flagSeed, DefaultSeedHex, "job seed in hex: initial weights and data order")
	f.Int(flagWorkers, 0, "goroutines per operator (0: all cores); results are the same for any value")
	f.Bool(flagJSON, false, "print only train.py-compatible JSON lines on stdout (everything else on stderr)")
	// Only the node flags of AddQueryFlagsToCmd: its -o/--output would sit
	// confusingly beside --out.
	f.String(flags.FlagNode, "tcp://localhost:26657", "with --job: <host>:<port> of the node's CometBFT RPC")
	f.String(flags.FlagGRPC, "", "with --job: the node's gRPC endpoint, used instead of --node")
	f.Bool(flags.FlagGRPCInsecure, false, "with --job: gRPC without TLS")
	return cmd
}

func runRun(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	specPath, _ := f.GetString(flagSpec)
	jobID, _ := f.GetUint64(flagJob)
	datasetDir, _ := f.GetString(flagDatasetDir)
	var (
		cfg  exact.Config
		spec markettypes.JobSpec
		seed []byte
		err  error
	)
	if jobID != 0 {
		if specPath != "" {
			return fmt.Errorf("--%s and --%s: give one; a job on chain has its spec", flagSpec, flagJob)
		}
		if f.Changed(flagSeed) {
			return fmt.Errorf("--%s and --%s: give one; a job on chain has its seed", flagSeed, flagJob)
		}
		if cfg, spec, seed, err = loadJob(cmd, jobID); err != nil {
			return err
		}
		if spec.DatasetId != "" && datasetDir == "" {
			return fmt.Errorf("job %d trains on dataset %q: give its data with --%s", jobID, spec.DatasetId, flagDatasetDir)
		}
	} else {
		if cfg, spec, err = loadSpecConfig(specPath); err != nil {
			return err
		}
		seedText, _ := f.GetString(flagSeed)
		if seed, err = parseSeed(seedText); err != nil {
			return err
		}
	}
	out, _ := f.GetString(flagOut)
	if out == "" {
		return fmt.Errorf("--%s is required: the folder for the checkpoints", flagOut)
	}
	total, _ := f.GetUint64(flagSteps)
	if total == 0 {
		total = spec.TotalSteps
	}
	if total == 0 || total > exact.HardMaxSteps {
		return fmt.Errorf("--%s: must be in [1, %d], got %d", flagSteps, uint64(exact.HardMaxSteps), total)
	}
	interval, _ := f.GetUint64(flagCheckpointEvery)
	if interval == 0 {
		interval = spec.CheckpointInterval
	}
	if interval == 0 {
		return fmt.Errorf("--%s: must be positive", flagCheckpointEvery)
	}
	jsonOut, _ := f.GetBool(flagJSON)
	stdout, info := cmd.OutOrStdout(), cmd.OutOrStdout()
	if jsonOut {
		info = cmd.ErrOrStderr()
	}

	// Data.
	var stream []byte
	dataDir, dataName := datasetDir, ""
	if datasetDir != "" {
		fi, err := os.Stat(datasetDir)
		if err != nil {
			return fmt.Errorf("--%s: %w", flagDatasetDir, fileErr(err))
		}
		if !fi.IsDir() {
			return fmt.Errorf("--%s %s: not a folder (put the data file in a folder of its own)", flagDatasetDir, datasetDir)
		}
		if stream, err = exact.ReadStreamDir(datasetDir); err != nil {
			return fmt.Errorf("--%s %s: %w", flagDatasetDir, datasetDir, err)
		}
		dataName = "--" + flagDatasetDir + " " + datasetDir
	} else {
		stream = traindata.BuiltinCorpus()
		dataDir, dataName = filepath.Join(out, DataDirName), "the built-in corpus"
	}
	if need := cfg.Model.Context + 1; len(stream) < need {
		return fmt.Errorf("training data (%s) has %d bytes; a window of model.context %d needs at least %d", dataName, len(stream), cfg.Model.Context, need)
	}
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	dataSum := sha256.Sum256(stream)

	// Step 0.
	initWeights, _ := f.GetString(flagInitWeights)
	var initial *exact.State
	if initWeights != "" {
		if _, err := os.Stat(initWeights); err != nil {
			return fmt.Errorf("--%s: %w", flagInitWeights, fileErr(err))
		}
		if initial, err = exact.ImportSafetensors(cfg, initWeights); err != nil {
			return fmt.Errorf("--%s %s: cannot start the spec's model %s from it: %w", flagInitWeights, initWeights, describeModel(cfg.Model), err)
		}
	} else if initial, err = exact.Init(cfg, seed); err != nil {
		return err
	}
	h0 := initial.Root()
	rec := runRecord{ConfigDigest: hex.EncodeToString(digest(cfg)), Seed: hex.EncodeToString(seed), DataDir: dataDir,
		DataBytes: len(stream), DataSHA256: hex.EncodeToString(dataSum[:]), InitWeights: initWeights, H0: h0.Hex()}

	// A fresh folder, or the continuation of a run in it.
	resume, err := prepareOut(out, rec, total)
	if err != nil {
		return err
	}
	if datasetDir == "" {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dataDir, "corpus.txt"), stream, 0o644); err != nil {
			return err
		}
	}
	cj, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(out, ConfigFileName), append(cj, '\n'), 0o644); err != nil {
		return err
	}
	rj, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(out, RunFileName), append(rj, '\n'), 0o644); err != nil {
		return err
	}

	m := cfg.Model
	fmt.Fprintf(info, "workload: %s; %d parameters; batch %d × context %d = %d tokens/step; %d multiply-accumulates/step\n",
		describeModel(m), cfg.ParamCount(), cfg.Train.Batch, m.Context, cfg.TokensPerStep(), cfg.MACsPerStep())
	for _, w := range chainWarnings(cfg) {
		fmt.Fprintf(info, "note: %s\n", w)
	}
	if spec.DatasetId != "" && datasetDir == "" {
		fmt.Fprintf(info, "note: the spec names dataset %q; this run trains on the built-in corpus (give the dataset's files with --%s)\n", spec.DatasetId, flagDatasetDir)
	}
	fmt.Fprintf(info, "seed %s; data: %s (%d bytes, sha256 %s)\n", rec.Seed, dataName, len(stream), rec.DataSHA256)
	start := initial
	opts := exact.TrainOptions{Config: cfg, Seed: seed, Stream: stream, OutputDir: out, TotalSteps: total,
		CheckpointInterval: interval, Workers: workers(cmd)}
	if resume != 0 {
		opts.ResumeFrom, opts.StartStep = exact.CheckpointDir(out, resume), resume
		if start, err = exact.LoadCheckpointState(opts.ResumeFrom); err != nil {
			return fmt.Errorf("--%s %s: checkpoint step-%d: %w", flagOut, out, resume, err)
		}
		fmt.Fprintf(info, "h_0 %s\ncontinuing from %s (h_%d %s)\n", h0.Hex(), opts.ResumeFrom, resume, start.Root().Hex())
	} else {
		opts.Initial = initial
		if initWeights != "" {
			fmt.Fprintf(info, "h_0 %s (imported from %s: the state root a fine-tuning job starts from)\n", h0.Hex(), initWeights)
		} else {
			fmt.Fprintf(info, "h_0 %s (exact.Init of the seed)\n", h0.Hex())
		}
	}
	if jsonOut {
		fmt.Fprint(stdout, jsonLine(start.Step, start.Loss, start.Root()))
	}
	began := time.Now()
	opts.Progress = func(step uint64, loss int64, root merkle.Hash) {
		if jsonOut {
			fmt.Fprint(stdout, jsonLine(step, loss, root))
			return
		}
		fmt.Fprintf(stdout, "step %d loss %.6f root %s\n", step, exact.LossNats(loss), root.Hex())
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	trainErr := exact.Train(ctx, opts)
	// Every checkpoint this run completed, read back from disk.
	steps, err := completeCheckpoints(out)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s <= opts.StartStep {
			continue
		}
		dir := exact.CheckpointDir(out, s)
		b, err := os.ReadFile(filepath.Join(dir, exact.StateFileName))
		if err != nil {
			return err
		}
		fmt.Fprintf(info, "checkpoint step-%d state_root %s %s\n", s, exact.StateRoot(b).Hex(), dir)
	}
	if trainErr != nil {
		if errors.Is(trainErr, context.Canceled) {
			return fmt.Errorf("stopped; run the same command again to continue from the last checkpoint")
		}
		return trainErr
	}
	el := time.Since(began)
	n := total - opts.StartStep
	fmt.Fprintf(info, "trained steps %d..%d in %s (%.2f steps/s, %d workers); last state %s\n", opts.StartStep+1, total,
		el.Round(time.Millisecond), float64(n)/max(el.Seconds(), 1e-9), opts.Workers, filepath.Join(exact.CheckpointDir(out, total), exact.StateFileName))
	fmt.Fprintf(info, "the same steps in PyTorch: python3 pkg/exact/torch/train.py steps --config @%s --seed %s --data %s --steps %d%s\n",
		filepath.Join(out, ConfigFileName), rec.Seed, dataDir, total, initFlag(initWeights))
	return nil
}

// loadJob reads job id from the node and returns its workload config, spec
// and seed.
func loadJob(cmd *cobra.Command, id uint64) (exact.Config, markettypes.JobSpec, []byte, error) {
	clientCtx, err := client.GetClientQueryContext(cmd)
	if err != nil {
		return exact.Config{}, markettypes.JobSpec{}, nil, fmt.Errorf("--%s %d: %w", flagJob, id, err)
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := markettypes.NewQueryClient(clientCtx).Job(ctx, &markettypes.QueryJobRequest{JobId: id})
	if err != nil {
		return exact.Config{}, markettypes.JobSpec{}, nil, fmt.Errorf("--%s %d: querying the node: %w", flagJob, id, err)
	}
	job := res.Job
	cfg, err := specConfig(job.Spec)
	if err != nil {
		return exact.Config{}, job.Spec, nil, fmt.Errorf("--%s %d: %w", flagJob, id, err)
	}
	if len(job.Seed) == 0 {
		return exact.Config{}, job.Spec, nil, fmt.Errorf("--%s %d: the job has no seed", flagJob, id)
	}
	return cfg, job.Spec, job.Seed, nil
}

func initFlag(w string) string {
	if w == "" {
		return ""
	}
	return " --init-weights " + w
}

// jsonLine is a line of `train.py steps`, spaced as Python's json.dumps.
func jsonLine(step uint64, loss int64, root merkle.Hash) string {
	return fmt.Sprintf("{\"step\": %d, \"loss\": %d, \"root\": \"%s\"}\n", step, loss, root.Hex())
}

func digest(cfg exact.Config) []byte {
	d := cfg.Hyper().Digest()
	return d[:]
}

// chainWarnings lists the bounds of a chain with default params that cfg
// exceeds: local training is allowed, submitting such a spec is not.
func chainWarnings(cfg exact.Config) []string {
	var out []string
	if err := cfg.CheckLimits(markettypes.DefaultParams().TransformerLimits()); err != nil {
		out = append(out, "a chain with default x/market params would refuse this spec: "+markettypes.ConfigProblems(err))
	}
	if macs, max := uint64(cfg.MACsPerStep()), verifytypes.DefaultParams().MaxStepMacs; macs > max {
		out = append(out, fmt.Sprintf("a step is %d multiply-accumulates, more than the one-step referee re-executes with default x/verify params (max_step_macs %d); the chain refuses it at submit", macs, max))
	}
	return out
}

// prepareOut checks --out and returns the checkpoint step to resume from
// (0: start at step 0). A folder with run.json must record the same
// training; one without must be empty or absent.
func prepareOut(out string, rec runRecord, total uint64) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(out, RunFileName))
	if errors.Is(err, os.ErrNotExist) {
		entries, err := os.ReadDir(out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("--%s: %w", flagOut, err)
		}
		if len(entries) > 0 {
			return 0, fmt.Errorf("--%s %s: the folder is not empty and has no %s: not a 'workload run' folder; name a new or empty one", flagOut, out, RunFileName)
		}
		return 0, os.MkdirAll(out, 0o755)
	}
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", flagOut, err)
	}
	var old runRecord
	if err := json.Unmarshal(b, &old); err != nil {
		return 0, fmt.Errorf("--%s %s: %s: %w", flagOut, out, RunFileName, err)
	}
	var diff []string
	if old.ConfigDigest != rec.ConfigDigest {
		diff = append(diff, "workload config (model or train) of another digest")
	}
	if old.Seed != rec.Seed {
		diff = append(diff, fmt.Sprintf("seed %s (now %s)", old.Seed, rec.Seed))
	}
	if old.DataSHA256 != rec.DataSHA256 {
		diff = append(diff, fmt.Sprintf("data of %d bytes from %s (now %d bytes from %s)", old.DataBytes, old.DataDir, rec.DataBytes, rec.DataDir))
	}
	if old.H0 != rec.H0 && old.Seed == rec.Seed && old.ConfigDigest == rec.ConfigDigest {
		diff = append(diff, fmt.Sprintf("initial state h_0 %s (now %s: --%s differs)", old.H0, rec.H0, flagInitWeights))
	}
	if len(diff) > 0 {
		return 0, fmt.Errorf("--%s %s was trained from other inputs: %s; continue it with the same ones or name a new folder", flagOut, out, strings.Join(diff, "; "))
	}
	steps, err := completeCheckpoints(out)
	if err != nil {
		return 0, err
	}
	var last uint64
	if len(steps) > 0 {
		last = steps[len(steps)-1]
	}
	if last >= total {
		return 0, fmt.Errorf("--%s %s already holds checkpoint step-%d; ask for more than %d --%s to continue it", flagOut, out, last, last, flagSteps)
	}
	// Forget what followed the last checkpoint: metrics of steps after it
	// and the old end of the run.
	if err := trimMetrics(filepath.Join(out, exact.MetricsFileName), last); err != nil {
		return 0, err
	}
	if err := os.Remove(filepath.Join(out, exact.DoneMarkerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	return last, nil
}

// completeCheckpoints lists the steps of out's checkpoints that have
// COMPLETE, ascending.
func completeCheckpoints(out string) ([]uint64, error) {
	entries, err := os.ReadDir(filepath.Join(out, exact.CheckpointsDirName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var steps []uint64
	for _, e := range entries {
		n, err := strconv.ParseUint(strings.TrimPrefix(e.Name(), exact.CheckpointDirPrefix), 10, 64)
		if err != nil || !e.IsDir() || !strings.HasPrefix(e.Name(), exact.CheckpointDirPrefix) {
			continue
		}
		if _, err := os.Stat(filepath.Join(out, exact.CheckpointsDirName, e.Name(), exact.CompleteMarkerName)); err == nil {
			steps = append(steps, n)
		}
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] < steps[j] })
	return steps, nil
}

// trimMetrics keeps the metrics lines of steps up to last.
func trimMetrics(path string, last uint64) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Step uint64 `json:"step"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Step <= last {
			kept.Write(sc.Bytes())
			kept.WriteByte('\n')
		}
	}
	return os.WriteFile(path, kept.Bytes(), 0o644)
}
