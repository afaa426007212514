package exact

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
)

//go:embed testdata/corpus.txt
var testCorpus []byte

var testSeed = []byte("exact test seed")

// trained returns cfg's state after n steps on the test corpus.
func trained(t testing.TB, cfg Config, n int) *State {
	t.Helper()
	s, err := Init(cfg, testSeed)
	require.NoError(t, err)
	for range n {
		b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
		require.NoError(t, err)
		s, _, err = Step(s, b)
		require.NoError(t, err)
	}
	return s
}

func TestInitIsDeterministicAndSeedDependent(t *testing.T) {
	cfg := tinyConfig()
	a, err := Init(cfg, testSeed)
	require.NoError(t, err)
	b, _ := Init(cfg, testSeed)
	c, _ := Init(cfg, []byte("another seed"))
	require.Equal(t, a.Root(), b.Root())
	require.NotEqual(t, a.Root(), c.Root())
	// Uniform in [-R, R] with R = ISqrt(3σ²): the standard deviation is σ.
	h := cfg.Hyper()
	for pi, p := range Params(a.Config) {
		w := a.Tensors[3*pi].Data
		R := InitRadius(h, p)
		var sum2 float64
		for _, v := range w {
			require.LessOrEqual(t, v, R)
			require.GreaterOrEqual(t, v, -R)
			sum2 += float64(v) * float64(v)
		}
		std := float64(h.InitStd)
		if p.Residual {
			std /= 2 // √(2·layers) with 2 layers
		}
		require.InDelta(t, std, sqrt(sum2/float64(len(w))), 0.15*std, p.Name)
		for _, m := range a.Tensors[3*pi+1].Data {
			require.Zero(t, m)
		}
	}
	_, err = Init(Config{}, testSeed)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

func sqrt(x float64) float64 {
	z := x
	for range 60 {
		z = (z + x/z) / 2
	}
	return z
}

func TestStateEncodeDecodeRoundTrip(t *testing.T) {
	s := trained(t, tinyConfig(), 3)
	enc := s.Encode()
	require.Equal(t, int(s.Config.StateBytes()), len(enc))
	require.Equal(t, merkle.RootOfBytes(enc, ChunkSize), s.Root())
	require.Equal(t, StateRoot(enc), s.Root())
	d, err := Decode(enc)
	require.NoError(t, err)
	require.Equal(t, s.Step, d.Step)
	require.Equal(t, s.Loss, d.Loss)
	require.Equal(t, enc, d.Encode())
	// The step and loss sit in the first chunk.
	require.Equal(t, uint64(3), binary.LittleEndian.Uint64(enc[offStep:]))
	require.Equal(t, uint64(s.Loss), binary.LittleEndian.Uint64(enc[offLoss:]))
	// Every tensor starts on a chunk boundary.
	l := newStateLayout(s.Config)
	for _, off := range l.offsets {
		require.Zero(t, off%ChunkSize)
	}
}

// Decode refuses every non-canonical variation, and refusing leaves the
// caller's bytes untouched.
func TestDecodeRejects(t *testing.T) {
	s := trained(t, tinyConfig(), 1)
	enc := s.Encode()
	l := newStateLayout(s.Config)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), enc...)) }
	cases := map[string][]byte{
		"magic":     mutate(func(b []byte) []byte { b[0] ^= 1; return b }),
		"version":   mutate(func(b []byte) []byte { b[offVersion] = 9; return b }),
		"digest":    mutate(func(b []byte) []byte { b[offDigest] ^= 1; return b }),
		"config":    mutate(func(b []byte) []byte { b[offConfig] = 3; return b }),
		"table":     mutate(func(b []byte) []byte { b[offTable+3] ^= 1; return b }),
		"padding":   mutate(func(b []byte) []byte { b[l.header+1] = 1; return b }),
		"truncated": enc[:len(enc)-1],
		"trailing":  append(append([]byte(nil), enc...), 0),
		"negative v": mutate(func(b []byte) []byte {
			off := l.offsets[2] // tok_emb.v
			binary.LittleEndian.PutUint64(b[off:], uint64(1<<63))
			return b
		}),
		"int32 min weight": mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[l.offsets[0]:], 1<<31)
			return b
		}),
		"loss at step 0": mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[offStep:], 0)
			return b
		}),
		"negative loss": mutate(func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[offLoss:], uint64(1<<63))
			return b
		}),
		"empty": nil,
	}
	for name, b := range cases {
		before := append([]byte(nil), b...)
		_, err := Decode(b)
		require.ErrorIs(t, err, ErrInvalidState, name)
		require.Equal(t, before, b, name)
	}
}

func FuzzDecode(f *testing.F) {
	enc := trained(f, Config{Model: ModelConfig{Layers: 1, DModel: 4, Heads: 1, DFF: 4, Context: 2, Vocab: 256},
		Train: TrainConfig{Batch: 1, LR: 0.01}}, 1).Encode()
	f.Add(enc)
	f.Add(enc[:300])
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(s.Encode(), b) {
			t.Fatal("a decoded state does not re-encode to its input")
		}
	})
}

// DecodeHeader reads step, loss and the state's size from chunk 0 alone,
// and refuses a chunk that is not the start of a state.
func TestDecodeHeaderFromTheFirstChunk(t *testing.T) {
	s := trained(t, tinyConfig(), 2)
	enc := s.Encode()
	h, err := DecodeHeader(enc[:ChunkSize])
	require.NoError(t, err)
	require.Equal(t, s.Step, h.Step)
	require.Equal(t, s.Loss, h.Loss)
	require.NotZero(t, h.Loss)
	require.Equal(t, int64(len(enc)), h.StateBytes)
	require.Equal(t, uint64((len(enc)+ChunkSize-1)/ChunkSize), h.Chunks)
	require.Equal(t, s.Config.Hyper(), h.Config.Hyper())

	_, err = DecodeHeader(enc[:offTable-1])
	require.ErrorIs(t, err, ErrInvalidState)
	bad := append([]byte(nil), enc[:ChunkSize]...)
	bad[offConfig]++
	_, err = DecodeHeader(bad)
	require.ErrorIs(t, err, ErrInvalidState, "a config that does not match its digest")
	bad = append([]byte(nil), enc[:ChunkSize]...)
	binary.LittleEndian.PutUint64(bad[offLoss:], uint64(MaxLossTok)+1)
	_, err = DecodeHeader(bad)
	require.ErrorIs(t, err, ErrInvalidState, "a loss out of range")
}
