package reftrainer

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigValidateNamesBadField(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), WorstCaseConfig()} {
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	cases := []struct {
		field  string
		mutate func(*Config)
	}{
		{"Vocab", func(c *Config) { c.Vocab = 1 }},
		{"Vocab", func(c *Config) { c.Vocab = MaxVocab + 1 }},
		{"Embed", func(c *Config) { c.Embed = 0 }},
		{"Embed", func(c *Config) { c.Embed = MaxEmbed + 1 }},
		{"Context", func(c *Config) { c.Context = 0 }},
		{"Context", func(c *Config) { c.Context = MaxContext + 1 }},
		{"Hidden", func(c *Config) { c.Hidden = 0 }},
		{"Hidden", func(c *Config) { c.Hidden = MaxHidden + 1 }},
		{"BatchSize", func(c *Config) { c.BatchSize = 0 }},
		{"BatchSize", func(c *Config) { c.BatchSize = MaxBatchSize + 1 }},
		{"LearningRate", func(c *Config) { c.LearningRate = 0 }},
		{"LearningRate", func(c *Config) { c.LearningRate = -One }},
		{"LearningRate", func(c *Config) { c.LearningRate = MaxLearningRate + 1 }},
		{"parameters", func(c *Config) { c.Hidden, c.Context, c.Embed = MaxHidden, MaxContext, MaxEmbed }},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig naming %s", c.field, err, c.field)
		}
	}
}

// TestWorkFigures pins the documented sizes: changing them changes gas.
func TestWorkFigures(t *testing.T) {
	cases := []struct {
		name         string
		cfg          Config
		params, macs uint64
	}{
		// 8·(3·(1024+3072) + 96·8 + 1 + 96 + 8) + 4992
		{"default", DefaultConfig(), 4992, 110280},
		// 32·(3·(524288+131072) + 256·8 + 1 + 256 + 8) + 672512
		{"worst case", WorstCaseConfig(), 672512, 63661088},
	}
	for _, c := range cases {
		if got := c.cfg.NumParams(); got != c.params {
			t.Errorf("%s: NumParams() = %d, want %d", c.name, got, c.params)
		}
		if got := c.cfg.MACsPerStep(); got != c.macs {
			t.Errorf("%s: MACsPerStep() = %d, want %d", c.name, got, c.macs)
		}
	}
}
