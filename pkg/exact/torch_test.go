package exact

// Cross-implementation tests: the PyTorch implementation (torch/) must give
// the Go package's bits. They never skip: without PyTorch they fail with
// the install hint.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// python is Debian's interpreter, for which apt-get installs python3-torch
// (a python3 earlier on PATH, e.g. pyenv's, would not see it).
const python = "/usr/bin/python3"

var torchOnce sync.Once
var torchErr error

func requireTorch(t testing.TB) {
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
			"(.ci/run and `make test` do this)", python, torchErr)
	}
}

// runPy runs python with args (and extra environment) under a deadline
// and returns stdout; a failure reports stderr.
func runPy(t testing.TB, stdin []byte, env []string, args ...string) []byte {
	t.Helper()
	requireTorch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("%s %v: no result within 3 minutes; stderr:\n%s", python, args, stderr.String())
		}
		t.Fatalf("%s %v: %v; stderr:\n%s", python, args, err, stderr.String())
	}
	return stdout.Bytes()
}

const trainPy = "torch/train.py"

// crossConfigs differ in depth, width, heads (head dims 16, 10, 6, 32, 8),
// context, batch and micro-batch, schedule and optimizer settings.
func crossConfigs() map[string]Config {
	return map[string]Config{
		"L1-D16-C8": {Model: ModelConfig{Layers: 1, DModel: 16, Heads: 1, DFF: 32, Context: 8, Vocab: 256},
			Train: TrainConfig{Batch: 2, LR: 1e-2, WeightDecay: 0.1}},
		"L2-D30-H3-mb3": {Model: ModelConfig{Layers: 2, DModel: 30, Heads: 3, DFF: 48, Context: 12, Vocab: 256},
			Train: TrainConfig{Batch: 6, MicroBatch: 2, LR: 5e-3, WarmupSteps: 2, DecaySteps: 5, MinLR: 1e-4, WeightDecay: 0.05, Beta2: 0.999}},
		"L3-D24-H4-C5": {Model: ModelConfig{Layers: 3, DModel: 24, Heads: 4, DFF: 40, Context: 5, Vocab: 256},
			Train: TrainConfig{Batch: 3, MicroBatch: 1, LR: 2e-2, Beta1: 0.8}},
		"L1-D64-C32": {Model: ModelConfig{Layers: 1, DModel: 64, Heads: 2, DFF: 128, Context: 32, Vocab: 256},
			Train: TrainConfig{Batch: 4, LR: 1e-3, WarmupSteps: 1, WeightDecay: 0.1}},
		"L2-D40-H5-C17": {Model: ModelConfig{Layers: 2, DModel: 40, Heads: 5, DFF: 20, Context: 17, Vocab: 256},
			Train: TrainConfig{Batch: 2, MicroBatch: 1, LR: 3e-3, Eps: 1e-6, NormEps: 1e-6}},
	}
}

type pyLine struct {
	Step uint64 `json:"step"`
	Loss int64  `json:"loss"`
	Root string `json:"root"`
}

// files writes cfg as JSON and the corpus into a temporary folder.
func files(t *testing.T, cfg Config) (cfgPath, dataPath string) {
	dir := t.TempDir()
	j, err := json.Marshal(cfg)
	require.NoError(t, err)
	cfgPath, dataPath = filepath.Join(dir, "config.json"), filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(cfgPath, j, 0o644))
	require.NoError(t, os.WriteFile(dataPath, testCorpus, 0o644))
	return cfgPath, dataPath
}

// torchSteps runs train.py steps and returns its lines (h_start first).
func torchSteps(t *testing.T, cfg Config, steps int, extra ...string) []pyLine {
	cfgPath, dataPath := files(t, cfg)
	args := append([]string{trainPy, "steps", "--config", "@" + cfgPath, "--seed", hex.EncodeToString(testSeed),
		"--data", dataPath, "--steps", fmt.Sprint(steps)}, extra...)
	out := runPy(t, nil, nil, args...)
	var lines []pyLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var l pyLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		lines = append(lines, l)
	}
	return lines
}

