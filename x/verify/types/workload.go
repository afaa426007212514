package types

import (
	"sort"
	"sync"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// ExactWorkloadVersion is the version of the workload rules new checkpoints are pinned
// to: 2, the exact transformer (pkg/exact) for kinds reference and transformer. A dispute
// is always judged by the version its checkpoint names; version 1 was the retired
// fixed-point MLP, whose checkpoints no referee of this release re-executes.
const ExactWorkloadVersion = 2

// DataChunkSize is the leaf size of the Merkle tree over a job's training data; MsgStep
// proves each chunk a batch touches against that tree's root.
const DataChunkSize = 1024

// JobConfig is the exact transformer configuration a job trains.
func JobConfig(job markettypes.Job) (exact.Config, error) {
	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		return exact.Config{}, errorsmod.Wrapf(ErrNotAdjudicable, "job %d: %s", job.Id, err)
	}
	return cfg, nil
}

// InitialState is the step-0 state of a job: its configuration initialised from the job's
// seed (which the chain derived from a block hash).
func InitialState(job markettypes.Job) (*exact.State, error) {
	cfg, err := JobConfig(job)
	if err != nil {
		return nil, err
	}
	return exact.Init(cfg, job.Seed)
}

// InitialStateHash is h_0 of a job: the Merkle root of its freshly initialised state.
func InitialStateHash(job markettypes.Job) ([]byte, error) {
	s, err := InitialState(job)
	if err != nil {
		return nil, err
	}
	h := s.Root()
	return h[:], nil
}

var builtinData = sync.OnceValue(func() traindata.Stream {
	return traindata.SingleSegment(traindata.BuiltinCorpus(), DataChunkSize)
})

// BuiltinData is the corpus jobs without a dataset train on.
func BuiltinData() traindata.Stream { return builtinData() }

// JobTrainingData returns the built-in training data of a job that names no dataset. A
// dataset-backed job's bytes live with storage providers: provers assemble them from the
// worker's pieces (traindata.NewStream) and the referee checks them against DatasetLayout.
//
// A job that trains in rounds has no one stream: each worker trains on its own shards of
// each round (WorkerTrainingData).
func JobTrainingData(job markettypes.Job) (traindata.Stream, error) {
	if job.Spec.DatasetId != "" {
		return traindata.Stream{}, errorsmod.Wrapf(ErrUnsupportedData,
			"job %d trains on dataset %q: its bytes come from the worker's shard pieces, not the chain", job.Id, job.Spec.DatasetId)
	}
	if job.Spec.Sync != nil {
		return traindata.Stream{}, errorsmod.Wrapf(ErrUnsupportedData,
			"job %d trains in rounds: each worker's data is its shards of the round (WorkerTrainingData)", job.Id)
	}
	return builtinData(), nil
}

// WorkerTrainingData is the training stream of worker at step: for a job that trains in
// rounds, the worker's shards of the built-in corpus in the step's round (pkg/diloco
// WorkerData over CorpusShards of DefaultShardBytes, assigned among the job's workers by
// the job seed) — so a trace trained on another worker's shards fails at its batch —
// otherwise JobTrainingData. A dataset-backed job's stream, in rounds or not, is the
// DatasetLayout of its worker's shards (a sync job's: of the round, AssignRoundShards).
func WorkerTrainingData(job markettypes.Job, worker uint32, step uint64) (traindata.Stream, error) {
	if job.Spec.Sync == nil || job.Spec.DatasetId != "" {
		return JobTrainingData(job)
	}
	sync, err := JobSync(job)
	if err != nil {
		return traindata.Stream{}, err
	}
	corpus := traindata.BuiltinCorpus()
	shards := diloco.CorpusShards(uint64(len(corpus)), diloco.DefaultShardBytes)
	data, err := diloco.WorkerData(corpus, job.Seed, sync.RoundOf(step), shards, int(job.Spec.Workers), int(worker))
	if err != nil {
		return traindata.Stream{}, errorsmod.Wrapf(ErrUnsupportedData, "job %d worker %d: %s", job.Id, worker, err)
	}
	return traindata.SingleSegment(data, DataChunkSize), nil
}

// DatasetLayout is the training stream of a worker of a dataset-backed job: the data
// pieces of its assigned shards, in assignment order (for Reed–Solomon shards the first k
// pieces, whose concatenation is the shard; for replicated shards the shard's one piece).
func DatasetLayout(ds shardtypes.Dataset, shards []shardtypes.Shard) (traindata.Layout, error) {
	var segs []traindata.Segment
	for _, sh := range shards {
		pieces := append([]shardtypes.Piece(nil), sh.Pieces...)
		sort.Slice(pieces, func(i, j int) bool { return pieces[i].Index < pieces[j].Index })
		data := 1
		if ds.Encoding.Kind == shardtypes.ENCODING_KIND_REED_SOLOMON {
			data = int(ds.Encoding.DataPieces)
		}
		if len(pieces) < data {
			return traindata.Layout{}, errorsmod.Wrapf(ErrUnsupportedData, "shard %d of %s has %d pieces, needs %d data pieces", sh.Index, ds.Id, len(pieces), data)
		}
		for _, p := range pieces[:data] {
			root, err := merkle.HashFromBytes(p.Root)
			if err != nil {
				return traindata.Layout{}, errorsmod.Wrapf(ErrUnsupportedData, "shard %d piece %d: %s", sh.Index, p.Index, err)
			}
			seg := traindata.Segment{Root: root, Size: p.SizeBytes, ChunkSize: uint64(ds.ChunkSize)}
			if ds.ChunkSize == 0 || seg.Chunks() != p.ChunkCount {
				return traindata.Layout{}, errorsmod.Wrapf(ErrUnsupportedData, "shard %d piece %d: %d bytes in %d-byte chunks is not %d chunks", sh.Index, p.Index, p.SizeBytes, ds.ChunkSize, p.ChunkCount)
			}
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return traindata.Layout{}, errorsmod.Wrapf(ErrUnsupportedData, "dataset %s assigns no shard to this worker", ds.Id)
	}
	return traindata.NewLayout(segs), nil
}

// StepData returns the data chunks, with inclusion proofs, that step `step`'s batch
// windows touch: exactly what MsgStep must carry for the referee to rebuild the batch.
func StepData(d traindata.Stream, cfg exact.Config, jobSeed []byte, step uint64) ([]DataChunk, error) {
	windows, err := exact.BatchWindows(cfg, jobSeed, step, d.Size())
	if err != nil {
		return nil, err
	}
	proofs, err := d.Prove(windows)
	if err != nil {
		return nil, err
	}
	chunks := make([]DataChunk, len(proofs))
	for i, p := range proofs {
		chunks[i] = DataChunk{Index: p.Index, Data: p.Data, Proof: merkle.HashesToBytes(p.Proof)}
	}
	return chunks, nil
}

// JobSync is the integer DiLoCo sync of a job that trains in rounds (JobSpec.sync), checked
// as every pseudo-gradient and global state header checks it.
func JobSync(job markettypes.Job) (diloco.Sync, error) {
	if job.Spec.Sync == nil {
		return diloco.Sync{}, errorsmod.Wrapf(ErrNotAdjudicable, "job %d does not train in rounds (no sync spec)", job.Id)
	}
	sync := job.Spec.Sync.Diloco()
	if err := sync.Check(); err != nil {
		return diloco.Sync{}, errorsmod.Wrapf(ErrNotAdjudicable, "job %d: %s", job.Id, err)
	}
	return sync, nil
}
