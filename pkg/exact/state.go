package exact

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// ErrInvalidState is wrapped by every Decode error.
var ErrInvalidState = errors.New("exact: invalid state")

// StateMagic starts every encoded state; StateVersion follows it.
const (
	StateMagic   = "DPXSTATE"
	StateVersion = 1
)

// Header field offsets (all little-endian). The step and the loss sit in
// the first chunk at fixed offsets, so one chunk opening proves them
// against h_i.
const (
	offMagic     = 0
	offVersion   = 8
	offHeaderLen = 12
	offStep      = 16
	offLoss      = 24
	offDigest    = 32
	offConfig    = 64
	offCount     = offConfig + ConfigEncodedSize // 224
	offTable     = offCount + 8                  // 232
	tableEntry   = 64
	maxNameLen   = 32
)

// State is a model checkpoint: config, step, the loss of the step that
// produced it, and every weight and optimizer moment.
type State struct {
	Config Config // with defaults applied
	// Step is the number of updates applied since Init; the next Step call
	// trains on BatchWindows(..., Step, ...).
	Step uint64
	// Loss is the mean training loss (Q30 nats) of the step that produced
	// this state; 0 for a step-0 state.
	Loss int64
	// Tensors are the state tensors in StateTensorNames order.
	Tensors []*Tensor
}

// stateLayout places the header and tensors of a config's state.
type stateLayout struct {
	specs   []TensorSpec
	offsets []int
	header  int // header length before padding
	size    int
}

func alignChunk(n int) int { return (n + ChunkSize - 1) / ChunkSize * ChunkSize }

func newStateLayout(cfg Config) stateLayout {
	var l stateLayout
	for _, p := range Params(cfg) {
		for _, sfx := range []string{"w", "m", "v"} {
			dt, frac, shape := stateTensorSpec(p, sfx)
			l.specs = append(l.specs, TensorSpec{ID: len(l.specs), Name: p.Name + "." + sfx, DType: dt, Shape: shape, Frac: frac})
		}
	}
	l.header = offTable + tableEntry*len(l.specs)
	off := alignChunk(l.header)
	for i := range l.specs {
		l.offsets = append(l.offsets, off)
		off += l.specs[i].Bytes()
		if i+1 < len(l.specs) {
			off = alignChunk(off)
		}
	}
	l.size = off
	return l
}

// Tensor returns the state tensor called name ("tok_emb.w", ...), or nil.
func (s *State) Tensor(name string) *Tensor {
	for _, t := range s.Tensors {
		if t.Spec.Name == name {
			return t
		}
	}
	return nil
}

// Encode returns the canonical state file: header, tensor table, then
// each tensor's canonical bytes starting on a ChunkSize boundary, zero
// padding between.
func (s *State) Encode() []byte {
	l := newStateLayout(s.Config)
	buf := make([]byte, l.size)
	copy(buf, StateHeader(s.Config, s.Step, s.Loss))
	for i, spec := range l.specs {
		EncodeValues(buf[l.offsets[i]:l.offsets[i]], spec.DType, s.Tensors[i].Data)
	}
	return buf
}

// Root is h_i: the Merkle root of Encode() in ChunkSize chunks. It is also
// the checkpoint's state_root.
func (s *State) Root() merkle.Hash { return merkle.RootOfBytes(s.Encode(), ChunkSize) }

// StateRoot is the Merkle root of an encoded state file (without decoding
// it).
func StateRoot(encoded []byte) merkle.Hash { return merkle.RootOfBytes(encoded, ChunkSize) }

