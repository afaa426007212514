//go:build unix

package runtime

import (
	"context"
	"fmt"
	"time"
)

// ExactTorch runs the exact transformer workload (kinds reference and
// transformer) with its PyTorch implementation, pkg/exact/torch/train.py, as
// a Process: the operator's command with the trainer contract's environment
// (DEPIN_EXACT_CONFIG holding the job's configuration, CUDA_VISIBLE_DEVICES
// the leased GPUs), logs in Job.LogDir, SIGTERM on Stop. train.py is
// bit-identical to the Go trainer (Reference), so its checkpoints commit the
// same roots and pass the same checks; it trains on CUDA when torch sees the
// leased GPUs, data-parallel over DEPIN_TORCH_PROCS processes. Its process
// group is recorded in Job.LogDir (TrainerGroupFileName) for StopLeftover.
type ExactTorch struct {
	Process
}

// Name implements Runtime.
func (*ExactTorch) Name() string { return "exact-torch" }

// Start implements Runtime.
func (t *ExactTorch) Start(ctx context.Context, job Job) (Handle, error) {
	if kind := job.Market.Spec.Workload.Kind; !kind.Adjudicable() {
		return nil, fmt.Errorf("runtime exact-torch: job %d is a %s workload", job.Market.Id, kind)
	}
	if _, err := job.Market.Spec.ExactConfig(); err != nil {
		return nil, fmt.Errorf("runtime exact-torch: job %d: %w", job.Market.Id, err)
	}
	h, err := t.Process.Start(ctx, job)
	if err != nil {
		return nil, err
	}
	// Recorded so that a sidecar restarted after a crash stops this trainer
	// before it trains the lease again (StopLeftover).
	if ph, ok := h.(*processHandle); ok {
		if err := recordGroup(job.LogDir, ph.pgid); err != nil {
			select {
			case <-h.Done(): // it ended already: Wait says why
				return h, nil
			default:
			}
			stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			h.Stop(stop) //nolint:errcheck // the error that matters is the record's
			return nil, fmt.Errorf("runtime exact-torch: recording the trainer's process group: %w", err)
		}
	}
	return h, nil
}
