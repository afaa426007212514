package disputes

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/pkg/traindata"
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
	exec      StepExec
}

// StepExec is how the operator executes a step of a job: the executor and the
// batch (as the job's data gives it) the step runs with. Honest returns
// exact.Executor{} and the batch; tests make cheaters and lying verifiers
// with others (Hooks.StepExec).
type StepExec func(step uint64, batch [][]byte) (exact.Executor, [][]byte)

// Honest is the StepExec of an honest operator.
func Honest(_ uint64, batch [][]byte) (exact.Executor, [][]byte) { return exact.Executor{}, batch }

// Reexecute trains job's exact workload from start (the state at startStep) to
// endStep with the same package the chain's referee uses, on data: the stream the
// referee proves the worker's steps against (Role.trainingData: for a job that trains
// in rounds, the worker's shards of the range's round, which is one round; for a
// dataset-backed job, the data pieces of the worker's shards), each step as exec runs
// it (nil: Honest).
func Reexecute(job markettypes.Job, data traindata.Stream, start *exact.State, startStep, endStep uint64, exec StepExec) (*Execution, error) {
	if endStep < startStep {
		return nil, fmt.Errorf("dispute: range %d..%d is empty", startStep, endStep)
	}
	if exec == nil {
		exec = Honest
	}
	e := &Execution{start: start, startStep: startStep, data: data.Bytes, seed: job.Seed, exec: exec}
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
	return runSteps(e.start, step, e.data, e.seed, e.exec, onRoot)
}

// runSteps trains s up to step, each step as exec runs it, showing each new
// root to onRoot (if set).
func runSteps(s *exact.State, step uint64, data, seed []byte, exec StepExec, onRoot func(merkle.Hash)) (*exact.State, error) {
	for s.Step < step {
		batch, err := exact.StepBatch(s.Config, seed, s.Step, data)
		if err != nil {
			return nil, err
		}
		ex, batch := exec(s.Step, batch)
		var info exact.StepInfo
		if s, info, err = ex.Step(s, batch); err != nil {
			return nil, err
		}
		if onRoot != nil {
			onRoot(info.Root)
		}
	}
	return s, nil
}

// StateAt rebuilds the encoded state at step by training from the range's
// start again: states are not kept, as only the one-step proof needs one.
func (e *Execution) StateAt(step uint64) ([]byte, error) {
	s, err := e.stateAt(step)
	if err != nil {
		return nil, err
	}
	return s.Encode(), nil
}

// stateAt is StateAt, decoded.
func (e *Execution) stateAt(step uint64) (*exact.State, error) {
	if step < e.startStep || step > e.Trace.End() {
		return nil, fmt.Errorf("dispute: step %d is outside %d..%d", step, e.startStep, e.Trace.End())
	}
	return e.train(step, nil)
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