// Decode parses a canonical state file. It rejects every deviation from
// what Encode would produce for the decoded values: wrong magic, version,
// config, digest, table, offsets, non-zero padding, out-of-range values,
// trailing bytes.
func Decode(b []byte) (*State, error) {
	fail := func(format string, args ...any) (*State, error) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidState, fmt.Sprintf(format, args...))
	}
	le := binary.LittleEndian
	h, err := DecodeHeader(b)
	if err != nil {
		return nil, err
	}
	cfg := h.Config
	l := newStateLayout(cfg)
	if len(b) != l.size {
		return fail("%d bytes, the config's state has %d", len(b), l.size)
	}
	if n := le.Uint32(b[offCount:]); int(n) != len(l.specs) {
		return fail("%d tensors, want %d", n, len(l.specs))
	}
	if le.Uint32(b[offCount+4:]) != 0 {
		return fail("reserved header word is not zero")
	}
	s := &State{Config: cfg, Step: h.Step, Loss: h.Loss}
	// The encoding of what was decoded must be the input, byte for byte:
	// that checks the table and the zero padding in one comparison.
	want := make([]byte, l.header)
	copy(want, b[:offTable])
	for i, spec := range l.specs {
		e := want[offTable+i*tableEntry:]
		copy(e, spec.Name)
		e[maxNameLen] = byte(spec.DType)
		e[maxNameLen+1] = byte(len(spec.Shape))
		le.PutUint32(e[40:], uint32(spec.Shape[0]))
		le.PutUint32(e[44:], uint32(spec.Shape[1]))
		le.PutUint64(e[48:], uint64(l.offsets[i]))
		le.PutUint64(e[56:], uint64(spec.Bytes()))
	}
	if !bytes.Equal(want, b[:l.header]) {
		return fail("tensor table does not match the config's layout")
	}
	prevEnd := l.header
	for i := range l.specs {
		spec := &l.specs[i]
		off := l.offsets[i]
		if !allZero(b[prevEnd:off]) {
			return fail("non-zero padding before %s", spec.Name)
		}
		t := &Tensor{Spec: spec, Data: make([]int64, spec.Elems())}
		if err := DecodeValues(t.Data, spec.DType, b[off:off+spec.Bytes()]); err != nil {
			return fail("%s: %v", spec.Name, err)
		}
		if spec.Frac == FracV {
			for j, v := range t.Data {
				if v < 0 || v > 1<<62-1 {
					return fail("%s: element %d is %d, outside [0, 2^62)", spec.Name, j, v)
				}
			}
		}
		s.Tensors = append(s.Tensors, t)
		prevEnd = off + spec.Bytes()
	}
	return s, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// initDomain separates weight initialisation from other SHA-256 uses.
const initDomain = "depinchain/exact/init/v1"

// InitRadius returns R of a parameter's uniform initial distribution
// [-R, R] (Q28): ISqrt(3σ²) for σ = init_std at Q28, and for residual
// projections ISqrt(DIV(3σ², 2·layers)), giving standard deviation
// ≈ σ (resp. σ/√(2·layers)).
func InitRadius(h Hyper, p ParamSpec) int64 {
	v := 3 * h.InitStd * h.InitStd
	if p.Residual {
		v = DIV(v, 2*h.Layers)
	}
	return ISqrt(v)
}

// Init returns the step-0 state: each weight matrix p drawn uniformly
// from [-R, R] (InitRadius) by w = (x mod (2R+1)) - R, where element i
// takes the little-endian uint64 word i mod 4 of
//
//	SHA-256(initDomain || u64(len(seed)) || seed || u32(len(name)) || name || u64(i div 4))
//
// with name the parameter name ("l0.attn_qkv"); Adam moments are zero.
func Init(cfg Config, seed []byte) (*State, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	h := cfg.Hyper()
	l := newStateLayout(cfg)
	s := &State{Config: cfg}
	for i := range l.specs {
		s.Tensors = append(s.Tensors, &Tensor{Spec: &l.specs[i], Data: make([]int64, l.specs[i].Elems())})
	}
	for pi, p := range Params(cfg) {
		R := InitRadius(h, p)
		fillUniform(s.Tensors[3*pi].Data, seed, p.Name, R)
	}
	return s, nil
}

func fillUniform(dst []int64, seed []byte, name string, R int64) {
	prefix := []byte(initDomain)
	prefix = binary.LittleEndian.AppendUint64(prefix, uint64(len(seed)))
	prefix = append(prefix, seed...)
	prefix = binary.LittleEndian.AppendUint32(prefix, uint32(len(name)))
	prefix = append(prefix, name...)
	n := len(prefix)
	buf := make([]byte, n+8)
	copy(buf, prefix)
	span := uint64(2*R + 1)
	var digest [32]byte
	for i := range dst {
		if i%4 == 0 {
			binary.LittleEndian.PutUint64(buf[n:], uint64(i/4))
			digest = sha256.Sum256(buf)
		}
		x := binary.LittleEndian.Uint64(digest[8*(i%4):])
		dst[i] = int64(x%span) - R
	}
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	c := &State{Config: s.Config, Step: s.Step, Loss: s.Loss}
	for _, t := range s.Tensors {
		c.Tensors = append(c.Tensors, &Tensor{Spec: t.Spec, Data: append([]int64(nil), t.Data...)})
	}
	return c
}

// Header is what the first chunk of an encoded state says on its own: the
// config, the step and the loss of the step that produced the state. With
// chunk 0 Merkle-proven against a checkpoint's state_root, it is a step
// and loss the chain vouches for (the referee recomputes both when it
// re-executes a step), read without downloading the state.
type Header struct {
	Config Config
	Step   uint64
	// Loss is in Q30 nats (LossNats converts it).
	Loss int64
	// StateBytes is the length of the whole state the config lays out;
	// Chunks is that length in ChunkSize chunks, the tree size a proof of
	// chunk 0 must be checked against.
	StateBytes int64
	Chunks     uint64
}

