package custody

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// benchStateBytes is the state the custody benchmark encodes: 1 GiB, or
// CUSTODY_BENCH_BYTES (e.g. 8589934592 for 8 GiB).
func benchStateBytes(b *testing.B) int64 {
	if v := os.Getenv("CUSTODY_BENCH_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("CUSTODY_BENCH_BYTES=%q", v)
		}
		return n
	}
	return 1 << 30
}

// BenchmarkCustodyVsOpenSSL measures custody encoding — Reed-Solomon 4+2 and the Merkle
// roots of all six pieces, pieces discarded — of a state file against `openssl dgst
// -sha256` of the same file in the same run (openssl uses the CPU's SHA extensions, as
// Go's crypto/sha256 does), on one core and on all cores; openssl comes first so that
// tools/benchratio reports the encodes as ratios to it (time ÷ openssl's, so the goal
// "throughput ≥ 0.8 of openssl's" is a ratio ≤ 1.25). MB/s is of state bytes. peak-rss-MiB
// is the process's peak resident memory after the run (VmHWM), which stays a few MiB
// per piece whatever the state's size (the state file itself is written in 1 MiB blocks).
func BenchmarkCustodyVsOpenSSL(b *testing.B) {
	ssl, err := exec.LookPath("openssl")
	if err != nil {
		b.Skip("openssl is not installed")
	}
	size := benchStateBytes(b)
	path := filepath.Join(b.TempDir(), "state")
	writeRandomFile(b, path, size)
	b.Run("openssl-sha256", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if out, err := exec.Command(ssl, "dgst", "-sha256", path).CombinedOutput(); err != nil {
				b.Fatalf("%s: %s", err, out)
			}
		}
	})
	for _, c := range []struct {
		name  string
		procs int
	}{{"encode-4+2-1core", 1}, {"encode-4+2-allcores", runtime.NumCPU()}} {
		b.Run(c.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			l, err := NewLayout(uint64(size), 4, 2)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, err := Encode(f, l, nil, c.procs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(peakRSSMiB(b), "peak-rss-MiB")
		})
	}
}

func writeRandomFile(b *testing.B, path string, size int64) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := w.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}

// peakRSSMiB is the process's peak resident set (VmHWM) in MiB.
func peakRSSMiB(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// BenchmarkCustodyRepair rebuilds one lost piece — a data piece, then a parity piece — of
// a 1 GiB state (CUSTODY_BENCH_BYTES) cut 4+2, from the four other pieces' files, as a
// storage holder repairs a custody slot (RebuildPiece, streamed block by block).
// peak-rss-MiB is the process's peak resident memory during the repairs alone (VmHWM,
// reset before each), state-MiB the state's size and rss/state their
// ratio: a repair holding the state would be ≥ 1, a streaming one is (k+m) blocks of
// BlockSize plus the Go runtime, whatever the state's size.
func BenchmarkCustodyRepair(b *testing.B) {
	size := benchStateBytes(b)
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	writeRandomFile(b, state, size)
	l, err := NewLayout(uint64(size), 4, 2)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(state)
	if err != nil {
		b.Fatal(err)
	}
	files := make([]*os.File, l.Pieces())
	out := make([]io.Writer, l.Pieces())
	for i := range files {
		if files[i], err = os.Create(filepath.Join(dir, fmt.Sprintf("piece-%d", i))); err != nil {
			b.Fatal(err)
		}
		defer files[i].Close()
		out[i] = files[i]
	}
	roots, err := Encode(f, l, out, 0)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(state); err != nil { // only the pieces are left, as at a holder
		b.Fatal(err)
	}
	for _, target := range []uint32{0, l.DataPieces} {
		b.Run(fmt.Sprintf("piece-%d-of-4+2", target), func(b *testing.B) {
			rebuilt, err := os.Create(filepath.Join(dir, "rebuilt"))
			if err != nil {
				b.Fatal(err)
			}
			defer rebuilt.Close()
			resetPeakRSS(b)
			b.SetBytes(int64(l.PieceBytes(target)))
			for b.Loop() {
				readers := make([]io.Reader, l.Pieces())
				for i, pf := range files {
					if uint32(i) != target {
						readers[i] = io.NewSectionReader(pf, 0, int64(l.PieceBytes(uint32(i))))
					}
				}
				if err := RebuildPiece(l, roots, readers, target, rebuilt); err != nil {
					b.Fatal(err)
				}
			}
			rss := peakRSSMiB(b)
			b.ReportMetric(rss, "peak-rss-MiB")
			b.ReportMetric(float64(size)/(1<<20), "state-MiB")
			b.ReportMetric(rss/(float64(size)/(1<<20)), "rss/state")
		})
	}
}

// resetPeakRSS resets the process's peak resident set (VmHWM) to its current one.
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS (%v): it includes the setup", err)
	}
}
