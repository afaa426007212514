package diloco

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// PseudoGradient is a worker's contribution to a round: Delta = global −
// local weights after its `every` inner steps (DiLoCo's outer gradient),
// element by element, saturated to the symmetric s32 range, as a section
// vector at FracW. With compression (Sync.TopK > 0) Delta is what the
// worker sent: the top-k form, zeros elsewhere.
type PseudoGradient struct {
	Config exact.Config
	Sync   Sync
	Round  uint64
	Worker uint32
	// Base is the root of the global state the worker started from.
	Base  merkle.Hash
	Delta []int64
	// ErrIn and ErrOut are set by Compress: the ErrorBufferRoot of the
	// error buffer this pseudo-gradient was compressed with (the worker's
	// carry from its last entered round; the zero buffer's root for its
	// first) and of the one it leaves. The compressed file's header commits
	// to both, so the error feedback is adjudicable chunk by chunk.
	ErrIn, ErrOut merkle.Hash
}

func clamp32(v int64) int64 { return max(-exact.Max32, min(exact.Max32, v)) }

// NewPseudoGradient returns worker's dense pseudo-gradient for round
// g.Round from its state local at the end of the round (step
// RoundStart(Round+1), same config).
func NewPseudoGradient(g *GlobalState, worker uint32, local *exact.State) (*PseudoGradient, error) {
	if local.Config.Hyper() != g.Config.Hyper() {
		return nil, fmt.Errorf("%w: local state has a different config than the global state", ErrInvalid)
	}
	if want := g.Sync.RoundStart(g.Round + 1); local.Step != want {
		return nil, fmt.Errorf("%w: local state is at step %d, round %d ends at step %d", ErrInvalid, local.Step, g.Round, want)
	}
	l := NewLayout(g.Config)
	lw := l.Weights(local)
	d := make([]int64, len(lw))
	for i := range d {
		d[i] = clamp32(g.Weights[i] - lw[i])
	}
	return &PseudoGradient{Config: g.Config, Sync: g.Sync, Round: g.Round, Worker: worker, Base: g.Root(), Delta: d}, nil
}

func (p *PseudoGradient) header(kind Kind) header {
	h := header{kind: kind, round: p.Round, worker: p.Worker, cfg: p.Config, sync: p.Sync, base: p.Base, chunks: uint64(NewLayout(p.Config).Chunks)}
	if kind == KindCompressed {
		h.errIn, h.errOut = p.ErrIn, p.ErrOut
	}
	return h
}

// EncodeDense is the dense file: the header chunk (kind
// KindPseudoGradient), then the Delta section; chunk 1+k is section chunk k.
func (p *PseudoGradient) EncodeDense() []byte {
	return encodeSection(p.header(KindPseudoGradient).encode(), p.Delta)
}

// DecodePseudoGradient parses a dense pseudo-gradient file.
func DecodePseudoGradient(b []byte) (*PseudoGradient, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return nil, err
	}
	if h.kind != KindPseudoGradient {
		return nil, fmt.Errorf("%w: kind %d is not a dense pseudo-gradient", ErrInvalid, h.kind)
	}
	l := NewLayout(h.cfg)
	d, err := decodeSection(l, b[ChunkSize:], "pseudo-gradient")
	if err != nil {
		return nil, err
	}
	return &PseudoGradient{Config: l.Config, Sync: h.sync, Round: h.round, Worker: h.worker, Base: h.base, Delta: d}, nil
}

// Root is the worker's commitment: the Merkle root of EncodeDense in
// ChunkSize chunks when Sync.TopK is 0, else Compressed().Root() (an error
// when Delta has more than TopK non-zeros in a chunk, i.e. was not
// compressed).
func (p *PseudoGradient) Root() (merkle.Hash, error) {
	if p.Sync.TopK > 0 {
		c, err := p.Compressed()
		if err != nil {
			return merkle.Hash{}, err
		}
		return c.Root(), nil
	}
	return merkle.RootOfBytes(p.EncodeDense(), ChunkSize), nil
}

// AggregateChunk computes chunk k of the new global weights and momentum
// from chunk k of the global weights and momentum and chunk k of each
// worker's (dense or decompressed) pseudo-gradient, all as ChunkSize bytes
// of int32 little-endian — exactly the Merkle chunks a tile referee has
// proven. valid is the number of parameter elements in the chunk
// (Layout.Valid); the rest must be zero in every input and stays zero in
// the output. With n = len(deltas) workers, for every element:
//
//	avg = DIV(Σ Δ_i, n)                      the mean, rounded to nearest, ties toward +∞
//	u'  = clamp32(RS(μ·u, 30) + avg)         momentum buffer (μ = outer_momentum, Q30)
//	w'  = clamp32(w − RS(η·(RS(μ·u', 30) + avg), 30))   Nesterov step (η = outer_lr, Q30)
//
// (PyTorch's SGD with nesterov=True on the outer gradient avg). The sum is
// of integers, so the workers' order does not change it; Aggregate fixes
// ascending worker order anyway so that the list is canonical.
func AggregateChunk(sync Sync, valid int, weights, momentum []byte, deltas [][]byte) (newWeights, newMomentum []byte, err error) {
	if err := sync.Check(); err != nil {
		return nil, nil, err
	}
	if valid < 0 || valid > ChunkElems {
		return nil, nil, fmt.Errorf("%w: valid element count %d outside [0, %d]", ErrInvalid, valid, ChunkElems)
	}
	if len(deltas) < 1 || len(deltas) > MaxWorkers {
		return nil, nil, fmt.Errorf("%w: %d pseudo-gradients, need 1 to %d", ErrInvalid, len(deltas), MaxWorkers)
	}
	read := func(b []byte, what string) ([]int64, error) { return readChunk(b, valid, what) }
	w, err := read(weights, "weights")
	if err != nil {
		return nil, nil, err
	}
	u, err := read(momentum, "momentum")
	if err != nil {
		return nil, nil, err
	}
	sum := make([]int64, ChunkElems)
	for i, db := range deltas {
		d, err := read(db, fmt.Sprintf("pseudo-gradient %d", i))
		if err != nil {
			return nil, nil, err
		}
		for j, x := range d {
			sum[j] += x
		}
	}
	aggregateElems(sync, w, u, sum, int64(len(deltas)))
	return encodeSection(nil, w), encodeSection(nil, u), nil
}

