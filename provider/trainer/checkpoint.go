package trainer

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
)

// Names of the files and folders of a trainer's output (see CONTRACT.md).
const (
	// CheckpointsDirName is the folder of OutputDir holding one folder per
	// checkpoint, named CheckpointDirPrefix followed by the end step.
	CheckpointsDirName  = "checkpoints"
	CheckpointDirPrefix = "step-"
	// StateFileName holds the checkpoint's model state; its hash (see
	// StateHash) is the last hash of the trace.
	StateFileName = "state"
	// TraceFileName holds h_start..h_end in the x/verify trace-file format.
	TraceFileName = "trace.txt"
	// CompleteMarkerName is created in a checkpoint folder after its other
	// files are written and flushed. The sidecar ignores folders without it,
	// so it never reads a checkpoint the trainer is still writing.
	CompleteMarkerName = "COMPLETE"
	// MetricsFileName is the per-step metrics log in OutputDir.
	MetricsFileName = "metrics.jsonl"
	// DoneMarkerName is created in OutputDir after the final checkpoint.
	DoneMarkerName = "DONE"
)

// Errors about checkpoint folders, wrapped with details.
var (
	// ErrCheckpointIncomplete: the folder has no COMPLETE marker (yet).
	ErrCheckpointIncomplete = errors.New("trainer: checkpoint not complete")
	// ErrInvalidCheckpoint: a complete folder breaks the contract.
	ErrInvalidCheckpoint = errors.New("trainer: invalid checkpoint")
)

// CheckpointDir returns the folder of the checkpoint ending at step.
func CheckpointDir(outputDir string, step uint64) string {
	return filepath.Join(outputDir, CheckpointsDirName, CheckpointDirPrefix+strconv.FormatUint(step, 10))
}

// Checkpoint is a validated checkpoint folder.
type Checkpoint struct {
	Dir string
	// Trace is h_start..h_end; Trace.Start is the checkpoint's start step
	// and Trace.End() its end step.
	Trace trace.Trace
	// StateSize is the size of the state file in bytes.
	StateSize int64
	// Hash is how h_end commits to the state file.
	Hash StateHash
}

// StateHash names how a checkpoint's h_end commits to its state file.
type StateHash uint8

const (
	// StateSHA256: h_end is the SHA-256 of the state file (container
	// workloads).
	StateSHA256 StateHash = iota + 1
	// StateRoot: h_end is the state file's Merkle root over
	// trace.CheckpointChunkSize chunks, the checkpoint's state_root (the
	// exact transformer workload, kinds reference and transformer, whichever
	// implementation trains it). The chain refuses such a checkpoint whose
	// final hash is not its state_root.
	StateRoot
)

func (h StateHash) String() string {
	switch h {
	case StateSHA256:
		return "SHA-256"
	case StateRoot:
		return "state root"
	default:
		return fmt.Sprintf("StateHash(%d)", uint8(h))
	}
}

// StateHash is how h_end commits to the state of a checkpoint of e's run: its
// state root for the exact workload (required), its SHA-256 by default
// otherwise (a container's trainer may also write the state root).
func (e Env) StateHash() StateHash {
	if e.Exact != nil {
		return StateRoot
	}
	return StateSHA256
}

// HashStateBytes returns both hashes h_end may be of an encoded state: its
// SHA-256 and its state root.
func HashStateBytes(state []byte) (sum, root merkle.Hash) {
	return sha256.Sum256(state), merkle.RootOfBytes(state, trace.CheckpointChunkSize)
}

// hashState reads r once and returns its SHA-256 and its state root.
func hashState(r io.Reader) (sum, root merkle.Hash, err error) {
	digest := sha256.New()
	root, _, err = merkle.StreamRoot(io.TeeReader(r, digest), trace.CheckpointChunkSize)
	if err != nil {
		return sum, root, err
	}
	copy(sum[:], digest.Sum(nil))
	return sum, root, nil
}

// hashOf reports which of the state's hashes h is, or 0 for neither.
func hashOf(h, sum, root merkle.Hash) StateHash {
	switch h {
	case sum:
		return StateSHA256
	case root:
		return StateRoot
	default:
		return 0
	}
}

// StartStep is the step of the state the checkpoint's training started from.
func (c Checkpoint) StartStep() uint64 { return c.Trace.Start }

// EndStep is the step of the checkpoint's state.
func (c Checkpoint) EndStep() uint64 { return c.Trace.End() }

// StartHash is h_start, the hash of the state training started from.
func (c Checkpoint) StartHash() merkle.Hash { return c.Trace.Hashes[0] }

// FinalHash is h_end, the hash (Hash) of the state file.
func (c Checkpoint) FinalHash() merkle.Hash { return c.Trace.Hashes[len(c.Trace.Hashes)-1] }

// StatePath is the checkpoint's state file.
func (c Checkpoint) StatePath() string { return filepath.Join(c.Dir, StateFileName) }

// TracePath is the checkpoint's trace file.
func (c Checkpoint) TracePath() string { return filepath.Join(c.Dir, TraceFileName) }

