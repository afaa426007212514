package types

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// MaxNameLength bounds a dataset's display name.
const MaxNameLength = 128

// manifestDomain opens the manifest's header leaf, so a manifest root can never be
// mistaken for a piece root or any other tree of the chain.
const manifestDomain = "depinchain/shardregistry/manifest/v1"

var datasetIDPattern = regexp.MustCompile(`^[a-z0-9-]{3,64}$`)

// ValidateDatasetID checks an owner-chosen dataset id: 3 to 64 characters of [a-z0-9-].
func ValidateDatasetID(id string) error {
	if !datasetIDPattern.MatchString(id) {
		return errorsmod.Wrapf(ErrInvalidDataset, "dataset id %q must be 3 to 64 characters of a-z, 0-9 and '-'", id)
	}
	return nil
}

// ValidateName checks a dataset's display name: at most MaxNameLength bytes of
// printable UTF-8 (it may be empty).
func ValidateName(name string) error {
	if len(name) > MaxNameLength {
		return errorsmod.Wrapf(ErrInvalidDataset, "name is %d bytes long, at most %d allowed", len(name), MaxNameLength)
	}
	for _, r := range name {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return errorsmod.Wrapf(ErrInvalidDataset, "name %q must be printable UTF-8", name)
		}
	}
	return nil
}

// IsReedSolomon reports whether shards are erasure coded.
func (e Encoding) IsReedSolomon() bool { return e.Kind == ENCODING_KIND_REED_SOLOMON }

// PiecesPerShard is k+m for Reed-Solomon and 1 for replicas.
func (e Encoding) PiecesPerShard() uint32 {
	if e.IsReedSolomon() {
		return e.DataPieces + e.ParityPieces
	}
	return 1
}

// HoldersPerPiece is the number of live holders a piece needs: 1 for a Reed-Solomon
// piece, n for replicas. A piece with fewer has an open (repair) slot.
func (e Encoding) HoldersPerPiece() uint32 {
	if e.IsReedSolomon() {
		return 1
	}
	return e.Replicas
}

// Target is a shard's full live count: k+m live pieces, or n live replicas.
func (e Encoding) Target() uint32 {
	if e.IsReedSolomon() {
		return e.DataPieces + e.ParityPieces
	}
	return e.Replicas
}

// MinLive is the live count below which a shard's bytes are lost: k, or 1.
func (e Encoding) MinLive() uint32 {
	if e.IsReedSolomon() {
		return e.DataPieces
	}
	return 1
}

// PieceSize is the size of every piece of a shard of shardSize bytes: ceil(size / k)
// for Reed-Solomon (the last data piece is zero-padded), the shard's size for replicas.
func (e Encoding) PieceSize(shardSize uint64) uint64 {
	if e.IsReedSolomon() {
		k := uint64(e.DataPieces)
		return shardSize/k + boolToUint64(shardSize%k != 0)
	}
	return shardSize
}

// Describe writes the encoding as "rs 4+2" or "3 replicas".
func (e Encoding) Describe() string {
	switch e.Kind {
	case ENCODING_KIND_REED_SOLOMON:
		return fmt.Sprintf("Reed-Solomon %d+%d", e.DataPieces, e.ParityPieces)
	case ENCODING_KIND_REPLICAS:
		return fmt.Sprintf("%d replicas", e.Replicas)
	}
	return "unspecified encoding"
}

// Validate checks the encoding against the params' limits.
func (e Encoding) Validate(p Params) error {
	switch e.Kind {
	case ENCODING_KIND_REPLICAS:
		if e.DataPieces != 0 || e.ParityPieces != 0 {
			return errorsmod.Wrap(ErrInvalidManifest, "encoding: replicas takes no data_pieces or parity_pieces")
		}
		if e.Replicas == 0 || e.Replicas > p.MaxReplicas {
			return errorsmod.Wrapf(ErrInvalidManifest, "encoding: replicas must be within [1, %d], got %d", p.MaxReplicas, e.Replicas)
		}
	case ENCODING_KIND_REED_SOLOMON:
		if e.Replicas != 0 {
			return errorsmod.Wrap(ErrInvalidManifest, "encoding: Reed-Solomon takes no replicas (each piece has one holder)")
		}
		if e.DataPieces == 0 || e.ParityPieces == 0 {
			return errorsmod.Wrapf(ErrInvalidManifest, "encoding: Reed-Solomon needs at least 1 data and 1 parity piece, got %d+%d", e.DataPieces, e.ParityPieces)
		}
		if uint64(e.DataPieces)+uint64(e.ParityPieces) > uint64(p.MaxPiecesPerShard) {
			return errorsmod.Wrapf(ErrInvalidManifest, "encoding: Reed-Solomon %d+%d has %d pieces per shard, at most %d (max_pieces_per_shard) allowed",
				e.DataPieces, e.ParityPieces, uint64(e.DataPieces)+uint64(e.ParityPieces), p.MaxPiecesPerShard)
		}
	default:
		return errorsmod.Wrapf(ErrInvalidManifest, "encoding: kind must be ENCODING_KIND_REPLICAS or ENCODING_KIND_REED_SOLOMON, got %s", e.Kind)
	}
	return nil
}

