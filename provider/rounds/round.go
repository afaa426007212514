package rounds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
)

// ErrBadPseudoGradient is wrapped when a fetched pseudo-gradient file is not the one its
// worker committed (another root, round, worker or base).
var ErrBadPseudoGradient = errors.New("rounds: pseudo-gradient does not match its commitment")

// Job is what every round of one training-together job shares.
type Job struct {
	ID      uint64
	Seed    []byte
	Config  exact.Config
	Sync    diloco.Sync
	Workers uint32
	// Dir holds the job's round files: global states, pseudo-gradients, error buffers.
	Dir string
	// DataDir holds the workers' training streams, a folder per round (RoundDataDir).
	DataDir string
	// Data puts a worker's data of a round in its folder: CorpusData, or a dataset's
	// shards (the role's datasetData).
	Data RoundData
}

// ErrNoData is wrapped when a round assigns a worker slot no shard: it sits the round out.
var ErrNoData = errors.New("rounds: the round assigns this slot no data")

// RoundData writes worker's training stream of round into dir: the bytes of the shards
// diloco.Assign gives the slot in the round (diloco.WorkerData), in files whose
// concatenation in name order is the stream. A round that gives the slot none is ErrNoData.
type RoundData func(ctx context.Context, round uint64, worker uint32, dir string) error

// CorpusData is the RoundData of a job on the built-in corpus: the slot's shards of it
// (diloco.CorpusShards of DefaultShardBytes, x/verify's WorkerTrainingData), one file.
func CorpusData(seed []byte, workers uint32) RoundData {
	return func(_ context.Context, round uint64, worker uint32, dir string) error {
		corpus := traindata.BuiltinCorpus()
		shards := diloco.CorpusShards(uint64(len(corpus)), diloco.DefaultShardBytes)
		a, err := diloco.Assign(seed, round, shards, int(workers))
		if err != nil {
			return err
		}
		if int(worker) >= len(a) || len(a[worker]) == 0 {
			return fmt.Errorf("%w: round %d, worker %d (%d corpus shards over %d workers)", ErrNoData, round, worker, len(shards), workers)
		}
		data, err := diloco.WorkerData(corpus, seed, round, shards, int(workers), int(worker))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return pieces.WriteBytesAtomic(filepath.Join(dir, trainer.CorpusFileName), data)
	}
}

// RoundDataDir is the folder of a worker's training stream in round.
func (j Job) RoundDataDir(round uint64) string {
	return filepath.Join(j.DataDir, "round-"+strconv.FormatUint(round, 10))
}

// GlobalPath is G_round's file (diloco.GlobalState.Encode).
func (j Job) GlobalPath(round uint64) string {
	return filepath.Join(j.Dir, "global-"+strconv.FormatUint(round, 10))
}

// PseudoGradientPath is worker's pseudo-gradient file of round, as committed.
func (j Job) PseudoGradientPath(round uint64, worker uint32) string {
	return filepath.Join(j.Dir, fmt.Sprintf("pg-%d-%d", round, worker))
}

// errBufPath is worker's compression error buffer after round (kept locally: it is
// a deterministic function of the worker's earlier rounds, never sent).
func (j Job) errBufPath(round uint64, worker uint32) string {
	return filepath.Join(j.Dir, fmt.Sprintf("errbuf-%d-%d", round, worker))
}

// Global reads G_round from its file.
func (j Job) Global(round uint64) (*diloco.GlobalState, error) {
	b, err := os.ReadFile(j.GlobalPath(round))
	if err != nil {
		return nil, err
	}
	g, err := diloco.DecodeGlobal(b)
	if err != nil {
		return nil, err
	}
	if g.Round != round || g.Sync != j.Sync || g.Config.Hyper() != j.Config.WithDefaults().Hyper() {
		return nil, fmt.Errorf("rounds: %s is not job %d's global state of round %d", j.GlobalPath(round), j.ID, round)
	}
	return g, nil
}

// PutGlobal writes g as the job's G_{g.Round} and returns its root.
func (j Job) PutGlobal(g *diloco.GlobalState) (merkle.Hash, uint64, error) {
	b := g.Encode()
	if err := pieces.WriteBytesAtomic(j.GlobalPath(g.Round), b); err != nil {
		return merkle.Hash{}, 0, err
	}
	return merkle.RootOfBytes(b, diloco.ChunkSize), uint64(len(b)), nil
}

// Trainer runs one round run of the trainer contract (env.Round set: DEPIN_ROUND,
// DEPIN_GLOBAL_STATE, …) until it ended, nil when its round-end checkpoint is complete;
// its logs, if any, go to logDir and its steps to onStep. runtime.Reference (the Go exact
// trainer, in process) and runtime.ExactTorch (train.py, runtimes.exact_torch) are
// Trainers and write the same checkpoint bit for bit.
type Trainer interface {
	RunRound(ctx context.Context, env trainer.Env, logDir string, onStep func(trainer.StepMetric)) error
}

