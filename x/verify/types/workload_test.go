package types_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

var seedA, seedB = []byte("job-seed-a"), []byte("job-seed-b")

func referenceJob(seed []byte) markettypes.Job {
	return markettypes.Job{Id: 7, Seed: seed, Spec: markettypes.JobSpec{Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}}}
}

func TestJobConfigAndInitialState(t *testing.T) {
	cfg, err := types.JobConfig(referenceJob(seedA))
	require.NoError(t, err)
	require.Equal(t, exact.ReferenceConfig(), cfg, "kind reference is the fixed reference configuration")

	small := exact.Config{
		Model: exact.ModelConfig{Layers: 2, DModel: 16, Heads: 2, DFF: 32, Context: 8, Vocab: exact.Vocab},
		Train: exact.TrainConfig{Batch: 2, Optimizer: exact.OptimizerAdamW, LR: 0.002, WeightDecay: 0.1},
	}.WithDefaults()
	tj := referenceJob(seedA)
	tj.Spec.Workload = markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_TRANSFORMER, Transformer: markettypes.NewTransformerConfig(small)}
	cfg, err = types.JobConfig(tj)
	require.NoError(t, err)
	require.Equal(t, small.Hyper(), cfg.Hyper())

	cj := referenceJob(seedA)
	cj.Spec.Workload = markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER}
	_, err = types.JobConfig(cj)
	require.ErrorIs(t, err, types.ErrNotAdjudicable)

	h, err := types.InitialStateHash(referenceJob(seedA))
	require.NoError(t, err)
	s, err := exact.Init(exact.ReferenceConfig(), seedA)
	require.NoError(t, err)
	want := s.Root()
	require.Equal(t, want[:], h, "h_0 is the Merkle root of the seed's initial state")
	hb, err := types.InitialStateHash(referenceJob(seedB))
	require.NoError(t, err)
	require.NotEqual(t, h, hb, "the job seed picks the initial weights")
}

func TestJobTrainingData(t *testing.T) {
	job := markettypes.Job{Id: 7, Seed: seedA}
	d, err := types.JobTrainingData(job)
	require.NoError(t, err)
	corpus := traindata.BuiltinCorpus()
	require.Equal(t, corpus, d.Bytes)
	require.Equal(t, merkle.RootOfBytes(corpus, types.DataChunkSize), d.Segments[0].Root)
	require.Equal(t, merkle.ChunkCount(int64(len(corpus)), types.DataChunkSize), d.Chunks())
	require.Greater(t, d.Chunks(), uint64(1))

	job.Spec.DatasetId = "ds-fineweb"
	_, err = types.JobTrainingData(job)
	require.ErrorIs(t, err, types.ErrUnsupportedData)
	require.Contains(t, err.Error(), "ds-fineweb")
}

// StepData carries exactly the chunks a step's windows touch, each provably in the data
// tree, and the batch rebuilt from them is the batch the trainer uses.
func TestStepData(t *testing.T) {
	d, err := types.JobTrainingData(markettypes.Job{Seed: seedA})
	require.NoError(t, err)
	cfg := exact.ReferenceConfig()
	for _, step := range []uint64{0, 1, 17, 1 << 20} {
		chunks, err := types.StepData(d, cfg, seedA, step)
		require.NoError(t, err)
		windows, err := exact.BatchWindows(cfg, seedA, step, uint64(len(d.Bytes)))
		require.NoError(t, err)
		need := map[uint64]bool{}
		for _, w := range windows {
			for i := w.Start / types.DataChunkSize; i <= (w.Start+w.Length-1)/types.DataChunkSize; i++ {
				need[i] = true
			}
		}
		got := map[uint64][]byte{}
		for _, c := range chunks {
			require.False(t, need[c.Index] && got[c.Index] != nil, "chunk %d twice", c.Index)
			proof := make([]merkle.Hash, len(c.Proof))
			for i, p := range c.Proof {
				proof[i], err = merkle.HashFromBytes(p)
				require.NoError(t, err)
			}
			require.NoError(t, merkle.VerifyInclusion(d.Segments[0].Root, c.Index, d.Chunks(), merkle.LeafHash(c.Data), proof))
			got[c.Index] = c.Data
		}
		require.Len(t, got, len(need))
		for i := range need {
			require.NotNil(t, got[i], "chunk %d missing", i)
		}
		batch, err := exact.Batch(d.Bytes, windows)
		require.NoError(t, err)
		for k, w := range windows {
			var rebuilt []byte
			for off := w.Start; off < w.Start+w.Length; off++ {
				rebuilt = append(rebuilt, got[off/types.DataChunkSize][off%types.DataChunkSize])
			}
			require.Equal(t, batch[k], rebuilt)
		}
	}
}
