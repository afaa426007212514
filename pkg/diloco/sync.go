package diloco

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrInvalidSync is wrapped by every SyncSpec.Validate error.
var ErrInvalidSync = errors.New("diloco: invalid sync spec")

// Bounds of a sync spec.
const (
	// MaxEvery bounds the inner steps of a round (a round is one dispute
	// game's worth of steps; longer rounds defeat the point of rounds).
	MaxEvery = 1 << 20
	// MaxOuterMomentum is the largest outer momentum: at 1 the buffer never
	// forgets and the outer step diverges.
	MaxOuterMomentum = 0.999
	// QOuter is the fixed-point position of outer_lr and outer_momentum
	// (Q30, like the Hyper's coefficients).
	QOuter = 30
	// MaxWorkers bounds the workers of one round: the sum of their
	// pseudo-gradients (each below 2^31) stays below 2^47.
	MaxWorkers = 1 << 16
)

// SyncSpec is the job spec's `sync` block: every `Every` inner steps the
// workers' pseudo-gradients are averaged and applied with an outer
// Nesterov-momentum SGD step (DiLoCo). YAML/JSON keys are the job spec's.
type SyncSpec struct {
	Every         int     `json:"every" yaml:"every"`
	OuterLR       float64 `json:"outer_lr" yaml:"outer_lr"`
	OuterMomentum float64 `json:"outer_momentum" yaml:"outer_momentum"`
	// TopK > 0 turns on compression: in every 4 KiB chunk of a
	// pseudo-gradient (1024 elements) only the TopK largest magnitudes are
	// sent, the rest is carried to the next round in the worker's error
	// buffer. 0 sends pseudo-gradients dense.
	TopK int `json:"top_k,omitempty" yaml:"top_k,omitempty"`
}

// SyncError lists every problem of a sync spec, each prefixed by its field
// path ("sync.outer_lr: must be in (0, 1], got 1.5"). It wraps ErrInvalidSync.
type SyncError struct{ Problems []string }

func (e *SyncError) Error() string {
	return fmt.Sprintf("%s: %s", ErrInvalidSync, strings.Join(e.Problems, "; "))
}

func (e *SyncError) Unwrap() error { return ErrInvalidSync }

// fixed returns floor(x·2^f + 1/2) for 0 ≤ x ≤ 1, exact in IEEE-754 (the
// same rule as pkg/exact's hyperparameters, so Python gets the same integer).
func fixed(x float64, f int) int64 { return int64(math.Floor(math.Ldexp(x, f) + 0.5)) }

// Validate reports every invalid field.
func (s SyncSpec) Validate() error {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if s.Every < 1 || s.Every > MaxEvery {
		add("sync.every: must be in [1, %d], got %d", MaxEvery, s.Every)
	}
	if math.IsNaN(s.OuterLR) || s.OuterLR <= 0 || s.OuterLR > 1 {
		add("sync.outer_lr: must be in (0, 1], got %g", s.OuterLR)
	} else if fixed(s.OuterLR, QOuter) == 0 {
		add("sync.outer_lr: %g is below the resolution 2^-%d", s.OuterLR, QOuter)
	}
	if math.IsNaN(s.OuterMomentum) || s.OuterMomentum < 0 || s.OuterMomentum > MaxOuterMomentum {
		add("sync.outer_momentum: must be in [0, %g], got %g", MaxOuterMomentum, s.OuterMomentum)
	}
	if s.TopK < 0 || s.TopK > ChunkElems {
		add("sync.top_k: must be in [0, %d] (kept elements per 4 KiB chunk; 0 = dense), got %d", ChunkElems, s.TopK)
	}
	if len(probs) > 0 {
		return &SyncError{Problems: probs}
	}
	return nil
}

// Sync is the integer form of a SyncSpec: what the arithmetic uses and what
// every pseudo-gradient and global state header commits to.
type Sync struct {
	Every         int64
	OuterLR       int64 // Q30
	OuterMomentum int64 // Q30
	TopK          int64
}

// Sync returns the integer form of s, or Validate's error.
func (s SyncSpec) Sync() (Sync, error) {
	if err := s.Validate(); err != nil {
		return Sync{}, err
	}
	return Sync{Every: int64(s.Every), OuterLR: fixed(s.OuterLR, QOuter), OuterMomentum: fixed(s.OuterMomentum, QOuter), TopK: int64(s.TopK)}, nil
}

// Spec is the SyncSpec whose integer form is s (for Simulate from a job's stored
// Sync): Q30 values are exact in a float64, so Spec().Sync() returns s.
func (s Sync) Spec() SyncSpec {
	return SyncSpec{Every: int(s.Every), OuterLR: math.Ldexp(float64(s.OuterLR), -QOuter),
		OuterMomentum: math.Ldexp(float64(s.OuterMomentum), -QOuter), TopK: int(s.TopK)}
}

// SyncEncodedSize is the length of Sync.Encode.
const SyncEncodedSize = 32

// Encode is the four fields as little-endian int64 in declaration order.
func (s Sync) Encode() []byte {
	out := make([]byte, 0, SyncEncodedSize)
	for _, v := range []int64{s.Every, s.OuterLR, s.OuterMomentum, s.TopK} {
		out = binary.LittleEndian.AppendUint64(out, uint64(v))
	}
	return out
}

// Check validates an integer Sync (one decoded from a header, or built by
// hand): the same ranges as SyncSpec.Validate, on the integers.
func (s Sync) Check() error {
	var probs []string
	if s.Every < 1 || s.Every > MaxEvery {
		probs = append(probs, fmt.Sprintf("sync.every: must be in [1, %d], got %d", MaxEvery, s.Every))
	}
	if s.OuterLR < 1 || s.OuterLR > 1<<QOuter {
		probs = append(probs, fmt.Sprintf("sync.outer_lr: must be in (0, 1], got %d·2^-%d", s.OuterLR, QOuter))
	}
	if s.OuterMomentum < 0 || s.OuterMomentum > fixed(MaxOuterMomentum, QOuter) {
		probs = append(probs, fmt.Sprintf("sync.outer_momentum: must be in [0, %g], got %d·2^-%d", MaxOuterMomentum, s.OuterMomentum, QOuter))
	}
	if s.TopK < 0 || s.TopK > ChunkElems {
		probs = append(probs, fmt.Sprintf("sync.top_k: must be in [0, %d], got %d", ChunkElems, s.TopK))
	}
	if len(probs) > 0 {
		return &SyncError{Problems: probs}
	}
	return nil
}

// DecodeSync parses Sync.Encode's output and checks it.
func DecodeSync(b []byte) (Sync, error) {
	if len(b) != SyncEncodedSize {
		return Sync{}, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidSync, len(b), SyncEncodedSize)
	}
	le := binary.LittleEndian
	s := Sync{Every: int64(le.Uint64(b)), OuterLR: int64(le.Uint64(b[8:])), OuterMomentum: int64(le.Uint64(b[16:])), TopK: int64(le.Uint64(b[24:]))}
	return s, s.Check()
}

// RoundStart is the first inner step of round r (0-based): r·every. Round r
// trains steps RoundStart(r) .. RoundStart(r+1)-1, so the learning-rate
// schedule and Adam's step count run on across rounds.
func (s Sync) RoundStart(round uint64) uint64 { return round * uint64(s.Every) }

// RoundOf is the round an inner step belongs to.
func (s Sync) RoundOf(step uint64) uint64 { return step / uint64(s.Every) }