// Worker is one worker slot's side of a job.
type Worker struct {
	Job
	Index uint32
	// Trainer trains the worker's rounds; nil is the Go exact trainer (runtime.Reference).
	Trainer Trainer
	// LeaseID and GPUs (the leased GPUs' UUIDs) are the round runs' DEPIN_LEASE_ID and
	// CUDA_VISIBLE_DEVICES.
	LeaseID uint64
	GPUs    []string
	// OutputDir receives the trainer's checkpoint folders (the lease's output folder,
	// which the checkpoint server serves for disputes); LogDir the trainer's logs (a
	// trainer process's; the Go trainer has none).
	OutputDir, LogDir string
	// Carry is the round whose end state and error buffer the worker carries into the
	// next one: the last round it entered; nil for a worker that has entered none (a
	// joiner starts from WorkerStart(nil)).
	Carry *uint64
	// skewErrorOut (tests only: Options.CheatErrorOut) keeps and names an error buffer
	// with one element off.
	skewErrorOut bool
}

// Contribution is a worker's result of one round: what MsgCommitRound and the round's
// MsgSubmitCheckpoint commit.
type Contribution struct {
	Round  uint64
	Worker uint32
	// Checkpoint is the round-end checkpoint: its trace runs from the WorkerStart
	// state's root (StartRoot) to the end state's (EndRoot).
	Checkpoint         trainer.Checkpoint
	StartRoot, EndRoot merkle.Hash
	// PseudoGradientPath is the committed file (dense or compressed), PseudoGradientRoot
	// its commitment.
	PseudoGradientPath string
	PseudoGradientRoot merkle.Hash
	PseudoGradientSize uint64
}

// Train puts the worker's data of round in RoundDataDir (Data) and runs the round with
// its Trainer (the trainer contract's round run: DEPIN_ROUND, DEPIN_GLOBAL_STATE, …),
// then writes its pseudo-gradient; a round that gives the slot no data is ErrNoData. A
// round-end checkpoint already complete (a restart) is not trained again. G_round must be
// at GlobalPath(round).
func (w Worker) Train(ctx context.Context, round uint64, onStep func(trainer.StepMetric)) (Contribution, error) {
	end := w.Sync.RoundStart(round + 1)
	env := trainer.Env{
		JobID: w.ID, LeaseID: w.LeaseID, OutputDir: w.OutputDir, DataDir: w.RoundDataDir(round), VisibleDevices: w.GPUs,
		StartStep: w.Sync.RoundStart(round), TotalSteps: end, CheckpointInterval: uint64(w.Sync.Every), JobSeed: w.Seed,
		Exact: &w.Config,
		Round: &trainer.RoundEnv{Worker: w.Index, Workers: w.Workers, Round: round, GlobalState: w.GlobalPath(round), Sync: w.Sync},
	}
	if w.Carry != nil {
		if *w.Carry >= round {
			return Contribution{}, fmt.Errorf("rounds: worker %d carries round %d into round %d", w.Index, *w.Carry, round)
		}
		env.ResumeFrom = trainer.CheckpointDir(w.OutputDir, w.Sync.RoundStart(*w.Carry+1))
		if _, err := os.Stat(filepath.Join(env.ResumeFrom, trainer.CompleteMarkerName)); err != nil {
			return Contribution{}, fmt.Errorf("rounds: worker %d carries its round-%d end state into round %d and its checkpoint is not here: %w", w.Index, *w.Carry, round, err)
		}
	}
	if _, err := os.Stat(filepath.Join(trainer.CheckpointDir(w.OutputDir, end), trainer.CompleteMarkerName)); err != nil {
		if err := w.Data(ctx, round, w.Index, env.DataDir); err != nil {
			return Contribution{}, fmt.Errorf("the data of round %d of worker %d: %w", round, w.Index, err)
		}
		tr := w.Trainer
		if tr == nil {
			tr = &runtime.Reference{}
		}
		if err := tr.RunRound(ctx, env, w.LogDir, onStep); err != nil {
			return Contribution{}, fmt.Errorf("round %d of worker %d: %w", round, w.Index, err)
		}
	}
	cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(w.OutputDir, end), end)
	if err != nil {
		return Contribution{}, err
	}
	c := Contribution{Round: round, Worker: w.Index, Checkpoint: cp, StartRoot: cp.StartHash(), EndRoot: cp.FinalHash()}
	if err := w.pseudoGradient(round, cp, &c); err != nil {
		return Contribution{}, err
	}
	return c, nil
}

