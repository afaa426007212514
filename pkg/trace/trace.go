// Package trace is the per-step hash trace of a checkpoint, h_start..h_end, as the
// trainer writes it, the provider and a challenger hold it, and the chain commits its
// Merkle root (trace_root): the tree's leaves are the step hashes themselves, so a
// bisection move opens one h_i with an RFC 6962 inclusion proof.
package trace

import (
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// ErrOutOfRange is returned when a step outside the trace is opened.
var ErrOutOfRange = errors.New("trace: step outside the trace")

// CheckpointChunkSize is the leaf size of a checkpoint file's state_root tree.
const CheckpointChunkSize = 4096

// Trace is a per-step hash trace h_start..h_end and its Merkle tree.
type Trace struct {
	Start  uint64
	Hashes []merkle.Hash
	leaves []merkle.Hash
}

// New builds the trace tree over hashes, the first of which is h_start.
func New(start uint64, hashes []merkle.Hash) Trace {
	leaves := make([]merkle.Hash, len(hashes))
	for i, h := range hashes {
		leaves[i] = merkle.LeafHash(h[:])
	}
	return Trace{Start: start, Hashes: hashes, leaves: leaves}
}

// End is the last step the trace covers.
func (t Trace) End() uint64 { return t.Start + uint64(len(t.Hashes)) - 1 }

// Root is the trace_root committed on chain.
func (t Trace) Root() merkle.Hash { return merkle.RootFromLeafHashes(t.leaves) }

// Open returns h_step and its inclusion proof against Root, in wire form.
func (t Trace) Open(step uint64) (merkle.Hash, [][]byte, error) {
	if step < t.Start || step > t.End() {
		return merkle.Hash{}, nil, fmt.Errorf("%w: step %d, trace [%d, %d]", ErrOutOfRange, step, t.Start, t.End())
	}
	proof, err := merkle.InclusionProof(t.leaves, step-t.Start)
	if err != nil {
		return merkle.Hash{}, nil, err
	}
	return t.Hashes[step-t.Start], merkle.HashesToBytes(proof), nil
}
