package tiles

import (
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// zeroSource reads every row of every input as zeros, so data-dependent
// needs (embed's token row) resolve to some row: every row has the same
// shape, so the bound holds for all of them.
type zeroSource []*exact.TensorSpec

func (z zeroSource) Row(input, _ int) []int64 { return make([]int64, z[input].Cols()) }

// recordProofBytes bounds one record opening: the record and its proof.
func (s *Step) recordProofBytes() int64 {
	return int64(len(RecordBytes(0, exact.KindEmbedGradTok, merkle.Hash{}))) + 32*int64(merkle.MaxProofDepth(uint64(s.Len())))
}

// ElementBound bounds the cost of EvalElement on entry e (any element,
// any alignment): for every input rectangle an element reads, at most
// rows·(⌈cols·size/4096⌉ + 1) chunks (capped by the tensor's chunks), each
// 4096 bytes with a full-depth proof; plus one record opening per input.
// It is computed from the graph alone.
func (s *Step) ElementBound(e int) Cost {
	op := s.Entries[e].Op
	specs := make(zeroSource, len(op.Inputs))
	for i, id := range op.Inputs {
		specs[i] = &s.Graph.Tensors[id]
	}
	ns, err := s.Graph.RegionNeeds(op, 0, 0, 1, specs)
	if err != nil {
		panic(err) // element 0 of a graph operator always exists
	}
	var c Cost
	for _, n := range ns {
		spec := specs[n.Input]
		rows, cols := int64(n.Row1-n.Row0), int64(n.Col1-n.Col0)
		chunks := min(rows*((cols*int64(spec.DType.Size())+exact.ChunkSize-1)/exact.ChunkSize+1), int64(spec.Chunks()))
		depth := int64(merkle.MaxProofDepth(uint64(spec.Chunks())))
		c.Bytes += chunks * (exact.ChunkSize + 32*depth)
		c.Hashes += chunks * (chunkHashes(exact.ChunkSize) + depth)
		c.Elems += rows * cols
	}
	rp := s.recordProofBytes()
	c.Bytes += int64(len(op.Inputs)) * rp
	c.Hashes += int64(len(op.Inputs)) * (rp/32 + 2)
	return c
}

// ChunkRevealBound bounds revealing one chunk of entry e's output with its
// proof against the party's output root.
func (s *Step) ChunkRevealBound(e int) Cost {
	depth := int64(merkle.MaxProofDepth(s.OutputChunks(e)))
	return Cost{Bytes: exact.ChunkSize + 32*depth, Hashes: chunkHashes(exact.ChunkSize) + depth}
}

// NodeRevealCost is one descent move: two child hashes, one node hash.
var NodeRevealCost = Cost{Bytes: 64, Hashes: 2}

// Worst is the most expensive single move of phases 2 and 3 of a step.
type Worst struct {
	// Entry and Kind name the operator whose element move is the largest.
	Entry int
	Kind  string
	Cost  Cost
	// Rounds are the descent moves of phase 2 (records) and the largest of
	// phase 3 (an output's chunks).
	RecordRounds, ChunkRounds int
}

// WorstCase scans every entry of the step (no execution) for the largest
// element move and the deepest descents. Loads and the store move one
// chunk with two proofs, far below any operator's element move, and are
// covered by ChunkRevealBound twice over.
func (s *Step) WorstCase(gas func(Cost) uint64) Worst {
	w := Worst{RecordRounds: merkle.MaxProofDepth(uint64(s.Len()))}
	var best uint64
	for e, en := range s.Entries {
		w.ChunkRounds = max(w.ChunkRounds, merkle.MaxProofDepth(s.OutputChunks(e)))
		var c Cost
		if en.Op != nil {
			c = s.ElementBound(e)
		} else {
			c = s.ChunkRevealBound(e)
			c.add(s.ChunkRevealBound(e))
			c.Bytes += 2 * s.recordProofBytes()
		}
		if g := gas(c); g > best {
			best, w.Entry, w.Kind, w.Cost = g, e, en.Kind, c
		}
	}
	return w
}
