package merkle_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"github.com/depinchain/depinchain/pkg/merkle"
)

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// dataLengths returns the input lengths worth testing for chunkSize: empty,
// one byte, around one and several chunk boundaries, and a few random ones.
func dataLengths(rng *rand.Rand, chunkSize int) []int {
	lengths := []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 2 * chunkSize, 5*chunkSize - 1, 5 * chunkSize, 5*chunkSize + 1, 16*chunkSize + 1}
	for range 4 {
		lengths = append(lengths, rng.IntN(20*chunkSize+1))
	}
	return lengths
}

var chunkSizes = []int{1, 2, 7, 64, 1000}

func TestChunkCount(t *testing.T) {
	for _, tc := range []struct {
		size      int64
		chunkSize int
		want      uint64
	}{
		{0, 1, 0}, {0, 4096, 0}, {1, 4096, 1}, {4095, 4096, 1}, {4096, 4096, 1},
		{4097, 4096, 2}, {8192, 4096, 2}, {7, 1, 7}, {math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt32, math.MaxInt64/math.MaxInt32 + 1},
	} {
		if got := merkle.ChunkCount(tc.size, tc.chunkSize); got != tc.want {
			t.Errorf("ChunkCount(%d, %d) = %d, want %d", tc.size, tc.chunkSize, got, tc.want)
		}
	}
	for _, tc := range []struct {
		size      int64
		chunkSize int
		want      error
	}{{10, 0, merkle.ErrInvalidChunkSize}, {10, -1, merkle.ErrInvalidChunkSize}, {-1, 4, merkle.ErrNegativeSize}} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, tc.want) {
					t.Errorf("ChunkCount(%d, %d) panicked with %v, want %v", tc.size, tc.chunkSize, err, tc.want)
				}
			}()
			merkle.ChunkCount(tc.size, tc.chunkSize)
		}()
	}
}

func TestRootOfBytesMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, chunkSize := range chunkSizes {
		for _, n := range dataLengths(rng, chunkSize) {
			data := randomBytes(rng, n)
			wantLeaves := naiveLeafHashes(naiveChunks(data, chunkSize))
			if got := merkle.LeafHashesOfBytes(data, chunkSize); !equalHashes(got, wantLeaves) {
				t.Fatalf("LeafHashesOfBytes(%d bytes, chunk %d) differs from naive", n, chunkSize)
			}
			if uint64(len(wantLeaves)) != merkle.ChunkCount(int64(n), chunkSize) {
				t.Fatalf("ChunkCount(%d, %d) = %d, want %d", n, chunkSize, merkle.ChunkCount(int64(n), chunkSize), len(wantLeaves))
			}
			if got, want := merkle.RootOfBytes(data, chunkSize), naiveRoot(wantLeaves); got != want {
				t.Fatalf("RootOfBytes(%d bytes, chunk %d) = %s, want %s", n, chunkSize, got, want)
			}
		}
	}
	if merkle.RootOfBytes(nil, 4096) != merkle.EmptyRoot() {
		t.Error("RootOfBytes(empty) is not the empty root")
	}
}

// streamRooter is StreamRoot or ParallelStreamRoot with a worker count.
type streamRooter struct {
	name string
	root func(r io.Reader, chunkSize int) (merkle.Hash, uint64, error)
}

func streamRooters() []streamRooter {
	rooters := []streamRooter{{"StreamRoot", merkle.StreamRoot}}
	for _, workers := range []int{0, 1, 2, 3, 8} {
		rooters = append(rooters, streamRooter{
			fmt.Sprintf("ParallelStreamRoot/workers=%d", workers),
			func(r io.Reader, chunkSize int) (merkle.Hash, uint64, error) {
				return merkle.ParallelStreamRoot(r, chunkSize, workers)
			},
		})
	}
	return rooters
}

func TestStreamRootsMatchRootOfBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Readers returning short reads, or data together with io.EOF, must
	// chunk the same as one big read.
	readers := map[string]func([]byte) io.Reader{
		"bytes":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"half":     func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
		"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
		"one-byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	}
	for _, rooter := range streamRooters() {
		t.Run(rooter.name, func(t *testing.T) {
			for _, chunkSize := range chunkSizes {
				for _, n := range dataLengths(rng, chunkSize) {
					data := randomBytes(rng, n)
					want := merkle.RootOfBytes(data, chunkSize)
					wantChunks := merkle.ChunkCount(int64(n), chunkSize)
					for readerName, newReader := range readers {
						got, chunks, err := rooter.root(newReader(data), chunkSize)
						if err != nil || got != want || chunks != wantChunks {
							t.Fatalf("%s reader, %d bytes, chunk %d: got (%s, %d, %v), want (%s, %d, nil)",
								readerName, n, chunkSize, got, chunks, err, want, wantChunks)
						}
					}
				}
			}
		})
	}
}

func TestStreamRootsRejectBadChunkSize(t *testing.T) {
	for _, rooter := range streamRooters() {
		for _, chunkSize := range []int{0, -1} {
			if _, _, err := rooter.root(bytes.NewReader([]byte("x")), chunkSize); !errors.Is(err, merkle.ErrInvalidChunkSize) {
				t.Errorf("%s(chunk %d) error = %v, want ErrInvalidChunkSize", rooter.name, chunkSize, err)
			}
		}
	}
}

// failingReader yields limit bytes, then fails.
type failingReader struct {
	limit int
	err   error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.limit == 0 {
		return 0, r.err
	}
	n := min(len(p), r.limit)
	clear(p[:n])
	r.limit -= n
	return n, nil
}

func TestStreamRootsReportReadErrors(t *testing.T) {
	errDisk := errors.New("disk on fire")
	goroutinesBefore := runtime.NumGoroutine()
	for _, rooter := range streamRooters() {
		for _, limit := range []int{0, 5, 64, 640, 6400} {
			_, _, err := rooter.root(&failingReader{limit: limit, err: errDisk}, 64)
			if !errors.Is(err, errDisk) {
				t.Errorf("%s, failing after %d bytes: error = %v, want %v", rooter.name, limit, err, errDisk)
			}
		}
	}
	// ParallelStreamRoot's workers must all exit after an error.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutinesBefore {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left running after failed streams", runtime.NumGoroutine()-goroutinesBefore)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// patternReader generates size deterministic bytes without holding them, so
// measuring allocations sees only the hashing's.
type patternReader struct {
	offset, size int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.offset >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-r.offset))
	for i := range p[:n] {
		x := uint64(r.offset+int64(i)) * 0x9E3779B97F4A7C15
		p[i] = byte(x >> 56)
	}
	r.offset += int64(n)
	return n, nil
}

// The streaming roots must allocate a fixed number of chunk buffers, not one
// per chunk: 256 chunks go through at most 2*workers buffers.
func TestStreamRootsMemoryIsBoundedByChunkSize(t *testing.T) {
	const chunkSize = 64 << 10
	const size = 256 * chunkSize
	for _, tc := range []struct {
		name    string
		buffers int
		root    func(io.Reader) (merkle.Hash, uint64, error)
	}{
		{"StreamRoot", 1, func(r io.Reader) (merkle.Hash, uint64, error) { return merkle.StreamRoot(r, chunkSize) }},
		{"ParallelStreamRoot/workers=2", 4, func(r io.Reader) (merkle.Hash, uint64, error) {
			return merkle.ParallelStreamRoot(r, chunkSize, 2)
		}},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		root, chunks, err := tc.root(&patternReader{size: size})
		runtime.ReadMemStats(&after)
		if err != nil || chunks != size/chunkSize {
			t.Fatalf("%s: %d chunks, %v", tc.name, chunks, err)
		}
		allocated := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(tc.buffers*chunkSize + 64<<10); allocated > limit {
			t.Errorf("%s allocated %d bytes hashing %d, want at most %d", tc.name, allocated, size, limit)
		}
		data, _ := io.ReadAll(&patternReader{size: size})
		if want := merkle.RootOfBytes(data, chunkSize); root != want {
			t.Errorf("%s root = %s, want %s", tc.name, root, want)
		}
	}
}

func TestProofFromReaderAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, chunkSize := range []int{1, 7, 64} {
		for _, n := range dataLengths(rng, chunkSize) {
			data := randomBytes(rng, n)
			leafHashes := merkle.LeafHashesOfBytes(data, chunkSize)
			root := merkle.RootOfBytes(data, chunkSize)
			count := merkle.ChunkCount(int64(n), chunkSize)
			for index := range count {
				chunk, proof, err := merkle.ProofFromReaderAt(bytes.NewReader(data), int64(n), chunkSize, index)
				if err != nil {
					t.Fatalf("%d bytes, chunk %d, index %d: %v", n, chunkSize, index, err)
				}
				start := int(index) * chunkSize
				if want := data[start:min(start+chunkSize, n)]; !bytes.Equal(chunk, want) {
					t.Fatalf("%d bytes, chunk %d, index %d: wrong chunk", n, chunkSize, index)
				}
				wantProof, _ := merkle.InclusionProof(leafHashes, index)
				if !equalHashes(proof, wantProof) {
					t.Fatalf("%d bytes, chunk %d, index %d: proof differs from InclusionProof", n, chunkSize, index)
				}
				if err := merkle.VerifyInclusion(root, index, count, merkle.LeafHash(chunk), proof); err != nil {
					t.Fatalf("%d bytes, chunk %d, index %d: %v", n, chunkSize, index, err)
				}
			}
			if _, _, err := merkle.ProofFromReaderAt(bytes.NewReader(data), int64(n), chunkSize, count); !errors.Is(err, merkle.ErrIndexOutOfRange) {
				t.Fatalf("index %d of %d chunks: error = %v, want ErrIndexOutOfRange", count, count, err)
			}
		}
	}
}

func TestProofFromReaderAtErrors(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 10)
	r := bytes.NewReader(data)
	if _, _, err := merkle.ProofFromReaderAt(r, 100, 0, 0); !errors.Is(err, merkle.ErrInvalidChunkSize) {
		t.Errorf("chunk size 0: error = %v, want ErrInvalidChunkSize", err)
	}
	if _, _, err := merkle.ProofFromReaderAt(r, -1, 10, 0); !errors.Is(err, merkle.ErrNegativeSize) {
		t.Errorf("size -1: error = %v, want ErrNegativeSize", err)
	}
	// A ReaderAt shorter than the claimed size, whether the missing bytes
	// fall in the proven chunk or in a sibling subtree.
	short := bytes.NewReader(data[:95])
	for index := range uint64(10) {
		if _, _, err := merkle.ProofFromReaderAt(short, 100, 10, index); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("truncated data, index %d: error = %v, want io.ErrUnexpectedEOF", index, err)
		}
	}
	boundary := bytes.NewReader(data[:90]) // missing exactly the last chunk
	if _, _, err := merkle.ProofFromReaderAt(boundary, 100, 10, 9); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("missing last chunk: error = %v, want io.ErrUnexpectedEOF", err)
	}
}

const benchmarkSize = 64 << 20
const benchmarkChunkSize = 1 << 20

func BenchmarkStreamRoot(b *testing.B) {
	data := make([]byte, benchmarkSize)
	b.SetBytes(benchmarkSize)
	for b.Loop() {
		if _, _, err := merkle.StreamRoot(bytes.NewReader(data), benchmarkChunkSize); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParallelStreamRoot(b *testing.B) {
	data := make([]byte, benchmarkSize)
	for _, workers := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(benchmarkSize)
			for b.Loop() {
				if _, _, err := merkle.ParallelStreamRoot(bytes.NewReader(data), benchmarkChunkSize, workers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
