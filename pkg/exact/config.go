package exact

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("exact: invalid config")

// ErrLimits is wrapped by every Config.CheckLimits error.
var ErrLimits = errors.New("exact: config exceeds limits")

// ModelConfig is the shape of the decoder. YAML/JSON keys are the job
// spec's (workload.model).
type ModelConfig struct {
	Layers  int `json:"layers" yaml:"layers"`
	DModel  int `json:"d_model" yaml:"d_model"`
	Heads   int `json:"heads" yaml:"heads"`
	DFF     int `json:"d_ff" yaml:"d_ff"`
	Context int `json:"context" yaml:"context"`
	Vocab   int `json:"vocab" yaml:"vocab"`
}

// TrainConfig holds the training hyperparameters (workload.train). Real
// numbers are turned into fixed point by Config.Hyper; the integer form is
// what the state commits to. Zero values of Beta1, Beta2, Eps, InitStd and
// NormEps mean "the default" (see WithDefaults); zero MicroBatch means
// Batch.
type TrainConfig struct {
	// Batch is the number of windows (examples) per step.
	Batch int `json:"batch" yaml:"batch"`
	// MicroBatch is the number of windows per micro-batch: a step runs
	// Batch/MicroBatch forward/backward passes and sums their gradients.
	// It is part of the arithmetic (it bounds the contraction length of
	// weight gradients), not only a memory knob.
	MicroBatch  int     `json:"micro_batch,omitempty" yaml:"micro_batch,omitempty"`
	Optimizer   string  `json:"optimizer" yaml:"optimizer"`
	LR          float64 `json:"lr" yaml:"lr"`
	WarmupSteps int     `json:"warmup_steps" yaml:"warmup_steps"`
	// DecaySteps > 0 decays the learning rate linearly from LR (after
	// warm-up) to MinLR at update DecaySteps, and holds MinLR after it.
	// 0 keeps LR constant after warm-up.
	DecaySteps  int     `json:"decay_steps,omitempty" yaml:"decay_steps,omitempty"`
	MinLR       float64 `json:"min_lr,omitempty" yaml:"min_lr,omitempty"`
	WeightDecay float64 `json:"weight_decay" yaml:"weight_decay"`
	Beta1       float64 `json:"beta1,omitempty" yaml:"beta1,omitempty"`
	Beta2       float64 `json:"beta2,omitempty" yaml:"beta2,omitempty"`
	Eps         float64 `json:"eps,omitempty" yaml:"eps,omitempty"`
	// InitStd is the standard deviation of the initial weights (uniform
	// distribution of that standard deviation; residual projections are
	// scaled by 1/√(2·layers)).
	InitStd float64 `json:"init_std,omitempty" yaml:"init_std,omitempty"`
	// NormEps is the ε of RMSNorm.
	NormEps float64 `json:"norm_eps,omitempty" yaml:"norm_eps,omitempty"`
}

// Config is a transformer workload: model shape and training.
type Config struct {
	Model ModelConfig `json:"model" yaml:"model"`
	Train TrainConfig `json:"train" yaml:"train"`
}

// Defaults of the optional hyperparameters.
const (
	DefaultBeta1   = 0.9
	DefaultBeta2   = 0.95
	DefaultEps     = 1e-8
	DefaultInitStd = 0.02
	DefaultNormEps = 1e-5
	OptimizerAdamW = "adamw"
)

// WithDefaults returns c with unset optional fields filled in.
func (c Config) WithDefaults() Config {
	t := &c.Train
	if t.MicroBatch == 0 {
		t.MicroBatch = t.Batch
	}
	if t.Optimizer == "" {
		t.Optimizer = OptimizerAdamW
	}
	if t.Beta1 == 0 {
		t.Beta1 = DefaultBeta1
	}
	if t.Beta2 == 0 {
		t.Beta2 = DefaultBeta2
	}
	if t.Eps == 0 {
		t.Eps = DefaultEps
	}
	if t.InitStd == 0 {
		t.InitStd = DefaultInitStd
	}
	if t.NormEps == 0 {
		t.NormEps = DefaultNormEps
	}
	return c
}

