//go:build linux

package leases

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	"github.com/depinchain/depinchain/provider/metrics"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// python is Debian's interpreter, for which apt-get installs python3-torch.
const python = "/usr/bin/python3"

var torchCheck = sync.OnceValue(func() error {
	out, err := exec.Command(python, "-c", "import torch, numpy").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
})

// trainPy is the exact workload's PyTorch trainer; the tests never skip
// without PyTorch, they say how to install it.
func trainPy(t *testing.T) string {
	t.Helper()
	if err := torchCheck(); err != nil {
		t.Fatalf("%s cannot import torch and numpy (%v); install Debian's packages: "+
			"apt-get update && apt-get install -y python3-torch python3-numpy (`make deps` does this)", python, err)
	}
	path, err := filepath.Abs("../../pkg/exact/torch/train.py")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func tinyTransformerJob(steps, interval uint64) markettypes.Job {
	cfg := exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 1, DFF: 32, Context: 8, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, LR: 1e-2},
	}.WithDefaults()
	return markettypes.Job{Id: 1, Seed: bytes.Repeat([]byte{7}, 32), State: markettypes.JOB_STATE_LEASED,
		Spec: markettypes.JobSpec{TotalSteps: steps, CheckpointInterval: interval,
			Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_TRANSFORMER, Transformer: markettypes.NewTransformerConfig(cfg)}}}
}

// goTrain trains job with the Go trainer into a fresh folder, as the
// referee and the in-process runtime would.
func goTrain(t *testing.T, job markettypes.Job) string {
	t.Helper()
	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		t.Fatal(err)
	}
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := exact.Train(context.Background(), exact.TrainOptions{Config: cfg, Seed: job.Seed, Stream: data.Bytes, OutputDir: out,
		TotalSteps: job.Spec.TotalSteps, CheckpointInterval: job.Spec.CheckpointInterval}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A lease of a transformer job on a sidecar configured with exact_torch is
// trained by train.py, and its checkpoints pass the sidecar's checks (h_end
// the state root, chained traces) and are submitted with exactly the roots
// the Go trainer computes.
func TestServeTrainsTheTransformerWithPyTorch(t *testing.T) {
	script := trainPy(t)
	h := &harness{db: roletest.OpenDB(t), chain: roletest.NewChain(), cat: checkpoint.NewCatalog(time.Hour), metrics: metrics.New("test")}
	var err error
	h.role, err = New(Options{
		Operator: operator, Submit: h.chain.Submit, Chain: h.chain, DB: h.db, Catalog: h.cat, GPUs: noGPUs{},
		Runtimes: config.Runtimes{Reference: true, ExactTorch: []string{python, script}, ExactTorchEnv: []string{"OMP_NUM_THREADS=1"}},
		WorkDir:  t.TempDir(), PublicURL: publicURL, Metrics: h.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.role.Close() })
	job := tinyTransformerJob(12, 4)
	h.chain.Jobs[1] = job
	h.chain.LeaseByID[1] = markettypes.Lease{Id: 1, JobId: 1, Provider: operator, State: markettypes.LEASE_STATE_ACTIVE}
	h.handle(t, chainEventLeaseCreated())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := h.role.serve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	want := goTrain(t, job)
	subs := roletest.SentOf[*verifytypes.MsgSubmitCheckpoint](h.chain)
	if len(subs) != 3 {
		t.Fatalf("submitted %d checkpoints, want 3", len(subs))
	}
	for i, m := range subs {
		end := uint64(4*i + 4)
		goCp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(want, end), end)
		if err != nil {
			t.Fatal(err)
		}
		root := goCp.FinalHash()
		if !bytes.Equal(m.StateRoot, root[:]) || !bytes.Equal(m.FinalHash, root[:]) {
			t.Fatalf("checkpoint %d: state root %x, final hash %x; the Go trainer's state root is %s", i, m.StateRoot, m.FinalHash, root)
		}
		if tr := goCp.Trace.Root(); !bytes.Equal(m.TraceRoot, tr[:]) {
			t.Fatalf("checkpoint %d: trace root %x, Go's %s", i, m.TraceRoot, tr)
		}
	}
	rec := h.leaseRecord(t, 1)
	if rec.Runtime != "exact-torch" {
		t.Fatalf("the lease ran on %q", rec.Runtime)
	}
	// The trainer's output went to the lease's logs; its group record is
	// there until the next attempt clears it.
	if _, err := os.Stat(filepath.Join(rec.Dir, "logs", runtime.StderrLogName)); err != nil {
		t.Fatal(err)
	}
}

func chainEventLeaseCreated() chain.Event {
	return chain.Event{Height: 3, Message: &markettypes.EventLeaseCreated{LeaseId: 1, JobId: 1, Provider: operator, Gpus: 0}}
}

// A trainer whose sidecar died (its group recorded in the lease's logs) is
// killed before the lease is trained again; a recorded group that is not
// that trainer (its id reused) is left alone.
func TestStopLeftoverKillsOnlyTheRecordedTrainer(t *testing.T) {
	root := t.TempDir()
	job := runtime.Job{Market: tinyTransformerJob(8, 4), LeaseID: 1,
		OutputDir: filepath.Join(root, "output"), DataDir: filepath.Join(root, "data"), LogDir: filepath.Join(root, "logs")}
	rt := &runtime.ExactTorch{Process: runtime.Process{Command: []string{"/bin/sh", "-c", "sleep 300 & sleep 300"}}}
	h, err := rt.Start(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(context.Background()) }) //nolint:errcheck // stopped already when the test passes
	if err := runtime.StopLeftover(job.LogDir); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the recorded trainer still runs")
	}
	if _, err := os.Stat(filepath.Join(job.LogDir, runtime.TrainerGroupFileName)); !os.IsNotExist(err) {
		t.Fatalf("the group record is left: %v", err)
	}
	if err := runtime.StopLeftover(job.LogDir); err != nil {
		t.Fatalf("nothing recorded: %v", err)
	}

	// Another process group under the recorded id, started at another time.
	other := exec.Command("sleep", "300")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }() //nolint:errcheck // cleanup
	rec := strconv.Itoa(other.Process.Pid) + " 1\n"
	if err := os.WriteFile(filepath.Join(job.LogDir, runtime.TrainerGroupFileName), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runtime.StopLeftover(job.LogDir); err != nil {
		t.Fatal(err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process that is not the recorded trainer was killed: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(job.LogDir, runtime.StderrLogName)); err == nil && strings.TrimSpace(string(b)) != "" {
		t.Logf("trainer stderr: %s", b)
	}
}