// goSteps returns h_0..h_n and the losses of steps 1..n.
func goSteps(t testing.TB, s *State, n int) ([]merkle.Hash, []int64, *State) {
	roots := []merkle.Hash{s.Root()}
	var losses []int64
	for range n {
		b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
		require.NoError(t, err)
		var info StepInfo
		s, info, err = Step(s, b)
		require.NoError(t, err)
		roots = append(roots, info.Root)
		losses = append(losses, info.Loss)
	}
	return roots, losses, s
}

func requireSameRoots(t *testing.T, goRoots []merkle.Hash, goLosses []int64, py []pyLine) {
	t.Helper()
	require.Len(t, py, len(goRoots))
	for i, l := range py {
		require.Equal(t, goRoots[i].Hex(), l.Root, "h_%d", l.Step)
		if i > 0 {
			require.Equal(t, goLosses[i-1], l.Loss, "loss of step %d", l.Step)
		}
	}
}

func TestTorchArithmeticMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 78))
	req := map[string][][]int64{}
	add := func(fn string, args ...int64) { req[fn] = append(req[fn], args) }
	for _, v := range []int64{0, 1, -1, 5, -5, 1<<61 - 1, -(1 << 61), 1<<62 - 1, -(1<<62 - 1)} {
		for _, n := range []int64{0, 1, 2, 30, 61, 62} {
			add("rs", v, n)
		}
	}
	for range 400 {
		add("rs", int64(r.Uint64()>>(2+r.IntN(40)))*int64(1-2*r.IntN(2)), int64(r.IntN(63)))
		add("div", int64(r.Uint64()>>(2+r.IntN(40)))*int64(1-2*r.IntN(2)), 1+int64(r.Uint64()>>(3+r.IntN(59))))
		add("mulshift", int64(r.Uint64()>>(2+r.IntN(30)))*int64(1-2*r.IntN(2)), int64(r.Uint64()>>33)*int64(1-2*r.IntN(2)), 30+int64(r.IntN(2))*16)
		add("isqrt", int64(r.Uint64()>>(2+r.IntN(61))))
		add("bitlen", int64(r.Uint64()>>(11+r.IntN(52)))) // the domain: |v| < 2^53
		add("exp", -int64(r.Uint64()>>(16+r.IntN(48))))
		add("ln", 1<<30+int64(r.Uint64()>>(24+r.IntN(40))))
	}
	for _, v := range []int64{0, 1, 3, 1<<62 - 1, 4611686014132420609} {
		add("isqrt", v)
	}
	for _, v := range []int64{0, 1, 2, 1<<52 - 1, 1 << 52, 1<<53 - 1, -(1<<53 - 1)} {
		add("bitlen", v)
	}
	for _, v := range []int64{0, 1, 32767, 32768, 65534, 65535, 65536, 131069, 131070, 131071, 1<<31 - 1, -(1<<31 - 1), -65535} {
		add("qshift", v)
	}
	for range 200 {
		add("qshift", int64(r.Uint64()>>(33+r.IntN(31)))*int64(1-2*r.IntN(2)))
	}
	for _, v := range []int64{0, -1, -(1 << 32), -(1 << 47)} {
		add("exp", v)
	}
	for _, v := range []int64{1 << 30, 1<<30 + 1, 1<<31 - 1, 1 << 31, 256 << 30} {
		add("ln", v)
	}
	for range 30 {
		add("schedule", int64(r.IntN(5000)), fixed(r.Float64()*0.1, qLR), fixed(r.Float64()*1e-4, qLR), int64(r.IntN(100)),
			[]int64{0, 3000}[r.IntN(2)]+int64(r.IntN(100)), fixed(r.Float64(), 30), fixed(r.Float64()*0.999, 30), fixed(0.5+r.Float64()*0.4999, 30))
	}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	var got map[string][]json.RawMessage
	require.NoError(t, json.Unmarshal(runPy(t, body, nil, trainPy, "arith"), &got))
	for fn, args := range req {
		require.Len(t, got[fn], len(args), fn)
		for i, a := range args {
			var want any
			switch fn {
			case "rs":
				want = RS(a[0], int(a[1]))
			case "div":
				want = DIV(a[0], a[1])
			case "mulshift":
				want = MulShift(a[0], a[1], int(a[2]))
			case "isqrt":
				want = ISqrt(a[0])
			case "bitlen":
				want = int64(BitLen(a[0]))
			case "qshift":
				want = int64(qShift(max(a[0], -a[0])))
			case "exp":
				want = Exp(a[0])
			case "ln":
				want = Ln(a[0])
			case "schedule":
				s := schedule(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])
				want = s[:]
			}
			w, _ := json.Marshal(want)
			require.JSONEq(t, string(w), string(got[fn][i]), "%s%v", fn, a)
		}
	}
}