// Hard limits: beyond them the spec's range analysis (every intermediate
// fits int64, float64 GEMMs stay exact) no longer holds, so Validate
// refuses them whatever a chain's Limits say.
const (
	HardMaxLayers        = 256
	HardMaxDModel        = 4096    // RMSNorm's Σx² and Cauchy–Schwarz bounds
	HardMaxDFF           = 1 << 16 // 65536
	HardMaxContext       = 4096
	HardMaxHeadDim       = 1024
	HardMaxMicroTokens   = 1 << 20 // contraction length of weight gradients (< 2^23)
	HardMaxTokensPerStep = 1 << 22 // loss sum: 2^22 · 2^40 < 2^63
	HardMaxMicroBatches  = 1 << 15 // 2^15 gradient parts of ≤ 2^47 each
	HardMaxSteps         = 1 << 40
	Vocab                = 256 // byte-level tokens
)

type fieldErrs []string

func (f *fieldErrs) addf(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

func (f fieldErrs) err(base error) error {
	if len(f) == 0 {
		return nil
	}
	return &ConfigError{base: base, Problems: f}
}

// ConfigError is what Validate and CheckLimits return: every problem found,
// each prefixed by its field path ("model.d_model: ..."). It wraps
// ErrInvalidConfig or ErrLimits.
type ConfigError struct {
	base     error
	Problems []string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: %s", e.base, strings.Join(e.Problems, "; "))
}

func (e *ConfigError) Unwrap() error { return e.base }

// Under lists the problems with every field path under prefix (a job spec
// writes the model as workload.model, so Under("workload.") names the
// fields as the owner spelled them).
func (e *ConfigError) Under(prefix string) string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = prefix + p
	}
	return strings.Join(out, "; ")
}

// Validate checks every field (after WithDefaults, which it applies itself)
// and reports all violations, each prefixed by its field path, e.g.
// "model.d_model: must be divisible by model.heads (256 vs 3)".
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs fieldErrs
	m, t := c.Model, c.Train
	intRange := func(name string, v, lo, hi int) bool {
		if v < lo || v > hi {
			errs.addf("%s: must be in [%d, %d], got %d", name, lo, hi, v)
			return false
		}
		return true
	}
	intRange("model.layers", m.Layers, 1, HardMaxLayers)
	okD := intRange("model.d_model", m.DModel, 1, HardMaxDModel)
	okH := intRange("model.heads", m.Heads, 1, HardMaxDModel)
	intRange("model.d_ff", m.DFF, 1, HardMaxDFF)
	okC := intRange("model.context", m.Context, 1, HardMaxContext)
	if m.Vocab != Vocab {
		errs.addf("model.vocab: must be %d (byte-level tokens), got %d", Vocab, m.Vocab)
	}
	if okD && okH {
		if m.DModel%m.Heads != 0 {
			errs.addf("model.d_model: must be divisible by model.heads (%d vs %d)", m.DModel, m.Heads)
		} else if m.DModel/m.Heads > HardMaxHeadDim {
			errs.addf("model.heads: head dimension d_model/heads must be at most %d, got %d", HardMaxHeadDim, m.DModel/m.Heads)
		}
	}
	okB := intRange("train.batch", t.Batch, 1, HardMaxTokensPerStep)
	okMB := intRange("train.micro_batch", t.MicroBatch, 1, HardMaxTokensPerStep)
	if okB && okMB && okC {
		if t.Batch%t.MicroBatch != 0 {
			errs.addf("train.batch: must be divisible by train.micro_batch (%d vs %d)", t.Batch, t.MicroBatch)
		} else if n := t.Batch / t.MicroBatch; n > HardMaxMicroBatches {
			errs.addf("train.micro_batch: batch/micro_batch must be at most %d, got %d", HardMaxMicroBatches, n)
		}
		if tok := int64(t.MicroBatch) * int64(m.Context); tok > HardMaxMicroTokens {
			errs.addf("train.micro_batch: micro_batch·context must be at most %d tokens, got %d", HardMaxMicroTokens, tok)
		}
		if tok := int64(t.Batch) * int64(m.Context); tok > HardMaxTokensPerStep {
			errs.addf("train.batch: batch·context must be at most %d tokens, got %d", HardMaxTokensPerStep, tok)
		}
	}
	if t.Optimizer != OptimizerAdamW {
		errs.addf("train.optimizer: must be %q, got %q", OptimizerAdamW, t.Optimizer)
	}
	realRange := func(name string, v, lo, hi float64, loOpen bool) bool {
		bad := math.IsNaN(v) || v > hi || v < lo || (loOpen && v == lo)
		if bad {
			open := "["
			if loOpen {
				open = "("
			}
			errs.addf("%s: must be in %s%g, %g], got %g", name, open, lo, hi, v)
		}
		return !bad
	}
	if realRange("train.lr", t.LR, 0, 1, true) && fixed(t.LR, qLR) == 0 {
		errs.addf("train.lr: %g is below the resolution 2^-%d", t.LR, qLR)
	}
	realRange("train.min_lr", t.MinLR, 0, 1, false)
	if t.MinLR > t.LR {
		errs.addf("train.min_lr: must not exceed train.lr (%g vs %g)", t.MinLR, t.LR)
	}
	intRange("train.warmup_steps", t.WarmupSteps, 0, HardMaxSteps)
	intRange("train.decay_steps", t.DecaySteps, 0, HardMaxSteps)
	if t.DecaySteps > 0 && t.DecaySteps <= t.WarmupSteps {
		errs.addf("train.decay_steps: must exceed train.warmup_steps (%d vs %d) or be 0", t.DecaySteps, t.WarmupSteps)
	}
	realRange("train.weight_decay", t.WeightDecay, 0, 1, false)
	realRange("train.beta1", t.Beta1, 0, 0.999, false)
	realRange("train.beta2", t.Beta2, 0.5, 0.9999, false)
	if realRange("train.eps", t.Eps, 0, 1, true) && fixed(t.Eps, FracW) == 0 {
		errs.addf("train.eps: must be at least 2^-29 (half the resolution of the update's denominator), got %g", t.Eps)
	}
	if realRange("train.init_std", t.InitStd, 0, 1, true) && fixed(t.InitStd, FracW) == 0 {
		errs.addf("train.init_std: %g is below the resolution 2^-%d", t.InitStd, FracW)
	}
	if realRange("train.norm_eps", t.NormEps, 0, 1, true) && fixed(t.NormEps, qNormEps) == 0 {
		errs.addf("train.norm_eps: %g is below the resolution 2^-%d", t.NormEps, qNormEps)
	}
	return errs.err(ErrInvalidConfig)
}