// readChunk decodes one section chunk (ChunkSize bytes, int32
// little-endian, s32 range) whose elements from valid on are padding and
// must be zero.
func readChunk(b []byte, valid int, what string) ([]int64, error) {
	if len(b) != ChunkSize {
		return nil, fmt.Errorf("%w: %s chunk is %d bytes, want %d", ErrInvalid, what, len(b), ChunkSize)
	}
	v := make([]int64, ChunkElems)
	if err := exact.DecodeValues(v, exact.I32, b); err != nil {
		return nil, fmt.Errorf("%w: %s chunk: %v", ErrInvalid, what, err)
	}
	for i := valid; i < ChunkElems; i++ {
		if v[i] != 0 {
			return nil, fmt.Errorf("%w: %s chunk: padding element %d is %d, not 0", ErrInvalid, what, i, v[i])
		}
	}
	return v, nil
}

// aggregateElems applies the outer step in place to w and u given the sum
// of n pseudo-gradients (see AggregateChunk).
func aggregateElems(sync Sync, w, u, sum []int64, n int64) {
	for j := range w {
		avg := exact.DIV(sum[j], n)
		u[j] = clamp32(exact.RS(sync.OuterMomentum*u[j], QOuter) + avg)
		step := exact.RS(sync.OuterMomentum*u[j], QOuter) + avg
		w[j] = clamp32(w[j] - exact.RS(sync.OuterLR*step, QOuter))
	}
}

// Aggregate returns round g.Round+1's global state from g and the
// pseudo-gradients of the workers that entered round g.Round (in strictly
// ascending worker order; at least one). Every pseudo-gradient must be of
// this round, config and sync and computed from g (its Base is g's root).
// A worker left out — it missed the deadline, or was convicted — is simply
// not in the list: the average is over the ones that are.
func Aggregate(g *GlobalState, pgs []*PseudoGradient) (*GlobalState, error) {
	if len(pgs) < 1 || len(pgs) > MaxWorkers {
		return nil, fmt.Errorf("%w: %d pseudo-gradients, need 1 to %d", ErrInvalid, len(pgs), MaxWorkers)
	}
	root := g.Root()
	hyp := g.Config.Hyper()
	l := NewLayout(g.Config)
	for i, p := range pgs {
		switch {
		case p.Round != g.Round:
			return nil, fmt.Errorf("%w: pseudo-gradient %d (worker %d) is of round %d, the global state is at round %d", ErrInvalid, i, p.Worker, p.Round, g.Round)
		case p.Config.Hyper() != hyp || p.Sync != g.Sync:
			return nil, fmt.Errorf("%w: pseudo-gradient %d (worker %d) has a different config or sync", ErrInvalid, i, p.Worker)
		case p.Base != root:
			return nil, fmt.Errorf("%w: pseudo-gradient %d (worker %d) was computed from global root %s, not %s", ErrInvalid, i, p.Worker, p.Base, root)
		case len(p.Delta) != l.Elems():
			return nil, fmt.Errorf("%w: pseudo-gradient %d (worker %d) has %d elements, want %d", ErrInvalid, i, p.Worker, len(p.Delta), l.Elems())
		case i > 0 && p.Worker <= pgs[i-1].Worker:
			return nil, fmt.Errorf("%w: workers must be strictly ascending, got %d after %d", ErrInvalid, p.Worker, pgs[i-1].Worker)
		}
	}
	next := &GlobalState{Config: g.Config, Sync: g.Sync, Round: g.Round + 1,
		Weights: append([]int64(nil), g.Weights...), Momentum: append([]int64(nil), g.Momentum...)}
	sum := make([]int64, l.Elems())
	for _, p := range pgs {
		for j, x := range p.Delta {
			sum[j] += x
		}
	}
	aggregateElems(g.Sync, next.Weights, next.Momentum, sum, int64(len(pgs)))
	return next, nil
}

// GlobalChunks returns the section chunk k of g's weights and momentum as
// the bytes AggregateChunk takes (for tests and referees holding the whole
// state).
func (g *GlobalState) GlobalChunks(k int) (weights, momentum []byte) {
	return encodeSection(nil, g.Weights[k*ChunkElems:(k+1)*ChunkElems]), encodeSection(nil, g.Momentum[k*ChunkElems:(k+1)*ChunkElems])
}

// DeltaChunk returns section chunk k of p's Delta as bytes.
func (p *PseudoGradient) DeltaChunk(k int) []byte {
	return encodeSection(nil, p.Delta[k*ChunkElems:(k+1)*ChunkElems])
}
