package diloco

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// ErrInvalid is wrapped by every error about a malformed or mismatched
// pseudo-gradient, global state or chunk.
var ErrInvalid = errors.New("diloco: invalid input")

// ChunkSize is the Merkle chunk size of every file here: the states'
// (exact.ChunkSize, 4 KiB).
const ChunkSize = exact.ChunkSize

// ChunkElems is the number of int32 elements in one chunk.
const ChunkElems = ChunkSize / 4

// Header constants. Every file of this package starts with one header chunk
// (zero padded to ChunkSize); its fields are little-endian at fixed
// offsets.
const (
	Magic   = "DPXDLOCO"
	Version = 1

	offMagic   = 0
	offVersion = 8
	offKind    = 12
	offRound   = 16
	offWorker  = 24
	offDigest  = 32
	offConfig  = 64
	offSync    = offConfig + exact.ConfigEncodedSize // 224
	offBase    = offSync + SyncEncodedSize           // 256
	offChunks  = offBase + merkle.HashSize           // 288
	offErrIn   = offChunks + 8                       // 296
	offErrOut  = offErrIn + merkle.HashSize          // 328
	headerLen  = offErrOut + merkle.HashSize         // 360
)

// Kind says what a file is.
type Kind uint32

// File kinds.
const (
	// KindPseudoGradient is a worker's dense pseudo-gradient.
	KindPseudoGradient Kind = 1
	// KindGlobal is a global state: weights and outer momentum.
	KindGlobal Kind = 2
	// KindCompressed is a worker's top-k pseudo-gradient (see Compressed).
	KindCompressed Kind = 3
)

// Placement is where one trainable parameter lies in a section: its
// elements (row-major, as in the state) start at element
// FirstChunk·ChunkElems and fill Elems elements, then zeros to the next
// chunk boundary.
type Placement struct {
	Name       string
	FirstChunk int
	Elems      int
}

// Layout is the section layout of a config: the trainable parameters
// (exact.Params order), each starting on a chunk boundary. A section is a
// flat vector of Chunks·ChunkElems int32 values; the same layout holds
// weights, outer momentum, pseudo-gradients and error buffers, so chunk k
// of every one of them covers the same parameter elements — what makes the
// aggregation chunk-local.
type Layout struct {
	Config  exact.Config
	Tensors []Placement
	Chunks  int
}

// NewLayout returns cfg's section layout (cfg after WithDefaults).
func NewLayout(cfg exact.Config) Layout {
	l := Layout{Config: cfg.WithDefaults()}
	for _, p := range exact.Params(l.Config) {
		n := p.Rows * p.Cols
		l.Tensors = append(l.Tensors, Placement{Name: p.Name, FirstChunk: l.Chunks, Elems: n})
		l.Chunks += (n + ChunkElems - 1) / ChunkElems
	}
	return l
}

// Elems is the length of a section vector (padding included).
func (l Layout) Elems() int { return l.Chunks * ChunkElems }

// Valid is the number of parameter elements in section chunk k (the rest
// of the chunk is padding and must be zero).
func (l Layout) Valid(k int) int {
	for _, t := range l.Tensors {
		n := (t.Elems + ChunkElems - 1) / ChunkElems
		if k >= t.FirstChunk && k < t.FirstChunk+n {
			return min(ChunkElems, t.Elems-(k-t.FirstChunk)*ChunkElems)
		}
	}
	return 0
}

// Weights returns the section vector of s's weights.
func (l Layout) Weights(s *exact.State) []int64 {
	out := make([]int64, l.Elems())
	for _, t := range l.Tensors {
		copy(out[t.FirstChunk*ChunkElems:], s.Tensor(t.Name+".w").Data)
	}
	return out
}

// withWeights returns a copy of s whose weights are w (a section vector).
func (l Layout) withWeights(s *exact.State, w []int64) *exact.State {
	c := s.Clone()
	for _, t := range l.Tensors {
		copy(c.Tensor(t.Name+".w").Data, w[t.FirstChunk*ChunkElems:t.FirstChunk*ChunkElems+t.Elems])
	}
	return c
}

