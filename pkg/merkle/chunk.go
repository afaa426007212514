package merkle

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
)

// Errors returned for invalid chunking parameters.
var (
	// ErrInvalidChunkSize: the chunk size is not positive.
	ErrInvalidChunkSize = errors.New("merkle: chunk size must be positive")
	// ErrNegativeSize: a data size is negative.
	ErrNegativeSize = errors.New("merkle: data size must not be negative")
)

// ChunkCount returns the number of leaves of data of size bytes cut into
// chunkSize-byte chunks, the last one possibly shorter: ceil(size/chunkSize),
// so 0 for empty data. It panics if chunkSize is not positive or size is
// negative, which are programming errors; code handling untrusted values must
// check them first.
func ChunkCount(size int64, chunkSize int) uint64 {
	mustValidChunking(size, chunkSize)
	count := size / int64(chunkSize)
	if size%int64(chunkSize) != 0 {
		count++
	}
	return uint64(count)
}

// LeafHashesOfBytes returns the leaf hashes of data cut into chunkSize-byte
// chunks, the last one possibly shorter. It panics if chunkSize is not
// positive.
func LeafHashesOfBytes(data []byte, chunkSize int) []Hash {
	leafHashes := make([]Hash, 0, ChunkCount(int64(len(data)), chunkSize))
	lh := newLeafHasher()
	for chunk := range chunks(data, chunkSize) {
		leafHashes = append(leafHashes, lh.sum(chunk))
	}
	return leafHashes
}

// RootOfBytes returns the root of the tree whose leaves are data cut into
// chunkSize-byte chunks, the last one possibly shorter; empty data gives
// [EmptyRoot]. It panics if chunkSize is not positive.
func RootOfBytes(data []byte, chunkSize int) Hash {
	mustValidChunking(int64(len(data)), chunkSize)
	lh := newLeafHasher()
	var b Builder
	for chunk := range chunks(data, chunkSize) {
		b.AddLeafHash(lh.sum(chunk))
	}
	return b.Root()
}

// chunks yields data's consecutive chunkSize-byte chunks, the last one
// possibly shorter, and nothing for empty data.
func chunks(data []byte, chunkSize int) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for len(data) > 0 {
			n := min(chunkSize, len(data))
			if !yield(data[:n]) {
				return
			}
			data = data[n:]
		}
	}
}

// mustValidChunking panics unless checkChunking accepts its arguments.
func mustValidChunking(size int64, chunkSize int) {
	if err := checkChunking(size, chunkSize); err != nil {
		panic(err)
	}
}

// checkChunking validates the size in bytes and chunk size of chunked data.
func checkChunking(size int64, chunkSize int) error {
	if err := checkChunkSize(chunkSize); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w, got %d", ErrNegativeSize, size)
	}
	return nil
}

func checkChunkSize(chunkSize int) error {
	if chunkSize <= 0 {
		return fmt.Errorf("%w, got %d", ErrInvalidChunkSize, chunkSize)
	}
	return nil
}

// StreamRoot reads r to its end, chunkSize bytes at a time, and returns the
// root of its chunks (as [RootOfBytes] would on the same bytes) and their
// number. It holds one chunk in memory at a time. A read error is returned
// wrapped, with a zero root and count.
func StreamRoot(r io.Reader, chunkSize int) (Hash, uint64, error) {
	if err := checkChunkSize(chunkSize); err != nil {
		return Hash{}, 0, err
	}
	return streamRoot(r, make([]byte, chunkSize))
}

// streamRoot is StreamRoot reading into the caller's chunk buffer.
func streamRoot(r io.Reader, chunk []byte) (Hash, uint64, error) {
	lh := newLeafHasher()
	var b Builder
	for {
		n, err := io.ReadFull(r, chunk)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Hash{}, 0, fmt.Errorf("merkle: reading chunk %d: %w", b.Size(), err)
		}
		if n > 0 {
			b.AddLeafHash(lh.sum(chunk[:n]))
		}
		if err != nil { // io.EOF or a short final chunk
			return b.Root(), b.Size(), nil
		}
	}
}

// chunkJob carries one chunk from the reading goroutine to a hashing worker
// and its leaf hash back. Jobs, with their buffers, are recycled.
type chunkJob struct {
	buf      []byte
	data     []byte    // the filled prefix of buf
	leafHash chan Hash // capacity 1, so a worker never waits for the reader
}

