package disputes

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Execution is an honest re-execution of a range of an exact (transformer) job.
type Execution struct {
	// Trace is h_start..h_end.
	Trace trace.Trace
	// End is the state at the range's end.
	End *exact.State

	start     *exact.State
	startStep uint64
	data      []byte
	seed      []byte
}

// Reexecute trains job's exact workload from start (the state at startStep)
// to endStep with the same package the chain's referee uses.
func Reexecute(job markettypes.Job, start *exact.State, startStep, endStep uint64) (*Execution, error) {
	if endStep < startStep {
		return nil, fmt.Errorf("dispute: range %d..%d is empty", startStep, endStep)
	}
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		return nil, err
	}
	e := &Execution{start: start, startStep: startStep, data: data.Bytes, seed: job.Seed}
	hashes := make([]merkle.Hash, 0, endStep-startStep+1)
	hashes = append(hashes, start.Root())
	end, err := e.train(endStep, func(root merkle.Hash) { hashes = append(hashes, root) })
	if err != nil {
		return nil, err
	}
	e.Trace, e.End = trace.New(startStep, hashes), end
	return e, nil
}

// train steps from the range's start to step, showing each new root to onRoot.
func (e *Execution) train(step uint64, onRoot func(merkle.Hash)) (*exact.State, error) {
	return exact.Run(e.start, e.data, e.seed, step-e.start.Step, func(_ uint64, info exact.StepInfo) error {
		if onRoot != nil {
			onRoot(info.Root)
		}
		return nil
	})
}

// StateAt rebuilds the encoded state at step by training from the range's
// start again: states are not kept, as only the one-step proof needs one.
func (e *Execution) StateAt(step uint64) ([]byte, error) {
	if step < e.startStep || step > e.Trace.End() {
		return nil, fmt.Errorf("dispute: step %d is outside %d..%d", step, e.startStep, e.Trace.End())
	}
	s, err := e.train(step, nil)
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

// InitialState is job's exact state at step 0.
func InitialState(job markettypes.Job) (*exact.State, error) {
	return verifytypes.InitialState(job)
}