// Fixed-point formats of the hyperparameters.
const (
	qLR      = 40 // lr, min_lr
	qCoef    = 30 // weight_decay, beta1, beta2
	qNormEps = 32
)

// fixed returns floor(x·2^f + 1/2) for 0 ≤ x ≤ 1 and f ≤ 40: x·2^f is
// exact in float64 and adding 1/2 to a number below 2^52 is exact too, so
// every IEEE-754 implementation (Go, Python) gets the same integer.
func fixed(x float64, f int) int64 {
	return int64(math.Floor(math.Ldexp(x, f) + 0.5))
}

// Hyper is the integer form of a Config: what the arithmetic uses and what
// a state's config digest commits to.
type Hyper struct {
	Layers, DModel, Heads, DFF, Context, Vocab int64
	Batch, MicroBatch                          int64
	LR, MinLR                                  int64 // Q40
	WarmupSteps, DecaySteps                    int64
	WeightDecay, Beta1, Beta2                  int64 // Q30
	Eps                                        int64 // Q28 (units of the update denominator)
	InitStd                                    int64 // Q28
	NormEps                                    int64 // Q32
}

// hyperFields is the number of int64 fields of Hyper, in declaration order;
// their little-endian concatenation is the canonical config encoding.
const hyperFields = 20

// ConfigEncodedSize is the length of Hyper.Encode.
const ConfigEncodedSize = 8 * hyperFields

