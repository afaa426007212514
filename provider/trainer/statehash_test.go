package trainer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/trainer"
)

// tinyExact is a transformer small enough to train a few steps in a test.
func tinyExact() *exact.Config {
	return &exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 1, DFF: 32, Context: 8, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, LR: 1e-2},
	}
}

// An exact run's checkpoints commit their state root, which the chain
// requires to be the final hash: the sidecar reads them as such, and a
// Watcher refuses the other kind of hash for either kind of workload.
func TestCheckpointStateHashFollowsTheWorkload(t *testing.T) {
	env := testEnv(t)
	env.Exact, env.VisibleDevices = tinyExact(), nil
	stream := []byte(strings.Repeat("the exact transformer trains on every core to the same bits. ", 20))
	if err := trainer.RunExact(context.Background(), env, stream, nil); err != nil {
		t.Fatal(err)
	}
	cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(env.OutputDir, 4), 4)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Hash != trainer.StateRoot || env.StateHash() != trainer.StateRoot {
		t.Fatalf("an exact checkpoint is hashed as %s (env %s), want its state root", cp.Hash, env.StateHash())
	}
	w, err := trainer.NewWatcher(env)
	if err != nil {
		t.Fatal(err)
	}
	if cps, err := w.Poll(); err != nil || len(cps) != 3 || !w.Finished() {
		t.Fatalf("exact run: %d checkpoints, %v", len(cps), err)
	}

	// The same folders under a container job's contract are accepted: an image
	// may run the exact PyTorch trainer, and either hash binds h_end to the state.
	container := env
	container.Exact = nil
	w, err = trainer.NewWatcher(container)
	if err != nil {
		t.Fatal(err)
	}
	if cps, err := w.Poll(); err != nil || len(cps) != 3 {
		t.Fatalf("a container run's checkpoints ending with state roots: %d, %v", len(cps), err)
	}

	// And SHA-256-hashed checkpoints under the exact contract.
	fake := testEnv(t)
	fake.Exact = tinyExact()
	writeFake(t, fake.OutputDir, 0, 4)
	w, err = trainer.NewWatcher(fake)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Poll(); !errors.Is(err, trainer.ErrInvalidCheckpoint) || !strings.Contains(err.Error(), "is the SHA-256 of its state, but this workload's h_i is the state's state root") {
		t.Fatalf("an exact run's checkpoint ending with a SHA-256: got %v", err)
	}
}

// WriteCheckpoint (the resume path) takes a state under either hash.
func TestWriteCheckpointTakesAStateRoot(t *testing.T) {
	state := []byte(strings.Repeat("x", 3*trace.CheckpointChunkSize+5))
	_, root := trainer.HashStateBytes(state)
	if root != merkle.RootOfBytes(state, trace.CheckpointChunkSize) {
		t.Fatal("HashStateBytes' root is not the state root")
	}
	out := t.TempDir()
	if _, err := trainer.WriteCheckpoint(out, 6, state, []merkle.Hash{{1}, root}); err != nil {
		t.Fatal(err)
	}
	cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(out, 6), 6)
	if err != nil || cp.Hash != trainer.StateRoot || cp.StartStep() != 5 {
		t.Fatalf("read back: %+v, %v", cp, err)
	}
	if _, err := trainer.WriteCheckpoint(out, 7, state, []merkle.Hash{{1}, {2}}); !errors.Is(err, trainer.ErrInvalidCheckpoint) {
		t.Fatalf("a trace ending in neither hash: %v", err)
	}
}
