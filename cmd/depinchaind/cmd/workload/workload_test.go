package workload

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// tinyModel is small enough that a step takes milliseconds.
const tinyModel = "{layers: 1, d_model: 16, heads: 2, d_ff: 32, context: 8, vocab: 256}"

// specYAML is a complete job spec whose workload section is given.
func specYAML(workload string) string {
	return `name: tiny-lm
gpu: {min_vram_gib: 1, per_worker: 1}
workload:
` + workload + `
total_steps: 6
checkpoint_every: 2
max_price_per_gpu_hour: 2000000udepin
max_duration: 1h
bidding_window_blocks: 12
`
}

func transformerSpec(model, train string) string {
	return specYAML("  kind: transformer\n  model: " + model + "\n  train: " + train)
}

var tinySpec = transformerSpec(tinyModel, "{batch: 2, optimizer: adamw, lr: 0.01, warmup_steps: 2, weight_decay: 0.1}")

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// execute runs `workload args...` and returns stdout, stderr and the error.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := NewCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return stdout.String(), stderr.String(), err
}

func mustExecute(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := execute(t, args...)
	require.NoError(t, err, "workload %v\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
	return out
}

// printed is what `workload run` printed: h_0, each step's loss and root,
// each checkpoint's state root.
type printed struct {
	h0          string
	losses      map[uint64]string
	roots       map[uint64]string
	checkpoints map[uint64]string
}

func parseRun(t *testing.T, out string) printed {
	t.Helper()
	p := printed{losses: map[uint64]string{}, roots: map[uint64]string{}, checkpoints: map[uint64]string{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && f[0] == "h_0":
			p.h0 = f[1]
		case len(f) == 6 && f[0] == "step" && f[2] == "loss" && f[4] == "root":
			n, err := strconv.ParseUint(f[1], 10, 64)
			require.NoError(t, err)
			p.losses[n], p.roots[n] = f[3], f[5]
		case len(f) == 5 && f[0] == "checkpoint" && f[2] == "state_root":
			n, err := strconv.ParseUint(strings.TrimPrefix(f[1], "step-"), 10, 64)
			require.NoError(t, err)
			p.checkpoints[n] = f[3]
		}
	}
	return p
}

func defaultSeed(t *testing.T) []byte {
	s, err := hex.DecodeString(DefaultSeedHex)
	require.NoError(t, err)
	return s
}

// exactSteps trains with pkg/exact directly: h_0..h_n and the losses.
func exactSteps(t *testing.T, s *exact.State, seed, stream []byte, n int) ([]merkle.Hash, []int64) {
	t.Helper()
	roots := []merkle.Hash{s.Root()}
	var losses []int64
	for range n {
		b, err := exact.StepBatch(s.Config, seed, s.Step, stream)
		require.NoError(t, err)
		var info exact.StepInfo
		s, info, err = exact.Step(s, b)
		require.NoError(t, err)
		roots, losses = append(roots, info.Root), append(losses, info.Loss)
	}
	return roots, losses
}

func tinyConfig() exact.Config {
	return exact.Config{Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 2, DFF: 32, Context: 8, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, Optimizer: "adamw", LR: 0.01, WarmupSteps: 2, WeightDecay: 0.1}}.WithDefaults()
}

