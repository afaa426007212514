package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/depinchain/depinchain/pkg/exact"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

func TestReferenceMatchesDirectRun(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_REFERENCE, 10, 4)
	var steps []uint64
	rt := &runtime.Reference{Progress: func(p runtime.Progress) {
		if p.LeaseID != 12 || p.TotalSteps != 10 || p.Loss <= 0 {
			t.Errorf("progress %+v", p)
		}
		steps = append(steps, p.Step)
	}}
	h, err := rt.Start(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	cps := checkCheckpoints(t, job, directTrace(t, 10))
	if len(cps) != 3 || cps[0].EndStep() != 4 || cps[1].EndStep() != 8 || cps[2].EndStep() != 10 {
		t.Fatalf("checkpoints %v, want step-4, step-8, step-10", cps)
	}
	if len(steps) != 10 || steps[0] != 1 || steps[9] != 10 {
		t.Fatalf("progress reported steps %v", steps)
	}
	metrics, err := trainer.ReadMetrics(job.OutputDir)
	if err != nil || len(metrics) != 10 || metrics[9].Step != 10 {
		t.Fatalf("metrics log: %v, %v", metrics, err)
	}
	if _, err := os.Stat(filepath.Join(job.OutputDir, trainer.DoneMarkerName)); err != nil {
		t.Fatal("no DONE marker")
	}
	if err := trainer.CheckRun(job.Env(), trainer.Exit{}); err != nil {
		t.Fatal(err)
	}
}

func TestReferenceResumesBitExactly(t *testing.T) {
	full := newJob(t, markettypes.WORKLOAD_KIND_REFERENCE, 10, 3)
	rt := &runtime.Reference{}
	h, err := rt.Start(context.Background(), full)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}

	// A second lease resumes from the full run's step-6 checkpoint.
	resumed := newJob(t, markettypes.WORKLOAD_KIND_REFERENCE, 10, 3)
	resumed.LeaseID, resumed.StartStep = 13, 6
	resumed.ResumeFrom = trainer.CheckpointDir(full.OutputDir, 6)
	h, err = rt.Start(context.Background(), resumed)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	cps := checkCheckpoints(t, resumed, directTrace(t, 10))
	if len(cps) != 2 || cps[0].StartStep() != 6 || cps[0].EndStep() != 9 || cps[1].EndStep() != 10 {
		t.Fatalf("resumed checkpoints %v, want step-9 and step-10", cps)
	}
	for _, step := range []uint64{9, 10} {
		for _, file := range []string{trainer.StateFileName, trainer.TraceFileName} {
			want, err := os.ReadFile(filepath.Join(trainer.CheckpointDir(full.OutputDir, step), file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(trainer.CheckpointDir(resumed.OutputDir, step), file))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("step-%d/%s differs from the uninterrupted run's", step, file)
			}
		}
	}
}

func TestReferenceRejectsForeignResumeState(t *testing.T) {
	other := newJob(t, markettypes.WORKLOAD_KIND_TRANSFORMER, 4, 2)
	other.Market.Spec.Workload.Transformer = markettypes.NewTransformerConfig(exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 2, DFF: 32, Context: 16, Vocab: exact.Vocab},
		Train: exact.TrainConfig{Batch: 2, Optimizer: exact.OptimizerAdamW, LR: 0.001},
	})
	rt := &runtime.Reference{}
	h, err := rt.Start(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	job := newJob(t, markettypes.WORKLOAD_KIND_REFERENCE, 4, 2)
	job.StartStep, job.ResumeFrom = 2, trainer.CheckpointDir(other.OutputDir, 2)
	h, err = rt.Start(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); !errors.Is(err, trainer.ErrInvalidCheckpoint) {
		t.Fatalf("resuming from a model of another configuration: %v", err)
	}
}

func TestReferenceStop(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_REFERENCE, 1_000_000, 5)
	reached := make(chan struct{})
	rt := &runtime.Reference{Progress: func(p runtime.Progress) {
		if p.Step == 12 {
			close(reached)
		}
	}}
	h, err := rt.Start(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	<-reached
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); !errors.Is(err, runtime.ErrStopped) {
		t.Fatalf("Wait after Stop: %v", err)
	}
	// The checkpoints completed before the stop are valid.
	w, err := trainer.NewWatcher(job.Env())
	if err != nil {
		t.Fatal(err)
	}
	cps, err := w.Poll()
	if err != nil || len(cps) < 2 || cps[1].EndStep() != 10 {
		t.Fatalf("checkpoints after stopping: %v, %v", cps, err)
	}
}

func TestReferenceRefusesOtherWorkloads(t *testing.T) {
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 4, 2)
	if _, err := (&runtime.Reference{}).Start(context.Background(), job); err == nil {
		t.Fatal("started a container workload in process")
	}
	job = newJob(t, markettypes.WORKLOAD_KIND_REFERENCE, 4, 2)
	job.Market.Spec.DatasetId = "ds-1"
	if _, err := (&runtime.Reference{}).Start(context.Background(), job); err == nil {
		t.Fatal("started a dataset job the referee cannot check")
	}
}
