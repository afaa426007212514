package trace

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// A trace file is the on-disk form of a per-step hash trace, written by trainers and read
// by the CLI, the provider sidecar and verifiers: one lowercase hex SHA-256 hash per line,
// h_start first. Blank lines are ignored.

// Read parses a trace from r; start is the step of its first hash.
func Read(r io.Reader, start uint64) (Trace, error) {
	var hashes []merkle.Hash
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		raw, err := hex.DecodeString(text)
		if err != nil {
			return Trace{}, fmt.Errorf("line %d: not hex: %w", line, err)
		}
		h, err := merkle.HashFromBytes(raw)
		if err != nil {
			return Trace{}, fmt.Errorf("line %d: %w", line, err)
		}
		hashes = append(hashes, h)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, err
	}
	if len(hashes) < 2 {
		return Trace{}, fmt.Errorf("a trace needs at least h_start and h_end, got %d hashes", len(hashes))
	}
	return New(start, hashes), nil
}

// ReadFile reads a trace file.
func ReadFile(path string, start uint64) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, err
	}
	defer f.Close()
	t, err := Read(f, start)
	if err != nil {
		return Trace{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Write writes hashes in trace-file form.
func Write(w io.Writer, hashes []merkle.Hash) error {
	bw := bufio.NewWriter(w)
	for _, h := range hashes {
		if _, err := bw.WriteString(h.Hex() + "\n"); err != nil {
			return err
		}
	}
	return bw.Flush()
}