// The roots and losses `workload run` prints, and the checkpoints it
// writes, are pkg/exact's on the built-in corpus with the default seed.
func TestWorkloadRunPrintsTheRootsExactComputes(t *testing.T) {
	dir := t.TempDir()
	spec := writeFile(t, dir, "job.yaml", tinySpec)
	out := filepath.Join(dir, "run")
	p := parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "5", "--out", out))

	s, err := exact.Init(tinyConfig(), defaultSeed(t))
	require.NoError(t, err)
	roots, losses := exactSteps(t, s, defaultSeed(t), traindata.BuiltinCorpus(), 5)
	require.Equal(t, roots[0].Hex(), p.h0)
	require.Len(t, p.roots, 5)
	for i := uint64(1); i <= 5; i++ {
		require.Equal(t, roots[i].Hex(), p.roots[i], "h_%d", i)
		require.Equal(t, fmt.Sprintf("%.6f", exact.LossNats(losses[i-1])), p.losses[i], "loss of step %d", i)
	}
	// checkpoint_every 2 from the spec: steps 2, 4 and the last, 5.
	require.Equal(t, map[uint64]string{2: roots[2].Hex(), 4: roots[4].Hex(), 5: roots[5].Hex()}, p.checkpoints)
	for _, n := range []uint64{2, 4, 5} {
		st, err := exact.LoadCheckpointState(exact.CheckpointDir(out, n))
		require.NoError(t, err)
		require.Equal(t, roots[n], st.Root())
		trace, err := os.ReadFile(filepath.Join(exact.CheckpointDir(out, n), exact.TraceFileName))
		require.NoError(t, err)
		lines := strings.Fields(string(trace))
		require.Equal(t, roots[n].Hex(), lines[len(lines)-1], "a trace ends with its checkpoint's state root")
	}
	require.FileExists(t, filepath.Join(out, exact.DoneMarkerName))
	corpus, err := os.ReadFile(filepath.Join(out, DataDirName, "corpus.txt"))
	require.NoError(t, err)
	require.Equal(t, traindata.BuiltinCorpus(), corpus, "the built-in corpus is left for the PyTorch trainer")
	var cfg exact.Config
	b, err := os.ReadFile(filepath.Join(out, ConfigFileName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.Equal(t, tinyConfig().Hyper(), cfg.Hyper(), "workload.json is the spec's config (as the chain stores it)")

	// --dataset-dir trains on that folder's files in name order.
	data := t.TempDir()
	text := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 20)
	writeFile(t, data, "b.txt", text[400:])
	writeFile(t, data, "a.txt", text[:400])
	p = parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "2", "--out", filepath.Join(dir, "ds"), "--dataset-dir", data, "--seed", "0102"))
	s, err = exact.Init(tinyConfig(), []byte{1, 2})
	require.NoError(t, err)
	roots, _ = exactSteps(t, s, []byte{1, 2}, []byte(text), 2)
	require.Equal(t, roots[0].Hex(), p.h0)
	require.Equal(t, map[uint64]string{1: roots[1].Hex(), 2: roots[2].Hex()}, p.roots)
}

func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
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

// A run continued into the same folder prints and writes the hashes of an
// uninterrupted run; the thread count changes nothing; a folder trained
// from other inputs is not continued.
func TestWorkloadRunResumesWithTheUninterruptedHashes(t *testing.T) {
	dir := t.TempDir()
	spec := writeFile(t, dir, "job.yaml", tinySpec)
	whole, parts := filepath.Join(dir, "whole"), filepath.Join(dir, "parts")
	w := parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "7", "--out", whole, "--workers", "1"))
	first := parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "3", "--out", parts, "--workers", "2"))
	second := parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "7", "--out", parts, "--workers", "2"))
	require.Equal(t, w.h0, first.h0)
	require.Equal(t, w.h0, second.h0)
	for i := uint64(1); i <= 7; i++ {
		got := first.roots[i]
		if i > 3 {
			got = second.roots[i]
		}
		require.Equal(t, w.roots[i], got, "h_%d", i)
	}
	require.Len(t, second.roots, 4, "the continuation trains steps 4..7 only")
	a, b := readTree(t, whole), readTree(t, parts)
	require.Equal(t, a["checkpoints/step-7/state"], b["checkpoints/step-7/state"])
	require.Equal(t, a[exact.MetricsFileName], b[exact.MetricsFileName], "one metrics line per step, none twice")
	require.Equal(t, w.roots[5], second.checkpoints[5])
	require.Equal(t, w.roots[7], second.checkpoints[7])

	// Same inputs, more steps than a completed run: refused with the reason.
	_, _, err := execute(t, "run", "--spec", spec, "--steps", "7", "--out", parts)
	require.ErrorContains(t, err, "already holds checkpoint step-7")
	_, _, err = execute(t, "run", "--spec", spec, "--steps", "9", "--out", parts, "--seed", "ff")
	require.ErrorContains(t, err, "seed 646570696e636861696e (now ff)")
	other := writeFile(t, dir, "other.yaml", transformerSpec(tinyModel, "{batch: 2, lr: 0.02}"))
	_, _, err = execute(t, "run", "--spec", other, "--steps", "9", "--out", parts)
	require.ErrorContains(t, err, "workload config")
}

