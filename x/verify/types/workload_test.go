package types_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/reftrainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

var seedA, seedB = []byte("job-seed-a"), []byte("job-seed-b")

func TestReferenceConfig(t *testing.T) {
	a, b := types.ReferenceConfig(seedA), types.ReferenceConfig(seedB)
	require.NoError(t, a.Validate())
	require.Equal(t, a, types.ReferenceConfig(seedA), "deterministic")
	require.NotEqual(t, a.Seed, b.Seed, "the job seed picks the initial weights")
	// Apart from the seed it is the package default.
	def := reftrainer.DefaultConfig()
	def.Seed = a.Seed
	require.Equal(t, def, a)

	h, err := types.InitialStateHash(seedA)
	require.NoError(t, err)
	s, err := reftrainer.Init(a)
	require.NoError(t, err)
	want := s.Hash()
	require.Equal(t, want[:], h)
	hb, err := types.InitialStateHash(seedB)
	require.NoError(t, err)
	require.NotEqual(t, h, hb)
}

func TestJobTrainingData(t *testing.T) {
	job := markettypes.Job{Id: 7, Seed: seedA}
	d, err := types.JobTrainingData(job)
	require.NoError(t, err)
	corpus := reftrainer.DefaultCorpus()
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
	cfg := types.ReferenceConfig(seedA)
	for _, step := range []uint64{0, 1, 17, 1 << 20} {
		chunks, err := types.StepData(d, cfg, seedA, step)
		require.NoError(t, err)
		windows, err := reftrainer.BatchWindows(cfg, seedA, step, uint64(len(d.Bytes)))
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
		batch, err := reftrainer.Batch(d.Bytes, windows)
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
