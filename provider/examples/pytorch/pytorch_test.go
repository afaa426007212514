// Package pytorch_test runs the example PyTorch trainer (train.py) through
// the process runtime and checks it against the trainer contract.
package pytorch_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// python is Debian's interpreter, for which apt-get installs python3-torch;
// a python3 earlier on PATH (pyenv) would not see it.
const python = "/usr/bin/python3"

func requireTorch(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("example PyTorch trainer: %s cannot import torch (%v: %s); apt-get install python3-torch to run this test",
			python, err, bytes.TrimSpace(out))
	}
}

func exampleJob(t *testing.T, leaseID, startStep uint64, resumeFrom string) runtime.Job {
	root := t.TempDir()
	return runtime.Job{
		Market: markettypes.Job{
			Id:   21,
			Seed: []byte("example pytorch job seed"),
			Spec: markettypes.JobSpec{
				Workload:           markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER},
				TotalSteps:         12,
				CheckpointInterval: 5,
			},
		},
		LeaseID:    leaseID,
		StartStep:  startStep,
		ResumeFrom: resumeFrom,
		OutputDir:  filepath.Join(root, "output"),
		DataDir:    filepath.Join(root, "data"),
		LogDir:     filepath.Join(root, "logs"),
	}
}

// run trains job with train.py through the process runtime and returns its
// validated checkpoints.
func run(t *testing.T, job runtime.Job) []trainer.Checkpoint {
	t.Helper()
	script, err := filepath.Abs("train.py")
	if err != nil {
		t.Fatal(err)
	}
	rt := &runtime.Process{Command: []string{python, script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}}
	h, err := rt.Start(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(2 * time.Minute):
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Stop(ctx)
		t.Fatal("train.py ran for more than 2 minutes")
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	w, err := trainer.NewWatcher(job.Env())
	if err != nil {
		t.Fatal(err)
	}
	cps, err := w.Poll()
	if err != nil {
		t.Fatal(err)
	}
	if !w.Finished() {
		t.Fatalf("checkpoints end before step %d: %v", job.Market.Spec.TotalSteps, cps)
	}
	return cps
}

func TestExamplePyTorchTrainer(t *testing.T) {
	requireTorch(t)
	first := exampleJob(t, 1, 0, "")
	cps := run(t, first)
	if len(cps) != 3 || cps[0].EndStep() != 5 || cps[1].EndStep() != 10 || cps[2].EndStep() != 12 {
		t.Fatalf("checkpoints %v, want step-5, step-10 and step-12", cps)
	}
	metrics, err := trainer.ReadMetrics(first.OutputDir)
	if err != nil || len(metrics) != 12 || metrics[0].Step != 1 || metrics[11].Step != 12 || metrics[11].Loss <= 0 {
		t.Fatalf("metrics log: %v, %v", metrics, err)
	}
	if _, err := os.Stat(filepath.Join(first.OutputDir, trainer.DoneMarkerName)); err != nil {
		t.Fatal("no DONE marker")
	}

	// Resumed from step 5 by another lease, it reproduces the same states.
	resumed := exampleJob(t, 2, 5, trainer.CheckpointDir(first.OutputDir, 5))
	again := run(t, resumed)
	if len(again) != 2 {
		t.Fatalf("resumed checkpoints %v", again)
	}
	for i, cp := range again {
		if want := cps[i+1]; cp.EndStep() != want.EndStep() || cp.Trace.Root() != want.Trace.Root() {
			t.Fatalf("resumed step-%d: trace root %s, the uninterrupted run's is %s", cp.EndStep(), cp.Trace.Root(), want.Trace.Root())
		}
	}
}