// sample is exact.Generate; export is exact.Export; run --init-weights
// starts from the exported weights quantized back, and prints that h_0.
func TestWorkloadRunSampleExportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	spec := writeFile(t, dir, "job.yaml", tinySpec)
	out := filepath.Join(dir, "run")
	mustExecute(t, "run", "--spec", spec, "--steps", "6", "--out", out)
	ckpt := exact.CheckpointDir(out, 6)
	s, err := exact.LoadCheckpointState(ckpt)
	require.NoError(t, err)

	for _, tc := range []struct {
		temp string
		opts exact.GenerateOptions
	}{
		{"0.8", exact.GenerateOptions{Seed: defaultSeed(t), Temperature: 0.8}},
		{"0", exact.GenerateOptions{Seed: defaultSeed(t)}},
		{"2", exact.GenerateOptions{Seed: []byte{0xab}, Temperature: 2}},
	} {
		args := []string{"sample", "--state", filepath.Join(ckpt, exact.StateFileName), "--prompt", "The chain ", "--tokens", "30", "--temperature", tc.temp}
		if tc.opts.Seed[0] == 0xab {
			args = append(args, "--seed", "ab")
		}
		got := mustExecute(t, args...)
		want, err := exact.Generate(s, []byte("The chain "), 30, tc.opts)
		require.NoError(t, err)
		require.Equal(t, "The chain "+string(want)+"\n", got, "temperature %s", tc.temp)
	}
	// A checkpoint folder names its state too, and --spec checks it.
	require.Equal(t, mustExecute(t, "sample", "--state", filepath.Join(ckpt, exact.StateFileName), "--prompt", "ab", "--tokens", "5"),
		mustExecute(t, "sample", "--state", ckpt, "--prompt", "ab", "--tokens", "5", "--spec", spec))

	model := filepath.Join(dir, "model")
	printedExport := mustExecute(t, "export", "--state", ckpt, "--out", model)
	require.Contains(t, printedExport, s.Root().Hex())
	direct := t.TempDir()
	require.NoError(t, exact.Export(s, direct))
	for _, name := range []string{exact.SafetensorsFileName, exact.HFConfigFileName} {
		a, err := os.ReadFile(filepath.Join(model, name))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(direct, name))
		require.NoError(t, err)
		require.Equal(t, b, a, name)
	}
	var hf map[string]any
	b, err := os.ReadFile(filepath.Join(model, exact.HFConfigFileName))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &hf))
	require.EqualValues(t, 16, hf["n_embd"])
	require.Equal(t, s.Root().Hex(), hf["depinchain_root"])

	// Fine-tuning: the exported weights start a new run; h_0 is the
	// imported state's root, the first line of the first trace.
	weights := filepath.Join(model, exact.SafetensorsFileName)
	imported, err := exact.ImportSafetensors(tinyConfig(), weights)
	require.NoError(t, err)
	ft := filepath.Join(dir, "ft")
	p := parseRun(t, mustExecute(t, "run", "--spec", spec, "--steps", "2", "--out", ft, "--init-weights", weights))
	require.Equal(t, imported.Root().Hex(), p.h0)
	trace, err := os.ReadFile(filepath.Join(exact.CheckpointDir(ft, 2), exact.TraceFileName))
	require.NoError(t, err)
	require.Equal(t, p.h0, strings.Fields(string(trace))[0])
	roots, _ := exactSteps(t, imported, defaultSeed(t), traindata.BuiltinCorpus(), 2)
	require.Equal(t, map[uint64]string{1: roots[1].Hex(), 2: roots[2].Hex()}, p.roots)
	// The imported weights are the trained ones to within float32 rounding.
	for _, prm := range exact.Params(s.Config) {
		a, b := s.Tensor(prm.Name+".w").Data, imported.Tensor(prm.Name+".w").Data
		for i := range a {
			require.InDelta(t, a[i], b[i], 1+float64(max(a[i], -a[i]))/(1<<23), "%s[%d]", prm.Name, i)
		}
	}
	// Continuing the fine-tuning run needs the same weights.
	_, _, err = execute(t, "run", "--spec", spec, "--steps", "3", "--out", ft)
	require.ErrorContains(t, err, "initial state h_0")
}