// Hyper returns the integer form of c (after WithDefaults). c must be valid.
func (c Config) Hyper() Hyper {
	c = c.WithDefaults()
	m, t := c.Model, c.Train
	return Hyper{
		Layers: int64(m.Layers), DModel: int64(m.DModel), Heads: int64(m.Heads), DFF: int64(m.DFF),
		Context: int64(m.Context), Vocab: int64(m.Vocab),
		Batch: int64(t.Batch), MicroBatch: int64(t.MicroBatch),
		LR: fixed(t.LR, qLR), MinLR: fixed(t.MinLR, qLR),
		WarmupSteps: int64(t.WarmupSteps), DecaySteps: int64(t.DecaySteps),
		WeightDecay: fixed(t.WeightDecay, qCoef), Beta1: fixed(t.Beta1, qCoef), Beta2: fixed(t.Beta2, qCoef),
		Eps: fixed(t.Eps, FracW), InitStd: fixed(t.InitStd, FracW), NormEps: fixed(t.NormEps, qNormEps),
	}
}

func (h Hyper) fields() [hyperFields]int64 {
	return [hyperFields]int64{h.Layers, h.DModel, h.Heads, h.DFF, h.Context, h.Vocab, h.Batch, h.MicroBatch,
		h.LR, h.MinLR, h.WarmupSteps, h.DecaySteps, h.WeightDecay, h.Beta1, h.Beta2, h.Eps, h.InitStd, h.NormEps, 0, 0}
}

// Encode returns the canonical encoding: the fields as little-endian int64
// in declaration order, then two zero words reserved for later versions.
func (h Hyper) Encode() []byte {
	out := make([]byte, 0, ConfigEncodedSize)
	for _, v := range h.fields() {
		out = binary.LittleEndian.AppendUint64(out, uint64(v))
	}
	return out
}

// configDomain separates config digests from other SHA-256 uses.
const configDomain = "depinchain/exact/config/v1"

// Digest is SHA-256(configDomain || Encode()).
func (h Hyper) Digest() [32]byte {
	return sha256.Sum256(append([]byte(configDomain), h.Encode()...))
}

