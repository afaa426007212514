package checkpoint

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/trainer"
)

// ChunkSize is the leaf size of a state file's Merkle tree, the chain's
// CheckpointChunkSize.
const ChunkSize = trace.CheckpointChunkSize

// maxDefaultWorkers caps the default number of hashing goroutines: a few
// cores already hash faster than disks read, and every worker costs two
// chunk buffers.
const maxDefaultWorkers = 8

func defaultWorkers() int { return min(runtime.GOMAXPROCS(0), maxDefaultWorkers) }

// HashOptions tunes HashState.
type HashOptions struct {
	// Workers is the number of hashing goroutines; 0 means
	// min(GOMAXPROCS, 8). Memory use is 2·Workers·ChunkSize bytes.
	Workers int
	// Progress, if set, is called from the hashing goroutine after each
	// read with the bytes hashed so far and the file's size.
	Progress func(hashed, total int64)
}

// StateCommitment is what a state file commits to on chain.
type StateCommitment struct {
	// Root is state_root: the RFC 6962 root over the file's ChunkSize chunks.
	Root merkle.Hash
	// Size is the file's length in bytes.
	Size int64
	// Chunks is the number of leaves, ceil(Size/ChunkSize).
	Chunks uint64
}

// HashState computes the state_root of the file at path, reading it once
// in chunks spread over opts.Workers goroutines; memory stays within
// 2·Workers·ChunkSize bytes whatever the file's size.
func HashState(path string, opts HashOptions) (StateCommitment, error) {
	f, err := os.Open(path)
	if err != nil {
		return StateCommitment{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return StateCommitment{}, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = defaultWorkers()
	}
	counted := &countingReader{r: f, total: info.Size(), progress: opts.Progress}
	root, chunks, err := merkle.ParallelStreamRoot(counted, ChunkSize, workers)
	if err != nil {
		return StateCommitment{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	// A file that grew or shrank while being read gives a root of neither
	// version; refuse it rather than commit to bytes nobody has.
	if counted.read != info.Size() {
		return StateCommitment{}, fmt.Errorf("hashing %s: read %d bytes of %d: the file changed while being hashed", path, counted.read, info.Size())
	}
	return StateCommitment{Root: root, Size: info.Size(), Chunks: chunks}, nil
}

// countingReader counts the bytes read through it and reports them to
// progress, if set.
type countingReader struct {
	r        io.Reader
	read     int64
	total    int64
	progress func(hashed, total int64)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.read += int64(n)
		if c.progress != nil {
			c.progress(c.read, c.total)
		}
	}
	return n, err
}

// Commitment is everything a checkpoint commitment on chain says about a
// checkpoint folder.
type Commitment struct {
	StartStep uint64
	EndStep   uint64
	// StartHash and FinalHash are h_start and h_end.
	StartHash merkle.Hash
	FinalHash merkle.Hash
	State     StateCommitment
	// TraceRoot is trace_root, the root over h_start..h_end.
	TraceRoot merkle.Hash
}

// Commit hashes a validated checkpoint folder into its commitment.
func Commit(cp trainer.Checkpoint, opts HashOptions) (Commitment, error) {
	state, err := HashState(cp.StatePath(), opts)
	if err != nil {
		return Commitment{}, err
	}
	if state.Size != cp.StateSize {
		return Commitment{}, fmt.Errorf("%s is %d bytes, %d when the checkpoint was validated", cp.StatePath(), state.Size, cp.StateSize)
	}
	return Commitment{
		StartStep: cp.StartStep(),
		EndStep:   cp.EndStep(),
		StartHash: cp.StartHash(),
		FinalHash: cp.FinalHash(),
		State:     state,
		TraceRoot: cp.Trace.Root(),
	}, nil
}
