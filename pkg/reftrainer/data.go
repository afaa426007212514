package reftrainer

import (
	"crypto/sha256"
	_ "embed" // for the default corpus
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/depinchain/depinchain/pkg/traindata"
)

// ErrInvalidData is wrapped by errors about the training data or batch.
var ErrInvalidData = errors.New("reftrainer: invalid data")

// batchDomain separates window selection from every other use of SHA-256 in
// the protocol.
const batchDomain = "depinchain/reftrainer/batch/v1"

//go:embed corpus.txt
var defaultCorpus string

// DefaultCorpus returns a copy of the small English corpus shipped with the
// package (printable ASCII prose about distributed training and blockchains),
// used by tests, benchmarks and demonstrations.
func DefaultCorpus() []byte {
	return []byte(defaultCorpus)
}

// BatchWindows returns the BatchSize windows that step number step trains
// (each Context+1 bytes long: Context input tokens followed by the target token)
// on, for a token stream of dataLen bytes. Window k starts at
//
//	uint64le(SHA-256(batchDomain || uint64le(len(jobSeed)) || jobSeed ||
//	                 uint64le(step) || uint32le(k))[:8]) mod (dataLen - Context)
//
// so the choice depends only on the job seed, the step index and the data
// length, never on anything a provider or challenger submits later. The
// modulo bias is below dataLen/2^64, negligible for any real corpus.
func BatchWindows(cfg Config, jobSeed []byte, step uint64, dataLen uint64) ([]traindata.Window, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	windowLen := uint64(cfg.Context) + 1
	if dataLen < windowLen {
		return nil, fmt.Errorf("%w: %d bytes of data, need at least Context+1 = %d", ErrInvalidData, dataLen, windowLen)
	}
	starts := dataLen - uint64(cfg.Context) // Start in [0, dataLen-Context-1]
	// Room for the example index, so appending it below never reallocates
	// and each iteration overwrites the same four bytes.
	prefix := make([]byte, 0, len(batchDomain)+8+len(jobSeed)+8+4)
	prefix = append(prefix, batchDomain...)
	prefix = binary.LittleEndian.AppendUint64(prefix, uint64(len(jobSeed)))
	prefix = append(prefix, jobSeed...)
	prefix = binary.LittleEndian.AppendUint64(prefix, step)
	windows := make([]traindata.Window, cfg.BatchSize)
	for k := range windows {
		digest := sha256.Sum256(binary.LittleEndian.AppendUint32(prefix, uint32(k)))
		windows[k] = traindata.Window{
			Start:  binary.LittleEndian.Uint64(digest[:8]) % starts,
			Length: windowLen,
		}
	}
	return windows, nil
}

// Batch returns the bytes of each window, as sub-slices of data (capacity
// limited to the window, so an append by the caller cannot clobber data).
func Batch(data []byte, windows []traindata.Window) ([][]byte, error) {
	batch := make([][]byte, len(windows))
	for i, w := range windows {
		if w.Start > uint64(len(data)) || w.Length > uint64(len(data))-w.Start {
			return nil, fmt.Errorf("%w: window %d [%d, +%d) exceeds %d bytes of data", ErrInvalidData, i, w.Start, w.Length, len(data))
		}
		batch[i] = data[w.Start : w.Start+w.Length : w.Start+w.Length]
	}
	return batch, nil
}
