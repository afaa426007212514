package reftrainer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrInvalidState is wrapped by every Decode and State.Validate error.
var ErrInvalidState = errors.New("reftrainer: invalid state")

// stateMagic starts every encoded State. The last byte is the format version,
// so an incompatible change of layout or arithmetic gets a new magic.
var stateMagic = [4]byte{'R', 'T', 'S', 1}

// configEncodedSize is five uint32 dimensions, the int32 learning rate and
// the 32-byte seed.
const configEncodedSize = 5*4 + 4 + 32

// stateHeaderSize is the magic, the config and the uint64 step counter.
const stateHeaderSize = len(stateMagic) + configEncodedSize + 8

// initDomain separates the weight-initialisation PRNG from every other use
// of SHA-256 in the protocol.
const initDomain = "depinchain/reftrainer/init/v1"

// State is a model checkpoint: its config, how many steps produced it and
// all weights in Q16.16. Matrices are row-major.
type State struct {
	Config Config
	// Step is the number of training steps applied since Init; the next
	// Step call trains on the windows BatchWindows selects for this index.
	Step uint64
	// Embedding is Vocab×Embed: row t is the vector of token t.
	Embedding []int32
	// HiddenWeights is Hidden×(Context·Embed): row j feeds hidden unit j
	// from the concatenated context embeddings, oldest token first.
	HiddenWeights []int32
	// HiddenBias has Hidden entries.
	HiddenBias []int32
	// OutputWeights is Vocab×Hidden: row t produces the logit of token t.
	OutputWeights []int32
	// OutputBias has Vocab entries.
	OutputBias []int32
}

// tensorShapes returns the length of each weight tensor in canonical order
// (the order of the encoding and of the State fields).
func (c Config) tensorShapes() [5]int {
	v, d, ctx, h := int(c.Vocab), int(c.Embed), int(c.Context), int(c.Hidden)
	return [5]int{v * d, h * ctx * d, h, v * h, v}
}

// tensors returns pointers to the weight slices in canonical order.
func (s *State) tensors() [5]*[]int32 {
	return [5]*[]int32{&s.Embedding, &s.HiddenWeights, &s.HiddenBias, &s.OutputWeights, &s.OutputBias}
}

// Init returns the step-0 state for cfg. Weights are drawn uniformly from
// a SHA-256 counter-mode stream keyed by cfg.Seed: the embedding from
// [-1/2, 1/2], each weight matrix from [-1/√fanIn, 1/√fanIn] (integer square
// root), biases are zero. The result depends on nothing but cfg.
func Init(cfg Config) (*State, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &State{Config: cfg}
	shapes := cfg.tensorShapes()
	for i, t := range s.tensors() {
		*t = make([]int32, shapes[i])
	}
	rng := newInitStream(cfg.Seed)
	rng.fillUniform(s.Embedding, One/2)
	rng.fillUniform(s.HiddenWeights, One/isqrt(int32(cfg.Context*cfg.Embed)))
	rng.fillUniform(s.OutputWeights, One/isqrt(int32(cfg.Hidden)))
	return s, nil
}

// isqrt returns floor(√n) for n >= 1.
func isqrt(n int32) int32 {
	r := int32(1)
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}

// initStream is a SHA-256 counter-mode generator: block i is
// SHA-256(initDomain || seed || uint64le(i)), consumed four bytes at a time.
type initStream struct {
	seed    [32]byte
	counter uint64
	block   [sha256.Size]byte
	used    int
}

func newInitStream(seed [32]byte) *initStream {
	return &initStream{seed: seed, used: sha256.Size}
}

func (r *initStream) uint32() uint32 {
	if r.used == sha256.Size {
		msg := make([]byte, 0, len(initDomain)+len(r.seed)+8)
		msg = append(msg, initDomain...)
		msg = append(msg, r.seed[:]...)
		msg = binary.LittleEndian.AppendUint64(msg, r.counter)
		r.block = sha256.Sum256(msg)
		r.counter++
		r.used = 0
	}
	v := binary.LittleEndian.Uint32(r.block[r.used:])
	r.used += 4
	return v
}