// header is the decoded header chunk.
type header struct {
	kind   Kind
	round  uint64
	worker uint32
	cfg    exact.Config
	sync   Sync
	base   merkle.Hash
	chunks uint64
	// errIn and errOut are a compressed pseudo-gradient's error-buffer
	// roots (ErrorBufferRoot): the buffer it was compressed with and the
	// one it carries to the worker's next round. Zero in other kinds.
	errIn, errOut merkle.Hash
}

func (h header) encode() []byte {
	b := make([]byte, ChunkSize)
	le := binary.LittleEndian
	copy(b[offMagic:], Magic)
	le.PutUint32(b[offVersion:], Version)
	le.PutUint32(b[offKind:], uint32(h.kind))
	le.PutUint64(b[offRound:], h.round)
	le.PutUint32(b[offWorker:], h.worker)
	hyp := h.cfg.Hyper()
	d := hyp.Digest()
	copy(b[offDigest:], d[:])
	copy(b[offConfig:], hyp.Encode())
	copy(b[offSync:], h.sync.Encode())
	copy(b[offBase:], h.base[:])
	le.PutUint64(b[offChunks:], h.chunks)
	copy(b[offErrIn:], h.errIn[:])
	copy(b[offErrOut:], h.errOut[:])
	return b
}

// decodeHeader parses and checks a header chunk: it must be exactly what
// encode writes for the values it holds.
func decodeHeader(b []byte) (header, error) {
	fail := func(format string, args ...any) (header, error) {
		return header{}, fmt.Errorf("%w: header: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if len(b) < ChunkSize {
		return fail("%d bytes is shorter than the header chunk (%d)", len(b), ChunkSize)
	}
	if string(b[:8]) != Magic {
		return fail("bad magic %q", b[:8])
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[offVersion:]); v != Version {
		return fail("version %d, want %d", v, Version)
	}
	hyp, err := exact.DecodeHyper(b[offConfig:offSync])
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := hyp.Config()
	if err != nil {
		return fail("config: %v", err)
	}
	sync, err := DecodeSync(b[offSync:offBase])
	if err != nil {
		return fail("%v", err)
	}
	h := header{kind: Kind(le.Uint32(b[offKind:])), round: le.Uint64(b[offRound:]), worker: le.Uint32(b[offWorker:]),
		cfg: cfg, sync: sync, chunks: le.Uint64(b[offChunks:])}
	copy(h.base[:], b[offBase:])
	copy(h.errIn[:], b[offErrIn:])
	copy(h.errOut[:], b[offErrOut:])
	if h.kind < KindPseudoGradient || h.kind > KindCompressed {
		return fail("unknown kind %d", h.kind)
	}
	if h.kind != KindCompressed && (h.errIn != (merkle.Hash{}) || h.errOut != (merkle.Hash{})) {
		return fail("kind %d carries error-buffer roots", h.kind)
	}
	if want := uint64(NewLayout(cfg).Chunks); h.chunks != want {
		return fail("%d section chunks, the config has %d", h.chunks, want)
	}
	if !bytes.Equal(h.encode(), b[:ChunkSize]) {
		return fail("not canonical (digest, reserved bytes or padding)")
	}
	return h, nil
}

// encodeSection appends the int32 little-endian encoding of v.
func encodeSection(dst []byte, v []int64) []byte { return exact.EncodeValues(dst, exact.I32, v) }

// decodeSection decodes an int32 section of l from b, checking the
// symmetric s32 range and that padding is zero.
func decodeSection(l Layout, b []byte, what string) ([]int64, error) {
	if len(b) != l.Elems()*4 {
		return nil, fmt.Errorf("%w: %s: %d bytes, want %d", ErrInvalid, what, len(b), l.Elems()*4)
	}
	v := make([]int64, l.Elems())
	if err := exact.DecodeValues(v, exact.I32, b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	for k := range l.Chunks {
		for i, x := range v[k*ChunkElems+l.Valid(k) : (k+1)*ChunkElems] {
			if x != 0 {
				return nil, fmt.Errorf("%w: %s: chunk %d: padding element %d is %d, not 0", ErrInvalid, what, k, l.Valid(k)+i, x)
			}
		}
	}
	return v, nil
}
