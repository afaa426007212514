package exact

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
)

func TestTrainWritesContractCheckpointsAndResumesExactly(t *testing.T) {
	cfg := tinyConfig()
	full := t.TempDir()
	o := TrainOptions{Config: cfg, Seed: testSeed, Stream: testCorpus, OutputDir: full, TotalSteps: 7, CheckpointInterval: 3}
	var seen []uint64
	o.Progress = func(step uint64, _ int64, _ merkle.Hash) { seen = append(seen, step) }
	require.NoError(t, Train(context.Background(), o))
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, seen)
	f := readDirFiles(t, full)
	for _, step := range []string{"3", "6", "7"} {
		require.Contains(t, f, "checkpoints/step-"+step+"/COMPLETE")
	}
	require.Contains(t, f, DoneMarkerName)
	// Each trace starts with the previous checkpoint's end and ends with
	// the Merkle root of its own state.
	prevEnd := ""
	for _, step := range []string{"3", "6", "7"} {
		lines := strings.Fields(string(f["checkpoints/step-"+step+"/trace.txt"]))
		st, err := Decode(f["checkpoints/step-"+step+"/state"])
		require.NoError(t, err)
		require.Equal(t, st.Root().Hex(), lines[len(lines)-1])
		if prevEnd != "" {
			require.Equal(t, prevEnd, lines[0])
		}
		prevEnd = lines[len(lines)-1]
	}
	require.Len(t, strings.Fields(string(f["checkpoints/step-7/trace.txt"])), 2)
	// Resuming from either checkpoint reproduces the later files exactly.
	for _, from := range []uint64{3, 6} {
		out := t.TempDir()
		r := o
		r.Progress, r.OutputDir, r.ResumeFrom, r.StartStep = nil, out, CheckpointDir(full, from), from
		require.NoError(t, Train(context.Background(), r))
		g := readDirFiles(t, out)
		for rel, b := range g {
			if strings.HasPrefix(rel, "checkpoints/") {
				require.Equal(t, f[rel], b, rel)
			}
		}
	}
}

func TestTrainRefusesBadStartsAndStopsOnCancel(t *testing.T) {
	cfg := tinyConfig()
	base := TrainOptions{Config: cfg, Seed: testSeed, Stream: testCorpus, OutputDir: t.TempDir(), TotalSteps: 4, CheckpointInterval: 2}
	bad := base
	bad.StartStep = 2
	require.ErrorContains(t, Train(context.Background(), bad), "needs a checkpoint")
	bad = base
	bad.CheckpointInterval = 0
	require.Error(t, Train(context.Background(), bad))
	// A resume checkpoint at another step, or of another config, is refused.
	require.NoError(t, Train(context.Background(), base))
	bad = base
	bad.ResumeFrom, bad.StartStep = CheckpointDir(base.OutputDir, 2), 3
	require.ErrorContains(t, Train(context.Background(), bad), "at step 2")
	bad = base
	bad.Config.Train.LR = 0.5
	bad.ResumeFrom, bad.StartStep = CheckpointDir(base.OutputDir, 2), 2
	require.ErrorContains(t, Train(context.Background(), bad), "different config")
	// Cancelled before the first step: nothing is checkpointed.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := t.TempDir()
	c := base
	c.OutputDir = out
	require.ErrorIs(t, Train(ctx, c), context.Canceled)
	_, err := os.Stat(filepath.Join(out, DoneMarkerName))
	require.True(t, os.IsNotExist(err))
	_, err = os.Stat(CheckpointDir(out, 2))
	require.True(t, os.IsNotExist(err))
}

func TestGenerateIsDeterministic(t *testing.T) {
	cfg := tinyConfig()
	cfg.Train.LR = 1e-2
	s := trained(t, cfg, 40)
	a, err := Generate(s, []byte("The "), 20, GenerateOptions{Seed: []byte("x"), Temperature: 0.8})
	require.NoError(t, err)
	b, _ := Generate(s, []byte("The "), 20, GenerateOptions{Seed: []byte("x"), Temperature: 0.8, Workers: 1})
	c, _ := Generate(s, []byte("The "), 20, GenerateOptions{Seed: []byte("y"), Temperature: 0.8})
	require.Len(t, a, 20)
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
	// Greedy decoding takes the argmax of the exact logits.
	g, err := Generate(s, []byte("The quick"), 1, GenerateOptions{})
	require.NoError(t, err)
	w := append([]byte("The quick"[1:]), 0)
	logits, _, err := Forward(s, [][]byte{w[len(w)-cfg.Model.Context-1:]}, 0)
	require.NoError(t, err)
	last := logits.Row(cfg.Model.Context - 1)
	best := 0
	for j, v := range last {
		if v > last[best] {
			best = j
		}
	}
	require.Equal(t, byte(best), g[0])
	_, err = Generate(s, nil, 3, GenerateOptions{})
	require.ErrorIs(t, err, ErrInvalidData)
	_, err = Generate(s, []byte("a"), 3, GenerateOptions{Temperature: 100})
	require.ErrorContains(t, err, "temperature")
}

func TestMeanLossMatchesTrainingLoss(t *testing.T) {
	cfg := tinyConfig()
	cfg.Train.MicroBatch = cfg.Train.Batch
	s := trained(t, cfg, 3)
	b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
	require.NoError(t, err)
	l, err := MeanLoss(s, b, 0)
	require.NoError(t, err)
	_, info, err := Step(s, b)
	require.NoError(t, err)
	require.Equal(t, info.Loss, l, "the forward graph's loss is the training step's")
}

