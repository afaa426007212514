package reftrainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"testing"
	"time"
)

// countingMeter records what Step reports.
type countingMeter struct {
	total uint64
	calls int
}

func (m *countingMeter) ConsumeMACs(n uint64) {
	m.total += n
	m.calls++
}

func batchFor(t testing.TB, s *State, data, jobSeed []byte) [][]byte {
	t.Helper()
	windows, err := BatchWindows(s.Config, jobSeed, s.Step, uint64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := Batch(data, windows)
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func hashTrace(t *testing.T, s *State, data, jobSeed []byte, steps uint64) [][32]byte {
	t.Helper()
	var trace [][32]byte
	_, err := Run(s, data, jobSeed, steps, func(step uint64, h [32]byte, _ StepMetrics) error {
		if step != uint64(len(trace))+1+s.Step {
			t.Fatalf("onStep got step %d after %d steps from %d", step, len(trace), s.Step)
		}
		trace = append(trace, h)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return trace
}

// TestMACCountIsExact runs a step with a counting meter and compares the
// reported work with the formula the chain charges by. The counts are made
// inside the kernels as they run, so this checks the formula against the
// loops actually executed.
func TestMACCountIsExact(t *testing.T) {
	odd := Config{Vocab: 256, Embed: 3, Context: 7, Hidden: 5, BatchSize: 3, LearningRate: One}
	tiny := Config{Vocab: 2, Embed: 1, Context: 1, Hidden: 1, BatchSize: 1, LearningRate: 1}
	type namedConfig struct {
		name string
		cfg  Config
	}
	configs := []namedConfig{{"default", DefaultConfig()}, {"odd", odd}, {"tiny", tiny}}
	if !testing.Short() {
		configs = append(configs, namedConfig{"worst case", WorstCaseConfig()})
	}
	data := DefaultCorpus()
	for _, c := range configs {
		name, cfg := c.name, c.cfg
		s, err := Init(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var meter countingMeter
		if _, _, err := Step(s, batchFor(t, s, data, []byte(name)), &meter); err != nil {
			t.Fatal(err)
		}
		if meter.total != cfg.MACsPerStep() {
			t.Errorf("%s: step reported %d MACs, MACsPerStep() = %d", name, meter.total, cfg.MACsPerStep())
		}
		if meter.calls != int(cfg.BatchSize)+1 {
			t.Errorf("%s: %d meter calls, want one per window plus the update", name, meter.calls)
		}
	}
}

func TestStepDoesNotMutateInputs(t *testing.T) {
	s := trainedState(t, 2)
	before := s.Encode()
	batch := batchFor(t, s, DefaultCorpus(), []byte("job"))
	var batchBefore [][]byte
	for _, w := range batch {
		batchBefore = append(batchBefore, append([]byte(nil), w...))
	}
	next, _, err := Step(s, batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Encode(), before) {
		t.Fatal("Step modified its input state")
	}
	for i := range batch {
		if !bytes.Equal(batch[i], batchBefore[i]) {
			t.Fatal("Step modified its batch")
		}
	}
	if next.Step != s.Step+1 || next.Hash() == s.Hash() {
		t.Fatalf("next state: Step %d (from %d), hash changed %v", next.Step, s.Step, next.Hash() != s.Hash())
	}
	if &next.Embedding[0] == &s.Embedding[0] {
		t.Fatal("next state shares weight memory with the input")
	}
}

func TestStepRejectsBadInput(t *testing.T) {
	s := trainedState(t, 0)
	good := batchFor(t, s, DefaultCorpus(), nil)
	short := append([][]byte(nil), good...)
	short[3] = short[3][:len(short[3])-1]
	long := append([][]byte(nil), good...)
	long[0] = []byte("abcdef")
	broken := s.clone()
	broken.HiddenWeights = nil
	exhausted := s.clone()
	exhausted.Step = math.MaxUint64
	cases := []struct {
		name  string
		state *State
		batch [][]byte
		want  error
	}{
		{"too few windows", s, good[:len(good)-1], ErrInvalidData},
		{"too many windows", s, append(good, good[0]), ErrInvalidData},
		{"no windows", s, nil, ErrInvalidData},
		{"short window", s, short, ErrInvalidData},
		{"long window", s, long, ErrInvalidData},
		{"nil state", nil, good, ErrInvalidState},
		{"missing weights", broken, good, ErrInvalidState},
		{"step counter exhausted", exhausted, good, ErrInvalidState},
	}
	for _, c := range cases {
		next, _, err := Step(c.state, c.batch, nil)
		if !errors.Is(err, c.want) || next != nil {
			t.Errorf("%s: Step = (%v, %v), want %v", c.name, next, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestDeterministicTrace checks what the dispute game relies on: two runs
// give identical hash traces, and a referee that decodes the state at step i
// and re-executes reproduces h_{i+1}, ... exactly.
func TestDeterministicTrace(t *testing.T) {
	data, job := DefaultCorpus(), []byte("determinism")
	start, err := Init(testConfig("determinism"))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 40
	first := hashTrace(t, start, data, job, steps)
	second := hashTrace(t, start, data, job, steps)
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("runs diverge at step %d", i+1)
		}
	}

	mid, err := Run(start, data, job, steps/2, nil)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := Decode(mid.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resumed := hashTrace(t, decoded, data, job, steps/2)
	for i, h := range resumed {
		if h != first[steps/2+i] {
			t.Fatalf("resumed run diverges at step %d", steps/2+i+1)
		}
	}

	// The referee path: one Step on the decoded state with the windows
	// BatchWindows selects for its step index, metered.
	var meter countingMeter
	refereed, _, err := Step(decoded, batchFor(t, decoded, data, job), &meter)
	if err != nil {
		t.Fatal(err)
	}
	if refereed.Hash() != first[steps/2] {
		t.Fatal("single refereed step disagrees with the trace")
	}
}

// TestGoldenHash pins the state hash after a fixed run. If it fails, the
// arithmetic, the data selection, the initialisation, the encoding or the
// shipped corpus has changed. Apart from the corpus, that is a
// consensus-breaking protocol change, which needs a new stateMagic version
// and a deliberate update of this value.
func TestGoldenHash(t *testing.T) {
	const (
		steps  = 25
		golden = "9fce2da337ab90c90e7b7d5e29e6cf409ac905f16243ccff5e15c32167a2dceb"
	)
	s, err := Init(testConfig("depinchain reftrainer golden"))
	if err != nil {
		t.Fatal(err)
	}
	s, err = Run(s, DefaultCorpus(), []byte("golden job"), steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Hash()
	if got := hex.EncodeToString(h[:]); got != golden {
		t.Fatalf("hash after %d steps = %s, want %s", steps, got, golden)
	}
}

// TestModelLearns trains DefaultConfig on the shipped corpus and requires
// the mean loss of the last 50 steps to be well below the loss at the start
// (about ln 96 ≈ 4.56 nats for an untrained model), for two seeds.
func TestModelLearns(t *testing.T) {
	const (
		steps = 800
		tail  = 50
		head  = 10
	)
	for _, seed := range []string{"learn-1", "learn-2"} {
		s, err := Init(testConfig(seed))
		if err != nil {
			t.Fatal(err)
		}
		var losses []int64
		_, err = Run(s, DefaultCorpus(), []byte(seed), steps, func(_ uint64, _ [32]byte, m StepMetrics) error {
			losses = append(losses, int64(m.MeanLoss))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		mean := func(xs []int64) int32 {
			var sum int64
			for _, x := range xs {
				sum += x
			}
			return int32(sum / int64(len(xs)))
		}
		initial, final := mean(losses[:head]), mean(losses[steps-tail:])
		t.Logf("%s: mean loss of first %d steps %s, of last %d steps %s (%d%%)",
			seed, head, FormatQ16(initial), tail, FormatQ16(final), 100*int64(final)/int64(initial))
		if lnVocab := lnQ16(int32(s.Config.Vocab) * One); initial < lnVocab*8/10 || initial > lnVocab*11/10 {
			t.Errorf("%s: initial loss %s is not near ln(Vocab) = %s", seed, FormatQ16(initial), FormatQ16(lnVocab))
		}
		if int64(final) >= int64(initial)*85/100 {
			t.Errorf("%s: final loss %s is not below 85%% of initial %s", seed, FormatQ16(final), FormatQ16(initial))
		}
	}
}

func TestRunStopsOnCallbackError(t *testing.T) {
	s, err := Init(testConfig("run"))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	got, err := Run(s, DefaultCorpus(), nil, 10, func(step uint64, _ [32]byte, _ StepMetrics) error {
		if step == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || got.Step != 3 {
		t.Fatalf("Run = (step %d, %v), want step 3 and the callback's error", got.Step, err)
	}
	if _, err := Run(s, []byte("abc"), nil, 1, nil); !errors.Is(err, ErrInvalidData) {
		t.Fatalf("Run on too little data: %v", err)
	}
}

func BenchmarkStep(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"default", DefaultConfig()}, {"worst-case", WorstCaseConfig()}} {
		b.Run(bc.name, func(b *testing.B) {
			bc.cfg.Seed = sha256.Sum256([]byte(bc.name))
			s, err := Init(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			batch := batchFor(b, s, DefaultCorpus(), nil)
			iterations := 0
			start := time.Now()
			for b.Loop() {
				if _, _, err := Step(s, batch, nil); err != nil {
					b.Fatal(err)
				}
				iterations++
			}
			elapsed := time.Since(start).Seconds()
			b.ReportMetric(float64(bc.cfg.MACsPerStep())*float64(iterations)/elapsed, "MACs/s")
		})
	}
}