// fillUniform sets every element of w to a value in [-limit, limit]. The
// modulo bias (at most 2^-14 relative for the limits used) is irrelevant for
// initial weights and, like everything else, deterministic.
func (r *initStream) fillUniform(w []int32, limit int32) {
	span := uint64(2*limit) + 1
	for i := range w {
		w[i] = int32(uint64(r.uint32())%span) - limit
	}
}

// Validate checks the config and that every weight slice has the length the
// config implies, so Step never indexes out of range.
func (s *State) Validate() error {
	if s == nil {
		return fmt.Errorf("%w: nil state", ErrInvalidState)
	}
	if err := s.Config.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	names := [5]string{"Embedding", "HiddenWeights", "HiddenBias", "OutputWeights", "OutputBias"}
	shapes := s.Config.tensorShapes()
	for i, t := range s.tensors() {
		if len(*t) != shapes[i] {
			return fmt.Errorf("%w: %s has %d values, config implies %d", ErrInvalidState, names[i], len(*t), shapes[i])
		}
	}
	return nil
}

// clone returns a deep copy of s.
func (s *State) clone() *State {
	c := &State{Config: s.Config, Step: s.Step}
	src := s.tensors()
	for i, t := range c.tensors() {
		*t = append([]int32(nil), *src[i]...)
	}
	return c
}

// Encode returns the canonical encoding of s, all integers little-endian:
//
//	magic "RTS\x01"
//	Vocab, Embed, Context, Hidden, BatchSize  uint32 each
//	LearningRate                              int32
//	Seed                                      32 bytes
//	Step                                      uint64
//	Embedding, HiddenWeights, HiddenBias, OutputWeights, OutputBias
//	                                          int32 each, no length prefixes
//
// Tensor lengths follow from the config, so every State has exactly one
// encoding. Encode does not validate s; Decode does.
func (s *State) Encode() []byte {
	size := stateHeaderSize
	for _, t := range s.tensors() {
		size += 4 * len(*t)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, stateMagic[:]...)
	c := s.Config
	for _, v := range []uint32{c.Vocab, c.Embed, c.Context, c.Hidden, c.BatchSize, uint32(c.LearningRate)} {
		buf = binary.LittleEndian.AppendUint32(buf, v)
	}
	buf = append(buf, c.Seed[:]...)
	buf = binary.LittleEndian.AppendUint64(buf, s.Step)
	for _, t := range s.tensors() {
		for _, w := range *t {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(w))
		}
	}
	return buf
}

// Hash returns SHA-256(s.Encode()), the state commitment h_i of the
// protocol's per-step hash trace.
func (s *State) Hash() [32]byte {
	return sha256.Sum256(s.Encode())
}

// Decode parses a canonical encoding. It is strict: wrong magic, an invalid
// config, and any length other than exactly the one the config implies (too
// short or trailing bytes) are errors, so Decode(b) succeeding implies
// Encode of the result equals b. Nothing is allocated before the length has
// been checked against the config.
func Decode(data []byte) (*State, error) {
	if len(data) < stateHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrInvalidState, len(data), stateHeaderSize)
	}
	if [4]byte(data[:4]) != stateMagic {
		return nil, fmt.Errorf("%w: bad magic %x, want %x", ErrInvalidState, data[:4], stateMagic)
	}
	rest := data[4:]
	u32 := func() uint32 {
		v := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		return v
	}
	var c Config
	c.Vocab, c.Embed, c.Context, c.Hidden, c.BatchSize = u32(), u32(), u32(), u32(), u32()
	c.LearningRate = int32(u32())
	copy(c.Seed[:], rest)
	rest = rest[len(c.Seed):]
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	s := &State{Config: c, Step: binary.LittleEndian.Uint64(rest)}
	rest = rest[8:]
	// NumParams <= MaxParams after Validate, so this cannot overflow.
	if want := 4 * c.NumParams(); uint64(len(rest)) != want {
		return nil, fmt.Errorf("%w: %d bytes of weights, config implies %d", ErrInvalidState, len(rest), want)
	}
	shapes := c.tensorShapes()
	for i, t := range s.tensors() {
		w := make([]int32, shapes[i])
		for j := range w {
			w[j] = int32(binary.LittleEndian.Uint32(rest))
			rest = rest[4:]
		}
		*t = w
	}
	return s, nil
}
