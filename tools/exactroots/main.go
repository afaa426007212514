// Command exactroots writes the Go reference roots that
// pkg/exact/torch/gpu_check.py compares the PyTorch path against (on a
// machine with an NVIDIA GPU and no Go toolchain):
//
//	go run ./tools/exactroots -out build/exact-roots.json [-steps 3] [-cases all|small] [-data FILE]
//	python3 pkg/exact/torch/gpu_check.py --expected build/exact-roots.json
//
// Each case holds a config, a seed, the training stream (base64, so the
// file is self-contained) and h_0..h_steps with each step's loss.
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
)

// Case is one configuration's expected trace.
type Case struct {
	Name      string       `json:"name"`
	Config    exact.Config `json:"config"`
	Seed      string       `json:"seed"`
	StreamB64 string       `json:"stream_b64"`
	Roots     []string     `json:"roots"`
	Losses    []int64      `json:"losses"`
	GoSeconds float64      `json:"go_seconds"`
}

// File is what exactroots writes.
type File struct {
	Generator string `json:"generator"`
	Cases     []Case `json:"cases"`
}

func cases(set string) []Case {
	small := []Case{
		{Name: "L1-D16-C8", Config: exact.Config{Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 1, DFF: 32, Context: 8, Vocab: 256},
			Train: exact.TrainConfig{Batch: 2, LR: 1e-2, WeightDecay: 0.1}}},
		{Name: "L2-D30-H3-mb3", Config: exact.Config{Model: exact.ModelConfig{Layers: 2, DModel: 30, Heads: 3, DFF: 48, Context: 12, Vocab: 256},
			Train: exact.TrainConfig{Batch: 6, MicroBatch: 2, LR: 5e-3, WarmupSteps: 2, DecaySteps: 5, MinLR: 1e-4, WeightDecay: 0.05, Beta2: 0.999}}},
	}
	if set == "small" {
		return small
	}
	return append(small,
		Case{Name: "L3-D96-H4-C48", Config: exact.Config{Model: exact.ModelConfig{Layers: 3, DModel: 96, Heads: 4, DFF: 384, Context: 48, Vocab: 256},
			Train: exact.TrainConfig{Batch: 8, MicroBatch: 4, LR: 3e-3, WarmupSteps: 2, WeightDecay: 0.1}}},
		Case{Name: "L2-D128-H4-C64", Config: exact.Config{Model: exact.ModelConfig{Layers: 2, DModel: 128, Heads: 4, DFF: 512, Context: 64, Vocab: 256},
			Train: exact.TrainConfig{Batch: 16, LR: 3e-3, WarmupSteps: 30, WeightDecay: 0.1}}},
	)
}

// defaultStream is deterministic English-like text, used when no -data
// file is given: sentences from a small vocabulary, chosen by SHA-256.
func defaultStream(n int) []byte {
	words := []string{"the", "model", "trains", "on", "every", "machine", "to", "same", "bits", "and", "a", "referee",
		"checks", "one", "step", "of", "it", "when", "two", "parties", "disagree", "about", "state", "hash", "data"}
	var out []byte
	for i := 0; len(out) < n; i++ {
		d := sha256.Sum256([]byte(fmt.Sprint(i)))
		for j := 0; j < 12; j++ {
			out = append(out, words[int(d[j])%len(words)]...)
			out = append(out, ' ')
		}
		out = append(out[:len(out)-1], ". "...)
	}
	return out[:n]
}

func main() {
	out := flag.String("out", "build/exact-roots.json", "output file")
	steps := flag.Int("steps", 3, "steps per case")
	set := flag.String("cases", "all", "all or small")
	data := flag.String("data", "", "training stream file (default: built-in text)")
	flag.Parse()
	stream := defaultStream(64 << 10)
	if *data != "" {
		b, err := os.ReadFile(*data)
		if err != nil {
			fail(err)
		}
		stream = b[:min(len(b), 256<<10)]
	}
	seed := []byte("depinchain gpu check")
	f := File{Generator: "go run ./tools/exactroots"}
	for _, c := range cases(*set) {
		s, err := exact.Init(c.Config, seed)
		if err != nil {
			fail(fmt.Errorf("%s: %w", c.Name, err))
		}
		c.Config = s.Config
		c.Seed = hex.EncodeToString(seed)
		c.StreamB64 = base64.StdEncoding.EncodeToString(stream)
		c.Roots = []string{s.Root().Hex()}
		start := time.Now()
		for range *steps {
			b, err := exact.StepBatch(s.Config, seed, s.Step, stream)
			if err != nil {
				fail(err)
			}
			var info exact.StepInfo
			if s, info, err = exact.Step(s, b); err != nil {
				fail(err)
			}
			c.Roots = append(c.Roots, info.Root.Hex())
			c.Losses = append(c.Losses, info.Loss)
		}
		c.GoSeconds = time.Since(start).Seconds()
		f.Cases = append(f.Cases, c)
		fmt.Fprintf(os.Stderr, "%s: %d steps in %.2fs, h_%d = %s\n", c.Name, *steps, c.GoSeconds, *steps, c.Roots[*steps])
	}
	j, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, j, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "exactroots:", err)
	os.Exit(1)
}