func TestSafetensorsExportImport(t *testing.T) {
	s := trained(t, tinyConfig(), 5)
	dir := t.TempDir()
	require.NoError(t, Export(s, dir))
	b, err := os.ReadFile(filepath.Join(dir, SafetensorsFileName))
	require.NoError(t, err)
	ws, meta, err := ReadSafetensors(b)
	require.NoError(t, err)
	require.Equal(t, s.Root().Hex(), meta["depinchain_root"])
	require.Len(t, ws, len(Params(s.Config)))
	imp, err := ImportSafetensors(s.Config, filepath.Join(dir, SafetensorsFileName))
	require.NoError(t, err)
	require.Equal(t, uint64(0), imp.Step)
	for _, p := range Params(s.Config) {
		orig, back := s.Tensor(p.Name+".w").Data, imp.Tensor(p.Name+".w").Data
		for i := range orig {
			// Exact unless the weight needs more than float32's 24 bits.
			f := float64(float32(math.Ldexp(float64(orig[i]), -FracW)))
			require.Equal(t, QuantizeWeight(f), back[i])
			require.InDelta(t, orig[i], back[i], math.Abs(float64(orig[i]))*1e-7+0.5)
		}
		for _, v := range imp.Tensor(p.Name + ".m").Data {
			require.Zero(t, v)
		}
	}
	// A job can start from imported weights and train on.
	out := t.TempDir()
	require.NoError(t, Train(context.Background(), TrainOptions{Config: s.Config, Seed: testSeed, Stream: testCorpus, OutputDir: out,
		Initial: imp, TotalSteps: 2, CheckpointInterval: 2}))
	st, err := LoadCheckpointState(CheckpointDir(out, 2))
	require.NoError(t, err)
	require.Equal(t, uint64(2), st.Step)
	cj, err := os.ReadFile(filepath.Join(dir, HFConfigFileName))
	require.NoError(t, err)
	require.Contains(t, string(cj), `"n_layer": 2`)
	require.Contains(t, string(cj), `"model_type": "depin_exact_gpt"`)
}

func TestImportRejectsBadWeights(t *testing.T) {
	cfg := tinyConfig()
	s := trained(t, cfg, 1)
	good := map[string]FloatTensor{}
	for _, p := range Params(s.Config) {
		good[p.Name] = s.Dequantize(p.Name)
	}
	clone := func() map[string]FloatTensor {
		m := map[string]FloatTensor{}
		for k, v := range good {
			m[k] = FloatTensor{Shape: v.Shape, Data: append([]float64(nil), v.Data...)}
		}
		return m
	}
	_, err := ImportWeights(cfg, good)
	require.NoError(t, err)
	m := clone()
	m["head"].Data[3] = math.NaN()
	_, err = ImportWeights(cfg, m)
	require.ErrorContains(t, err, "head element 3 is NaN")
	m = clone()
	m["head"] = FloatTensor{Shape: []int{3, 3}, Data: make([]float64, 9)}
	_, err = ImportWeights(cfg, m)
	require.ErrorContains(t, err, "head has shape [3 3]")
	m = clone()
	delete(m, "tok_emb")
	_, err = ImportWeights(cfg, m)
	require.ErrorIs(t, err, ErrSafetensors)
	m = clone()
	m["extra"] = good["head"]
	delete(m, "head")
	_, err = ImportWeights(cfg, m)
	require.ErrorContains(t, err, `no tensor "head"`)
	// Saturation: a huge float weight clamps instead of wrapping.
	require.Equal(t, int64(Max32), QuantizeWeight(1e30))
	require.Equal(t, int64(-Max32), QuantizeWeight(-9))
	require.Equal(t, int64(1), QuantizeWeight(math.Ldexp(1, -29)), "half a unit rounds up")
	// Malformed files.
	short := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`
	for _, b := range [][]byte{nil, {1, 0, 0, 0, 0, 0, 0, 0}, append([]byte{40, 0, 0, 0, 0, 0, 0, 0}, short...),
		append(append([]byte{byte(len(short)), 0, 0, 0, 0, 0, 0, 0}, short...), 0, 0, 0, 0, 0, 0, 0, 0)} {
		_, _, err := ReadSafetensors(b)
		require.ErrorIs(t, err, ErrSafetensors, "%q", b)
	}
}

func TestSafetensorsReadsOtherFloatTypes(t *testing.T) {
	// F16 1.0 = 0x3c00, -2.0 = 0xc000; BF16 0.5 = 0x3f00; F64 0.25.
	hdr := `{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]},"d":{"dtype":"F64","shape":[1],"data_offsets":[6,14]}}`
	b := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
	b = append(b, 0x00, 0x3c, 0x00, 0xc0, 0x00, 0x3f)
	b = append(b, 0, 0, 0, 0, 0, 0, 0xd0, 0x3f)
	ws, _, err := ReadSafetensors(b)
	require.NoError(t, err)
	require.Equal(t, []float64{1, -2}, ws["h"].Data)
	require.Equal(t, []float64{0.5}, ws["b"].Data)
	require.Equal(t, []float64{0.25}, ws["d"].Data)
}
