package exact

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func tinyConfig() Config {
	return Config{Model: ModelConfig{Layers: 2, DModel: 16, Heads: 2, DFF: 24, Context: 8, Vocab: 256},
		Train: TrainConfig{Batch: 4, MicroBatch: 2, LR: 3e-3, WarmupSteps: 2, WeightDecay: 0.1}}
}

// issueConfig is the job spec example of issue 12.
func issueConfig() Config {
	return Config{Model: ModelConfig{Layers: 4, DModel: 256, Heads: 4, DFF: 1024, Context: 128, Vocab: 256},
		Train: TrainConfig{Batch: 16, Optimizer: "adamw", LR: 0.001, WarmupSteps: 100, WeightDecay: 0.1}}
}

func TestValidateReportsFields(t *testing.T) {
	require.NoError(t, tinyConfig().Validate())
	require.NoError(t, issueConfig().Validate())
	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Model.DModel, c.Model.Heads = 256, 3 }, "model.d_model: must be divisible by model.heads (256 vs 3)"},
		{func(c *Config) { c.Model.Layers = 0 }, "model.layers: must be in [1, 256], got 0"},
		{func(c *Config) { c.Model.DModel = 8192 }, "model.d_model: must be in [1, 4096], got 8192"},
		{func(c *Config) { c.Model.Vocab = 50257 }, "model.vocab: must be 256 (byte-level tokens), got 50257"},
		{func(c *Config) { c.Train.Batch, c.Train.MicroBatch = 6, 4 }, "train.batch: must be divisible by train.micro_batch (6 vs 4)"},
		{func(c *Config) { c.Train.Optimizer = "sgd" }, `train.optimizer: must be "adamw", got "sgd"`},
		{func(c *Config) { c.Train.LR = 0 }, "train.lr: must be in (0, 1], got 0"},
		{func(c *Config) { c.Train.LR = 1e-13 }, "train.lr: 1e-13 is below the resolution 2^-40"},
		{func(c *Config) { c.Train.Beta2 = 0.99999 }, "train.beta2: must be in [0.5, 0.9999], got 0.99999"},
		{func(c *Config) { c.Train.WeightDecay = -0.1 }, "train.weight_decay: must be in [0, 1], got -0.1"},
		{func(c *Config) { c.Train.MinLR = 0.01 }, "train.min_lr: must not exceed train.lr (0.01 vs 0.003)"},
		{func(c *Config) { c.Train.DecaySteps = 1 }, "train.decay_steps: must exceed train.warmup_steps (1 vs 2) or be 0"},
		{func(c *Config) { c.Train.Eps = 1e-12 }, "train.eps: must be at least 2^-29"},
		{func(c *Config) { c.Model.Context, c.Train.Batch, c.Train.MicroBatch = 4096, 2048, 2048 },
			"train.micro_batch: micro_batch·context must be at most 1048576 tokens, got 8388608"},
	}
	for _, c := range cases {
		cfg := tinyConfig()
		c.mut(&cfg)
		err := cfg.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, c.want)
	}
	// Every violation is reported, not just the first.
	cfg := tinyConfig()
	cfg.Model.Layers, cfg.Train.Optimizer = 0, "sgd"
	err := cfg.Validate()
	require.ErrorContains(t, err, "model.layers")
	require.ErrorContains(t, err, "train.optimizer")
}

func TestCheckLimits(t *testing.T) {
	cfg := issueConfig()
	require.NoError(t, cfg.CheckLimits(Limits{}))
	require.Equal(t, int64(4*(4*256*256+2*256*1024)+256*256+128*256+256*256), cfg.ParamCount()) // 3,309,568
	require.Equal(t, int64(2048), cfg.TokensPerStep())
	err := cfg.CheckLimits(Limits{MaxParams: 1_000_000, MaxTokensPerStep: 1024, MaxRowLength: 512, MaxMACsPerStep: 1e9, MaxStateBytes: 1 << 20, MaxLayers: 2})
	require.ErrorIs(t, err, ErrLimits)
	for _, want := range []string{
		"model: parameter count is 3309568, above the limit 1000000",
		"train.batch: tokens per step (batch·context) is 2048, above the limit 1024",
		"model: longest operator row (max of 3·d_model, d_ff, vocab, context, micro_batch·context) is 2048, above the limit 512",
		"multiply-accumulates per step is",
		"model: state size in bytes is",
		"model.layers: layer count is 4, above the limit 2",
	} {
		require.ErrorContains(t, err, want)
	}
	// An invalid config is reported as such, before any limit.
	bad := cfg
	bad.Model.Heads = 3
	require.ErrorIs(t, bad.CheckLimits(Limits{}), ErrInvalidConfig)
}

// MACsPerStep (computed from a one-micro-batch graph) equals the MACs of
// the full graph, and the closed form 3·M·(L(4D²+2CD+2DF) + VD)·tokens.
func TestCostsMatchTheFullGraph(t *testing.T) {
	for _, cfg := range []Config{tinyConfig(), issueConfig()} {
		cfg = cfg.WithDefaults()
		g := buildTrainGraph(cfg)
		var macs, elems int64
		for _, op := range g.Ops {
			out := &g.Tensors[op.Output]
			if op.Kind == KindMatmul {
				macs += int64(out.Elems()) * int64(g.Tensors[op.Inputs[0]].Cols())
			} else {
				elems += int64(out.Elems())
			}
		}
		require.Equal(t, macs, cfg.MACsPerStep())
		require.Equal(t, elems, cfg.ElementsPerStep())
		m := cfg.Model
		L, D, C, F, V := int64(m.Layers), int64(m.DModel), int64(m.Context), int64(m.DFF), int64(m.Vocab)
		require.Equal(t, 3*cfg.TokensPerStep()*(L*(4*D*D+2*C*D+2*D*F)+V*D), macs)
	}
}

func TestHyperRoundTrips(t *testing.T) {
	for _, cfg := range []Config{tinyConfig(), issueConfig()} {
		h := cfg.Hyper()
		h2, err := DecodeHyper(h.Encode())
		require.NoError(t, err)
		require.Equal(t, h, h2)
		back, err := h.Config()
		require.NoError(t, err)
		require.Equal(t, h, back.Hyper())
	}
	b := tinyConfig().Hyper().Encode()
	b[len(b)-1] = 1
	_, err := DecodeHyper(b)
	require.ErrorContains(t, err, "reserved")
	_, err = DecodeHyper(b[:10])
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func TestConfigJSONUsesTheJobSpecKeys(t *testing.T) {
	var cfg Config
	require.NoError(t, json.Unmarshal([]byte(`{"model": {"layers": 4, "d_model": 256, "heads": 4, "d_ff": 1024, "context": 128, "vocab": 256},
		"train": {"batch": 16, "optimizer": "adamw", "lr": 0.001, "warmup_steps": 100, "weight_decay": 0.1}}`), &cfg))
	require.Equal(t, issueConfig(), cfg)
}
