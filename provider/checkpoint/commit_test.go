package checkpoint_test

import (
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/trainer"
)

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHashStateMatchesInMemoryRoot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const chunk = checkpoint.ChunkSize
	sizes := []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3*chunk + 17}
	for range 3 {
		sizes = append(sizes, rng.IntN(5*chunk))
	}
	for _, size := range sizes {
		data := randomBytes(rng, size)
		path := writeFile(t, data)
		for _, workers := range []int{0, 1, 3} {
			var lastHashed, lastTotal int64
			got, err := checkpoint.HashState(path, checkpoint.HashOptions{
				Workers:  workers,
				Progress: func(hashed, total int64) { lastHashed, lastTotal = hashed, total },
			})
			if err != nil {
				t.Fatal(err)
			}
			want := checkpoint.StateCommitment{
				Root:   merkle.RootOfBytes(data, chunk),
				Size:   int64(size),
				Chunks: merkle.ChunkCount(int64(size), chunk),
			}
			if got != want {
				t.Fatalf("size %d, %d workers: HashState = %+v, want %+v", size, workers, got, want)
			}
			if lastHashed != int64(size) || (size > 0 && lastTotal != int64(size)) {
				t.Fatalf("size %d: last progress report %d/%d", size, lastHashed, lastTotal)
			}
		}
	}
}

// Hashing a file much larger than the chunk window allocates about the
// window, not the file: 64 MiB through 2 workers stays within a few MiB.
func TestHashStateMemoryIsBounded(t *testing.T) {
	const size = 64 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	path := writeFile(t, randomBytes(rng, size))
	const workers = 2
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := checkpoint.HashState(path, checkpoint.HashOptions{Workers: workers})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != size || got.Chunks != size/checkpoint.ChunkSize {
		t.Fatalf("HashState = %+v", got)
	}
	window := uint64(2 * workers * checkpoint.ChunkSize)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > window+(1<<20) {
		t.Fatalf("allocated %d bytes hashing %d, want at most the %d-byte window plus 1 MiB", allocated, size, window)
	}
}

func TestCommit(t *testing.T) {
	out := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	state := randomBytes(rng, 2*checkpoint.ChunkSize+5)
	tr := []merkle.Hash{{1}, {2}, {3}, sha256.Sum256(state)}
	dir, err := trainer.WriteCheckpoint(out, 13, state, tr)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := trainer.ReadCheckpoint(dir, 13)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.Commit(cp, checkpoint.HashOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := checkpoint.Commitment{
		StartStep: 10,
		EndStep:   13,
		StartHash: tr[0],
		FinalHash: tr[3],
		State:     checkpoint.StateCommitment{Root: merkle.RootOfBytes(state, checkpoint.ChunkSize), Size: int64(len(state)), Chunks: 3},
		TraceRoot: trace.New(10, tr).Root(),
	}
	if got != want {
		t.Fatalf("Commit = %+v\nwant %+v", got, want)
	}
}
