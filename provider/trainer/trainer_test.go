package trainer_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/trainer"
)

func testEnv(t *testing.T) trainer.Env {
	t.Helper()
	return trainer.Env{
		JobID:              7,
		LeaseID:            11,
		OutputDir:          t.TempDir(),
		DataDir:            t.TempDir(),
		StartStep:          0,
		TotalSteps:         10,
		CheckpointInterval: 4,
		JobSeed:            []byte{0xde, 0xad, 0xbe, 0xef},
		VisibleDevices:     []string{"GPU-a", "GPU-b"},
	}
}

func lookupIn(environ []string) func(string) (string, bool) {
	return func(key string) (string, bool) {
		for _, kv := range environ {
			if k, v, _ := strings.Cut(kv, "="); k == key {
				return v, true
			}
		}
		return "", false
	}
}

func TestEnvRoundTrip(t *testing.T) {
	env := testEnv(t)
	got, err := trainer.ParseEnv(lookupIn(env.Environ()))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(env) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, env)
	}

	// No GPU: CUDA_VISIBLE_DEVICES is set, to the empty string.
	env.VisibleDevices = nil
	if !slices.Contains(env.Environ(), "CUDA_VISIBLE_DEVICES=") {
		t.Fatalf("no GPUs must give CUDA_VISIBLE_DEVICES=, got %q", env.Environ())
	}
	got, err = trainer.ParseEnv(lookupIn(env.Environ()))
	if err != nil || got.VisibleDevices != nil {
		t.Fatalf("parse without GPUs: %v, %q", err, got.VisibleDevices)
	}
}

func TestEnvRejects(t *testing.T) {
	base := testEnv(t)
	for name, tc := range map[string]struct {
		edit func(environ []string) []string
		want string
	}{
		"missing":         {func(e []string) []string { return e[1:] }, "not set: DEPIN_JOB_ID"},
		"bad number":      {func(e []string) []string { return append(e, "DEPIN_START_STEP=x") }, "DEPIN_START_STEP must be a decimal integer"},
		"bad seed":        {func(e []string) []string { return append(e, "DEPIN_JOB_SEED=zz") }, "DEPIN_JOB_SEED must be hex"},
		"relative output": {func(e []string) []string { return append(e, "DEPIN_OUTPUT_DIR=out") }, "DEPIN_OUTPUT_DIR must be an absolute path"},
		"start past end":  {func(e []string) []string { return append(e, "DEPIN_START_STEP=10", "DEPIN_RESUME_FROM=/ckpt/step-10") }, "must be below DEPIN_TOTAL_STEPS"},
		"resume name":     {func(e []string) []string { return append(e, "DEPIN_START_STEP=4", "DEPIN_RESUME_FROM=/ckpt/step-5") }, "folder named step-4"},
		"resume at 0":     {func(e []string) []string { return append(e, "DEPIN_RESUME_FROM=/ckpt/step-0") }, "exactly when DEPIN_START_STEP is positive"},
		"no resume":       {func(e []string) []string { return append(e, "DEPIN_START_STEP=4") }, "exactly when DEPIN_START_STEP is positive"},
		"zero interval":   {func(e []string) []string { return append(e, "DEPIN_CHECKPOINT_INTERVAL=0") }, "DEPIN_CHECKPOINT_INTERVAL must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			// Later entries win in lookupIn's reverse order, so edits
			// that append override the base value.
			environ := tc.edit(base.Environ())
			slices.Reverse(environ)
			_, err := trainer.ParseEnv(lookupIn(environ))
			if !errors.Is(err, trainer.ErrInvalidEnv) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidEnv mentioning %q", err, tc.want)
			}
		})
	}
}

func TestNextCheckpointStep(t *testing.T) {
	env := trainer.Env{StartStep: 3, TotalSteps: 10, CheckpointInterval: 4}
	var ends []uint64
	for start := env.StartStep; start < env.TotalSteps; start = env.NextCheckpointStep(start) {
		ends = append(ends, env.NextCheckpointStep(start))
	}
	if want := []uint64{7, 10}; !slices.Equal(ends, want) {
		t.Fatalf("checkpoints at %v, want %v", ends, want)
	}
	huge := trainer.Env{TotalSteps: ^uint64(0), CheckpointInterval: ^uint64(0) - 1}
	if got := huge.NextCheckpointStep(5); got != ^uint64(0) {
		t.Fatalf("an interval reaching past the end must stop at TotalSteps, got %d", got)
	}
}

// fakeRun stands in for training: state i is "state-i" and h_i its SHA-256.
func fakeState(step uint64) []byte { return fmt.Appendf(nil, "state-%d", step) }

func fakeTrace(start, end uint64) []merkle.Hash {
	var hashes []merkle.Hash
	for s := start; s <= end; s++ {
		hashes = append(hashes, sha256.Sum256(fakeState(s)))
	}
	return hashes
}

