package types

import (
	"crypto/sha256"
	"sync"

	errorsmod "cosmossdk.io/errors"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/merkle"
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

// TrainingData is a job's training data as the referee sees it. Jobs that name no
// dataset train on the corpus built into the reference workload; dataset-backed jobs
// need x/shardregistry's shard roots, which this chain version does not have yet.
type TrainingData struct {
	Bytes []byte
	Root  merkle.Hash
}

var builtinData = sync.OnceValue(func() TrainingData {
	corpus := reftrainer.DefaultCorpus()
	return TrainingData{Bytes: corpus, Root: merkle.RootOfBytes(corpus, DataChunkSize)}
})

// JobTrainingData returns the data the referee checks a disputed batch against.
func JobTrainingData(job markettypes.Job) (TrainingData, error) {
	if job.Spec.DatasetId != "" {
		return TrainingData{}, errorsmod.Wrapf(ErrUnsupportedData,
			"job %d trains on dataset %q; the referee can only check the built-in corpus until x/shardregistry lands", job.Id, job.Spec.DatasetId)
	}
	return builtinData(), nil
}

// Chunks is how many DataChunkSize leaves the data has.
func (d TrainingData) Chunks() uint64 { return merkle.ChunkCount(int64(len(d.Bytes)), DataChunkSize) }

// CheckpointChunkSize is the leaf size of a checkpoint file's state_root tree.
const CheckpointChunkSize = 1 << 20

// StepData returns the data chunks, with inclusion proofs, that step `step`'s batch
// windows touch: exactly what MsgStep must carry for the referee to rebuild the batch.
func (d TrainingData) StepData(cfg reftrainer.Config, jobSeed []byte, step uint64) ([]DataChunk, error) {
	windows, err := reftrainer.BatchWindows(cfg, jobSeed, step, uint64(len(d.Bytes)))
	if err != nil {
		return nil, err
	}
	needed := map[uint64]bool{}
	var order []uint64
	for _, w := range windows {
		for idx := w.Start / DataChunkSize; idx <= (w.Start+w.Length-1)/DataChunkSize; idx++ {
			if !needed[idx] {
				needed[idx] = true
				order = append(order, idx)
			}
		}
	}
	leaves := merkle.LeafHashesOfBytes(d.Bytes, DataChunkSize)
	chunks := make([]DataChunk, 0, len(order))
	for _, idx := range order {
		proof, err := merkle.InclusionProof(leaves, idx)
		if err != nil {
			return nil, err
		}
		end := min((idx+1)*DataChunkSize, uint64(len(d.Bytes)))
		chunks = append(chunks, DataChunk{Index: idx, Data: d.Bytes[idx*DataChunkSize : end], Proof: HashesToBytes(proof)})
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
