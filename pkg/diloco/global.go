package diloco

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// GlobalState is the model every worker starts a round from: the weights
// and DiLoCo's outer momentum buffer, both section vectors of the config's
// Layout at FracW (Q28). Round r's global state is what rounds 0..r-1
// produced; round 0's is the job's initial weights and zero momentum.
type GlobalState struct {
	Config   exact.Config
	Sync     Sync
	Round    uint64
	Weights  []int64
	Momentum []int64
}

// InitGlobal returns round 0's global state: exact.Init's weights of the
// job seed and zero momentum.
func InitGlobal(cfg exact.Config, sync Sync, seed []byte) (*GlobalState, error) {
	s, err := exact.Init(cfg, seed)
	if err != nil {
		return nil, err
	}
	return GlobalFromState(s, sync)
}

// GlobalFromState returns the round-0 global state whose weights are s's
// (a fine-tuning job's imported weights).
func GlobalFromState(s *exact.State, sync Sync) (*GlobalState, error) {
	if err := sync.Check(); err != nil {
		return nil, err
	}
	l := NewLayout(s.Config)
	return &GlobalState{Config: l.Config, Sync: sync, Weights: l.Weights(s), Momentum: make([]int64, l.Elems())}, nil
}

// Encode is the canonical file: the header chunk (kind KindGlobal, zero
// worker and base), then the weights section, then the momentum section,
// each element int32 little-endian. Its chunk 1+k is weights chunk k and
// chunk 1+Chunks+k is momentum chunk k.
func (g *GlobalState) Encode() []byte {
	l := NewLayout(g.Config)
	b := header{kind: KindGlobal, round: g.Round, cfg: g.Config, sync: g.Sync, chunks: uint64(l.Chunks)}.encode()
	b = encodeSection(b, g.Weights)
	return encodeSection(b, g.Momentum)
}

// Root is the Merkle root of Encode in ChunkSize chunks: the round's
// global_root.
func (g *GlobalState) Root() merkle.Hash { return merkle.RootOfBytes(g.Encode(), ChunkSize) }

// DecodeGlobal parses a global state file, rejecting anything Encode would
// not have written.
func DecodeGlobal(b []byte) (*GlobalState, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return nil, err
	}
	if h.kind != KindGlobal || h.worker != 0 || h.base != (merkle.Hash{}) {
		return nil, fmt.Errorf("%w: not a global state header (kind %d)", ErrInvalid, h.kind)
	}
	l := NewLayout(h.cfg)
	n := l.Elems() * 4
	if len(b) != ChunkSize+2*n {
		return nil, fmt.Errorf("%w: global state of %d bytes, want %d", ErrInvalid, len(b), ChunkSize+2*n)
	}
	g := &GlobalState{Config: l.Config, Sync: h.sync, Round: h.round}
	if g.Weights, err = decodeSection(l, b[ChunkSize:ChunkSize+n], "weights"); err != nil {
		return nil, err
	}
	if g.Momentum, err = decodeSection(l, b[ChunkSize+n:], "momentum"); err != nil {
		return nil, err
	}
	return g, nil
}

// Model returns the global weights as an exact state (zero Adam moments, at
// the round's first step): what held-out evaluation and export read.
func (g *GlobalState) Model() *exact.State { return g.WorkerStart(nil) }

// WorkerStart is a worker's state at the start of round g.Round: the global
// weights, the Adam moments of carry (the worker's own state at the end of
// the last round it entered; nil for a worker that has none, e.g. one that
// joined this round: zero moments), step RoundStart(Round) and loss 0.
// DiLoCo keeps the inner optimizer's state local to each worker; on chain
// carry is the end state the worker committed, so this state's root is
// checkable chunk by chunk (every state tensor is chunk-aligned, so each
// chunk comes from exactly one of the two).
func (g *GlobalState) WorkerStart(carry *exact.State) *exact.State {
	l := NewLayout(g.Config)
	base := carry
	if base == nil {
		// Init's moments are zero; its weights are replaced below.
		var err error
		if base, err = exact.Init(l.Config, nil); err != nil {
			panic(err) // g.Config decoded or validated: Init cannot fail
		}
	}
	s := l.withWeights(base, g.Weights)
	s.Step = g.Sync.RoundStart(g.Round)
	s.Loss = 0
	return s
}
