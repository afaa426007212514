package workload

// Cross-implementation tests: `workload run` against the PyTorch trainer
// (pkg/exact/torch/train.py) and an exported model against the plain float
// model (float_model.py). Like pkg/exact's, they never skip: without
// PyTorch they fail with the install hint.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// python is Debian's interpreter, for which apt-get installs python3-torch.
const python = "/usr/bin/python3"

// torchDir is pkg/exact/torch from this package's folder.
var torchDir = filepath.Join("..", "..", "..", "..", "pkg", "exact", "torch")

var (
	torchOnce sync.Once
	torchErr  error
)

func requireTorch(t *testing.T) {
	t.Helper()
	torchOnce.Do(func() {
		out, err := exec.Command(python, "-c", "import torch, numpy").CombinedOutput()
		if err != nil {
			torchErr = fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
	})
	if torchErr != nil {
		t.Fatalf("the exact workload's PyTorch implementation cannot run: %s cannot import torch and numpy (%v).\n"+
			"Install Debian's packages: apt-get update && apt-get install -y python3-torch python3-numpy "+
			"(scripts/deps.sh, .ci/run and `make test` do this)", python, torchErr)
	}
}

// runPy runs a script of pkg/exact/torch with extra environment and returns
// its stdout; a failure reports stderr.
func runPy(t *testing.T, env []string, script string, args ...string) []byte {
	t.Helper()
	requireTorch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join(torchDir, script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s %s %v: no result within 3 minutes; stderr:\n%s", python, script, args, stderr.String())
		}
		t.Fatalf("%s %s %v: %v; stderr:\n%s", python, script, args, err, stderr.String())
	}
	return stdout.Bytes()
}

// `workload run` and train.py, given the same spec, seed and data, write the
// same checkpoints byte for byte: train.py under the trainer contract (the
// environment a provider's sidecar gives it, DEPIN_EXACT_CONFIG from the
// run's workload.json, DEPIN_DATA_DIR the run's copy of the built-in
// corpus), and `train.py steps` prints exactly the lines of `run --json`.
func TestWorkloadRunMatchesThePyTorchTrainer(t *testing.T) {
	requireTorch(t)
	dir := t.TempDir()
	// Two layers, three heads, two micro-batches: more of the graph than
	// the tiny model exercises.
	spec := writeFile(t, dir, "job.yaml", transformerSpec("{layers: 2, d_model: 24, heads: 3, d_ff: 40, context: 12, vocab: 256}",
		"{batch: 4, micro_batch: 2, optimizer: adamw, lr: 0.005, warmup_steps: 2, decay_steps: 5, min_lr: 0.0001, weight_decay: 0.05}"))
	goOut := filepath.Join(dir, "go")
	p := parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "5", "--checkpoint-every", "2", "--out", goOut))
	require.Len(t, p.roots, 5)

	pyOut := filepath.Join(dir, "py")
	cfgJSON, err := os.ReadFile(filepath.Join(goOut, ConfigFileName))
	require.NoError(t, err)
	env := []string{"DEPIN_JOB_ID=1", "DEPIN_LEASE_ID=1", "DEPIN_OUTPUT_DIR=" + pyOut, "DEPIN_RESUME_FROM=",
		"DEPIN_DATA_DIR=" + filepath.Join(goOut, DataDirName), "DEPIN_START_STEP=0", "DEPIN_TOTAL_STEPS=5",
		"DEPIN_CHECKPOINT_INTERVAL=2", "DEPIN_JOB_SEED=" + DefaultSeedHex, "CUDA_VISIBLE_DEVICES=",
		"DEPIN_EXACT_CONFIG=" + string(cfgJSON)}
	runPy(t, env, "train.py")
	g, py := readTree(t, goOut), readTree(t, pyOut)
	for _, n := range []uint64{2, 4, 5} {
		for _, f := range []string{exact.StateFileName, exact.TraceFileName, exact.CompleteMarkerName} {
			rel := filepath.Join(exact.CheckpointsDirName, fmt.Sprintf("step-%d", n), f)
			require.Contains(t, py, rel)
			require.Equal(t, g[rel], py[rel], rel)
		}
		require.Equal(t, p.roots[n], exact.StateRoot(py[filepath.Join(exact.CheckpointsDirName, fmt.Sprintf("step-%d", n), exact.StateFileName)]).Hex())
	}
	require.Contains(t, py, exact.DoneMarkerName)
	// Every step's root in train.py's metrics is the one `workload run` printed.
	var lines int
	for _, l := range bytes.Split(bytes.TrimSpace(py[exact.MetricsFileName]), []byte("\n")) {
		var m struct {
			Step uint64 `json:"step"`
			Root string `json:"root"`
		}
		require.NoError(t, json.Unmarshal(l, &m))
		require.Equal(t, p.roots[m.Step], m.Root, "h_%d", m.Step)
		lines++
	}
	require.Equal(t, 5, lines)

	// The documented comparison: `run --json` and `train.py steps` print
	// the same lines, h_0 first.
	jsonOut, _, err := execute(t, "run", "--spec", spec, "--steps", "5", "--out", filepath.Join(dir, "json"), "--json")
	require.NoError(t, err)
	steps := runPy(t, nil, "train.py", "steps", "--config", "@"+filepath.Join(goOut, ConfigFileName), "--seed", DefaultSeedHex,
		"--data", filepath.Join(goOut, DataDirName), "--steps", "5", "--threads", "1")
	require.Equal(t, jsonOut, string(steps))
	require.Equal(t, 6, bytes.Count(steps, []byte("\n")))
}

