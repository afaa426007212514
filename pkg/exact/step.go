package exact

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// ErrInvalidData is wrapped by errors about training data and batches.
var ErrInvalidData = errors.New("exact: invalid data")

// batchDomain separates window selection from other SHA-256 uses.
const batchDomain = "depinchain/exact/batch/v1"

// Window is one training example: stream[Start : Start+Length], Length =
// context+1 (context input tokens; each position's target is the next). It is
// the protocol's one window type, which data proofs (pkg/traindata) open.
type Window = traindata.Window

// BatchWindows returns the batch windows of step step over a stream of
// streamSize bytes. Window k starts at
//
//	u64le(SHA-256(batchDomain || u64(len(seed)) || seed || u64(step) || u32(k))[:8]) mod (streamSize - context)
//
// so the data a step trains on depends only on the job seed, the step and
// the stream's size. Window k belongs to micro-batch k div micro_batch.
func BatchWindows(cfg Config, seed []byte, step uint64, streamSize uint64) ([]Window, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	wl := uint64(cfg.Model.Context) + 1
	if streamSize < wl {
		return nil, fmt.Errorf("%w: %d bytes of data, need at least context+1 = %d", ErrInvalidData, streamSize, wl)
	}
	starts := streamSize - uint64(cfg.Model.Context)
	prefix := []byte(batchDomain)
	prefix = binary.LittleEndian.AppendUint64(prefix, uint64(len(seed)))
	prefix = append(prefix, seed...)
	prefix = binary.LittleEndian.AppendUint64(prefix, step)
	ws := make([]Window, cfg.Train.Batch)
	for k := range ws {
		d := sha256.Sum256(binary.LittleEndian.AppendUint32(prefix, uint32(k)))
		ws[k] = Window{Start: binary.LittleEndian.Uint64(d[:8]) % starts, Length: wl}
	}
	return ws, nil
}

// Batch returns each window's bytes (sub-slices of stream).
func Batch(stream []byte, ws []Window) ([][]byte, error) {
	out := make([][]byte, len(ws))
	for i, w := range ws {
		if w.Start > uint64(len(stream)) || w.Length > uint64(len(stream))-w.Start {
			return nil, fmt.Errorf("%w: window %d [%d, +%d) exceeds %d bytes", ErrInvalidData, i, w.Start, w.Length, len(stream))
		}
		out[i] = stream[w.Start : w.Start+w.Length : w.Start+w.Length]
	}
	return out, nil
}

// StepBatch returns the batch of the state's next step over stream.
func StepBatch(cfg Config, seed []byte, step uint64, stream []byte) ([][]byte, error) {
	ws, err := BatchWindows(cfg, seed, step, uint64(len(stream)))
	if err != nil {
		return nil, err
	}
	return Batch(stream, ws)
}

// ReadStreamDir returns the training stream of a data directory: the
// regular files directly in dir, in byte-wise order of their names,
// concatenated. (The PyTorch trainer reads DEPIN_DATA_DIR the same way.)
func ReadStreamDir(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// StepInfo reports a step's result.
type StepInfo struct {
	// Loss is the step's mean training loss at Q30 (nats·2^30).
	Loss int64
	// Root is the new state's Merkle root (h_{i+1}).
	Root merkle.Hash
}

// LossNats converts a Q30 loss to nats.
func LossNats(q int64) float64 { return math.Ldexp(float64(q), -FracProb) }

// Step applies one training step to s with the given batch (Batch
// windows of context+1 bytes, in example order) and returns the new state.
// s is not modified.
func Step(s *State, batch [][]byte) (*State, StepInfo, error) {
	return (&Executor{}).Step(s, batch)
}

// Step is the package-level Step with e's workers and observer.
func (e *Executor) Step(s *State, batch [][]byte) (*State, StepInfo, error) {
	g := TrainGraph(s.Config)
	inputs, err := StepInputs(g, s, batch)
	if err != nil {
		return nil, StepInfo{}, err
	}
	env, err := e.Run(g, inputs)
	if err != nil {
		return nil, StepInfo{}, err
	}
	next := &State{Config: s.Config, Step: s.Step + 1, Loss: env[g.ID("loss")].Data[0]}
	for _, t := range s.Tensors {
		out := env[g.ID("next."+t.Spec.Name)]
		next.Tensors = append(next.Tensors, &Tensor{Spec: t.Spec, Data: out.Data})
	}
	return next, StepInfo{Loss: next.Loss, Root: next.Root()}, nil
}

// StepInputs returns the input tensors of g (a TrainGraph) for stepping s
// with batch: "step", the micro-batch windows and the state tensors.
func StepInputs(g *Graph, s *State, batch [][]byte) (map[int]*Tensor, error) {
	cfg := s.Config
	if len(batch) != cfg.Train.Batch {
		return nil, fmt.Errorf("%w: batch has %d windows, want %d", ErrInvalidData, len(batch), cfg.Train.Batch)
	}
	in := map[int]*Tensor{}
	in[g.ID("step")] = &Tensor{Data: []int64{int64(s.Step)}}
	mbs := cfg.Train.MicroBatch
	wl := cfg.Model.Context + 1
	for k := range cfg.MicroBatches() {
		data := make([]int64, 0, mbs*wl)
		for _, w := range batch[k*mbs : (k+1)*mbs] {
			if len(w) != wl {
				return nil, fmt.Errorf("%w: window of %d bytes, want %d", ErrInvalidData, len(w), wl)
			}
			for _, c := range w {
				data = append(data, int64(c))
			}
		}
		in[g.ID(fmt.Sprintf("mb%d.window", k))] = &Tensor{Data: data}
	}
	for _, t := range s.Tensors {
		in[g.ID(t.Spec.Name)] = &Tensor{Data: t.Data}
	}
	return in, nil
}

// Run trains s for n steps on stream (the job's data, windows by seed) and
// returns the final state; onStep, if set, sees every step's result and may
// stop the run by returning an error. s is not modified.
func Run(s *State, stream, seed []byte, n uint64, onStep func(step uint64, info StepInfo) error) (*State, error) {
	for end := s.Step + n; s.Step < end; {
		batch, err := StepBatch(s.Config, seed, s.Step, stream)
		if err != nil {
			return nil, err
		}
		var info StepInfo
		if s, info, err = Step(s, batch); err != nil {
			return nil, err
		}
		if onStep != nil {
			if err := onStep(s.Step, info); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}
