package disputes

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Execution is an honest re-execution of a range of a reference job.
type Execution struct {
	// Trace is h_start..h_end.
	Trace trace.Trace
	// End is the state at the range's end.
	End *reftrainer.State

	start     *reftrainer.State
	startStep uint64
	data      []byte
	seed      []byte
}

// Reexecute trains job's reference workload from start (the state at
// startStep) to endStep with the same package the chain's referee uses.
func Reexecute(job markettypes.Job, start *reftrainer.State, startStep, endStep uint64) (*Execution, error) {
	if endStep < startStep {
		return nil, fmt.Errorf("dispute: range %d..%d is empty", startStep, endStep)
	}
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		return nil, err
	}
	hashes := make([]merkle.Hash, 0, endStep-startStep+1)
	hashes = append(hashes, start.Hash())
	end, err := reftrainer.Run(start, data.Bytes, job.Seed, endStep-startStep, func(_ uint64, h [32]byte, _ reftrainer.StepMetrics) error {
		hashes = append(hashes, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Execution{
		Trace: trace.New(startStep, hashes), End: end,
		start: start, startStep: startStep, data: data.Bytes, seed: job.Seed,
	}, nil
}

// StateAt rebuilds the encoded state at step by training from the range's
// start again: states are not kept, as only the one-step proof needs one.
func (e *Execution) StateAt(step uint64) ([]byte, error) {
	if step < e.startStep || step > e.Trace.End() {
		return nil, fmt.Errorf("dispute: step %d is outside %d..%d", step, e.startStep, e.Trace.End())
	}
	s, err := reftrainer.Run(e.start, e.data, e.seed, step-e.startStep, nil)
	if err != nil {
		return nil, err
	}
	return s.Encode(), nil
}

// Evidence returns the execution as a challenger's evidence: what it
// challenges with and plays the game from.
func (e *Execution) Evidence() dispute.Evidence {
	return dispute.Evidence{Trace: e.Trace, StateAt: e.StateAt}
}

// InitialState is the reference state of job at step 0.
func InitialState(job markettypes.Job) (*reftrainer.State, error) {
	return reftrainer.Init(verifytypes.ReferenceConfig(job.Seed))
}