func writeFake(t *testing.T, outputDir string, start, end uint64) string {
	t.Helper()
	dir, err := trainer.WriteCheckpoint(outputDir, end, fakeState(end), fakeTrace(start, end))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWriteAndReadCheckpoint(t *testing.T) {
	out := t.TempDir()
	dir := writeFake(t, out, 4, 8)
	if dir != filepath.Join(out, "checkpoints", "step-8") {
		t.Fatalf("folder %s", dir)
	}
	cp, err := trainer.ReadCheckpoint(dir, 8)
	if err != nil {
		t.Fatal(err)
	}
	if cp.StartStep() != 4 || cp.EndStep() != 8 || cp.StateSize != int64(len(fakeState(8))) ||
		cp.StartHash() != sha256.Sum256(fakeState(4)) || cp.FinalHash() != sha256.Sum256(fakeState(8)) {
		t.Fatalf("read back %+v", cp)
	}
	if _, err := trainer.WriteCheckpoint(out, 8, fakeState(8), fakeTrace(4, 8)); err == nil {
		t.Fatal("overwrote a complete checkpoint")
	}
	if _, err := trainer.WriteCheckpoint(out, 9, fakeState(8), fakeTrace(4, 9)); !errors.Is(err, trainer.ErrInvalidCheckpoint) {
		t.Fatalf("state not matching h_end: %v", err)
	}
}

func TestReadCheckpointRejects(t *testing.T) {
	out := t.TempDir()
	dir := writeFake(t, out, 0, 4)
	if _, err := trainer.ReadCheckpoint(dir, 3); !errors.Is(err, trainer.ErrInvalidCheckpoint) {
		t.Errorf("trace longer than the steps before its end: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, trainer.StateFileName), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := trainer.ReadCheckpoint(dir, 4); !errors.Is(err, trainer.ErrInvalidCheckpoint) || !strings.Contains(err.Error(), "SHA-256 of state") {
		t.Errorf("tampered state: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, trainer.CompleteMarkerName)); err != nil {
		t.Fatal(err)
	}
	if _, err := trainer.ReadCheckpoint(dir, 4); !errors.Is(err, trainer.ErrCheckpointIncomplete) {
		t.Errorf("no COMPLETE marker: %v", err)
	}
}

func TestCompletedSteps(t *testing.T) {
	out := t.TempDir()
	writeFake(t, out, 4, 12)
	writeFake(t, out, 0, 4)
	for _, junk := range []string{"step-8", "step-007", "step-9.tmp", "other"} {
		if err := os.MkdirAll(filepath.Join(out, "checkpoints", junk), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// step-007 is not a canonical name even with a marker.
	if err := os.WriteFile(filepath.Join(out, "checkpoints", "step-007", trainer.CompleteMarkerName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	steps, err := trainer.CompletedSteps(out)
	if err != nil || !slices.Equal(steps, []uint64{4, 12}) {
		t.Fatalf("CompletedSteps = %v, %v; want [4 12]", steps, err)
	}
}

func TestWatcherReportsInOrderAndChained(t *testing.T) {
	env := testEnv(t) // checkpoints at 4, 8, 10
	w, err := trainer.NewWatcher(env)
	if err != nil {
		t.Fatal(err)
	}
	if cps, err := w.Poll(); err != nil || len(cps) != 0 {
		t.Fatalf("nothing written yet: %v, %v", cps, err)
	}
	// step-8 alone is not reported before step-4 exists.
	writeFake(t, env.OutputDir, 4, 8)
	if cps, err := w.Poll(); err != nil || len(cps) != 0 {
		t.Fatalf("out of order: %v, %v", cps, err)
	}
	writeFake(t, env.OutputDir, 0, 4)
	cps, err := w.Poll()
	if err != nil || len(cps) != 2 || cps[0].EndStep() != 4 || cps[1].EndStep() != 8 {
		t.Fatalf("Poll = %v, %v; want step-4 and step-8", cps, err)
	}
	if w.Finished() {
		t.Fatal("finished before the final checkpoint")
	}

	// The last checkpoint comes while Watch is running.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	written := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, err := trainer.WriteCheckpoint(env.OutputDir, 10, fakeState(10), fakeTrace(8, 10))
		written <- err
	}()
	defer func() {
		if err := <-written; err != nil {
			t.Error(err)
		}
	}()
	var reported []uint64
	if err := w.Watch(ctx, 5*time.Millisecond, func(cp trainer.Checkpoint) error {
		reported = append(reported, cp.EndStep())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reported, []uint64{10}) || !w.Finished() {
		t.Fatalf("Watch reported %v", reported)
	}
}

func TestWatcherRejectsBrokenChain(t *testing.T) {
	for name, tc := range map[string]struct {
		write func(t *testing.T, out string)
		want  string
	}{
		"wrong range": {func(t *testing.T, out string) { writeFake(t, out, 1, 4) }, "covers steps 1..4, want 0..4"},
		"wrong start hash": {func(t *testing.T, out string) {
			writeFake(t, out, 0, 4)
			trace := fakeTrace(4, 8)
			trace[0] = merkle.Hash{1}
			if _, err := trainer.WriteCheckpoint(out, 8, fakeState(8), trace); err != nil {
				t.Fatal(err)
			}
		}, "previous checkpoint ended with"},
	} {
		t.Run(name, func(t *testing.T) {
			env := testEnv(t)
			tc.write(t, env.OutputDir)
			w, err := trainer.NewWatcher(env)
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Poll()
			if !errors.Is(err, trainer.ErrInvalidCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidCheckpoint mentioning %q", err, tc.want)
			}
		})
	}
}

func TestWatcherChecksResumeHash(t *testing.T) {
	env := testEnv(t)
	resumeOut := t.TempDir()
	env.ResumeFrom = writeFake(t, resumeOut, 0, 4)
	env.StartStep = 4

	w, err := trainer.NewWatcher(env)
	if err != nil {
		t.Fatal(err)
	}
	trace := fakeTrace(4, 8)
	trace[0] = merkle.Hash{2} // does not continue from the resume state
	if _, err := trainer.WriteCheckpoint(env.OutputDir, 8, fakeState(8), trace); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Poll(); !errors.Is(err, trainer.ErrInvalidCheckpoint) {
		t.Fatalf("a run not continuing from its resume state: %v", err)
	}

	env.StartStep = 5 // the resume checkpoint ends at 4
	if _, err := trainer.NewWatcher(env); !errors.Is(err, trainer.ErrInvalidEnv) {
		t.Fatalf("resume checkpoint at the wrong step: %v", err)
	}
}

func TestCheckRun(t *testing.T) {
	env := testEnv(t)
	err := trainer.CheckRun(env, trainer.Exit{Code: 3, StderrTail: "CUDA out of memory\n"})
	var runErr *trainer.RunError
	if !errors.As(err, &runErr) || !errors.Is(err, trainer.ErrTrainerFailed) || runErr.LastCheckpoint != -1 {
		t.Fatalf("non-zero exit: %v", err)
	}
	for _, want := range []string{"exit status 3", "wrote no checkpoint", "CUDA out of memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}

	writeFake(t, env.OutputDir, 0, 4)
	err = trainer.CheckRun(env, trainer.Exit{})
	if !errors.Is(err, trainer.ErrNoFinalCheckpoint) || !strings.Contains(err.Error(), "expected checkpoints/step-10/COMPLETE; its last complete checkpoint is step-4") {
		t.Fatalf("exit 0 before the end: %v", err)
	}
	if err := trainer.CheckRun(env, trainer.Exit{Code: -1, Signal: "killed"}); !errors.Is(err, trainer.ErrTrainerFailed) || !strings.Contains(err.Error(), "killed by signal killed") {
		t.Fatalf("killed: %v", err)
	}

	writeFake(t, env.OutputDir, 4, 8)
	writeFake(t, env.OutputDir, 8, 10)
	if err := trainer.CheckRun(env, trainer.Exit{}); err != nil {
		t.Fatalf("complete run: %v", err)
	}
	if err := trainer.CheckRun(env, trainer.Exit{Code: 139}); !errors.Is(err, trainer.ErrTrainerFailed) {
		t.Fatalf("crash after the last checkpoint without DONE: %v", err)
	}
	if err := trainer.MarkDone(env.OutputDir); err != nil {
		t.Fatal(err)
	}
	if err := trainer.CheckRun(env, trainer.Exit{Code: 139}); err != nil {
		t.Fatalf("crash in teardown after DONE: %v", err)
	}
}

func TestMetricsLog(t *testing.T) {
	out := t.TempDir()
	if ms, err := trainer.ReadMetrics(out); err != nil || ms != nil {
		t.Fatalf("no log: %v, %v", ms, err)
	}
	log, err := trainer.OpenMetricsLog(out)
	if err != nil {
		t.Fatal(err)
	}
	for step := uint64(1); step <= 3; step++ {
		if err := log.Append(trainer.StepMetric{Step: step, Loss: 4.5 / float64(step)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	// Another trainer's extra fields, and a line still being written.
	f, err := os.OpenFile(filepath.Join(out, trainer.MetricsFileName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `{"step": 4, "loss": 1.0, "lr": 0.1}`+"\n"+`{"step": 5, "lo`)
	f.Close()
	ms, err := trainer.ReadMetrics(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []trainer.StepMetric{{1, 4.5}, {2, 2.25}, {3, 1.5}, {4, 1}}
	if !slices.Equal(ms, want) {
		t.Fatalf("ReadMetrics = %v, want %v", ms, want)
	}
	if err := os.WriteFile(filepath.Join(out, trainer.MetricsFileName), []byte("{\"loss\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := trainer.ReadMetrics(out); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a line without step: %v", err)
	}
}
