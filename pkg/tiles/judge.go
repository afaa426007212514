package tiles

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// JudgeElement decides an operator tile: element i of chunk c of entry e's
// output, where provChunk is the provider's chunk (checked against its
// leaf by the caller). It recomputes the element from openings against the
// agreed inputRoots and reports whether the provider's value is right.
func (s *Step) JudgeElement(e, c int, provChunk []byte, i int, inputRoots []merkle.Hash, opens []Opening) (providerRight bool, computed int64, cost Cost, err error) {
	spec := s.Spec(e)
	if spec == nil || s.Entries[e].Op == nil {
		return false, 0, cost, fmt.Errorf("tiles: entry %d is not an operator", e)
	}
	per := ElemsPerChunk(spec)
	if i < 0 || i >= per || c*per+i >= spec.Elems() {
		return false, 0, cost, fmt.Errorf("tiles: element %d of chunk %d outside %q", i, c, spec.Name)
	}
	if (i+1)*spec.DType.Size() > len(provChunk) {
		return false, 0, cost, fmt.Errorf("tiles: element %d outside the provider's chunk of %d bytes", i, len(provChunk))
	}
	computed, cost, err = s.EvalElement(e, inputRoots, c*per+i, opens)
	if err != nil {
		return false, 0, cost, err
	}
	claimed, err := ChunkElement(spec, provChunk, i)
	if err != nil {
		// Not a value of the dtype at all (say −32768 in an i16 tensor): no kernel
		// writes that, so the provider's chunk is wrong.
		return false, computed, cost, nil
	}
	return computed == claimed, computed, cost, nil
}

// Load sources.
const (
	LoadStep   = "step"
	LoadWindow = "window"
	LoadState  = "state"
)

// LoadSource says what a load entry reads: the step counter, micro-batch
// Micro's windows, or the pre-state tensor Name.
type LoadSource struct {
	Source string
	Micro  int
	Name   string
}

// LoadOf describes load entry e.
func (s *Step) LoadOf(e int) (LoadSource, error) {
	if e < 0 || e >= s.Len() || s.Entries[e].Kind != KindLoad {
		return LoadSource{}, fmt.Errorf("tiles: entry %d is not a load", e)
	}
	name := s.Graph.Tensors[s.Entries[e].Tensor].Name
	switch {
	case name == "step":
		return LoadSource{Source: LoadStep}, nil
	case strings.HasPrefix(name, "mb") && strings.HasSuffix(name, ".window"):
		var k int
		if _, err := fmt.Sscanf(name, "mb%d.window", &k); err != nil {
			return LoadSource{}, err
		}
		return LoadSource{Source: LoadWindow, Micro: k}, nil
	}
	return LoadSource{Source: LoadState, Name: name}, nil
}

// StoreChunk computes the true chunk j of the next state file from one
// opening of a store input against the agreed inputRoots (a next state
// tensor's chunk, or chunk 0 of the loss for a header chunk); step is the
// next state's step.
func (s *Step) StoreChunk(j int, inputRoots []merkle.Hash, o Opening, step uint64) ([]byte, Cost, error) {
	src, err := NextStateSource(s.Config, j)
	if err != nil {
		return nil, Cost{}, err
	}
	want, wantChunk := src.Tensor, src.Chunk
	if src.Tensor < 0 {
		want, wantChunk = s.LossInput(), 0
	}
	if o.Input != want || o.Chunk != wantChunk {
		return nil, Cost{}, fmt.Errorf("tiles: state chunk %d comes from chunk %d of store input %d, not chunk %d of %d", j, wantChunk, want, o.Chunk, o.Input)
	}
	if len(inputRoots) != s.LossInput()+1 {
		return nil, Cost{}, fmt.Errorf("tiles: %d store input roots, want %d", len(inputRoots), s.LossInput()+1)
	}
	spec := &s.Graph.Tensors[s.StoreInput(o.Input)]
	cost, err := VerifyChunk(inputRoots[o.Input], int64(spec.Bytes()), o.Chunk, o.Data, o.Proof)
	if err != nil {
		return nil, cost, err
	}
	var loss int64
	if src.Tensor < 0 {
		loss = int64(binary.LittleEndian.Uint64(o.Data))
		cost.Bytes += exact.ChunkSize // the header is built
	}
	return NextStateChunk(s.Config, src, step, loss, o.Data), cost, nil
}
