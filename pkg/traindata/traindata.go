// Package traindata is a worker's training stream as the protocol sees it: the bytes a
// trainer reads, cut into Merkle-committed segments (the built-in corpus, or the data
// pieces of the dataset shards assigned to the worker), and the chunk proofs that let the
// chain's referee rebuild a step's batch from bytes it has not stored.
//
// The chain knows a stream only by its Layout (each segment's root, size and chunk size);
// provers — the sidecar, a challenger, the CLI — hold a Stream, the layout with its bytes.
package traindata

import (
	"fmt"
	"sort"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// Segment is one Merkle-committed run of bytes in a worker's training stream: the
// corpus built into the workload, or one data piece of a dataset shard.
type Segment struct {
	Root      merkle.Hash
	Size      uint64
	ChunkSize uint64
	// Offset is where the segment starts in the stream, FirstChunk the stream-wide
	// number of its first chunk. NewLayout sets both.
	Offset     uint64
	FirstChunk uint64
}

// Chunks is how many chunks (Merkle leaves) the segment has.
func (s Segment) Chunks() uint64 { return merkle.ChunkCount(int64(s.Size), int(s.ChunkSize)) }

// Layout is a worker's training stream as the chain knows it: committed segments in
// order. The batch windows of a step are byte ranges of this stream; the referee proves
// each chunk they touch against its segment's root, with the tree size taken from the
// layout (on chain), never from the prover.
type Layout struct {
	Segments []Segment
}

// NewLayout places segments one after the other, setting each one's Offset and
// FirstChunk.
func NewLayout(segments []Segment) Layout {
	var offset, chunk uint64
	for i := range segments {
		segments[i].Offset, segments[i].FirstChunk = offset, chunk
		offset += segments[i].Size
		chunk += segments[i].Chunks()
	}
	return Layout{Segments: segments}
}

// Size is the stream's length in bytes.
func (l Layout) Size() uint64 {
	if len(l.Segments) == 0 {
		return 0
	}
	last := l.Segments[len(l.Segments)-1]
	return last.Offset + last.Size
}

// Chunks is the number of chunks in the stream.
func (l Layout) Chunks() uint64 {
	if len(l.Segments) == 0 {
		return 0
	}
	last := l.Segments[len(l.Segments)-1]
	return last.FirstChunk + last.Chunks()
}

// Chunk locates stream-wide chunk number n: its segment, its index in that segment's
// tree, and its byte range [start, end) in the stream.
func (l Layout) Chunk(n uint64) (seg Segment, local, start, end uint64, ok bool) {
	i := sort.Search(len(l.Segments), func(i int) bool {
		return l.Segments[i].FirstChunk+l.Segments[i].Chunks() > n
	})
	if i == len(l.Segments) {
		return Segment{}, 0, 0, 0, false
	}
	seg = l.Segments[i]
	local = n - seg.FirstChunk
	start = seg.Offset + local*seg.ChunkSize
	end = min(start+seg.ChunkSize, seg.Offset+seg.Size)
	return seg, local, start, end, true
}

// ChunkAt returns the stream-wide number of the chunk holding byte offset off.
func (l Layout) ChunkAt(off uint64) (uint64, bool) {
	i := sort.Search(len(l.Segments), func(i int) bool {
		return l.Segments[i].Offset+l.Segments[i].Size > off
	})
	if i == len(l.Segments) {
		return 0, false
	}
	seg := l.Segments[i]
	return seg.FirstChunk + (off-seg.Offset)/seg.ChunkSize, true
}

// Stream is a worker's training stream with its bytes, as a prover holds it.
type Stream struct {
	Layout
	Bytes []byte
}

// NewStream pairs a layout with the stream's bytes, checking every segment's root.
func NewStream(layout Layout, stream []byte) (Stream, error) {
	if uint64(len(stream)) != layout.Size() {
		return Stream{}, fmt.Errorf("stream is %d bytes, the layout %d", len(stream), layout.Size())
	}
	for i, seg := range layout.Segments {
		if merkle.RootOfBytes(stream[seg.Offset:seg.Offset+seg.Size], int(seg.ChunkSize)) != seg.Root {
			return Stream{}, fmt.Errorf("segment %d of the stream does not match its committed root", i)
		}
	}
	return Stream{Layout: layout, Bytes: stream}, nil
}

// SingleSegment is a stream of one segment over data, cut into chunkSize-byte chunks.
func SingleSegment(data []byte, chunkSize uint64) Stream {
	seg := Segment{Root: merkle.RootOfBytes(data, int(chunkSize)), Size: uint64(len(data)), ChunkSize: chunkSize}
	return Stream{Layout: NewLayout([]Segment{seg}), Bytes: data}
}

// Window is one training example: stream bytes [Start, Start+Length).
type Window struct {
	Start  uint64
	Length uint64
}

// ChunkProof is one chunk of the stream with its inclusion proof against its segment's
// root: stream-wide chunk number Index, its bytes, and the proof's sibling hashes.
type ChunkProof struct {
	Index uint64
	Data  []byte
	Proof []merkle.Hash
}

// Prove returns every chunk the windows touch, each once, in the order the windows
// first touch them, with its inclusion proof: exactly what a referee needs to rebuild
// the windows' bytes.
func (s Stream) Prove(windows []Window) ([]ChunkProof, error) {
	needed := map[uint64]bool{}
	var order []uint64
	for _, w := range windows {
		first, ok1 := s.ChunkAt(w.Start)
		last, ok2 := s.ChunkAt(w.Start + w.Length - 1)
		if w.Length == 0 || !ok1 || !ok2 {
			return nil, fmt.Errorf("window [%d, %d) outside the %d-byte stream", w.Start, w.Start+w.Length, s.Size())
		}
		for n := first; n <= last; n++ {
			if !needed[n] {
				needed[n] = true
				order = append(order, n)
			}
		}
	}
	leaves := map[uint64][]merkle.Hash{} // by segment offset, computed once per segment
	proofs := make([]ChunkProof, 0, len(order))
	for _, n := range order {
		seg, local, start, end, _ := s.Chunk(n)
		if leaves[seg.Offset] == nil {
			leaves[seg.Offset] = merkle.LeafHashesOfBytes(s.Bytes[seg.Offset:seg.Offset+seg.Size], int(seg.ChunkSize))
		}
		proof, err := merkle.InclusionProof(leaves[seg.Offset], local)
		if err != nil {
			return nil, err
		}
		proofs = append(proofs, ChunkProof{Index: n, Data: s.Bytes[start:end], Proof: proof})
	}
	return proofs, nil
}
