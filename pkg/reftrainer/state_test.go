package reftrainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func testConfig(seed string) Config {
	cfg := DefaultConfig()
	cfg.Seed = sha256.Sum256([]byte(seed))
	return cfg
}

func TestInitIsDeterministicAndSeeded(t *testing.T) {
	a, err := Init(testConfig("a"))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := Init(testConfig("a"))
	b, _ := Init(testConfig("b"))
	if a.Hash() != a2.Hash() {
		t.Error("same seed gave different initial states")
	}
	if a.Hash() == b.Hash() {
		t.Error("different seeds gave the same initial state")
	}
	if a.Step != 0 {
		t.Errorf("initial Step = %d", a.Step)
	}
	inRange := func(name string, w []int32, limit int32) {
		nonZero := 0
		for _, v := range w {
			if v < -limit || v > limit {
				t.Fatalf("%s value %d outside ±%d", name, v, limit)
			}
			if v != 0 {
				nonZero++
			}
		}
		if limit > 0 && nonZero < len(w)*9/10 {
			t.Errorf("%s: only %d of %d values non-zero", name, nonZero, len(w))
		}
	}
	inRange("Embedding", a.Embedding, One/2)
	inRange("HiddenWeights", a.HiddenWeights, One/5) // fan-in 32, isqrt 5
	inRange("OutputWeights", a.OutputWeights, One/5) // fan-in 32
	inRange("HiddenBias", a.HiddenBias, 0)
	inRange("OutputBias", a.OutputBias, 0)
}

func TestInitRejectsInvalidConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Hidden = 0
	if _, err := Init(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Init(Hidden=0) = %v", err)
	}
}

func trainedState(t testing.TB, steps uint64) *State {
	t.Helper()
	s, err := Init(testConfig("trained"))
	if err != nil {
		t.Fatal(err)
	}
	s, err = Run(s, DefaultCorpus(), []byte("job"), steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	s := trainedState(t, 3)
	enc := s.Encode()
	if want := stateHeaderSize + 4*int(s.Config.NumParams()); len(enc) != want {
		t.Fatalf("encoding is %d bytes, want %d", len(enc), want)
	}
	got, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatal("Decode(Encode(s)) != s")
	}
	if !bytes.Equal(got.Encode(), enc) || got.Hash() != sha256.Sum256(enc) {
		t.Fatal("re-encoding or hash differs")
	}
}

func TestDecodeIsStrict(t *testing.T) {
	valid := trainedState(t, 1).Encode()
	mutated := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), valid...))
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", valid[:stateHeaderSize]},
		{"truncated header", valid[:stateHeaderSize-1]},
		{"one byte short", valid[:len(valid)-1]},
		{"trailing byte", append(append([]byte(nil), valid...), 0)},
		{"bad magic", mutated(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"future version", mutated(func(b []byte) []byte { b[3] = 2; return b })},
		{"invalid vocab", mutated(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1); return b })},
		{"zero learning rate", mutated(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 0); return b })},
		// A valid config for a bigger model than the bytes hold.
		{"hidden too large for data", mutated(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 33); return b })},
	}
	for _, c := range cases {
		if s, err := Decode(c.data); !errors.Is(err, ErrInvalidState) || s != nil {
			t.Errorf("%s: Decode = (%v, %v), want ErrInvalidState", c.name, s, err)
		}
	}
}

func TestStateValidateChecksShapes(t *testing.T) {
	var nilState *State
	if err := nilState.Validate(); !errors.Is(err, ErrInvalidState) {
		t.Errorf("nil state: %v", err)
	}
	s := trainedState(t, 0)
	s.OutputBias = s.OutputBias[:len(s.OutputBias)-1]
	if err := s.Validate(); !errors.Is(err, ErrInvalidState) {
		t.Errorf("short OutputBias: %v", err)
	}
}

// FuzzDecode checks Decode never panics and accepts only canonical
// encodings: whatever it accepts re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	small := DefaultConfig()
	small.Vocab, small.Embed, small.Context, small.Hidden, small.BatchSize = 2, 1, 1, 1, 1
	s, err := Init(small)
	if err != nil {
		f.Fatal(err)
	}
	enc := s.Encode()
	f.Add(enc)
	f.Add(enc[:len(enc)-1])
	f.Add(append(append([]byte(nil), enc...), 7))
	f.Add(trainedState(f, 1).Encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid state: %v", err)
		}
		if !bytes.Equal(s.Encode(), data) {
			t.Fatal("Decode accepted a non-canonical encoding")
		}
	})
}