// ReadCheckpoint validates the checkpoint folder dir whose state is at
// endStep: it must be complete, its trace must parse and hold at most
// endStep+1 hashes (its start step follows from its length), and the trace's
// last hash must be the SHA-256 or the state root of its state file
// (Checkpoint.Hash says which; a Watcher also checks it is the one its run's
// workload commits). Reading hashes the whole state file once.
func ReadCheckpoint(dir string, endStep uint64) (Checkpoint, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidCheckpoint, dir, fmt.Sprintf(format, args...))
	}
	if _, err := os.Stat(filepath.Join(dir, CompleteMarkerName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Checkpoint{}, fmt.Errorf("%w: %s has no %s marker", ErrCheckpointIncomplete, dir, CompleteMarkerName)
		}
		return Checkpoint{}, err
	}
	parsed, err := trace.ReadFile(filepath.Join(dir, TraceFileName), 0)
	if err != nil {
		return Checkpoint{}, invalid("%v", err)
	}
	if steps := uint64(len(parsed.Hashes)) - 1; steps > endStep {
		return Checkpoint{}, invalid("%s holds %d steps, more than the %d before step %d", TraceFileName, steps, endStep, endStep)
	}
	tr := trace.New(endStep-uint64(len(parsed.Hashes))+1, parsed.Hashes)

	state, err := os.Open(filepath.Join(dir, StateFileName))
	if err != nil {
		return Checkpoint{}, invalid("%v", err)
	}
	defer state.Close()
	info, err := state.Stat()
	if err != nil {
		return Checkpoint{}, err
	}
	if !info.Mode().IsRegular() {
		return Checkpoint{}, invalid("%s is not a regular file", StateFileName)
	}
	sum, root, err := hashState(state)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("hashing %s: %w", state.Name(), err)
	}
	cp := Checkpoint{Dir: dir, Trace: tr, StateSize: info.Size()}
	if cp.Hash = hashOf(cp.FinalHash(), sum, root); cp.Hash == 0 {
		return Checkpoint{}, invalid("SHA-256 of %s is %s and its state root %s, but the trace ends with h_%d = %s",
			StateFileName, sum, root, endStep, cp.FinalHash())
	}
	return cp, nil
}

// CompletedSteps lists the end steps of the checkpoint folders under
// outputDir that have a COMPLETE marker, in increasing order, without
// validating them. A missing checkpoints folder means none.
func CompletedSteps(outputDir string) ([]uint64, error) {
	entries, err := os.ReadDir(filepath.Join(outputDir, CheckpointsDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var steps []uint64
	for _, entry := range entries {
		digits, ok := strings.CutPrefix(entry.Name(), CheckpointDirPrefix)
		if !ok || !entry.IsDir() {
			continue
		}
		step, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || CheckpointDir(outputDir, step) != filepath.Join(outputDir, CheckpointsDirName, entry.Name()) {
			continue // not a canonical step-<N> name, e.g. step-007 or step-1.tmp
		}
		if _, err := os.Stat(filepath.Join(outputDir, CheckpointsDirName, entry.Name(), CompleteMarkerName)); err == nil {
			steps = append(steps, step)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

// WriteCheckpoint writes the checkpoint ending at step endStep into
// outputDir the way the contract asks a trainer to: state and trace.txt,
// each flushed to disk, then the COMPLETE marker. trace is h_start..h_end and
// its last hash must be SHA-256(state) or the state's root. A folder left without COMPLETE by an
// earlier, interrupted attempt is replaced; a complete one is an error. It
// returns the folder.
func WriteCheckpoint(outputDir string, endStep uint64, state []byte, hashes []merkle.Hash) (string, error) {
	dir := CheckpointDir(outputDir, endStep)
	if len(hashes) < 2 {
		return "", fmt.Errorf("%w %s: a trace needs h_start and h_end, got %d hashes", ErrInvalidCheckpoint, dir, len(hashes))
	}
	if sum, root := HashStateBytes(state); hashOf(hashes[len(hashes)-1], sum, root) == 0 {
		return "", fmt.Errorf("%w %s: the trace's last hash is neither SHA-256 nor the root of the state", ErrInvalidCheckpoint, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, CompleteMarkerName)); err == nil {
		return "", fmt.Errorf("checkpoint %s is already complete", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := writeFileSynced(filepath.Join(dir, StateFileName), func(w io.Writer) error {
		_, err := w.Write(state)
		return err
	}); err != nil {
		return "", err
	}
	if err := writeFileSynced(filepath.Join(dir, TraceFileName), func(w io.Writer) error {
		return trace.Write(w, hashes)
	}); err != nil {
		return "", err
	}
	// The marker must not reach the disk before the files it vouches for.
	if err := syncDir(dir); err != nil {
		return "", err
	}
	if err := writeFileSynced(filepath.Join(dir, CompleteMarkerName), func(io.Writer) error { return nil }); err != nil {
		return "", err
	}
	return dir, syncDir(dir)
}

// MarkDone creates the DONE marker in outputDir.
func MarkDone(outputDir string) error {
	return writeFileSynced(filepath.Join(outputDir, DoneMarkerName), func(io.Writer) error { return nil })
}

// writeFileSynced creates path, lets write fill it and flushes it to disk.
func writeFileSynced(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return f.Close()
}

// syncDir flushes dir's entries, so files created in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