// ChunkCount is the number of chunk_size-byte chunks (the last one possibly shorter) of
// size bytes: ceil(size / chunkSize).
func ChunkCount(size uint64, chunkSize uint32) uint64 {
	c := uint64(chunkSize)
	return size/c + boolToUint64(size%c != 0)
}

// ChunkLength is the length of chunk index of a piece of size bytes.
func ChunkLength(size uint64, chunkSize uint32, index uint64) uint64 {
	start := index * uint64(chunkSize)
	return min(uint64(chunkSize), size-start)
}

// ManifestStats are what validation learns about a manifest.
type ManifestStats struct {
	SampleCount uint64
	// Leaves is the number of leaves of the manifest tree (1 header + shards) and
	// Bytes the bytes hashed as leaves: what computing the root costs.
	Leaves uint64
	Bytes  uint64
}

// ValidateManifest checks a dataset manifest statelessly: the chunk size and encoding
// against params, every shard in index order with contiguous, non-empty sample ranges,
// sizes that add up to totalSize, exactly PiecesPerShard pieces of the right size with
// 32-byte roots, and manifestRoot equal to ManifestRoot of it all. It fills in each
// piece's chunk_count (a non-zero one given must match). Errors name the shard and piece.
func ValidateManifest(p Params, datasetID string, enc Encoding, chunkSize uint32, totalSize uint64, shards []Shard, manifestRoot []byte) (ManifestStats, error) {
	var stats ManifestStats
	if chunkSize < p.MinChunkSize || chunkSize > p.MaxChunkSize {
		return stats, errorsmod.Wrapf(ErrInvalidManifest, "chunk_size must be within [%d, %d], got %d", p.MinChunkSize, p.MaxChunkSize, chunkSize)
	}
	if err := enc.Validate(p); err != nil {
		return stats, err
	}
	if len(shards) == 0 {
		return stats, errorsmod.Wrap(ErrInvalidManifest, "a dataset needs at least one shard")
	}
	if uint64(len(shards)) > uint64(p.MaxShardsPerDataset) {
		return stats, errorsmod.Wrapf(ErrInvalidManifest, "%d shards, at most %d (max_shards_per_dataset) allowed", len(shards), p.MaxShardsPerDataset)
	}
	wantPieces := enc.PiecesPerShard()
	var sum, nextSample uint64
	for i := range shards {
		s := &shards[i]
		fail := func(format string, args ...any) error {
			return errorsmod.Wrapf(ErrInvalidManifest, "shard %d: "+format, append([]any{i}, args...)...)
		}
		if s.Index != uint32(i) {
			return stats, fail("index is %d; shards must be listed in index order 0..%d", s.Index, len(shards)-1)
		}
		if s.DatasetId != "" && s.DatasetId != datasetID {
			return stats, fail("belongs to dataset %q, not %q", s.DatasetId, datasetID)
		}
		if s.SampleStart != nextSample {
			return stats, fail("samples start at %d, but the previous shard ended at %d (ranges must be contiguous)", s.SampleStart, nextSample)
		}
		if s.SampleEnd <= s.SampleStart {
			return stats, fail("sample range [%d, %d) is empty", s.SampleStart, s.SampleEnd)
		}
		nextSample = s.SampleEnd
		if s.SizeBytes == 0 || s.SizeBytes > p.MaxShardSize {
			return stats, fail("size must be within [1, %d] (max_shard_size), got %d", p.MaxShardSize, s.SizeBytes)
		}
		if sum+s.SizeBytes < sum {
			return stats, fail("total size overflows")
		}
		sum += s.SizeBytes
		if uint32(len(s.Pieces)) != wantPieces || len(s.Pieces) > MaxPiecesLimit {
			return stats, fail("has %d pieces, but %s needs %d per shard", len(s.Pieces), enc.Describe(), wantPieces)
		}
		pieceSize := enc.PieceSize(s.SizeBytes)
		chunks := ChunkCount(pieceSize, chunkSize)
		for j := range s.Pieces {
			pc := &s.Pieces[j]
			if pc.Index != uint32(j) {
				return stats, fail("piece %d: index is %d; pieces must be listed in index order", j, pc.Index)
			}
			if len(pc.Root) != merkle.HashSize {
				return stats, fail("piece %d: root is %d bytes, must be a raw %d-byte SHA-256 Merkle root", j, len(pc.Root), merkle.HashSize)
			}
			if pc.SizeBytes != pieceSize {
				return stats, fail("piece %d: size is %d, but every piece of a %d-byte shard under %s is %d bytes", j, pc.SizeBytes, s.SizeBytes, enc.Describe(), pieceSize)
			}
			if pc.ChunkCount != 0 && pc.ChunkCount != chunks {
				return stats, fail("piece %d: chunk_count is %d, but %d bytes in %d-byte chunks are %d chunks", j, pc.ChunkCount, pieceSize, chunkSize, chunks)
			}
			pc.ChunkCount = chunks
		}
	}
	if sum != totalSize {
		return stats, errorsmod.Wrapf(ErrInvalidManifest, "total_size is %d, but the shards add up to %d bytes", totalSize, sum)
	}
	stats.SampleCount = nextSample
	leaves := ManifestLeaves(enc, chunkSize, totalSize, shards)
	stats.Leaves = uint64(len(leaves))
	for _, l := range leaves {
		stats.Bytes += uint64(len(l))
	}
	if len(manifestRoot) != merkle.HashSize {
		return stats, errorsmod.Wrapf(ErrInvalidManifest, "manifest_root is %d bytes, must be %d", len(manifestRoot), merkle.HashSize)
	}
	if root := merkle.Root(leaves); string(root[:]) != string(manifestRoot) {
		return stats, errorsmod.Wrapf(ErrInvalidManifest, "manifest_root %x does not match the manifest's contents, whose root is %x", manifestRoot, root[:])
	}
	return stats, nil
}

