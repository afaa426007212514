package diloco

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// python is Debian's interpreter, for which apt-get installs python3-torch
// (pkg/exact's PyTorch tests use the same one).
const python = "/usr/bin/python3"

const trainPy = "../exact/torch/train.py"

// runTorch runs train.py with args and returns its stdout (the printed
// root). Without python3 and torch the test is skipped, saying so.
func runTorch(t *testing.T, args ...string) string {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("PyTorch agreement not checked: %s cannot import torch and numpy (%v: %s); "+
			"apt-get install -y python3-torch python3-numpy", python, err, bytes.TrimSpace(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{trainPy}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("train.py %v: %v; stderr:\n%s", args, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTorchAggregationMatchesGo: random global states and pseudo-gradients
// (full s32 range, so saturation happens) for several worker counts and
// sync settings, dense and compressed; PyTorch's next global state must be
// Go's byte for byte.
func TestTorchAggregationMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	cfg := exact.Config{
		Model: exact.ModelConfig{Layers: 2, DModel: 40, Heads: 4, DFF: 72, Context: 24, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, LR: 0.003},
	}
	for i, c := range []struct {
		spec    SyncSpec
		workers []uint32
		r       int64
	}{
		{SyncSpec{Every: 100, OuterLR: 0.7, OuterMomentum: 0.9}, []uint32{0}, exact.Max32},
		{SyncSpec{Every: 100, OuterLR: 0.7, OuterMomentum: 0.9}, []uint32{0, 1, 2}, exact.Max32},
		{SyncSpec{Every: 10, OuterLR: 1, OuterMomentum: 0}, []uint32{1, 2, 5, 7}, 1 << 20},
		{SyncSpec{Every: 50, OuterLR: 0.3, OuterMomentum: 0.999}, []uint32{0, 3, 4, 8, 9, 10, 15}, 12345},
		{SyncSpec{Every: 100, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32}, []uint32{0, 2, 3}, 1 << 24},
		{SyncSpec{Every: 100, OuterLR: 0.5, OuterMomentum: 0.8, TopK: 1}, []uint32{4, 6}, exact.Max32},
	} {
		t.Run(fmt.Sprintf("%d-workers-%d-topk-%d", i, len(c.workers), c.spec.TopK), func(t *testing.T) {
			sync := testSync(t, c.spec)
			g, pgs := randRound(t, rng, cfg, sync, c.workers, c.r)
			dir := t.TempDir()
			args := []string{"diloco-aggregate", "--global", writeFile(t, dir, "global", g.Encode()), "--out", filepath.Join(dir, "next")}
			for j, p := range pgs {
				var file []byte
				if sync.TopK > 0 {
					cp, _, err := p.Compress(randSection(rng, NewLayout(cfg), c.r))
					if err != nil {
						t.Fatal(err)
					}
					pgs[j] = cp
					cf, err := cp.Compressed()
					if err != nil {
						t.Fatal(err)
					}
					file = cf.Encode()
				} else {
					file = p.EncodeDense()
				}
				args = append(args, writeFile(t, dir, fmt.Sprintf("pg%d", j), file))
			}
			want, err := Aggregate(g, pgs)
			if err != nil {
				t.Fatal(err)
			}
			root := runTorch(t, args...)
			got, _ := os.ReadFile(filepath.Join(dir, "next"))
			if !bytes.Equal(got, want.Encode()) || root != want.Root().Hex() {
				t.Fatalf("PyTorch's next global state differs from Go's (root %s vs %s)", root, want.Root().Hex())
			}
		})
	}
}

// TestTorchPseudoGradientMatchesGo: a worker trains a round with pkg/exact;
// PyTorch's pseudo-gradient of its end state (dense, and compressed with an
// error buffer) is Go's file, root and new error buffer.
func TestTorchPseudoGradientMatchesGo(t *testing.T) {
	cfg := tinyConfig()
	for _, topk := range []int{0, 8} {
		sync := testSync(t, SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topk})
		g, err := InitGlobal(cfg, sync, testSeed)
		if err != nil {
			t.Fatal(err)
		}
		local, err := exact.Run(g.WorkerStart(nil), traindata.BuiltinCorpus(), testSeed, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := NewPseudoGradient(g, 3, local)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		args := []string{"diloco-pg", "--global", writeFile(t, dir, "global", g.Encode()), "--local", writeFile(t, dir, "local", local.Encode()),
			"--worker", "3", "--out", filepath.Join(dir, "pg")}
		want := pg.EncodeDense()
		var wantErr []byte
		if topk > 0 {
			errBuf := randSection(rand.New(rand.NewPCG(1, 1)), NewLayout(cfg), 1<<16)
			cp, newErr, err := pg.Compress(errBuf)
			if err != nil {
				t.Fatal(err)
			}
			cf, _ := cp.Compressed()
			pg, want, wantErr = cp, cf.Encode(), encodeSection(nil, newErr)
			args = append(args, "--error", writeFile(t, dir, "err", encodeSection(nil, errBuf)), "--error-out", filepath.Join(dir, "err2"))
		}
		root := runTorch(t, args...)
		got, _ := os.ReadFile(filepath.Join(dir, "pg"))
		if !bytes.Equal(got, want) || root != mustRoot(t, pg).Hex() {
			t.Fatalf("top_k %d: PyTorch's pseudo-gradient differs from Go's (root %s vs %s)", topk, root, mustRoot(t, pg).Hex())
		}
		if topk > 0 {
			if gotErr, _ := os.ReadFile(filepath.Join(dir, "err2")); !bytes.Equal(gotErr, wantErr) {
				t.Fatal("PyTorch's error buffer differs from Go's")
			}
		}
	}
}