// A model trained and exported by the CLI, loaded by the plain float32
// PyTorch model (float_model.py), predicts the exact model's next bytes.
func TestWorkloadExportLoadsIntoTheFloatModel(t *testing.T) {
	requireTorch(t)
	dir := t.TempDir()
	spec := writeFile(t, dir, "job.yaml", transformerSpec("{layers: 2, d_model: 32, heads: 4, d_ff: 64, context: 24, vocab: 256}",
		"{batch: 8, optimizer: adamw, lr: 0.01, warmup_steps: 5, weight_decay: 0.1}"))
	out := filepath.Join(dir, "run")
	mustExecute(t, "run", "--spec", spec, "--steps", "60", "--checkpoint-every", "60", "--out", out)
	model := filepath.Join(dir, "model")
	mustExecute(t, "export", "--state", exact.CheckpointDir(out, 60), "--out", model)
	s, err := exact.LoadCheckpointState(exact.CheckpointDir(out, 60))
	require.NoError(t, err)

	// Held-out-ish windows: every 97th offset of the built-in corpus.
	corpus := traindata.BuiltinCorpus()
	var windows [][]byte
	var ids [][]int
	for i := 0; i+25 <= len(corpus) && len(windows) < 40; i += 97 {
		w := corpus[i : i+25]
		windows = append(windows, w)
		row := make([]int, 24)
		for j := range row {
			row[j] = int(w[j])
		}
		ids = append(ids, row)
	}
	logits, _, err := exact.Forward(s, windows, 0)
	require.NoError(t, err)
	var argmax []int
	var fl [][]float64
	for r := range logits.Spec.Rows() {
		row := logits.Row(r)
		best := 0
		f := make([]float64, len(row))
		for j, v := range row {
			if v > row[best] {
				best = j
			}
			f[j] = math.Ldexp(float64(v), -exact.FracAct)
		}
		argmax, fl = append(argmax, best), append(fl, f)
	}
	exp, err := json.Marshal(map[string]any{"windows": ids, "argmax": argmax, "logits": fl})
	require.NoError(t, err)
	expPath := writeFile(t, dir, "expected.json", string(exp))
	var res struct {
		Agreement float64 `json:"argmax_agreement"`
		MaxDiff   float64 `json:"max_abs_logit_diff"`
		MeanDiff  float64 `json:"mean_abs_logit_diff"`
		Range     float64 `json:"logit_range"`
		Positions int     `json:"positions"`
	}
	require.NoError(t, json.Unmarshal(runPy(t, nil, "float_model.py", "check", model, expPath), &res))
	t.Logf("float32 model vs exact over %d positions: argmax agreement %.4f, max |Δlogit| %.4f, mean %.5f, logit range %.2f",
		res.Positions, res.Agreement, res.MaxDiff, res.MeanDiff, res.Range)
	require.Equal(t, 40*24, res.Positions)
	require.GreaterOrEqual(t, res.Agreement, 0.95)
	require.Less(t, res.MaxDiff, 0.02*res.Range, "logits equal to within rounding")
	require.Greater(t, res.Range, 5.0, "the model learned something to predict")
}
