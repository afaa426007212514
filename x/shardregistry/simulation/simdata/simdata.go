// Package simdata is the content of the simulation's datasets: deterministic bytes of
// every shard and piece, rebuilt from a dataset's id and layout, so that claims, storage
// proofs (x/shardregistry's operations) and the referee's training data (x/verify's) are
// answered from chain state alone. It reads no keeper.
package simdata

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// ShardBytes is the content of shard index of a simulated dataset: a SHA-256 counter
// stream keyed by the dataset id and shard index. Everything the simulation proves or
// trains on is rebuilt from it, never kept between operations.
func ShardBytes(datasetID string, index uint32, size uint64) []byte {
	out := make([]byte, 0, size+sha256.Size)
	var block [8]byte
	for counter := uint64(0); uint64(len(out)) < size; counter++ {
		h := sha256.New()
		h.Write([]byte("depinchain/sim/shard/v1"))
		h.Write([]byte(datasetID))
		binary.BigEndian.PutUint32(block[:4], index)
		h.Write(block[:4])
		binary.BigEndian.PutUint64(block[:], counter)
		h.Write(block[:])
		out = h.Sum(out)
	}
	return out[:size]
}

// Pieces are the encoded pieces of shard index of a simulated dataset.
func Pieces(enc types.Encoding, datasetID string, index uint32, shardSize uint64) ([][]byte, error) {
	return manifest.EncodePieces(enc, ShardBytes(datasetID, index, shardSize))
}

// PieceBytes is the content of one piece of a simulated dataset.
func PieceBytes(d types.Dataset, shard types.Shard, piece uint32) ([]byte, error) {
	pieces, err := Pieces(d.Encoding, d.Id, shard.Index, shard.SizeBytes)
	if err != nil {
		return nil, err
	}
	if int(piece) >= len(pieces) {
		return nil, fmt.Errorf("shard %d of %s has %d pieces, not %d", shard.Index, d.Id, len(pieces), piece)
	}
	return pieces[piece], nil
}
