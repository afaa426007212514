//go:build unix

package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

func startProcess(t *testing.T, rt *runtime.Process, job runtime.Job) runtime.Handle {
	t.Helper()
	h, err := rt.Start(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Stop(ctx)
	})
	return h
}

func readLog(t *testing.T, job runtime.Job, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(job.LogDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestProcessRunsContractTrainer(t *testing.T) {
	// The sidecar's own CUDA_VISIBLE_DEVICES must not reach the trainer.
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	job.GPUs = []string{"GPU-1111", "GPU-2222"}
	h := startProcess(t, &runtime.Process{Command: []string{testTrainer(t)}}, job)
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	// The trainer read the corpus the runtime wrote to its data directory
	// and trained exactly what the reference workload trains.
	cps := checkCheckpoints(t, job, directTrace(t, 9))
	if len(cps) != 3 {
		t.Fatalf("%d checkpoints, want 3", len(cps))
	}
	stdout := readLog(t, job, runtime.StdoutLogName)
	if !strings.Contains(stdout, `CUDA_VISIBLE_DEVICES="GPU-1111,GPU-2222"`) || !strings.Contains(stdout, "job 3 lease 12") {
		t.Fatalf("stdout log: %q", stdout)
	}
}

func TestProcessTrainerExitsNonZero(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	h := startProcess(t, &runtime.Process{Command: []string{testTrainer(t), "-mode=crash"}}, job)
	err := h.Wait()
	var runErr *trainer.RunError
	if !errors.As(err, &runErr) || !errors.Is(err, trainer.ErrTrainerFailed) || runErr.Exit.Code != 3 {
		t.Fatalf("Wait = %v, want a RunError with exit status 3", err)
	}
	for _, want := range []string{"exit status 3", "wrote no checkpoint", "illegal memory access"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestProcessTrainerWritesNoCheckpoint(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	h := startProcess(t, &runtime.Process{Command: []string{testTrainer(t), "-mode=idle"}}, job)
	err := h.Wait()
	if !errors.Is(err, trainer.ErrNoFinalCheckpoint) || !strings.Contains(err.Error(), "exit status 0") {
		t.Fatalf("Wait = %v, want ErrNoFinalCheckpoint", err)
	}
}

func TestProcessStopKillsTheProcessGroup(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	// A trainer that leaves a child behind and ignores SIGTERM.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	script := `trap '' TERM; sleep 300 & echo $! > ` + pidFile + `; wait`
	h := startProcess(t, &runtime.Process{Command: []string{"/bin/sh", "-c", script}}, job)
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the trainer did not start its child")
		}
		if data, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(data), "\n") {
			child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); !errors.Is(err, runtime.ErrStopped) {
		t.Fatalf("Wait after Stop: %v", err)
	}
	// The orphaned child was killed with its group (it may linger as a
	// zombie until something reaps it, but it no longer runs).
	for deadline := time.Now().Add(5 * time.Second); alive(child); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d survived Stop", child)
		}
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func TestProcessStopLetsTheTrainerEndGracefully(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 1_000_000, 4)
	h := startProcess(t, &runtime.Process{Command: []string{testTrainer(t), "-step-delay=2ms"}}, job)
	first := trainer.CheckpointDir(job.OutputDir, 4)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(first, trainer.CompleteMarkerName)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint within 30 s")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); !errors.Is(err, runtime.ErrStopped) {
		t.Fatalf("Wait after Stop: %v", err)
	}
	// SIGTERM reached the trainer, which stopped between steps.
	if stderr := readLog(t, job, runtime.StderrLogName); !strings.Contains(stderr, "context canceled") {
		t.Fatalf("stderr log: %q", stderr)
	}
	if _, err := trainer.ReadCheckpoint(first, 4); err != nil {
		t.Fatal(err)
	}
}

func TestProcessRefusesWithoutCommand(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	if _, err := (&runtime.Process{}).Start(context.Background(), job); err == nil {
		t.Fatal("started without a command")
	}
}
