package types

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"sync"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/reftrainer"
)

// ReferenceWorkloadVersion is the version of the reference workload's rules that new
// checkpoints are pinned to. A dispute is always judged by the version its checkpoint
// names, so an upgrade that adds version 2 cannot change the outcome of a running game.
const ReferenceWorkloadVersion = 1

// DataChunkSize is the leaf size of the Merkle tree over a job's training data; MsgStep
// proves each chunk a batch touches against that tree's root.
const DataChunkSize = 1024

const modelSeedDomain = "depinchain/verify/model-seed/v1"

// ReferenceConfig is the model a reference-workload job trains: the package default,
// initialised from the job's seed (which the chain derived from a block hash).
func ReferenceConfig(jobSeed []byte) reftrainer.Config {
	cfg := reftrainer.DefaultConfig()
	cfg.Seed = sha256.Sum256(append([]byte(modelSeedDomain), jobSeed...))
	return cfg
}

// InitialStateHash is h_0 of a reference job: the hash of its freshly initialised model.
func InitialStateHash(jobSeed []byte) ([]byte, error) {
	s, err := reftrainer.Init(ReferenceConfig(jobSeed))
	if err != nil {
		return nil, err
	}
	h := s.Hash()
	return h[:], nil
}

// Segment is one Merkle-committed run of bytes in a worker's training stream: the
// corpus built into the reference workload, or one data piece of a dataset shard.
type Segment struct {
	Root      merkle.Hash
	Size      uint64
	ChunkSize uint64
	// Offset is where the segment starts in the stream, FirstChunk the stream-wide
	// number of its first chunk.
	Offset     uint64
	FirstChunk uint64
}

// Chunks is how many chunks (Merkle leaves) the segment has.
func (s Segment) Chunks() uint64 { return merkle.ChunkCount(int64(s.Size), int(s.ChunkSize)) }

// DataLayout is a worker's training stream as the chain knows it: committed segments in
// order. The batch windows of a step are byte ranges of this stream; the referee proves
// each chunk they touch against its segment's root, with the tree size taken from the
// layout (on-chain), never from the prover.
type DataLayout struct {
	Segments []Segment
}

func newLayout(segments []Segment) DataLayout {
	var offset, chunk uint64
	for i := range segments {
		segments[i].Offset, segments[i].FirstChunk = offset, chunk
		offset += segments[i].Size
		chunk += segments[i].Chunks()
	}
	return DataLayout{Segments: segments}
}

// Size is the stream's length in bytes.
func (l DataLayout) Size() uint64 {
	if len(l.Segments) == 0 {
		return 0
	}
	last := l.Segments[len(l.Segments)-1]
	return last.Offset + last.Size
}

// Chunks is the number of chunks in the stream.
func (l DataLayout) Chunks() uint64 {
	if len(l.Segments) == 0 {
		return 0
	}
	last := l.Segments[len(l.Segments)-1]
	return last.FirstChunk + last.Chunks()
}

