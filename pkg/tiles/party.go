package tiles

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// Party is one side's view of a disputed step: its execution, its
// commitment, and the moves it can make in phases 2 and 3. pkg/dispute
// turns these into messages; tests give a Party an Exec.Observer that
// tampers with an output to play a cheater.
type Party struct {
	Step  *Step
	Pre   *exact.State
	Batch [][]byte
	Exec  exact.Executor
	C     *Commitment
	Next  *exact.State

	entry     int
	ins       []*exact.Tensor
	out       *exact.Tensor
	outLeaves []merkle.Hash
	outBytes  []byte // the store's: the next state file
}

// NewParty executes the step and commits.
func NewParty(step *Step, ex exact.Executor, pre *exact.State, batch [][]byte) (*Party, error) {
	c, next, err := step.Commit(&ex, pre, batch)
	if err != nil {
		return nil, err
	}
	return &Party{Step: step, Pre: pre, Batch: batch, Exec: ex, C: c, Next: next, entry: -1}, nil
}

// load re-executes the step for entry e's tensors (once per entry).
func (p *Party) load(e int) error {
	if p.entry == e {
		return nil
	}
	ins, out, err := p.Step.Tensors(&p.Exec, p.Pre, p.Batch, e)
	if err != nil {
		return err
	}
	p.entry, p.ins, p.out, p.outBytes = e, ins, out, nil
	if out != nil {
		p.outLeaves = merkle.LeafHashesOfBytes(out.Encode(), exact.ChunkSize)
	} else {
		p.outBytes = p.Next.Encode()
		p.outLeaves = merkle.LeafHashesOfBytes(p.outBytes, exact.ChunkSize)
	}
	return nil
}

// OutputChildren are the children of node [lo, hi) of entry e's output
// chunk tree.
func (p *Party) OutputChildren(e int, lo, hi uint64) (merkle.Hash, merkle.Hash, error) {
	if err := p.load(e); err != nil {
		return merkle.Hash{}, merkle.Hash{}, err
	}
	l, r := Children(p.outLeaves, lo, hi)
	return l, r, nil
}

// OutputChunk is chunk c of entry e's output with its proof.
func (p *Party) OutputChunk(e, c int) ([]byte, []merkle.Hash, error) {
	if err := p.load(e); err != nil {
		return nil, nil, err
	}
	if p.out != nil {
		return p.out.ChunkProof(c)
	}
	proof, err := merkle.InclusionProof(p.outLeaves, uint64(c))
	if err != nil {
		return nil, nil, err
	}
	lo := c * exact.ChunkSize
	return p.outBytes[lo:min(lo+exact.ChunkSize, len(p.outBytes))], proof, nil
}

// FirstDifference is the first element of chunk c of entry e's output
// (index within the chunk) where other (the opponent's revealed chunk)
// differs from this party's, or -1.
func (p *Party) FirstDifference(e, c int, other []byte) (int, error) {
	mine, _, err := p.OutputChunk(e, c)
	if err != nil {
		return -1, err
	}
	sz := p.Step.Spec(e).DType.Size()
	for i := 0; i*sz < len(mine); i++ {
		if (i+1)*sz > len(other) || string(mine[i*sz:(i+1)*sz]) != string(other[i*sz:(i+1)*sz]) {
			return i, nil
		}
	}
	return -1, nil
}

// RecordOpening is one record with its proof against a record root: how
// an input's root is shown to be agreed.
type RecordOpening struct {
	Entry int
	Root  merkle.Hash
	Proof []merkle.Hash
}

// RecordOpening opens record e of this party's commitment.
func (p *Party) RecordOpening(e int) RecordOpening {
	return RecordOpening{Entry: e, Root: p.C.Roots[e], Proof: p.C.Proof(e)}
}

// InputOpenings opens the records of entry e's inputs (its writers).
func (p *Party) InputOpenings(e int) []RecordOpening {
	var out []RecordOpening
	for _, w := range p.Step.InputEntries(e) {
		out = append(out, p.RecordOpening(w))
	}
	return out
}

// ElementOpenings are the input chunks element elem (of e's whole output)
// reads, from this party's tensors.
func (p *Party) ElementOpenings(e, elem int) ([]Opening, error) {
	if err := p.load(e); err != nil {
		return nil, err
	}
	return p.Step.ElementOpenings(e, elem, p.ins)
}

// StoreInputChunk opens chunk c of store input i (a next state tensor or
// the loss).
func (p *Party) StoreInputChunk(i, c int) (Opening, error) {
	if err := p.load(p.Step.Store()); err != nil {
		return Opening{}, err
	}
	if i < 0 || i >= len(p.ins) {
		return Opening{}, fmt.Errorf("tiles: store input %d out of range", i)
	}
	data, proof, err := p.ins[i].ChunkProof(c)
	return Opening{Input: i, Chunk: c, Data: data, Proof: proof}, err
}

// VerifyRecord checks a record opening against a record root of a step of
// size entries and returns the record's leaf.
func (s *Step) VerifyRecord(root merkle.Hash, o RecordOpening) (Cost, error) {
	if o.Entry < 0 || o.Entry >= s.Len() {
		return Cost{}, fmt.Errorf("tiles: record %d out of range", o.Entry)
	}
	b := RecordBytes(o.Entry, s.Entries[o.Entry].Kind, o.Root)
	c := Cost{Bytes: int64(len(b)) + 32*int64(len(o.Proof)), Hashes: chunkHashes(len(b)) + int64(len(o.Proof))}
	if err := merkle.VerifyInclusion(root, uint64(o.Entry), uint64(s.Len()), merkle.LeafHash(b), o.Proof); err != nil {
		return c, fmt.Errorf("tiles: record %d: %w", o.Entry, err)
	}
	return c, nil
}

// AgreedInputRoots verifies the records of entry e's inputs (writers before
// the leftmost differing leaf e, so the same in both trees) against a
// record root and returns their output roots in input order.
func (s *Step) AgreedInputRoots(root merkle.Hash, e int, opens []RecordOpening) ([]merkle.Hash, Cost, error) {
	var cost Cost
	ws := s.InputEntries(e)
	if len(opens) != len(ws) {
		return nil, cost, fmt.Errorf("tiles: %d input records for %d inputs of entry %d", len(opens), len(ws), e)
	}
	roots := make([]merkle.Hash, len(ws))
	for i, o := range opens {
		if o.Entry != ws[i] {
			return nil, cost, fmt.Errorf("tiles: input %d of entry %d is written by entry %d, not %d", i, e, ws[i], o.Entry)
		}
		c, err := s.VerifyRecord(root, o)
		cost.add(c)
		if err != nil {
			return nil, cost, err
		}
		roots[i] = o.Root
	}
	return roots, cost, nil
}
