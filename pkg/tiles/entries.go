package tiles

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// Entry kinds besides the operator kinds of exact.
const (
	KindLoad  = "load"
	KindStore = "store"
)

// Entry is one element of a step's ordered list.
type Entry struct {
	Index int
	// Kind is KindLoad, an exact operator kind, or KindStore.
	Kind string
	// Tensor is the graph tensor the entry writes (the loaded input or the
	// operator's output); -1 for the store.
	Tensor int
	// Op is the operator (nil for loads and the store).
	Op *exact.Op
}

// Step is the entry list of one training step of a config.
type Step struct {
	Config  exact.Config
	Graph   *exact.Graph
	Entries []Entry
	writer  []int
	// outputs maps state tensor index (exact.StateTensorNames order) to the
	// graph tensor holding its next value.
	outputs []int
	loss    int
}

// NewStep lays out the step of cfg: loads (exact.TrainGraph's inputs in
// order), operators (graph order), store.
func NewStep(cfg exact.Config) *Step {
	cfg = cfg.WithDefaults()
	g := exact.TrainGraph(cfg)
	s := &Step{Config: cfg, Graph: g, writer: make([]int, len(g.Tensors))}
	for i := range s.writer {
		s.writer[i] = -1
	}
	add := func(kind string, tensor int, op *exact.Op) {
		e := len(s.Entries)
		s.Entries = append(s.Entries, Entry{Index: e, Kind: kind, Tensor: tensor, Op: op})
		if tensor >= 0 {
			s.writer[tensor] = e
		}
	}
	for _, id := range g.Inputs {
		add(KindLoad, id, nil)
	}
	for i := range g.Ops {
		add(g.Ops[i].Kind, g.Ops[i].Output, &g.Ops[i])
	}
	add(KindStore, -1, nil)
	for _, name := range exact.StateTensorNames(cfg) {
		s.outputs = append(s.outputs, g.ID("next."+name))
	}
	s.loss = g.ID("loss")
	return s
}

// Len is the number of entries (leaves of the record tree).
func (s *Step) Len() int { return len(s.Entries) }

// Writer is the entry that writes tensor id.
func (s *Step) Writer(tensor int) int { return s.writer[tensor] }

// Store is the index of the store entry (the last).
func (s *Step) Store() int { return len(s.Entries) - 1 }

// Spec is the spec of entry e's output tensor (nil for the store).
func (s *Step) Spec(e int) *exact.TensorSpec {
	if t := s.Entries[e].Tensor; t >= 0 {
		return &s.Graph.Tensors[t]
	}
	return nil
}

// OutputChunks is the number of 4 KiB chunks of entry e's output: the
// tensor's, or the next state file's for the store.
func (s *Step) OutputChunks(e int) uint64 {
	if spec := s.Spec(e); spec != nil {
		return uint64(spec.Chunks())
	}
	_, _, size := exact.StateLayout(s.Config)
	return merkle.ChunkCount(size, exact.ChunkSize)
}

// InputEntries are the writers of entry e's inputs, in the operator's input
// order (nil for loads; the store reads the next state tensors and the loss).
func (s *Step) InputEntries(e int) []int {
	en := s.Entries[e]
	switch {
	case en.Op != nil:
		ws := make([]int, len(en.Op.Inputs))
		for i, t := range en.Op.Inputs {
			ws[i] = s.writer[t]
		}
		return ws
	case en.Kind == KindStore:
		ws := make([]int, 0, len(s.outputs)+1)
		for _, t := range s.outputs {
			ws = append(ws, s.writer[t])
		}
		return append(ws, s.writer[s.loss])
	}
	return nil
}

// recordDomain separates record leaves from every other hash.
const recordDomain = "depinchain/tiles/record/v1"

// RecordBytes is the canonical encoding of a record: domain, entry index
// (u32 LE), kind length (u8), kind, output root.
func RecordBytes(index int, kind string, root merkle.Hash) []byte {
	b := make([]byte, 0, len(recordDomain)+5+len(kind)+sha256.Size)
	b = append(b, recordDomain...)
	b = binary.LittleEndian.AppendUint32(b, uint32(index))
	b = append(b, byte(len(kind)))
	b = append(b, kind...)
	return append(b, root[:]...)
}

// RecordLeaf is the leaf hash of a record in the record tree.
func RecordLeaf(index int, kind string, root merkle.Hash) merkle.Hash {
	return merkle.LeafHash(RecordBytes(index, kind, root))
}

// CheckRecord checks that (index, kind) is what the graph puts at entry
// index: a record that is not is inconsistent with the graph.
func (s *Step) CheckRecord(index int, kind string) error {
	if index < 0 || index >= len(s.Entries) {
		return fmt.Errorf("tiles: entry %d out of range [0, %d)", index, len(s.Entries))
	}
	if want := s.Entries[index].Kind; kind != want {
		return fmt.Errorf("tiles: entry %d is a %s, the record says %s", index, want, kind)
	}
	return nil
}