// DecodeHeader parses the header at the start of an encoded state (its
// first chunk, or any prefix of at least the fixed header). It checks what
// Decode checks of the header alone: magic, version, config and its
// digest, header length, and the ranges of step and loss.
func DecodeHeader(b []byte) (Header, error) {
	fail := func(format string, args ...any) (Header, error) {
		return Header{}, fmt.Errorf("%w: header: %s", ErrInvalidState, fmt.Sprintf(format, args...))
	}
	le := binary.LittleEndian
	if len(b) < offTable {
		return fail("%d bytes is shorter than the header", len(b))
	}
	if string(b[offMagic:offMagic+8]) != StateMagic {
		return fail("bad magic %q", b[:8])
	}
	if v := le.Uint32(b[offVersion:]); v != StateVersion {
		return fail("version %d, want %d", v, StateVersion)
	}
	hyp, err := DecodeHyper(b[offConfig : offConfig+ConfigEncodedSize])
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := hyp.Config()
	if err != nil {
		return fail("config: %v", err)
	}
	if d := hyp.Digest(); !bytes.Equal(d[:], b[offDigest:offDigest+32]) {
		return fail("config digest does not match the config")
	}
	l := newStateLayout(cfg)
	if h := le.Uint32(b[offHeaderLen:]); int(h) != l.header {
		return fail("header length %d, want %d", h, l.header)
	}
	h := Header{Config: cfg, Step: le.Uint64(b[offStep:]), Loss: int64(le.Uint64(b[offLoss:])), StateBytes: int64(l.size)}
	if h.Step > HardMaxSteps {
		return fail("step %d above %d", h.Step, uint64(HardMaxSteps))
	}
	if h.Loss < 0 || h.Loss > MaxLossTok || (h.Step == 0 && h.Loss != 0) {
		return fail("loss %d out of range for step %d", h.Loss, h.Step)
	}
	h.Chunks = uint64((l.size + ChunkSize - 1) / ChunkSize)
	return h, nil
}

// StatePlacement is where a state tensor lies in the encoded state: it
// starts at Offset (a multiple of ChunkSize) and spans Bytes bytes, so its
// chunk c is chunk Offset/ChunkSize + c of the state file.
type StatePlacement struct {
	Name   string
	Offset int64
	Bytes  int64
}

// StateLayout returns the header's length (before padding to ChunkSize),
// the placement of every state tensor in StateTensorNames order and the
// file's size, without building a state.
func StateLayout(cfg Config) (header int, tensors []StatePlacement, size int64) {
	l := newStateLayout(cfg.WithDefaults())
	for i, s := range l.specs {
		tensors = append(tensors, StatePlacement{s.Name, int64(l.offsets[i]), int64(s.Bytes())})
	}
	return l.header, tensors, int64(l.size)
}

// StateHeader returns the first alignChunk(header) bytes of the encoded
// state of cfg at step with loss: the header, tensor table and padding,
// which depend on nothing else.
func StateHeader(cfg Config, step uint64, loss int64) []byte {
	cfg = cfg.WithDefaults()
	l := newStateLayout(cfg)
	s := &State{Config: cfg, Step: step, Loss: loss}
	buf := make([]byte, alignChunk(l.header))
	copy(buf[offMagic:], StateMagic)
	le := binary.LittleEndian
	le.PutUint32(buf[offVersion:], StateVersion)
	le.PutUint32(buf[offHeaderLen:], uint32(l.header))
	le.PutUint64(buf[offStep:], s.Step)
	le.PutUint64(buf[offLoss:], uint64(s.Loss))
	h := cfg.Hyper()
	d := h.Digest()
	copy(buf[offDigest:], d[:])
	copy(buf[offConfig:], h.Encode())
	le.PutUint32(buf[offCount:], uint32(len(l.specs)))
	for i, spec := range l.specs {
		e := buf[offTable+i*tableEntry:]
		copy(e, spec.Name)
		e[maxNameLen] = byte(spec.DType)
		e[maxNameLen+1] = byte(len(spec.Shape))
		le.PutUint32(e[40:], uint32(spec.Shape[0]))
		le.PutUint32(e[44:], uint32(spec.Shape[1]))
		le.PutUint64(e[48:], uint64(l.offsets[i]))
		le.PutUint64(e[56:], uint64(spec.Bytes()))
	}
	return buf
}