// ManifestRoot is the RFC 6962 Merkle root over ManifestLeaves: it commits to the
// encoding, the chunk size, the total size and every shard with its pieces' sizes and
// roots (not to the dataset's id or name).
func ManifestRoot(enc Encoding, chunkSize uint32, totalSize uint64, shards []Shard) merkle.Hash {
	return merkle.Root(ManifestLeaves(enc, chunkSize, totalSize, shards))
}

// ManifestLeaves are the manifest tree's leaves: a header, then one leaf per shard.
//
//	header = "depinchain/shardregistry/manifest/v1" || u32 chunk_size || u32 kind ||
//	         u32 replicas || u32 data_pieces || u32 parity_pieces || u64 total_size || u32 shard_count
//	shard  = u32 index || u64 sample_start || u64 sample_end || u64 size || u32 piece_count ||
//	         (u32 piece index || u64 piece size || 32-byte root) per piece
//
// All integers are big-endian.
func ManifestLeaves(enc Encoding, chunkSize uint32, totalSize uint64, shards []Shard) [][]byte {
	leaves := make([][]byte, 0, len(shards)+1)
	h := []byte(manifestDomain)
	h = binary.BigEndian.AppendUint32(h, chunkSize)
	h = binary.BigEndian.AppendUint32(h, uint32(enc.Kind))
	h = binary.BigEndian.AppendUint32(h, enc.Replicas)
	h = binary.BigEndian.AppendUint32(h, enc.DataPieces)
	h = binary.BigEndian.AppendUint32(h, enc.ParityPieces)
	h = binary.BigEndian.AppendUint64(h, totalSize)
	h = binary.BigEndian.AppendUint32(h, uint32(len(shards)))
	leaves = append(leaves, h)
	for _, s := range shards {
		b := make([]byte, 0, 32+len(s.Pieces)*(12+merkle.HashSize))
		b = binary.BigEndian.AppendUint32(b, s.Index)
		b = binary.BigEndian.AppendUint64(b, s.SampleStart)
		b = binary.BigEndian.AppendUint64(b, s.SampleEnd)
		b = binary.BigEndian.AppendUint64(b, s.SizeBytes)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.Pieces)))
		for _, pc := range s.Pieces {
			b = binary.BigEndian.AppendUint32(b, pc.Index)
			b = binary.BigEndian.AppendUint64(b, pc.SizeBytes)
			b = append(b, pc.Root...)
		}
		leaves = append(leaves, b)
	}
	return leaves
}