// Bad input is refused with an error that names what is wrong.
func TestWorkloadErrorsNameWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	spec := writeFile(t, dir, "job.yaml", tinySpec)
	run := filepath.Join(dir, "run")
	mustExecute(t, "run", "--spec", spec, "--steps", "2", "--out", run)
	state := filepath.Join(exact.CheckpointDir(run, 2), exact.StateFileName)
	container := writeFile(t, dir, "container.yaml", specYAML("  kind: container\n  image: example/trainer:1\n  digest: sha256:"+strings.Repeat("ab", 32)))
	reference := writeFile(t, dir, "reference.yaml", specYAML("  kind: reference"))
	badModel := writeFile(t, dir, "bad.yaml", transformerSpec("{layers: 1, d_model: 30, heads: 4, d_ff: 32, context: 8, vocab: 256}", "{batch: 2, lr: 0.01}"))
	notState := writeFile(t, dir, "notstate", "hello")
	otherWeights := t.TempDir()
	s, err := exact.Init(exact.Config{Model: exact.ModelConfig{Layers: 1, DModel: 8, Heads: 1, DFF: 16, Context: 8, Vocab: 256},
		Train: exact.TrainConfig{Batch: 1, LR: 0.01}}, []byte{1})
	require.NoError(t, err)
	require.NoError(t, exact.Export(s, otherWeights))
	nonEmpty := t.TempDir()
	writeFile(t, nonEmpty, "keep.txt", "mine")
	emptyData := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no spec", []string{"run", "--out", filepath.Join(dir, "x")}, []string{"--spec is required"}},
		{"missing spec", []string{"run", "--spec", filepath.Join(dir, "nope.yaml"), "--out", filepath.Join(dir, "x")}, []string{"--spec", "nope.yaml: no such file"}},
		{"container spec", []string{"run", "--spec", container, "--out", filepath.Join(dir, "x")}, []string{"workload.kind is container", "only transformer and reference"}},
		{"invalid model", []string{"run", "--spec", badModel, "--out", filepath.Join(dir, "x")}, []string{"bad.yaml", "d_model", "divisible"}},
		{"no out", []string{"run", "--spec", spec}, []string{"--out is required"}},
		{"bad seed", []string{"run", "--spec", spec, "--out", filepath.Join(dir, "x"), "--seed", "xyz"}, []string{"--seed \"xyz\": must be hex"}},
		{"missing dataset", []string{"run", "--spec", spec, "--out", filepath.Join(dir, "x"), "--dataset-dir", filepath.Join(dir, "nodata")}, []string{"--dataset-dir", "nodata: no such file"}},
		{"empty dataset", []string{"run", "--spec", spec, "--out", filepath.Join(dir, "x"), "--dataset-dir", emptyData}, []string{"has 0 bytes", "model.context 8"}},
		{"missing weights", []string{"run", "--spec", spec, "--out", filepath.Join(dir, "x"), "--init-weights", filepath.Join(dir, "w.safetensors")}, []string{"--init-weights", "w.safetensors: no such file"}},
		{"weights of another model", []string{"run", "--spec", spec, "--out", filepath.Join(dir, "x"), "--init-weights", filepath.Join(otherWeights, exact.SafetensorsFileName)},
			[]string{"--init-weights", "d_model 16", "tok_emb has shape [256 8], want [256 16]"}},
		{"weights not safetensors", []string{"run", "--spec", spec, "--out", filepath.Join(dir, "x"), "--init-weights", notState}, []string{"--init-weights", "invalid safetensors"}},
		{"foreign out folder", []string{"run", "--spec", spec, "--out", nonEmpty}, []string{"not empty", "run.json"}},
		{"sample: no state", []string{"sample", "--prompt", "a"}, []string{"--state is required"}},
		{"sample: missing state", []string{"sample", "--state", filepath.Join(dir, "gone"), "--prompt", "a"}, []string{"--state", "gone: no such file"}},
		{"sample: not a state", []string{"sample", "--state", notState, "--prompt", "a"}, []string{"notstate: not a state of the exact workload"}},
		{"sample: state of another config", []string{"sample", "--state", state, "--prompt", "a", "--spec", reference},
			[]string{"is a state of another config than --spec", "d_model 16", "want {layers 1, d_model 32"}},
		{"sample: no prompt", []string{"sample", "--state", state}, []string{"--prompt is required"}},
		{"sample: bad temperature", []string{"sample", "--state", state, "--prompt", "a", "--temperature", "100"}, []string{"--temperature", "100"}},
		{"sample: bad tokens", []string{"sample", "--state", state, "--prompt", "a", "--tokens", "0"}, []string{"--tokens", "got 0"}},
		{"export: not a state", []string{"export", "--state", notState, "--out", filepath.Join(dir, "m")}, []string{"not a state of the exact workload"}},
		{"export: no out", []string{"export", "--state", state}, []string{"--out is required"}},
		{"export: state of another config", []string{"export", "--state", state, "--out", filepath.Join(dir, "m"), "--spec", reference}, []string{"another config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := execute(t, tc.args...)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	_, err = os.Stat(filepath.Join(dir, "x"))
	require.True(t, os.IsNotExist(err), "no refused run leaves a folder behind")
	// A reference spec runs exact.ReferenceConfig.
	p := parseRun(t, mustExecute(t, "run", "--spec", reference, "--steps", "1", "--out", filepath.Join(dir, "ref")))
	ref, err := exact.Init(exact.ReferenceConfig(), defaultSeed(t))
	require.NoError(t, err)
	require.Equal(t, ref.Root().Hex(), p.h0)
}
