package checkpoint

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/trainer"
)

// CommittedTraceFileName holds, in a checkpoint folder, the trace the
// sidecar committed on chain when it is not the trainer's trace.txt (only
// when a test hook changed it). A defender opens hashes from what it
// committed, never from what it would have liked to commit.
const CommittedTraceFileName = "trace.committed.txt"

// WriteCommittedTrace records tr in the checkpoint folder dir as the trace
// committed on chain instead of the trainer's.
func WriteCommittedTrace(dir string, tr trace.Trace) error {
	f, err := os.Create(filepath.Join(dir, CommittedTraceFileName))
	if err != nil {
		return err
	}
	return errors.Join(trace.Write(f, tr.Hashes), f.Close())
}

// ReadCommittedTrace reads the trace the checkpoint folder dir committed on
// chain, whose first hash is h_start: the committed trace when one was
// written, else the trainer's.
func ReadCommittedTrace(dir string, start uint64) (trace.Trace, error) {
	path := filepath.Join(dir, CommittedTraceFileName)
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(dir, trainer.TraceFileName)
	}
	return trace.ReadFile(path, start)
}
