package leases

import (
	"errors"
	"fmt"
	"os/exec"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/rounds"
	"github.com/depinchain/depinchain/provider/runtime"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// newExactTorch is the PyTorch trainer of the exact workload the operator
// configured (runtimes.exact_torch), or nil for the Go trainer. A program
// that is not there fails the start, not every lease later.
func newExactTorch(cfg config.Runtimes) (*runtime.ExactTorch, error) {
	if !cfg.Reference || !cfg.UsesExactTorch() {
		return nil, nil
	}
	if _, err := exec.LookPath(cfg.ExactTorch[0]); err != nil {
		return nil, fmt.Errorf("runtimes.exact_torch: %w", err)
	}
	return &runtime.ExactTorch{Process: runtime.Process{Command: cfg.ExactTorch, Env: cfg.ExactTorchEnv}}, nil
}

// exactTrainer is the runtime of an exact workload (kinds reference and
// transformer): the PyTorch trainer when the operator configured one, else
// the Go trainer. Both write the same checkpoints bit for bit.
func (r runtimes) exactTrainer(kind markettypes.WorkloadKind) (runtime.Runtime, error) {
	switch {
	case r.reference == nil:
		return nil, errors.New(kind.String() + " workloads are not enabled (runtimes.reference)")
	case r.exactTorch != nil:
		return r.exactTorch, nil
	default:
		return r.reference, nil
	}
}

// exactConfigOf is the exact configuration job trains, nil for a container
// job: it tells the checkpoint watcher that h_end is the state's root.
func exactConfigOf(job markettypes.Job) *exact.Config {
	c, err := job.Spec.ExactConfig()
	if err != nil {
		return nil
	}
	return &c
}

// roundTrainer is the runtime of a training-together (sync) job: the exact trainer
// (exactTrainer: the PyTorch trainer when the operator configured one, else the Go
// trainer); both implement the trainer contract's round runs (rounds.Trainer), which the
// rounds role drives round by round.
func (r runtimes) roundTrainer(job markettypes.Job) (runtime.Runtime, error) {
	if err := rounds.Supported(job); err != nil {
		return nil, err
	}
	rt, err := r.exactTrainer(job.Spec.Workload.Kind)
	if err != nil {
		return nil, err
	}
	if _, ok := rt.(rounds.Trainer); !ok {
		return nil, fmt.Errorf("training-together (sync) jobs: runtime %s does not run rounds", rt.Name())
	}
	return rt, nil
}
