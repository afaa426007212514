package tiles

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// Commitment is what one party commits to for a disputed step: the output
// root of every entry, the record leaves and their root.
type Commitment struct {
	Roots  []merkle.Hash
	Leaves []merkle.Hash
	Root   merkle.Hash
}

// NewCommitment builds the record leaves and root from per-entry output
// roots.
func (s *Step) NewCommitment(roots []merkle.Hash) (*Commitment, error) {
	if len(roots) != len(s.Entries) {
		return nil, fmt.Errorf("tiles: %d roots for %d entries", len(roots), len(s.Entries))
	}
	c := &Commitment{Roots: roots, Leaves: make([]merkle.Hash, len(roots))}
	for i, r := range roots {
		c.Leaves[i] = RecordLeaf(i, s.Entries[i].Kind, r)
	}
	c.Root = merkle.RootFromLeafHashes(c.Leaves)
	return c, nil
}

// Proof is the inclusion proof of record e.
func (c *Commitment) Proof(e int) []merkle.Hash {
	p, err := merkle.InclusionProof(c.Leaves, uint64(e))
	if err != nil {
		panic(err) // e is an entry index of this commitment
	}
	return p
}

// Children returns the children of node [lo, hi) of the record tree.
func (c *Commitment) Children(lo, hi uint64) (merkle.Hash, merkle.Hash) {
	return Children(c.Leaves, lo, hi)
}

// Commit executes step pre → next on batch and returns the honest
// commitment and the next state. Hashing every operator's output happens
// only here, for the disputed step.
func (s *Step) Commit(ex *exact.Executor, pre *exact.State, batch [][]byte) (*Commitment, *exact.State, error) {
	if pre.Config.Hyper() != s.Config.Hyper() {
		return nil, nil, fmt.Errorf("tiles: pre-state config differs from the step's")
	}
	in, err := exact.StepInputs(s.Graph, pre, batch)
	if err != nil {
		return nil, nil, err
	}
	roots := make([]merkle.Hash, len(s.Entries))
	for e, en := range s.Entries {
		if en.Kind == KindLoad {
			roots[e] = (&exact.Tensor{Spec: &s.Graph.Tensors[en.Tensor], Data: in[en.Tensor].Data}).Root()
		}
	}
	run := *ex
	run.Observer = func(op *exact.Op, out *exact.Tensor) {
		if ex.Observer != nil {
			ex.Observer(op, out)
		}
		roots[s.writer[op.Output]] = out.Root()
	}
	next, info, err := run.Step(pre, batch)
	if err != nil {
		return nil, nil, err
	}
	roots[s.Store()] = info.Root
	c, err := s.NewCommitment(roots)
	return c, next, err
}

// Tensors re-executes the step up to entry e and returns the tensors a
// party needs to play phase 3 on it: e's inputs (by input position) and e's
// output. For a load, ins is nil; for the store, out is nil (use the next
// state's Encode) and ins are the next state tensors and the loss.
func (s *Step) Tensors(ex *exact.Executor, pre *exact.State, batch [][]byte, e int) (ins []*exact.Tensor, out *exact.Tensor, err error) {
	in, err := exact.StepInputs(s.Graph, pre, batch)
	if err != nil {
		return nil, nil, err
	}
	en := s.Entries[e]
	if en.Kind == KindLoad {
		return nil, &exact.Tensor{Spec: &s.Graph.Tensors[en.Tensor], Data: in[en.Tensor].Data}, nil
	}
	want := map[int]bool{}
	var ids []int
	if en.Op != nil {
		ids = append(ids, en.Op.Inputs...)
		ids = append(ids, en.Op.Output)
	} else {
		ids = append(append(ids, s.outputs...), s.loss)
	}
	for _, id := range ids {
		want[id] = true
	}
	run := exact.Executor{Workers: ex.Workers, Observer: ex.Observer, Keep: want}
	env, err := run.Run(s.Graph, in)
	if err != nil {
		return nil, nil, err
	}
	if en.Op != nil {
		for _, id := range en.Op.Inputs {
			ins = append(ins, env[id])
		}
		return ins, env[en.Op.Output], nil
	}
	for _, id := range ids {
		ins = append(ins, env[id])
	}
	return ins, nil, nil
}
