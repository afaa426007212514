// Command exactbench measures the exact transformer workload against plain
// float32 PyTorch of the same architecture, all in one run on this machine
// with the same thread count, and prints the ratios with the BLAS named:
//
//   - speed: a training step of the Go path and of the exact PyTorch path,
//     each ÷ the float32 PyTorch step, and tokens per second of each, at
//     three model sizes;
//   - quality: held-out bits per byte on the fortunes corpus after the same
//     number of steps, exact ÷ float32 (same initial weights, data and
//     hyperparameters).
//
// Usage:
//
//	go run ./tools/exactbench [-threads 2] [-quality-steps 400] [-skip-quality]
//
// It needs /usr/bin/python3 with torch (Debian's python3-torch) and the
// fortunes package.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
)

type size struct {
	name   string
	cfg    exact.Config
	steps  int // timed steps (after one warm-up)
	goStep int // timed Go steps
}

func sizes() []size {
	c := func(l, d, h, f, ctx, b int) exact.Config {
		return exact.Config{Model: exact.ModelConfig{Layers: l, DModel: d, Heads: h, DFF: f, Context: ctx, Vocab: 256},
			Train: exact.TrainConfig{Batch: b, LR: 1e-3, WarmupSteps: 10, WeightDecay: 0.1}}
	}
	return []size{
		{"S (L2 D64 C64 B8)", c(2, 64, 2, 256, 64, 8), 8, 4},
		{"M (L2 D128 C64 B16)", c(2, 128, 4, 512, 64, 16), 6, 2},
		{"L (L4 D256 C128 B16, issue 12's example)", c(4, 256, 4, 1024, 128, 16), 3, 1},
	}
}

func main() {
	threads := flag.Int("threads", 2, "threads for every implementation (GOMAXPROCS and torch)")
	qsteps := flag.Int("quality-steps", 400, "training steps of the quality benchmark")
	skipQuality := flag.Bool("skip-quality", false, "only the speed benchmarks")
	py := flag.String("python", "/usr/bin/python3", "Python with torch")
	flag.Parse()
	runtime.GOMAXPROCS(*threads)
	threadsEnv = fmt.Sprint(*threads)
	root, err := repoRoot()
	if err != nil {
		fail(err)
	}
	bench := filepath.Join(root, "pkg/exact/torch/bench.py")
	stream, err := fortunes()
	if err != nil {
		fail(err)
	}
	fmt.Printf("exact workload benchmarks, %d threads (GOMAXPROCS=%d, torch.set_num_threads(%d)), %s\n\n", *threads, *threads, *threads, time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("%-42s %10s %10s %10s %9s %9s %12s %12s %12s\n", "model", "Go s/step", "exact-pt", "float32", "Go÷f32", "ex-pt÷f32", "Go tok/s", "ex-pt tok/s", "f32 tok/s")
	var blas string
	for _, sz := range sizes() {
		goSec := goStep(sz, stream)
		cj, _ := json.Marshal(sz.cfg)
		out, err := runPy(*py, bench, "speed", "--config", string(cj), "--steps", fmt.Sprint(sz.steps), "--threads", fmt.Sprint(*threads))
		if err != nil {
			fail(err)
		}
		var r struct {
			Exact, Float float64
			Blas         string
		}
		var raw map[string]any
		if err := json.Unmarshal(out, &raw); err != nil {
			fail(fmt.Errorf("bench.py speed: %w: %s", err, out))
		}
		r.Exact, r.Float, r.Blas = raw["exact_step_s"].(float64), raw["float32_step_s"].(float64), raw["blas"].(string)
		blas = r.Blas
		tok := float64(sz.cfg.TokensPerStep())
		fmt.Printf("%-42s %10.3f %10.3f %10.4f %9.1f %9.2f %12.0f %12.0f %12.0f\n", sz.name, goSec, r.Exact, r.Float,
			goSec/r.Float, r.Exact/r.Float, tok/goSec, tok/r.Exact, tok/r.Float)
	}
	fmt.Printf("\nBLAS (torch, float32 and the exact path's float64 GEMMs): %s\n", blas)
	if *skipQuality {
		return
	}
	fmt.Printf("\nquality: %d steps on fortunes (90%% train / 10%% held out), model M, same init, data and hyperparameters\n", *qsteps)
	out, err := runPy(*py, bench, "quality", "--steps", fmt.Sprint(*qsteps), "--threads", fmt.Sprint(*threads))
	if err != nil {
		fail(err)
	}
	var q map[string]any
	if err := json.Unmarshal(out, &q); err != nil {
		fail(fmt.Errorf("bench.py quality: %w: %s", err, out))
	}
	fmt.Printf("held-out bits per byte: exact %.4f, float32 %.4f, ratio exact÷float32 = %.4f (goal ≤ 1.05)\n",
		q["exact_bpb"], q["float32_bpb"], q["ratio"])
	fmt.Printf("training time of those steps: exact PyTorch %.1fs, float32 %.1fs (%s)\n", q["exact_seconds"], q["float32_seconds"], q["blas"])
}

// goStep returns the median seconds of a Go training step (after a
// warm-up step).
func goStep(sz size, stream []byte) float64 {
	seed := []byte("depinchain exact speed benchmark")
	s, err := exact.Init(sz.cfg, seed)
	if err != nil {
		fail(err)
	}
	var ts []float64
	for i := range sz.goStep + 1 {
		b, err := exact.StepBatch(s.Config, seed, s.Step, stream)
		if err != nil {
			fail(err)
		}
		t0 := time.Now()
		if s, _, err = exact.Step(s, b); err != nil {
			fail(err)
		}
		if i > 0 {
			ts = append(ts, time.Since(t0).Seconds())
		}
	}
	sort.Float64s(ts)
	return ts[len(ts)/2]
}

func fortunes() ([]byte, error) {
	const dir = "/usr/share/games/fortunes"
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (apt-get install fortunes)", err)
	}
	var out []byte
	for _, e := range es {
		if n := e.Name(); e.Type().IsRegular() && !strings.HasSuffix(n, ".dat") && !strings.HasSuffix(n, ".u8") {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
	}
	return out, nil
}

// threadsEnv is the thread count for the Python processes' BLAS and OpenMP.
var threadsEnv = "2"

func runPy(py string, args ...string) ([]byte, error) {
	cmd := exec.Command(py, args...)
	// Debian's torch does not know its libblas is OpenBLAS, so
	// torch.set_num_threads does not reach it: pin its pool (and OpenMP's)
	// to the same thread count explicitly.
	cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS="+threadsEnv, "OMP_NUM_THREADS="+threadsEnv)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", py, strings.Join(args[:2], " "), err)
	}
	return bytes.TrimSpace(stdout.Bytes()), nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the repository (no go.mod above %s)", dir)
		}
		dir = parent
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "exactbench:", err)
	os.Exit(1)
}
