package diloco

import (
	"fmt"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// This file is what a one-chunk round fault (x/verify's MsgProveRoundFault)
// opens and recomputes: for section chunk k, which chunk of which committed
// file holds each input, and the chunk-local function the referee runs. The
// chain and every sidecar that builds a proof use the same functions.
//
//   - START: chunk c of a worker's round-start state (its start_root) is a
//     fixed header chunk, a chunk of G_r's weights, or a chunk of the
//     worker's carry state (its last entered round's end state; zero for a
//     joiner): StartSource, StartChunk.
//   - PSEUDO_GRADIENT: chunk 1+k of the dense file from G_r's weights chunk k
//     and the end state's weights chunk (PseudoGradientChunk); with top_k the
//     record k and the error-buffer chunk k it leaves, from those and the
//     error-buffer chunk k it started from (CompressedChunk).
//   - AGGREGATION: chunk 1+k and 1+C+k of G_{r+1} from G_r's and every
//     entered pseudo-gradient's chunk k (AggregateChunk; records through
//     DecompressChunk).

// GlobalFileChunks is the number of ChunkSize chunks of a global state file
// (the tree size its openings are checked against).
func (l Layout) GlobalFileChunks() uint64 { return uint64(1 + 2*l.Chunks) }

// DenseFileChunks is the number of chunks of a dense pseudo-gradient file.
func (l Layout) DenseFileChunks() uint64 { return uint64(1 + l.Chunks) }

// CompressedFileBytes is the length of a compressed pseudo-gradient file.
func (l Layout) CompressedFileBytes(topK int) int { return ChunkSize + l.Chunks*RecordBytes(topK) }

// CompressedFileChunks is the number of chunks of a compressed file (the
// last one may be short).
func (l Layout) CompressedFileChunks(topK int) uint64 {
	return merkle.ChunkCount(int64(l.CompressedFileBytes(topK)), ChunkSize)
}

// WeightsChunk is the chunk of a global state file (and of a dense
// pseudo-gradient file) holding section chunk k of the weights (Δ).
func WeightsChunk(k int) uint64 { return uint64(1 + k) }

// MomentumChunk is the chunk of a global state file holding section chunk k
// of the outer momentum.
func (l Layout) MomentumChunk(k int) uint64 { return uint64(1 + l.Chunks + k) }

// RecordSpan is the chunks first..last of a compressed file that hold
// record k (records are RecordBytes(topK) bytes back to back after the
// header chunk, so one may straddle a chunk boundary).
func RecordSpan(topK, k int) (first, last uint64) {
	start := ChunkSize + k*RecordBytes(topK)
	end := start + RecordBytes(topK) - 1
	return uint64(start / ChunkSize), uint64(end / ChunkSize)
}

// RecordChunks is RecordSpan as the list of chunk indices first..last: the
// chunks a fault proof opens to read record k.
func RecordChunks(topK, k int) []uint64 {
	first, last := RecordSpan(topK, k)
	out := make([]uint64, 0, last-first+1)
	for c := first; c <= last; c++ {
		out = append(out, c)
	}
	return out
}

// RecordFromChunks cuts record k out of the compressed file's chunks
// RecordSpan(topK, k) (in order; the file's last chunk may be short).
func RecordFromChunks(topK, k int, chunks [][]byte) ([]byte, error) {
	if topK < 1 || topK > ChunkElems || k < 0 {
		return nil, fmt.Errorf("%w: top-k %d, record %d", ErrInvalid, topK, k)
	}
	first, last := RecordSpan(topK, k)
	if uint64(len(chunks)) != last-first+1 {
		return nil, fmt.Errorf("%w: record %d lies in chunks %d..%d, got %d chunks", ErrInvalid, k, first, last, len(chunks))
	}
	var span []byte
	for i, c := range chunks {
		if len(c) > ChunkSize || (i+1 < len(chunks) && len(c) != ChunkSize) {
			return nil, fmt.Errorf("%w: chunk %d of record %d has %d bytes", ErrInvalid, first+uint64(i), k, len(c))
		}
		span = append(span, c...)
	}
	off := ChunkSize + k*RecordBytes(topK) - int(first)*ChunkSize
	if len(span) < off+RecordBytes(topK) {
		return nil, fmt.Errorf("%w: chunks %d..%d end before record %d does", ErrInvalid, first, last, k)
	}
	return span[off : off+RecordBytes(topK)], nil
}

// ErrorBufferRoot is the commitment to a worker's error buffer (a section
// vector): the Merkle root of its int32 section in ChunkSize chunks, so
// leaf k is section chunk k. A compressed pseudo-gradient's header names the
// root of the buffer it was compressed with and of the one it leaves; a
// worker with no earlier entered round starts from the zero buffer
// (ZeroErrorBufferRoot).
func ErrorBufferRoot(e []int64) merkle.Hash {
	return merkle.RootOfBytes(EncodeErrorBuffer(e), ChunkSize)
}

// EncodeErrorBuffer is the int32 section encoding of an error buffer: what its root
// covers, and what a worker keeps to open chunks of for a fault proof.
func EncodeErrorBuffer(e []int64) []byte { return encodeSection(nil, e) }

// ZeroErrorBufferRoot is the root of the all-zero error buffer of l.
func (l Layout) ZeroErrorBufferRoot() merkle.Hash { return ErrorBufferRoot(make([]int64, l.Elems())) }

// StartSource says where a chunk of a worker's round-start state
// (GlobalState.WorkerStart) comes from.
type StartSource int

// Sources of a start-state chunk.
const (
	// StartFixed: the header chunks, fixed by the config, the round's
	// first step and loss 0 (exact.StateHeader).
	StartFixed StartSource = iota + 1
	// StartWeights: a weights chunk, equal to chunk WeightsChunk(k) of the
	// round's global state file.
	StartWeights
	// StartMoments: an Adam-moment chunk, equal to the same chunk of the
	// worker's carry state (its last entered round's end state), or zero
	// for a worker without one.
	StartMoments
)

// StateChunks is the number of chunks of a state file of l's config.
func (l Layout) StateChunks() uint64 {
	_, _, size := exact.StateLayout(l.Config)
	return merkle.ChunkCount(size, ChunkSize)
}

// stateChunkLen is the length of chunk c of a state file (the last may be
// short).
func (l Layout) stateChunkLen(c uint64) int {
	_, _, size := exact.StateLayout(l.Config)
	return int(min(int64(ChunkSize), size-int64(c)*ChunkSize))
}

// StartSourceOf maps chunk c of a round-start state file to its source; for
// StartWeights, section is the section chunk k whose global weights it is.
func (l Layout) StartSourceOf(c uint64) (src StartSource, section int, err error) {
	if c >= l.StateChunks() {
		return 0, 0, fmt.Errorf("%w: state chunk %d of %d", ErrInvalid, c, l.StateChunks())
	}
	_, tensors, _ := exact.StateLayout(l.Config)
	if int64(c)*ChunkSize < tensors[0].Offset {
		return StartFixed, 0, nil
	}
	for i := len(tensors) - 1; i >= 0; i-- {
		t := tensors[i]
		if int64(c)*ChunkSize < t.Offset {
			continue
		}
		name := t.Name[:len(t.Name)-2]
		if t.Name[len(t.Name)-2:] != ".w" {
			return StartMoments, 0, nil
		}
		for _, p := range l.Tensors {
			if p.Name == name {
				return StartWeights, p.FirstChunk + int((int64(c)*ChunkSize-t.Offset)/ChunkSize), nil
			}
		}
	}
	return 0, 0, fmt.Errorf("%w: state chunk %d has no tensor", ErrInvalid, c) // unreachable for a valid layout
}

// StateWeightsChunk is the chunk of a state file holding section chunk k of
// the weights (the end state's chunk a pseudo-gradient fault opens).
func (l Layout) StateWeightsChunk(k int) (uint64, error) {
	if k < 0 || k >= l.Chunks {
		return 0, fmt.Errorf("%w: section chunk %d of %d", ErrInvalid, k, l.Chunks)
	}
	_, tensors, _ := exact.StateLayout(l.Config)
	for _, p := range l.Tensors {
		n := (p.Elems + ChunkElems - 1) / ChunkElems
		if k < p.FirstChunk || k >= p.FirstChunk+n {
			continue
		}
		for _, t := range tensors {
			if t.Name == p.Name+".w" {
				return uint64(t.Offset/ChunkSize) + uint64(k-p.FirstChunk), nil
			}
		}
	}
	return 0, fmt.Errorf("%w: section chunk %d has no tensor", ErrInvalid, k)
}

// StartChunk is what chunk c of a worker's round-start state must be, from
// its source (StartSourceOf): for StartFixed nothing (source must be nil);
// for StartWeights the global state's weights chunk; for StartMoments the
// carry state's chunk c, or nil for a worker without a carry (zero moments).
func (l Layout) StartChunk(sync Sync, round, c uint64, source []byte) ([]byte, error) {
	src, k, err := l.StartSourceOf(c)
	if err != nil {
		return nil, err
	}
	switch src {
	case StartFixed:
		if source != nil {
			return nil, fmt.Errorf("%w: state chunk %d is a header chunk, which has no source to open", ErrInvalid, c)
		}
		h := exact.StateHeader(l.Config, sync.RoundStart(round), 0)
		return h[c*ChunkSize : (c+1)*ChunkSize], nil
	case StartWeights:
		if _, err := readChunk(source, l.Valid(k), "global weights"); err != nil {
			return nil, err
		}
		return source, nil
	default:
		n := l.stateChunkLen(c)
		if source == nil {
			return make([]byte, n), nil
		}
		if len(source) != n {
			return nil, fmt.Errorf("%w: carry state chunk %d has %d bytes, want %d", ErrInvalid, c, len(source), n)
		}
		return source, nil
	}
}

// PseudoGradientChunk is chunk 1+k of a dense pseudo-gradient file: Δ =
// clamp32(global − end) element by element over section chunk k of the
// global weights and of the worker's end-state weights (valid parameter
// elements, zero padding).
func PseudoGradientChunk(globalW, endW []byte, valid int) ([]byte, error) {
	if valid < 0 || valid > ChunkElems {
		return nil, fmt.Errorf("%w: valid element count %d outside [0, %d]", ErrInvalid, valid, ChunkElems)
	}
	g, err := readChunk(globalW, valid, "global weights")
	if err != nil {
		return nil, err
	}
	e, err := readChunk(endW, valid, "end-state weights")
	if err != nil {
		return nil, err
	}
	for i := range g {
		g[i] = clamp32(g[i] - e[i])
	}
	return encodeSection(nil, g), nil
}

// CompressedChunk is record k of a compressed pseudo-gradient and chunk k
// of the error buffer it leaves, from section chunk k of the global
// weights, the end-state weights and the error buffer the worker started
// the round with (CompressChunk of the dense Δ chunk).
func CompressedChunk(globalW, endW, errIn []byte, topK, valid int) (record, errOut []byte, err error) {
	if topK < 1 || topK > ChunkElems {
		return nil, nil, fmt.Errorf("%w: top-k %d outside [1, %d]", ErrInvalid, topK, ChunkElems)
	}
	d, err := PseudoGradientChunk(globalW, endW, valid)
	if err != nil {
		return nil, nil, err
	}
	delta, _ := readChunk(d, valid, "pseudo-gradient")
	e, err := readChunk(errIn, valid, "error buffer")
	if err != nil {
		return nil, nil, err
	}
	record, _, next := CompressChunk(delta, e, topK)
	return record, encodeSection(nil, next), nil
}

// CompressedErrorRoots reads the error-buffer roots a compressed
// pseudo-gradient's header chunk (chunk 0 of its file) commits to: the
// buffer it was compressed with and the one it leaves.
func CompressedErrorRoots(headerChunk []byte) (in, out merkle.Hash, err error) {
	h, err := decodeHeader(headerChunk)
	if err != nil {
		return in, out, err
	}
	if len(headerChunk) != ChunkSize || h.kind != KindCompressed {
		return in, out, fmt.Errorf("%w: not the header chunk of a compressed pseudo-gradient (kind %d, %d bytes)", ErrInvalid, h.kind, len(headerChunk))
	}
	return h.errIn, h.errOut, nil
}