// DecodeHyper parses Hyper.Encode's output.
func DecodeHyper(b []byte) (Hyper, error) {
	if len(b) != ConfigEncodedSize {
		return Hyper{}, fmt.Errorf("%w: config encoding is %d bytes, want %d", ErrInvalidConfig, len(b), ConfigEncodedSize)
	}
	var f [hyperFields]int64
	for i := range f {
		f[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	if f[18] != 0 || f[19] != 0 {
		return Hyper{}, fmt.Errorf("%w: reserved config words are not zero", ErrInvalidConfig)
	}
	return Hyper{Layers: f[0], DModel: f[1], Heads: f[2], DFF: f[3], Context: f[4], Vocab: f[5], Batch: f[6], MicroBatch: f[7],
		LR: f[8], MinLR: f[9], WarmupSteps: f[10], DecaySteps: f[11], WeightDecay: f[12], Beta1: f[13], Beta2: f[14],
		Eps: f[15], InitStd: f[16], NormEps: f[17]}, nil
}

// Config returns the Config whose Hyper is h (reals as the exact values of
// the fixed-point numbers), or an error if it is not valid or does not
// round-trip.
func (h Hyper) Config() (Config, error) {
	real := func(v int64, f int) float64 { return math.Ldexp(float64(v), -f) }
	c := Config{
		Model: ModelConfig{Layers: int(h.Layers), DModel: int(h.DModel), Heads: int(h.Heads), DFF: int(h.DFF), Context: int(h.Context), Vocab: int(h.Vocab)},
		Train: TrainConfig{Batch: int(h.Batch), MicroBatch: int(h.MicroBatch), Optimizer: OptimizerAdamW,
			LR: real(h.LR, qLR), MinLR: real(h.MinLR, qLR), WarmupSteps: int(h.WarmupSteps), DecaySteps: int(h.DecaySteps),
			WeightDecay: real(h.WeightDecay, qCoef), Beta1: real(h.Beta1, qCoef), Beta2: real(h.Beta2, qCoef),
			Eps: real(h.Eps, FracW), InitStd: real(h.InitStd, FracW), NormEps: real(h.NormEps, qNormEps)},
	}
	for _, v := range h.fields() {
		if v < 0 || v > 1<<42 {
			return Config{}, fmt.Errorf("%w: config field out of range: %d", ErrInvalidConfig, v)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	if c.Hyper() != h {
		return Config{}, fmt.Errorf("%w: config encoding is not canonical", ErrInvalidConfig)
	}
	return c, nil
}

// HeadDim is d_model / heads.
func (c Config) HeadDim() int { return c.Model.DModel / c.Model.Heads }

// MicroBatches is batch / micro_batch.
func (c Config) MicroBatches() int {
	c = c.WithDefaults()
	return c.Train.Batch / c.Train.MicroBatch
}

// TokensPerStep is batch·context: the number of predicted tokens a step
// trains on.
func (c Config) TokensPerStep() int64 { return int64(c.Train.Batch) * int64(c.Model.Context) }

// ParamCount is the number of trainable weights.
func (c Config) ParamCount() int64 {
	var n int64
	for _, p := range Params(c) {
		n += int64(p.Rows) * int64(p.Cols)
	}
	return n
}

// MACsPerStep is the exact number of multiply-accumulates of the step's
// contractions (the sum of G·M·N·K over its matmul operators).
func (c Config) MACsPerStep() int64 { return graphCost(c).macs }

// ElementsPerStep is the number of output elements of the step's other
// operators (elementwise and row-wise work), the second gas term.
func (c Config) ElementsPerStep() int64 { return graphCost(c).elements }

// StateBytes is the size of the encoded state.
func (c Config) StateBytes() int64 { return int64(newStateLayout(c).size) }

// Limits are a chain's bounds on the models it will adjudicate. A zero
// field means "no bound".
type Limits struct {
	MaxParams        int64 `json:"max_params"`
	MaxTokensPerStep int64 `json:"max_tokens_per_step"`
	// MaxRowLength bounds every row a row-wise operator or a contraction
	// reads (d_model, 3·d_model, d_ff, vocab, context, micro_batch·context).
	MaxRowLength   int64 `json:"max_row_length"`
	MaxMACsPerStep int64 `json:"max_macs_per_step"`
	MaxStateBytes  int64 `json:"max_state_bytes"`
	MaxLayers      int64 `json:"max_layers"`
}

// MaxRowLength is the longest row an operator of the step reads.
func (c Config) MaxRowLength() int64 {
	c = c.WithDefaults()
	m := c.Model
	return max(int64(3*m.DModel), int64(m.DFF), int64(m.Vocab), int64(m.Context), int64(c.Train.MicroBatch)*int64(m.Context))
}

// CheckLimits validates c and then checks it against l, reporting every
// exceeded bound by field.
func (c Config) CheckLimits(l Limits) error {
	if err := c.Validate(); err != nil {
		return err
	}
	c = c.WithDefaults()
	var errs fieldErrs
	check := func(field string, got, limit int64, what string) {
		if limit > 0 && got > limit {
			errs.addf("%s: %s is %d, above the limit %d", field, what, got, limit)
		}
	}
	check("model", c.ParamCount(), l.MaxParams, "parameter count")
	check("train.batch", c.TokensPerStep(), l.MaxTokensPerStep, "tokens per step (batch·context)")
	check("model", c.MaxRowLength(), l.MaxRowLength, "longest operator row (max of 3·d_model, d_ff, vocab, context, micro_batch·context)")
	check("model", c.MACsPerStep(), l.MaxMACsPerStep, "multiply-accumulates per step")
	check("model", c.StateBytes(), l.MaxStateBytes, "state size in bytes")
	check("model.layers", int64(c.Model.Layers), l.MaxLayers, "layer count")
	return errs.err(ErrLimits)
}

// ReferenceConfig is the configuration of workload kind "reference": a
// model small enough that the chain's one-step referee can re-execute any
// of its steps in one transaction, and still a real transformer that learns
// English bytes (the demo's loss falls from ln 256 ≈ 5.5 nats towards 2).
func ReferenceConfig() Config {
	return Config{
		Model: ModelConfig{Layers: 1, DModel: 32, Heads: 2, DFF: 128, Context: 32, Vocab: Vocab},
		Train: TrainConfig{Batch: 4, Optimizer: OptimizerAdamW, LR: 0.01, WarmupSteps: 10, WeightDecay: 0.01},
	}.WithDefaults()
}
