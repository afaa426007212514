package types_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// layoutOf registers pieces of the given sizes (replicated shards, one piece each) and
// returns the worker layout over them plus the stream's bytes.
func layoutOf(t *testing.T, chunkSize uint32, sizes ...int) (traindata.Layout, []byte) {
	t.Helper()
	corpus := traindata.BuiltinCorpus()
	var shards []shardtypes.Shard
	var stream []byte
	off := 0
	for i, n := range sizes {
		piece := corpus[off : off+n]
		off += n
		root := merkle.RootOfBytes(piece, int(chunkSize))
		shards = append(shards, shardtypes.Shard{Index: uint32(i), Pieces: []shardtypes.Piece{{
			Index: 0, Root: root[:], SizeBytes: uint64(n), ChunkCount: merkle.ChunkCount(int64(n), int(chunkSize)),
		}}})
		stream = append(stream, piece...)
	}
	ds := shardtypes.Dataset{Id: "ds", ChunkSize: chunkSize, Encoding: shardtypes.Encoding{Kind: shardtypes.ENCODING_KIND_REPLICAS, Replicas: 1}}
	layout, err := types.DatasetLayout(ds, shards)
	require.NoError(t, err)
	return layout, stream
}

func TestStepDataAcrossPieces(t *testing.T) {
	layout, stream := layoutOf(t, 64, 700, 300, 65, 900)
	data, err := traindata.NewStream(layout, stream)
	require.NoError(t, err)
	seed := []byte("seed")
	cfg := exact.ReferenceConfig()
	for step := uint64(0); step < 20; step++ {
		chunks, err := types.StepData(data, cfg, seed, step)
		require.NoError(t, err)
		got := map[uint64][]byte{}
		for _, c := range chunks {
			seg, local, start, end, ok := layout.Chunk(c.Index)
			require.True(t, ok)
			require.Equal(t, stream[start:end], c.Data)
			proof := make([]merkle.Hash, len(c.Proof))
			for i, p := range c.Proof {
				proof[i], err = merkle.HashFromBytes(p)
				require.NoError(t, err)
			}
			require.NoError(t, merkle.VerifyInclusion(seg.Root, local, seg.Chunks(), merkle.LeafHash(c.Data), proof))
			got[c.Index] = c.Data
		}
		windows, err := exact.BatchWindows(cfg, seed, step, layout.Size())
		require.NoError(t, err)
		for _, w := range windows {
			for off := w.Start; off < w.Start+w.Length; off++ {
				n, _ := layout.ChunkAt(off)
				require.Contains(t, got, n, "step %d: chunk %d of byte %d not supplied", step, n, off)
			}
		}
	}
}

func TestDatasetLayoutRejectsInconsistentPieces(t *testing.T) {
	ds := shardtypes.Dataset{Id: "ds", ChunkSize: 64, Encoding: shardtypes.Encoding{Kind: shardtypes.ENCODING_KIND_REED_SOLOMON, DataPieces: 2, ParityPieces: 1}}
	root := make([]byte, 32)
	_, err := types.DatasetLayout(ds, []shardtypes.Shard{{Pieces: []shardtypes.Piece{{Index: 0, Root: root, SizeBytes: 64, ChunkCount: 1}}}})
	require.ErrorContains(t, err, "needs 2 data pieces")
	_, err = types.DatasetLayout(ds, []shardtypes.Shard{{Pieces: []shardtypes.Piece{
		{Index: 0, Root: root, SizeBytes: 64, ChunkCount: 1}, {Index: 1, Root: root, SizeBytes: 64, ChunkCount: 2},
	}}})
	require.ErrorContains(t, err, "is not 2 chunks")
	_, err = types.DatasetLayout(ds, nil)
	require.ErrorIs(t, err, types.ErrUnsupportedData)
}
