package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Progress is one step of a reference run, for logs and metrics.
type Progress struct {
	LeaseID    uint64
	Step       uint64
	TotalSteps uint64
	// Loss is the step's training loss in nats.
	Loss float64
}

// Reference runs the chain's reference workload in the sidecar's process,
// for jobs of kind WORKLOAD_KIND_REFERENCE: the same deterministic trainer
// the chain's referee re-executes, on the job's training data. It needs no
// GPU and ignores Job.LogDir and Job.GPUs.
type Reference struct {
	// Progress, if set, is called after every step, from the run's
	// goroutine.
	Progress func(Progress)
}

// Name implements Runtime.
func (*Reference) Name() string { return "reference" }

// Start implements Runtime. The run stops between two steps when stopped.
func (r *Reference) Start(_ context.Context, job Job) (Handle, error) {
	if kind := job.Market.Spec.Workload.Kind; kind != markettypes.WORKLOAD_KIND_REFERENCE {
		return nil, fmt.Errorf("runtime reference: job %d is a %s workload", job.Market.Id, kind)
	}
	env := job.Env()
	if err := env.Validate(); err != nil {
		return nil, err
	}
	data, err := referenceData(job)
	if err != nil {
		return nil, err
	}
	var onStep func(trainer.StepMetric)
	if r.Progress != nil {
		onStep = func(m trainer.StepMetric) {
			r.Progress(Progress{LeaseID: job.LeaseID, Step: m.Step, TotalSteps: env.TotalSteps, Loss: m.Loss})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &referenceHandle{run: newRun(), cancel: cancel}
	go func() {
		err := trainer.RunReference(ctx, env, data, onStep)
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: reference run of lease %d", ErrStopped, job.LeaseID)
		}
		h.finish(err)
	}()
	return h, nil
}

// referenceData is the training stream of a reference run: the built-in
// corpus for a job without a dataset, else what the leases role put in the
// data folder (the worker's shard pieces), read as every trainer reads
// DEPIN_DATA_DIR (exact.ReadStreamDir).
func referenceData(job Job) ([]byte, error) {
	if job.Market.Spec.DatasetId == "" {
		data, err := verifytypes.JobTrainingData(job.Market)
		return data.Bytes, err
	}
	data, err := exact.ReadStreamDir(job.DataDir)
	if err != nil {
		return nil, fmt.Errorf("runtime reference: reading the training data of job %d: %w", job.Market.Id, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("runtime reference: job %d trains on dataset %q and its data folder %s is empty", job.Market.Id, job.Market.Spec.DatasetId, job.DataDir)
	}
	return data, nil
}

type referenceHandle struct {
	*run
	cancel context.CancelFunc
}

// Stop implements Handle. The run ends after the step in progress, which
// takes milliseconds, so ctx only bounds the wait.
func (h *referenceHandle) Stop(ctx context.Context) error {
	h.cancel()
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
