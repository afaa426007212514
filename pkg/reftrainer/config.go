package reftrainer

import (
	"errors"
	"fmt"
)

// Hard limits on Config. They keep every intermediate of the step inside the
// int64 ranges the arithmetic relies on and bound the memory a decoded state
// can claim; the chain is expected to cap work far lower through a
// MACs-per-step parameter (see WorstCaseConfig).
const (
	MaxVocab        = 256 // tokens are bytes, so more would be unused
	MaxEmbed        = 1024
	MaxContext      = 1024
	MaxHidden       = 4096
	MaxBatchSize    = 4096
	MaxLearningRate = 16 * One // Q16.16; keeps lr·gradient within int64
	MaxParams       = 1 << 24  // 64 MiB of int32 weights
)

// ErrInvalidConfig is wrapped by every Config validation error.
var ErrInvalidConfig = errors.New("reftrainer: invalid config")

// Config fixes the model shape, the optimiser and the weight initialisation.
// It is part of the encoded State, so a state hash commits to it.
type Config struct {
	// Vocab is the number of distinct tokens; data byte b is token b % Vocab.
	Vocab uint32
	// Embed is the embedding width D.
	Embed uint32
	// Context is the number of preceding tokens C the model sees.
	Context uint32
	// Hidden is the width H of the ReLU hidden layer.
	Hidden uint32
	// BatchSize is the number of windows per step.
	BatchSize uint32
	// LearningRate is the SGD step size in Q16.16 (One = 1.0), applied to
	// the batch-mean gradient.
	LearningRate int32
	// Seed determines the initial weights (see Init).
	Seed [32]byte
}

// DefaultConfig returns a configuration sized so that a step costs about a
// hundred thousand MACs (see MACsPerStep): printable-ASCII vocabulary, 8-wide
// embeddings, 4 tokens of context, 32 hidden units, 8 windows per step. Its
// Seed is zero; a job normally sets its own.
func DefaultConfig() Config {
	return Config{
		Vocab:        96,
		Embed:        8,
		Context:      4,
		Hidden:       32,
		BatchSize:    8,
		LearningRate: One / 2,
	}
}

// WorstCaseConfig returns the largest configuration this package's tests and
// benchmarks exercise, as a documented upper bound for chain parameters: full
// byte vocabulary, 64-wide embeddings, 16 tokens of context, 512 hidden units
// and 32 windows per step. That is 672,512 parameters (about 2.7 MB encoded)
// and 63,661,088 MACs per step; a chain whose max-MACs-per-step parameter is
// at most this value re-executes a disputed step in well under a second.
func WorstCaseConfig() Config {
	return Config{
		Vocab:        256,
		Embed:        64,
		Context:      16,
		Hidden:       512,
		BatchSize:    32,
		LearningRate: One / 4,
	}
}

// Validate reports the first field outside its allowed range, by name.
func (c Config) Validate() error {
	dims := []struct {
		name  string
		value uint32
		lo    uint32
		hi    uint32
	}{
		{"Vocab", c.Vocab, 2, MaxVocab},
		{"Embed", c.Embed, 1, MaxEmbed},
		{"Context", c.Context, 1, MaxContext},
		{"Hidden", c.Hidden, 1, MaxHidden},
		{"BatchSize", c.BatchSize, 1, MaxBatchSize},
	}
	for _, d := range dims {
		if d.value < d.lo || d.value > d.hi {
			return fmt.Errorf("%w: %s is %d, want %d..%d", ErrInvalidConfig, d.name, d.value, d.lo, d.hi)
		}
	}
	if c.LearningRate < 1 || c.LearningRate > MaxLearningRate {
		return fmt.Errorf("%w: LearningRate is %d (Q16.16), want 1..%d", ErrInvalidConfig, c.LearningRate, MaxLearningRate)
	}
	if n := c.NumParams(); n > MaxParams {
		return fmt.Errorf("%w: Vocab, Embed, Context and Hidden give %d parameters, want at most %d", ErrInvalidConfig, n, MaxParams)
	}
	return nil
}

// NumParams returns the number of int32 weights in a State with this config:
// embedding V·D, hidden weights H·C·D and bias H, output weights V·H and
// bias V. Within the dimension limits it cannot overflow.
func (c Config) NumParams() uint64 {
	v, d, ctx, h := uint64(c.Vocab), uint64(c.Embed), uint64(c.Context), uint64(c.Hidden)
	return v*d + h*ctx*d + h + v*h + v
}

// MACsPerStep returns the exact number of multiply-accumulates one Step
// performs with this config; Step reports precisely this many to its Meter,
// whatever the data. Per window:
//
//   - forward:  H·C·D (hidden layer) + V·H (output layer)
//   - softmax:  V·expMACs (exp), 1 (reciprocal of the sum), V (normalise)
//   - loss:     lnMACs (ln of the softmax sum)
//   - backward: 2·V·H (output weight gradient and hidden delta) +
//     2·H·C·D (hidden weight gradient and input delta)
//
// plus one per parameter for the SGD update. Divisions, exp and ln are
// counted by the multiplies and divides they are built from, each as one MAC.
// The count is only meaningful for a valid config.
func (c Config) MACsPerStep() uint64 {
	v, d, ctx, h := uint64(c.Vocab), uint64(c.Embed), uint64(c.Context), uint64(c.Hidden)
	hiddenLayer := h * ctx * d
	outputLayer := v * h
	perWindow := 3*hiddenLayer + 3*outputLayer + v*expMACs + 1 + v + lnMACs
	return uint64(c.BatchSize)*perWindow + c.NumParams()
}