// pseudoGradient writes the round's pseudo-gradient of the end state in cp: dense, or
// compressed with the error buffer of the carried round (the new buffer kept as this
// round's, used only if the worker enters it).
func (w Worker) pseudoGradient(round uint64, cp trainer.Checkpoint, c *Contribution) error {
	g, err := w.Global(round)
	if err != nil {
		return err
	}
	local, err := exact.LoadCheckpointState(cp.Dir)
	if err != nil {
		return err
	}
	pg, err := diloco.NewPseudoGradient(g, w.Index, local)
	if err != nil {
		return err
	}
	var file []byte
	if w.Sync.TopK == 0 {
		file = pg.EncodeDense()
	} else {
		var errBuf []int64
		if w.Carry != nil {
			if errBuf, err = readErrBuf(w.errBufPath(*w.Carry, w.Index), len(pg.Delta)); err != nil {
				return err
			}
		}
		var newErr []int64
		if pg, newErr, err = pg.Compress(errBuf); err != nil {
			return err
		}
		if w.skewErrorOut {
			newErr[0]++
			pg.ErrOut = diloco.ErrorBufferRoot(newErr)
		}
		if err := pieces.WriteBytesAtomic(w.errBufPath(round, w.Index), exact.EncodeValues(nil, exact.I32, newErr)); err != nil {
			return err
		}
		comp, err := pg.Compressed()
		if err != nil {
			return err
		}
		file = comp.Encode()
	}
	if c.PseudoGradientRoot, err = pg.Root(); err != nil {
		return err
	}
	c.PseudoGradientPath, c.PseudoGradientSize = w.PseudoGradientPath(round, w.Index), uint64(len(file))
	return pieces.WriteBytesAtomic(c.PseudoGradientPath, file)
}

// readErrBuf reads an error buffer of n elements (int32 little-endian).
func readErrBuf(path string, n int) ([]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rounds: the error buffer the worker carries: %w", err)
	}
	if len(b) != 4*n {
		return nil, fmt.Errorf("rounds: error buffer %s has %d bytes, want %d", path, len(b), 4*n)
	}
	v := make([]int64, n)
	return v, exact.DecodeValues(v, exact.I32, b)
}

// Entered is one worker whose pseudo-gradient entered a round, with its committed root.
type Entered struct {
	Worker uint32
	Root   merkle.Hash
}

// Fetch puts worker's committed pseudo-gradient file of round at path (from custody).
type Fetch func(ctx context.Context, round uint64, worker uint32, path string) error

// Aggregate computes G_{round+1} from G_round and the pseudo-gradients of the workers
// that entered round (ascending), each fetched unless already here, decoded and checked
// against its committed root before it counts; it writes G_{round+1} and returns it.
func (j Job) Aggregate(ctx context.Context, round uint64, entered []Entered, fetch Fetch) (*diloco.GlobalState, error) {
	g, err := j.Global(round)
	if err != nil {
		return nil, err
	}
	base := g.Root()
	pgs := make([]*diloco.PseudoGradient, 0, len(entered))
	for _, e := range entered {
		path := j.PseudoGradientPath(round, e.Worker)
		pg, err := j.readPseudoGradient(path, round, e, base)
		if err != nil {
			// Not here, or not the committed one: fetch it (again).
			if err := fetch(ctx, round, e.Worker, path); err != nil {
				return nil, fmt.Errorf("pseudo-gradient of worker %d in round %d: %w", e.Worker, round, err)
			}
			if pg, err = j.readPseudoGradient(path, round, e, base); err != nil {
				return nil, err
			}
		}
		pgs = append(pgs, pg)
	}
	next, err := diloco.Aggregate(g, pgs)
	if err != nil {
		return nil, err
	}
	if _, _, err := j.PutGlobal(next); err != nil {
		return nil, err
	}
	return next, nil
}

// readPseudoGradient decodes a pseudo-gradient file and checks it is e's commitment of
// round computed from the global state with root base.
func (j Job) readPseudoGradient(path string, round uint64, e Entered, base merkle.Hash) (*diloco.PseudoGradient, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pg *diloco.PseudoGradient
	if j.Sync.TopK == 0 {
		pg, err = diloco.DecodePseudoGradient(b)
	} else {
		pg, err = diloco.DecodeCompressed(b)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPseudoGradient, path, err)
	}
	root, err := pg.Root()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrBadPseudoGradient, path, err)
	case root != e.Root:
		return nil, fmt.Errorf("%w: worker %d's file has root %s, it committed %s", ErrBadPseudoGradient, e.Worker, root, e.Root)
	case pg.Round != round || pg.Worker != e.Worker || pg.Base != base:
		return nil, fmt.Errorf("%w: worker %d's file is of round %d, worker %d, base %s", ErrBadPseudoGradient, e.Worker, pg.Round, pg.Worker, pg.Base)
	}
	return pg, nil
}