// Chunk locates stream-wide chunk number n: its segment, its index in that segment's
// tree, and its byte range [start, end) in the stream.
func (l DataLayout) Chunk(n uint64) (seg Segment, local, start, end uint64, ok bool) {
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
func (l DataLayout) ChunkAt(off uint64) (uint64, bool) {
	i := sort.Search(len(l.Segments), func(i int) bool {
		return l.Segments[i].Offset+l.Segments[i].Size > off
	})
	if i == len(l.Segments) {
		return 0, false
	}
	seg := l.Segments[i]
	return seg.FirstChunk + (off-seg.Offset)/seg.ChunkSize, true
}

// TrainingData is a worker's training stream with its bytes, as a prover (the sidecar,
// a challenger, the CLI) holds it.
type TrainingData struct {
	DataLayout
	Bytes []byte
}

var builtinData = sync.OnceValue(func() TrainingData {
	corpus := reftrainer.DefaultCorpus()
	seg := Segment{Root: merkle.RootOfBytes(corpus, DataChunkSize), Size: uint64(len(corpus)), ChunkSize: DataChunkSize}
	return TrainingData{DataLayout: newLayout([]Segment{seg}), Bytes: corpus}
})

// BuiltinData is the corpus jobs without a dataset train on.
func BuiltinData() TrainingData { return builtinData() }

// JobTrainingData returns the built-in training data of a job that names no dataset. A
// dataset-backed job's bytes live with storage providers: provers assemble them from the
// worker's pieces (NewTrainingData) and the referee checks them against DatasetLayout.
func JobTrainingData(job markettypes.Job) (TrainingData, error) {
	if job.Spec.DatasetId != "" {
		return TrainingData{}, errorsmod.Wrapf(ErrUnsupportedData,
			"job %d trains on dataset %q: its bytes come from the worker's shard pieces, not the chain", job.Id, job.Spec.DatasetId)
	}
	return builtinData(), nil
}

// DatasetLayout is the training stream of a worker of a dataset-backed job: the data
// pieces of its assigned shards, in assignment order (for Reed–Solomon shards the first k
// pieces, whose concatenation is the shard; for replicated shards the shard's one piece).
func DatasetLayout(ds shardtypes.Dataset, shards []shardtypes.Shard) (DataLayout, error) {
	var segs []Segment
	for _, sh := range shards {
		pieces := append([]shardtypes.Piece(nil), sh.Pieces...)
		sort.Slice(pieces, func(i, j int) bool { return pieces[i].Index < pieces[j].Index })
		data := 1
		if ds.Encoding.Kind == shardtypes.ENCODING_KIND_REED_SOLOMON {
			data = int(ds.Encoding.DataPieces)
		}
		if len(pieces) < data {
			return DataLayout{}, errorsmod.Wrapf(ErrUnsupportedData, "shard %d of %s has %d pieces, needs %d data pieces", sh.Index, ds.Id, len(pieces), data)
		}
		for _, p := range pieces[:data] {
			root, err := merkle.HashFromBytes(p.Root)
			if err != nil {
				return DataLayout{}, errorsmod.Wrapf(ErrUnsupportedData, "shard %d piece %d: %s", sh.Index, p.Index, err)
			}
			seg := Segment{Root: root, Size: p.SizeBytes, ChunkSize: uint64(ds.ChunkSize)}
			if ds.ChunkSize == 0 || seg.Chunks() != p.ChunkCount {
				return DataLayout{}, errorsmod.Wrapf(ErrUnsupportedData, "shard %d piece %d: %d bytes in %d-byte chunks is not %d chunks", sh.Index, p.Index, p.SizeBytes, ds.ChunkSize, p.ChunkCount)
			}
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return DataLayout{}, errorsmod.Wrapf(ErrUnsupportedData, "dataset %s assigns no shard to this worker", ds.Id)
	}
	return newLayout(segs), nil
}

// NewTrainingData pairs a layout with the stream's bytes, checking every segment's root.
func NewTrainingData(layout DataLayout, stream []byte) (TrainingData, error) {
	if uint64(len(stream)) != layout.Size() {
		return TrainingData{}, fmt.Errorf("stream is %d bytes, the layout %d", len(stream), layout.Size())
	}
	for i, seg := range layout.Segments {
		if merkle.RootOfBytes(stream[seg.Offset:seg.Offset+seg.Size], int(seg.ChunkSize)) != seg.Root {
			return TrainingData{}, fmt.Errorf("segment %d of the stream does not match its committed root", i)
		}
	}
	return TrainingData{DataLayout: layout, Bytes: stream}, nil
}

// CheckpointChunkSize is the leaf size of a checkpoint file's state_root tree.
const CheckpointChunkSize = 1 << 20

// StepData returns the data chunks, with inclusion proofs, that step `step`'s batch
// windows touch: exactly what MsgStep must carry for the referee to rebuild the batch.
func (d TrainingData) StepData(cfg reftrainer.Config, jobSeed []byte, step uint64) ([]DataChunk, error) {
	windows, err := reftrainer.BatchWindows(cfg, jobSeed, step, d.Size())
	if err != nil {
		return nil, err
	}
	needed := map[uint64]bool{}
	var order []uint64
	for _, w := range windows {
		first, ok1 := d.ChunkAt(w.Start)
		last, ok2 := d.ChunkAt(w.Start + w.Length - 1)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("window [%d, %d) outside the %d-byte stream", w.Start, w.Start+w.Length, d.Size())
		}
		for n := first; n <= last; n++ {
			if !needed[n] {
				needed[n] = true
				order = append(order, n)
			}
		}
	}
	leaves := map[uint64][]merkle.Hash{} // by segment offset, computed once per segment
	chunks := make([]DataChunk, 0, len(order))
	for _, n := range order {
		seg, local, start, end, _ := d.Chunk(n)
		if leaves[seg.Offset] == nil {
			leaves[seg.Offset] = merkle.LeafHashesOfBytes(d.Bytes[seg.Offset:seg.Offset+seg.Size], int(seg.ChunkSize))
		}
		proof, err := merkle.InclusionProof(leaves[seg.Offset], local)
		if err != nil {
			return nil, err
		}
		chunks = append(chunks, DataChunk{Index: n, Data: d.Bytes[start:end], Proof: HashesToBytes(proof)})
	}
	return chunks, nil
}

// HashesToBytes converts a Merkle proof to its wire form.
func HashesToBytes(hs []merkle.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = append([]byte(nil), h[:]...)
	}
	return out
}

// Trace is a per-step hash trace h_start..h_end and its Merkle tree, as both the provider
// and a challenger hold it.
type Trace struct {
	Start  uint64
	Hashes []merkle.Hash
	leaves []merkle.Hash
}

// NewTrace builds the trace tree over hashes, the first of which is h_start.
func NewTrace(start uint64, hashes []merkle.Hash) Trace {
	leaves := make([]merkle.Hash, len(hashes))
	for i, h := range hashes {
		leaves[i] = merkle.LeafHash(h[:])
	}
	return Trace{Start: start, Hashes: hashes, leaves: leaves}
}

// End is the last step the trace covers.
func (t Trace) End() uint64 { return t.Start + uint64(len(t.Hashes)) - 1 }

// Root is the trace_root committed on-chain.
func (t Trace) Root() merkle.Hash { return merkle.RootFromLeafHashes(t.leaves) }

// Open returns h_step and its inclusion proof against Root.
func (t Trace) Open(step uint64) (merkle.Hash, [][]byte, error) {
	if step < t.Start || step > t.End() {
		return merkle.Hash{}, nil, errorsmod.Wrapf(ErrWrongRange, "step %d outside the trace [%d, %d]", step, t.Start, t.End())
	}
	proof, err := merkle.InclusionProof(t.leaves, step-t.Start)
	if err != nil {
		return merkle.Hash{}, nil, err
	}
	return t.Hashes[step-t.Start], HashesToBytes(proof), nil
}
