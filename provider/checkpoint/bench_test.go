package checkpoint_test

import (
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/checkpoint"
)

// BenchmarkHashState hashes a 256 MiB state file with the default worker
// count and reports its throughput as a ratio to `sha256sum` on the same
// (page-cached) file, timed in the same run, so the number means the same on
// any machine: above 1 the parallel Merkle root is faster than one plain
// SHA-256 pass. It also reports the peak heap growth while hashing and the
// bytes allocated per hash, which stay at the chunk window whatever the
// file's size.
func BenchmarkHashState(b *testing.B) {
	const size = 256 << 20
	sha256sum, err := exec.LookPath("sha256sum")
	if err != nil {
		b.Skip("sha256sum not found, no baseline to compare with: ", err)
	}
	path := filepath.Join(b.TempDir(), "state")
	writeRandomFile(b, path, size)

	// The first run warms the page cache for both contenders.
	var baseline time.Duration
	for i := range 3 {
		start := time.Now()
		if out, err := exec.Command(sha256sum, path).CombinedOutput(); err != nil {
			b.Fatalf("sha256sum: %v: %s", err, out)
		}
		if elapsed := time.Since(start); i > 0 && (baseline == 0 || elapsed < baseline) {
			baseline = elapsed
		}
	}

	var before, sample runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	peakHeap := before.HeapInuse
	// Sampling every 32 MiB catches the peak: the buffers are all
	// allocated within the first window of chunks and then reused.
	sampleHeap := func(hashed, _ int64) {
		if hashed%(32<<20) == 0 {
			runtime.ReadMemStats(&sample)
			peakHeap = max(peakHeap, sample.HeapInuse)
		}
	}
	b.SetBytes(size)
	for b.Loop() {
		if _, err := checkpoint.HashState(path, checkpoint.HashOptions{Progress: sampleHeap}); err != nil {
			b.Fatal(err)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	perOp := b.Elapsed().Seconds() / float64(b.N)
	mbPerSec := size / 1e6 / perOp
	baselineMBPerSec := size / 1e6 / baseline.Seconds()
	b.ReportMetric(baselineMBPerSec, "sha256sum-MB/s")
	b.ReportMetric(mbPerSec/baselineMBPerSec, "ratio-vs-sha256sum")
	b.ReportMetric(float64(peakHeap-before.HeapInuse)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
}

// writeRandomFile writes size pseudo-random bytes to path without holding
// them in memory, so the benchmark's heap figures are its own.
func writeRandomFile(b *testing.B, path string, size int64) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.NewChaCha8([32]byte{9}), size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
