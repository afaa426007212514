package trainer_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/trainer"
)

// roundEnv is round 2 of worker 1 of 3 at every 4.
func roundEnv(t *testing.T) trainer.Env {
	env := testEnv(t)
	env.Exact = &exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 24, Heads: 2, DFF: 40, Context: 16, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, LR: 0.01, WarmupSteps: 2, WeightDecay: 0.01},
	}
	env.StartStep, env.TotalSteps, env.CheckpointInterval = 8, 12, 4
	env.Round = &trainer.RoundEnv{Worker: 1, Workers: 3, Round: 2, GlobalState: filepath.Join(t.TempDir(), "global-2"),
		Sync: diloco.Sync{Every: 4, OuterLR: 751619277, OuterMomentum: 966367642, TopK: 0}}
	return env
}

func TestRoundEnvRoundTripAndRejects(t *testing.T) {
	env := roundEnv(t)
	got, err := trainer.ParseEnv(lookupIn(env.Environ()))
	if err != nil {
		t.Fatal(err)
	}
	if *got.Round != *env.Round || got.StartStep != 8 || got.ResumeFrom != "" {
		t.Fatalf("round trip: %+v, want %+v", got.Round, env.Round)
	}
	// Not a round run: the round variables are set, empty.
	if plain := testEnv(t).Environ(); !slices.Contains(plain, "DEPIN_ROUND=") || !slices.Contains(plain, "DEPIN_SYNC=") {
		t.Fatalf("a plain run's environment lacks the empty round variables: %q", plain)
	}
	for name, tc := range map[string]struct {
		edit []string
		want string
	}{
		"partial":        {[]string{"DEPIN_GLOBAL_STATE="}, "a round run needs every one of DEPIN_WORKER_INDEX"},
		"index":          {[]string{"DEPIN_WORKER_INDEX=3"}, "DEPIN_WORKER_INDEX (3) must be below DEPIN_WORLD_SIZE (3)"},
		"sync format":    {[]string{"DEPIN_SYNC=4,1"}, "DEPIN_SYNC must be every,outer_lr_q30"},
		"sync range":     {[]string{"DEPIN_SYNC=4,0,0,0"}, "sync.outer_lr: must be in (0, 1]"},
		"steps":          {[]string{"DEPIN_START_STEP=4"}, "round 2 of every 4 trains steps 8 to 12"},
		"interval":       {[]string{"DEPIN_CHECKPOINT_INTERVAL=2"}, "DEPIN_CHECKPOINT_INTERVAL must be the round's 4 steps"},
		"relative":       {[]string{"DEPIN_GLOBAL_STATE=global-2"}, "DEPIN_GLOBAL_STATE must be an absolute path"},
		"not exact":      {[]string{"DEPIN_EXACT_CONFIG="}, "DEPIN_EXACT_CONFIG must be set"},
		"init weights":   {[]string{"DEPIN_INIT_WEIGHTS=/w.safetensors"}, "not DEPIN_INIT_WEIGHTS"},
		"bad world size": {[]string{"DEPIN_WORLD_SIZE=x"}, "DEPIN_WORLD_SIZE must be a decimal integer"},
	} {
		t.Run(name, func(t *testing.T) {
			environ := append(env.Environ(), tc.edit...)
			slices.Reverse(environ)
			_, err := trainer.ParseEnv(lookupIn(environ))
			if !errors.Is(err, trainer.ErrInvalidEnv) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidEnv mentioning %q", err, tc.want)
			}
		})
	}
}
