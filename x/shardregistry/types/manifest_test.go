package types_test

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

func TestValidateManifest(t *testing.T) {
	p := types.DefaultParams()
	enc := types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: 3, ParityPieces: 2}
	piece := func(i uint32, size uint64) types.Piece {
		root := sha256.Sum256([]byte{byte(i), byte(size)})
		return types.Piece{Index: i, Root: root[:], SizeBytes: size}
	}
	shards := []types.Shard{{Index: 0, SampleStart: 0, SampleEnd: 5, SizeBytes: 10_000}, {Index: 1, SampleStart: 5, SampleEnd: 6, SizeBytes: 7}}
	for i := range shards {
		for j := uint32(0); j < 5; j++ {
			shards[i].Pieces = append(shards[i].Pieces, piece(j, enc.PieceSize(shards[i].SizeBytes)))
		}
	}
	require.Equal(t, uint64(3334), shards[0].Pieces[0].SizeBytes)
	require.Equal(t, uint64(3), shards[1].Pieces[0].SizeBytes)
	root := types.ManifestRoot(enc, 4096, 10_007, shards)
	stats, err := types.ValidateManifest(p, "d-1", enc, 4096, 10_007, shards, root[:])
	require.NoError(t, err)
	require.Equal(t, uint64(6), stats.SampleCount)
	require.Equal(t, uint64(1), shards[0].Pieces[0].ChunkCount, "chunk counts are filled in")
	require.Equal(t, uint64(1), shards[1].Pieces[4].ChunkCount)

	// The root commits to the encoding and chunk size too.
	other := types.ManifestRoot(enc, 2048, 10_007, shards)
	require.NotEqual(t, root, other)
	_, err = types.ValidateManifest(p, "d-1", enc, 2048, 10_007, shards, root[:])
	require.ErrorContains(t, err, "chunk_count is 1, but 3334 bytes in 2048-byte chunks are 2 chunks")
	for i := range shards {
		for j := range shards[i].Pieces {
			shards[i].Pieces[j].ChunkCount = 0
		}
	}
	_, err = types.ValidateManifest(p, "d-1", enc, 2048, 10_007, shards, root[:])
	require.ErrorContains(t, err, "does not match")

	require.ErrorContains(t, types.ValidateDatasetID("ab"), "3 to 64")
	require.NoError(t, types.ValidateDatasetID("wiki-en-2026"))
	require.Error(t, types.ValidateName("bad\x00name"))
}

func TestEncoding(t *testing.T) {
	rs := types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: 4, ParityPieces: 2}
	require.Equal(t, uint32(6), rs.PiecesPerShard())
	require.Equal(t, uint32(1), rs.HoldersPerPiece())
	require.Equal(t, uint32(6), rs.Target())
	require.Equal(t, uint32(4), rs.MinLive())
	require.Equal(t, uint64(3), rs.PieceSize(9))
	rep := types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 3}
	require.Equal(t, uint32(1), rep.PiecesPerShard())
	require.Equal(t, uint32(3), rep.HoldersPerPiece())
	require.Equal(t, uint32(1), rep.MinLive())
	p := types.DefaultParams()
	require.NoError(t, rs.Validate(p))
	require.NoError(t, rep.Validate(p))
	require.Error(t, types.Encoding{}.Validate(p))
	require.ErrorContains(t, types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 99}.Validate(p), "replicas must be within")
	require.ErrorContains(t, types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: 30, ParityPieces: 10}.Validate(p), "max_pieces_per_shard")
}

func TestParams(t *testing.T) {
	require.NoError(t, types.DefaultParams().Validate())
	p := types.DefaultParams()
	p.ProofWindowBlocks = p.PeriodBlocks
	require.ErrorContains(t, p.Validate(), "proof_window_blocks")
	p = types.DefaultParams()
	require.Equal(t, int64(100_000), p.ReplicaCollateral(1).Amount.Int64(), "the minimum")
	require.Equal(t, int64(30*10_000), p.ReplicaCollateral(30*types.MiB-5).Amount.Int64(), "per started MiB")
	require.NoError(t, types.DefaultGenesis().Validate())
}
