package exact

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// OpRecord commits to one operator of a step: its position, kind, the
// roots of its inputs (in order) and the root of its output (Tensor.Root).
type OpRecord struct {
	Index      int
	Kind       string
	InputRoots []merkle.Hash
	OutputRoot merkle.Hash
}

// StepRecords runs one step of s and returns the record of every operator
// in graph order, with the new state. Input roots of the graph's inputs
// (step counter, windows, state tensors) are the roots of their canonical
// encodings, like every other tensor's.
func (e *Executor) StepRecords(s *State, batch [][]byte) ([]OpRecord, *State, error) {
	g := TrainGraph(s.Config)
	inputs, err := StepInputs(g, s, batch)
	if err != nil {
		return nil, nil, err
	}
	roots := make([]merkle.Hash, len(g.Tensors))
	known := make([]bool, len(g.Tensors))
	for id, t := range inputs {
		roots[id], known[id] = (&Tensor{Spec: &g.Tensors[id], Data: t.Data}).Root(), true
	}
	var recs []OpRecord
	obs := e.Observer
	ex := *e
	ex.Observer = func(op *Op, out *Tensor) {
		r := OpRecord{Index: op.Index, Kind: op.Kind, OutputRoot: out.Root()}
		for _, in := range op.Inputs {
			if !known[in] {
				panic(fmt.Sprintf("exact: op %d reads %q before it is written", op.Index, g.Tensors[in].Name))
			}
			r.InputRoots = append(r.InputRoots, roots[in])
		}
		roots[op.Output], known[op.Output] = r.OutputRoot, true
		recs = append(recs, r)
		if obs != nil {
			obs(op, out)
		}
	}
	next, _, err := ex.Step(s, batch)
	if err != nil {
		return nil, nil, err
	}
	return recs, next, nil
}

// ChunkProof returns chunk index of t's canonical encoding and its
// inclusion proof against t.Root().
func (t *Tensor) ChunkProof(index int) ([]byte, []merkle.Hash, error) {
	enc := t.Encode()
	n := t.Spec.Chunks()
	if index < 0 || index >= n {
		return nil, nil, fmt.Errorf("exact: chunk %d of %q out of range [0, %d)", index, t.Spec.Name, n)
	}
	leaves := merkle.LeafHashesOfBytes(enc, ChunkSize)
	proof, err := merkle.InclusionProof(leaves, uint64(index))
	if err != nil {
		return nil, nil, err
	}
	lo := index * ChunkSize
	return enc[lo:min(lo+ChunkSize, len(enc))], proof, nil
}