// ParallelStreamRoot is [StreamRoot] with the leaf hashing spread over
// workers goroutines (runtime.GOMAXPROCS(0) if workers <= 0), while the
// calling goroutine reads the next chunks and folds finished leaf hashes, in
// order, into a [Builder].
//
// At most 2*workers chunks are in flight, read but not yet folded: enough to
// keep every worker busy while the reader fills the next buffers. Their
// buffers are allocated on first use and then reused, so memory stays within
// 2*workers*chunkSize bytes whatever the input's length.
func ParallelStreamRoot(r io.Reader, chunkSize int, workers int) (Hash, uint64, error) {
	if err := checkChunkSize(chunkSize); err != nil {
		return Hash{}, 0, err
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	window := uint64(2 * workers)

	// Never blocks: at most window jobs are outstanding.
	toHash := make(chan *chunkJob, window)
	// Closing it on every return lets the workers finish what they hold
	// and exit, so an early read error leaks no goroutine.
	defer close(toHash)
	for range workers {
		go hashChunks(toHash)
	}

	// Chunk i travels in slot i%window. Before slot i%window takes chunk i,
	// chunk i-window, the oldest in flight, is folded: folding stays in
	// order and the slot's buffer is free again.
	slots := make([]*chunkJob, window)
	var b Builder
	var read uint64
	for {
		job := slots[read%window]
		if job == nil {
			job = &chunkJob{buf: make([]byte, chunkSize), leafHash: make(chan Hash, 1)}
			slots[read%window] = job
		} else {
			b.AddLeafHash(<-job.leafHash)
		}
		n, err := io.ReadFull(r, job.buf)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Hash{}, 0, fmt.Errorf("merkle: reading chunk %d: %w", read, err)
		}
		if n > 0 {
			job.data = job.buf[:n]
			toHash <- job
			read++
		}
		if err != nil { // io.EOF or a short final chunk
			break
		}
	}
	for b.Size() < read {
		b.AddLeafHash(<-slots[b.Size()%window].leafHash)
	}
	return b.Root(), read, nil
}

// hashChunks is a ParallelStreamRoot worker.
func hashChunks(jobs <-chan *chunkJob) {
	lh := newLeafHasher()
	for job := range jobs {
		job.leafHash <- lh.sum(job.data)
	}
}

// ProofFromReaderAt returns chunk index of the size bytes readable from ra,
// cut into chunkSize-byte chunks, together with its inclusion proof in the
// tree of all the chunks (see [RootOfBytes]).
//
// It keeps no state between calls: the sibling subtrees are re-hashed from ra,
// so each call reads every chunk once, holding one chunk buffer besides the
// returned chunk.
func ProofFromReaderAt(ra io.ReaderAt, size int64, chunkSize int, index uint64) (chunk []byte, proof []Hash, err error) {
	if err := checkChunking(size, chunkSize); err != nil {
		return nil, nil, err
	}
	count := ChunkCount(size, chunkSize)
	if index >= count {
		return nil, nil, fmt.Errorf("%w: chunk %d of %d", ErrIndexOutOfRange, index, count)
	}
	// Byte range of chunks [begin, end). Only the last chunk can be short;
	// computing its end as size also keeps end*chunkSize from overflowing.
	byteRange := func(begin, end uint64) (offset, length int64) {
		offset = int64(begin) * int64(chunkSize)
		endOffset := size
		if end < count {
			endOffset = int64(end) * int64(chunkSize)
		}
		return offset, endOffset - offset
	}

	offset, length := byteRange(index, index+1)
	chunk = make([]byte, length)
	if _, err := io.ReadFull(io.NewSectionReader(ra, offset, length), chunk); err != nil {
		if errors.Is(err, io.EOF) { // the chunk is not empty: no byte of it is a short read too
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("merkle: reading chunk %d: %w", index, err)
	}

	buf := make([]byte, chunkSize)
	proof, err = inclusionPath(index, count, func(begin, end uint64) (Hash, error) {
		offset, length := byteRange(begin, end)
		section := io.NewSectionReader(ra, offset, length)
		root, _, err := streamRoot(section, buf)
		if err != nil {
			return Hash{}, err
		}
		// A ReaderAt holding fewer than size bytes ends the section early,
		// which would silently give a tree of different chunks.
		if consumed, _ := section.Seek(0, io.SeekCurrent); consumed != length {
			return Hash{}, fmt.Errorf("merkle: chunks [%d, %d): read %d of %d bytes: %w",
				begin, end, consumed, length, io.ErrUnexpectedEOF)
		}
		return root, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return chunk, proof, nil
}