func TestTorchGraphMatchesGo(t *testing.T) {
	for name, cfg := range crossConfigs() {
		cfgPath, _ := files(t, cfg)
		want, err := json.Marshal(TrainGraph(cfg))
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(runPy(t, nil, nil, trainPy, "graph", "--config", "@"+cfgPath)), name)
	}
}

// Go and PyTorch give the same state root and loss after every step, for
// configurations of different shapes, and with 1 and 2 torch threads.
func TestTorchStepsMatchGo(t *testing.T) {
	for name, cfg := range crossConfigs() {
		t.Run(name, func(t *testing.T) {
			s, err := Init(cfg, testSeed)
			require.NoError(t, err)
			roots, losses, _ := goSteps(t, s, 3)
			threads := "1"
			if name == "L2-D30-H3-mb3" || name == "L1-D64-C32" {
				requireSameRoots(t, roots, losses, torchSteps(t, cfg, 3, "--threads", "1"))
				threads = "2"
			}
			requireSameRoots(t, roots, losses, torchSteps(t, cfg, 3, "--threads", threads))
		})
	}
}

// Every operator's output has the same Merkle root in both implementations
// (from a mid-training state, so the Adam moments are not zero).
func TestTorchOperatorRootsMatchGo(t *testing.T) {
	cfg := crossConfigs()["L2-D30-H3-mb3"]
	s := trained(t, cfg, 2)
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state")
	require.NoError(t, os.WriteFile(statePath, s.Encode(), 0o644))
	var want []string
	b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
	require.NoError(t, err)
	_, _, err = (&Executor{Observer: func(op *Op, out *Tensor) {
		want = append(want, fmt.Sprintf("%d %s %s", op.Index, op.Kind, out.Root()))
	}}).Step(s, b)
	require.NoError(t, err)
	cfgPath, dataPath := files(t, cfg)
	out := runPy(t, nil, nil, trainPy, "oproots", "--config", "@"+cfgPath, "--seed", hex.EncodeToString(testSeed),
		"--data", dataPath, "--from-state", statePath)
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			Index int    `json:"index"`
			Kind  string `json:"kind"`
			Root  string `json:"root"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		got = append(got, fmt.Sprintf("%d %s %s", r.Index, r.Kind, r.Root))
	}
	require.Equal(t, len(TrainGraph(cfg).Ops), len(want))
	require.Equal(t, want, got)
}

// Two gloo processes (3 micro-batches split 2 + 1) give the bits of one.
func TestTorchDataParallelMatchesGo(t *testing.T) {
	cfg := crossConfigs()["L2-D30-H3-mb3"]
	s, err := Init(cfg, testSeed)
	require.NoError(t, err)
	roots, losses, _ := goSteps(t, s, 3)
	requireSameRoots(t, roots, losses, torchSteps(t, cfg, 3, "--nproc", "2", "--threads", "1"))
}

// A run resumed from a mid-run state in the other implementation
// continues with the hashes of the uninterrupted run, both ways.
func TestResumeAcrossImplementations(t *testing.T) {
	cfg := crossConfigs()["L3-D24-H4-C5"]
	s, err := Init(cfg, testSeed)
	require.NoError(t, err)
	roots, losses, _ := goSteps(t, s, 4)
	// Go → PyTorch: Go trains 2 steps, PyTorch continues 2.
	mid := trained(t, cfg, 2)
	dir := t.TempDir()
	midPath := filepath.Join(dir, "mid")
	require.NoError(t, os.WriteFile(midPath, mid.Encode(), 0o644))
	py := torchSteps(t, cfg, 2, "--from-state", midPath)
	requireSameRoots(t, roots[2:], losses[2:], py)
	// PyTorch → Go: PyTorch trains 2 steps and saves, Go continues 2.
	savePath := filepath.Join(dir, "saved")
	torchSteps(t, cfg, 2, "--save", savePath)
	saved, err := os.ReadFile(savePath)
	require.NoError(t, err)
	st, err := Decode(saved)
	require.NoError(t, err)
	require.Equal(t, roots[2], st.Root())
	r2, l2, _ := goSteps(t, st, 2)
	require.Equal(t, roots[2:], r2)
	require.Equal(t, losses[2:], l2)
}

// trainerEnv is the contract's environment for train.py.
func trainerEnv(cfgJSON []byte, out, data, resume string, start, total, interval uint64) []string {
	return []string{"DEPIN_JOB_ID=1", "DEPIN_LEASE_ID=1", "DEPIN_OUTPUT_DIR=" + out, "DEPIN_RESUME_FROM=" + resume,
		"DEPIN_DATA_DIR=" + data, fmt.Sprintf("DEPIN_START_STEP=%d", start), fmt.Sprintf("DEPIN_TOTAL_STEPS=%d", total),
		fmt.Sprintf("DEPIN_CHECKPOINT_INTERVAL=%d", interval), "DEPIN_JOB_SEED=" + hex.EncodeToString(testSeed),
		"CUDA_VISIBLE_DEVICES=", "DEPIN_EXACT_CONFIG=" + string(cfgJSON)}
}

func readDirFiles(t *testing.T, root string) map[string][]byte {
	out := map[string][]byte{}
	require.NoError(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	}))
	return out
}

// train.py under the trainer contract writes the checkpoints Go's Train
// writes, byte for byte (metrics aside), and resumes from either's
// checkpoints with the uninterrupted hashes.
func TestTorchTrainerContractMatchesGoTrain(t *testing.T) {
	cfg := crossConfigs()["L1-D16-C8"]
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "corpus.txt"), testCorpus, 0o644))
	goOut, pyOut := t.TempDir(), t.TempDir()
	opts := TrainOptions{Config: cfg, Seed: testSeed, Stream: testCorpus, OutputDir: goOut, TotalSteps: 5, CheckpointInterval: 2}
	require.NoError(t, Train(context.Background(), opts))
	runPy(t, nil, trainerEnv(cfgJSON, pyOut, data, "", 0, 5, 2), trainPy)
	g, p := readDirFiles(t, goOut), readDirFiles(t, pyOut)
	for _, name := range []string{"step-2", "step-4", "step-5"} {
		for _, f := range []string{StateFileName, TraceFileName, CompleteMarkerName} {
			rel := filepath.Join(CheckpointsDirName, name, f)
			require.Contains(t, g, rel)
			require.Equal(t, g[rel], p[rel], rel)
		}
	}
	require.Contains(t, p, DoneMarkerName)
	require.Equal(t, 5, strings.Count(string(p[MetricsFileName]), "\n"))
	// The last trace line is the Merkle root of the checkpoint's state.
	trace := strings.Fields(string(g[filepath.Join(CheckpointsDirName, "step-4", TraceFileName)]))
	require.Len(t, trace, 3)
	require.Equal(t, StateRoot(g[filepath.Join(CheckpointsDirName, "step-4", StateFileName)]).Hex(), trace[2])
	// PyTorch resumes from Go's step-2, Go resumes from PyTorch's step-4.
	pyResumed := t.TempDir()
	runPy(t, nil, trainerEnv(cfgJSON, pyResumed, data, CheckpointDir(goOut, 2), 2, 5, 2), trainPy)
	r := readDirFiles(t, pyResumed)
	for _, rel := range []string{"checkpoints/step-4/state", "checkpoints/step-4/trace.txt", "checkpoints/step-5/state", "checkpoints/step-5/trace.txt"} {
		require.Equal(t, g[rel], r[rel], rel)
	}
	goResumed := t.TempDir()
	opts.OutputDir, opts.ResumeFrom, opts.StartStep = goResumed, CheckpointDir(pyOut, 4), 4
	require.NoError(t, Train(context.Background(), opts))
	r = readDirFiles(t, goResumed)
	require.Equal(t, g["checkpoints/step-5/state"], r["checkpoints/step-5/state"])
	require.Equal(t, g["checkpoints/step-5/trace.txt"], r["checkpoints/step-5/trace.txt"])
}

// Run as a container job's image (scripts/torch-image.sh), train.py gets no
// DEPIN_EXACT_CONFIG: the configuration comes in its command (--config) and
// h_i is the SHA-256 of the state file, as the contract asks of container
// workloads. The state files are Go's byte for byte either way, so the
// checkpoints' state roots are exact.Train's.
func TestTorchTrainerContainerModeMatchesGoStates(t *testing.T) {
	cfg := crossConfigs()["L1-D16-C8"]
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "corpus.txt"), testCorpus, 0o644))
	goOut, pyOut := t.TempDir(), t.TempDir()
	opts := TrainOptions{Config: cfg, Seed: testSeed, Stream: testCorpus, OutputDir: goOut, TotalSteps: 3, CheckpointInterval: 2}
	require.NoError(t, Train(context.Background(), opts))
	runPy(t, nil, trainerEnv(nil, pyOut, data, "", 0, 3, 2), trainPy, "--config", string(cfgJSON))
	g, p := readDirFiles(t, goOut), readDirFiles(t, pyOut)
	init, err := Init(cfg, testSeed)
	require.NoError(t, err)
	prev := sha256.Sum256(init.Encode())
	for _, name := range []string{"step-2", "step-3"} {
		state := filepath.Join(CheckpointsDirName, name, StateFileName)
		require.Equal(t, g[state], p[state], state)
		trace := strings.Fields(string(p[filepath.Join(CheckpointsDirName, name, TraceFileName)]))
		require.Equal(t, hex.EncodeToString(prev[:]), trace[0], "h_start of %s chains to the previous state's SHA-256", name)
		sum := sha256.Sum256(p[state])
		require.Equal(t, hex.EncodeToString(sum[:]), trace[len(trace)-1], "h_end of %s", name)
		prev = sum
	}
	require.Contains(t, p, DoneMarkerName)
	// Without either source of the configuration it refuses to start.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, trainPy)
	cmd.Env = append(os.Environ(), trainerEnv(nil, t.TempDir(), data, "", 0, 3, 2)...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "no configuration")
}

// The plain float32 model loaded from the exported safetensors reproduces
// the exact model's next-token predictions.
func TestFloatModelReproducesExactPredictions(t *testing.T) {
	cfg := Config{Model: ModelConfig{Layers: 2, DModel: 32, Heads: 4, DFF: 64, Context: 24, Vocab: 256},
		Train: TrainConfig{Batch: 8, LR: 1e-2, WarmupSteps: 5, WeightDecay: 0.1}}
	s := trained(t, cfg, 60)
	dir := t.TempDir()
	require.NoError(t, Export(s, dir))
	var windows [][]byte
	var ids [][]int
	for i := 0; i+25 <= len(testCorpus) && len(windows) < 40; i += 73 {
		w := testCorpus[i : i+25]
		windows = append(windows, w)
		row := make([]int, 24)
		for j := range row {
			row[j] = int(w[j])
		}
		ids = append(ids, row)
	}
	logits, _, err := Forward(s, windows, 0)
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
			f[j] = math.Ldexp(float64(v), -FracAct)
		}
		argmax = append(argmax, best)
		fl = append(fl, f)
	}
	exp, err := json.Marshal(map[string]any{"windows": ids, "argmax": argmax, "logits": fl})
	require.NoError(t, err)
	expPath := filepath.Join(dir, "expected.json")
	require.NoError(t, os.WriteFile(expPath, exp, 0o644))
	var res struct {
		Agreement float64 `json:"argmax_agreement"`
		MaxDiff   float64 `json:"max_abs_logit_diff"`
		MeanDiff  float64 `json:"mean_abs_logit_diff"`
		Range     float64 `json:"logit_range"`
		Positions int     `json:"positions"`
	}
	require.NoError(t, json.Unmarshal(runPy(t, nil, nil, "torch/float_model.py", "check", dir, expPath), &res))
	t.Logf("float32 vs exact over %d positions: argmax agreement %.4f, max |Δlogit| %.4f, mean %.5f, logit range %.2f",
		res.Positions, res.Agreement, res.MaxDiff, res.MeanDiff, res.Range)
	require.Equal(t, 960, res.Positions)
	require.GreaterOrEqual(t, res.Agreement, 0.99)
	require.Less(t, res.MaxDiff, 0.02*res.Range)
	require.Greater(t, res.Range, 5.0, "the model learned something to predict")
}

// gpu_check.py (here in its CPU mode) accepts Go's reference roots and
// fails when one of them is wrong.
func TestGPUCheckOnCPU(t *testing.T) {
	type gcCase struct {
		Name      string   `json:"name"`
		Config    Config   `json:"config"`
		Seed      string   `json:"seed"`
		StreamB64 string   `json:"stream_b64"`
		Roots     []string `json:"roots"`
		Losses    []int64  `json:"losses"`
	}
	var cases []gcCase
	for _, name := range []string{"L1-D16-C8", "L2-D30-H3-mb3"} {
		cfg := crossConfigs()[name]
		s, err := Init(cfg, testSeed)
		require.NoError(t, err)
		roots, losses, _ := goSteps(t, s, 2)
		c := gcCase{Name: name, Config: s.Config, Seed: hex.EncodeToString(testSeed), Losses: losses}
		c.StreamB64 = base64.StdEncoding.EncodeToString(testCorpus)
		for _, r := range roots {
			c.Roots = append(c.Roots, r.Hex())
		}
		cases = append(cases, c)
	}
	dir := t.TempDir()
	write := func(name string, cs []gcCase) string {
		b, err := json.Marshal(map[string]any{"cases": cs})
		require.NoError(t, err)
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	good := write("good.json", cases)
	out := runPy(t, nil, nil, "torch/gpu_check.py", "--expected", good, "--device", "cpu", "--speed", "small", "--speed-steps", "1", "--threads", "1")
	require.Contains(t, string(out), `"roots_match": true`)
	require.Contains(t, string(out), `"exact_over_float32"`)
	require.Contains(t, string(out), `"exact_over_bf16"`)
	cases[1].Roots[2] = strings.Repeat("0", 64)
	bad := write("bad.json", cases)
	cmd := exec.Command(python, "torch/gpu_check.py", "--expected", bad, "--device", "cpu", "--speed", "none")
	res, err := cmd.Output()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "a wrong root must fail the check")
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(res), `"first_differing_h": 2`)
	require.Contains(t, string(res), `"roots_match": false`)
}

// A job started from float weights (DEPIN_INIT_WEIGHTS in train.py,
// TrainOptions.Initial from ImportSafetensors in Go) quantizes them by the
// same rule and trains to the same checkpoints.
func TestInitialWeightsImportMatchesAcrossImplementations(t *testing.T) {
	cfg := crossConfigs()["L1-D16-C8"]
	donor := trained(t, Config{Model: cfg.Model, Train: TrainConfig{Batch: 2, LR: 3e-2}}, 3)
	wdir := t.TempDir()
	require.NoError(t, Export(donor, wdir))
	weights := filepath.Join(wdir, SafetensorsFileName)
	initial, err := ImportSafetensors(cfg, weights)
	require.NoError(t, err)
	data := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "corpus.txt"), testCorpus, 0o644))
	goOut, pyOut := t.TempDir(), t.TempDir()
	require.NoError(t, Train(context.Background(), TrainOptions{Config: cfg, Seed: testSeed, Stream: testCorpus, OutputDir: goOut,
		Initial: initial, TotalSteps: 2, CheckpointInterval: 2}))
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	runPy(t, nil, append(trainerEnv(cfgJSON, pyOut, data, "", 0, 2, 2), "DEPIN_INIT_WEIGHTS="+weights), trainPy)
	g, p := readDirFiles(t, goOut), readDirFiles(t, pyOut)
	require.Equal(t, g["checkpoints/step-2/trace.txt"], p["checkpoints/step-2/trace.txt"])
	require.Equal(t, g["checkpoints/step-2/state"], p["checkpoints/step-2/state"])
	h0 := strings.Fields(string(g["checkpoints/step-2/trace.txt"]))[0]
	require.Equal(t, initial.Root().Hex(), h0, "h_0 is the imported state")
}

// SIGTERM stops train.py between steps: it exits with status 143 without
// DONE, and every checkpoint it completed is valid.
func TestTorchTrainerStopsOnSIGTERM(t *testing.T) {
	requireTorch(t)
	cfg := crossConfigs()["L1-D16-C8"]
	cfgJSON, err := json.Marshal(cfg)
	require.NoError(t, err)
	data, out := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(data, "corpus.txt"), testCorpus, 0o644))
	cmd := exec.Command(python, trainPy)
	cmd.Env = append(os.Environ(), trainerEnv(cfgJSON, out, data, "", 0, 100000, 2)...)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(CheckpointDir(out, 2), CompleteMarkerName)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("train.py wrote no checkpoint within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatal("train.py did not stop within a minute of SIGTERM")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 143, ee.ExitCode())
	_, err = os.Stat(filepath.Join(out, DoneMarkerName))
	require.True(t, os.IsNotExist(err))
	entries, err := os.ReadDir(filepath.Join(out, CheckpointsDirName))
	require.NoError(t, err)
	for _, e := range entries {
		dir := filepath.Join(out, CheckpointsDirName, e.Name())
		if _, err := os.Stat(filepath.Join(dir, CompleteMarkerName)); err != nil {
			continue
		}
		st, err := LoadCheckpointState(dir)
		require.NoError(t, err, e.Name())
		trace := strings.Fields(string(readDirFiles(t, dir)[TraceFileName]))
		require.Equal(t, st.Root().Hex(), trace[len(trace)-1])
	}
}

// train.py with DEPIN_TORCH_PROCS=2 (gloo) writes Go's checkpoints, with
// more micro-batches than processes and with fewer.
func TestTorchTrainerDataParallelMatchesGoTrain(t *testing.T) {
	for _, cfg := range []Config{
		{Model: ModelConfig{Layers: 1, DModel: 16, Heads: 2, DFF: 32, Context: 8, Vocab: 256},
			Train: TrainConfig{Batch: 3, MicroBatch: 1, LR: 1e-2}},
		crossConfigs()["L1-D16-C8"], // one micro-batch: the second process adds zeros
	} {
		cfgJSON, err := json.Marshal(cfg)
		require.NoError(t, err)
		data, goOut, pyOut := t.TempDir(), t.TempDir(), t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, "corpus.txt"), testCorpus, 0o644))
		require.NoError(t, Train(context.Background(), TrainOptions{Config: cfg, Seed: testSeed, Stream: testCorpus, OutputDir: goOut,
			TotalSteps: 3, CheckpointInterval: 2}))
		runPy(t, nil, append(trainerEnv(cfgJSON, pyOut, data, "", 0, 3, 2), "DEPIN_TORCH_PROCS=2"), trainPy)
		g, p := readDirFiles(t, goOut), readDirFiles(t, pyOut)
		for _, rel := range []string{"checkpoints/step-2/state", "checkpoints/step-2/trace.txt", "checkpoints/step-3/state", "checkpoints/step-3/trace.txt", DoneMarkerName} {
			require.Contains(t, p, rel)
			require.Equal(t, g[rel], p[rel], rel)
		}
	}
}
