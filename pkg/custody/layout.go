// Package custody cuts a checkpoint's state into the erasure-coded pieces that storage
// holders keep (x/shardregistry custody objects), and rebuilds the state from any k of
// them. Chain, sidecar and CLI share it.
//
// # Binding pieces to the state root
//
// A checkpoint's state_root is the RFC 6962 root over the state's ChunkSize-byte chunks
// (pkg/trace's CheckpointChunkSize). The state is cut into data pieces of 2^a chunks
// each, consecutive, the last one possibly shorter (it is never padded: its root is
// over its real bytes). Then the root over the chunks equals the RFC 6962 tree whose
// leaf-level nodes are the data pieces' roots (DataRoot), so the chain checks the data
// pieces a trainer registers against state_root without seeing a byte:
//
// Let n > 2^a be the chunk count and q = ceil(n/2^a) the piece count. RFC 6962 splits n
// leaves at s, the largest power of two below n. As n > 2^a, s ≥ 2^a, so s is a multiple
// of 2^a: the split falls on a piece boundary, with s/2^a pieces on the left. From
// s < n ≤ 2s follows s/2^a < q ≤ 2s/2^a, so s/2^a is the largest power of two below q:
// exactly where the tree over the q piece roots splits. The left side is s/2^a whole
// pieces, the right side the remaining chunks; by induction on n both sides agree, and
// for n ≤ 2^a (one piece) the piece's root is the state's root. The shorter last piece
// is only ever the rightmost subtree, where RFC 6962 allows any size. (TestBinding
// checks it exhaustively over small sizes.)
//
// Parity pieces are Reed-Solomon (github.com/klauspost/reedsolomon) over the data pieces
// zero-padded to the piece size; they are not bound by the root, so a rebuild always
// checks the data pieces it reconstructs, and a parity piece that is not the parity of
// the data is proven so by one column (ParityColumn, CheckParityFault: x/verify's
// MsgProveParityFault convicts the trainer).
package custody

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// ChunkSize is the Merkle leaf size of a state and of its pieces (pkg/trace's
// CheckpointChunkSize, pkg/exact's ChunkSize).
const ChunkSize = 4096

// MaxPieces bounds data + parity pieces: Reed-Solomon over GF(2^8).
const MaxPieces = 256

// ErrInvalidLayout: a state size or piece count no layout exists for.
var ErrInvalidLayout = errors.New("custody: invalid layout")

// Layout is how a state of StateSize bytes is cut: DataPieces pieces of PieceSize bytes
// (the last one shorter when the state does not fill it) and ParityPieces parity pieces of
// PieceSize bytes. PieceSize is ChunkSize × 2^a with the smallest a that lets at most the
// requested number of data pieces cover the state; DataPieces is then how many it takes,
// which is fewer than requested for a state too small to fill them (a piece is never
// empty).
type Layout struct {
	StateSize    uint64
	DataPieces   uint32
	ParityPieces uint32
	PieceSize    uint64
}

// NewLayout returns the layout of a stateSize-byte state asked to be cut into at most
// dataPieces data pieces plus parityPieces parity pieces.
func NewLayout(stateSize uint64, dataPieces, parityPieces uint32) (Layout, error) {
	if stateSize == 0 {
		return Layout{}, fmt.Errorf("%w: the state is empty", ErrInvalidLayout)
	}
	if dataPieces == 0 || parityPieces == 0 || uint64(dataPieces)+uint64(parityPieces) > MaxPieces {
		return Layout{}, fmt.Errorf("%w: data_pieces %d and parity_pieces %d must be at least 1 each and at most %d together",
			ErrInvalidLayout, dataPieces, parityPieces, MaxPieces)
	}
	chunks := merkle.ChunkCount(int64(min(stateSize, 1<<62)), ChunkSize)
	if stateSize > 1<<62 {
		return Layout{}, fmt.Errorf("%w: state of %d bytes is too large", ErrInvalidLayout, stateSize)
	}
	// Smallest a with ceil(chunks / 2^a) ≤ dataPieces.
	perPiece := uint64(1)
	for ceilDiv(chunks, perPiece) > uint64(dataPieces) {
		perPiece <<= 1
	}
	pieceSize := perPiece * ChunkSize
	return Layout{
		StateSize:    stateSize,
		DataPieces:   uint32(ceilDiv(stateSize, pieceSize)),
		ParityPieces: parityPieces,
		PieceSize:    pieceSize,
	}, nil
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// Pieces is DataPieces + ParityPieces.
func (l Layout) Pieces() uint32 { return l.DataPieces + l.ParityPieces }

// PieceBytes is piece i's length: PieceSize, or for the last data piece what is left of
// the state.
func (l Layout) PieceBytes(i uint32) uint64 {
	if i == l.DataPieces-1 {
		return l.StateSize - uint64(i)*l.PieceSize
	}
	return l.PieceSize
}

// ChunksPerPiece is 2^a, the chunks of a whole piece.
func (l Layout) ChunksPerPiece() uint64 { return l.PieceSize / ChunkSize }

// Validate checks that l is what NewLayout makes of its own state size and counts.
func (l Layout) Validate() error {
	want, err := NewLayout(l.StateSize, l.DataPieces, l.ParityPieces)
	if err != nil {
		return err
	}
	if want != l || bits.OnesCount64(l.ChunksPerPiece()) != 1 {
		return fmt.Errorf("%w: %+v is not the layout of its state size (%+v)", ErrInvalidLayout, l, want)
	}
	return nil
}

// DataRoot is the state root the data pieces' roots make: the RFC 6962 tree whose
// leaf-level nodes are the data pieces' roots (see the package comment for why it equals
// the root over the state's chunks).
func DataRoot(dataRoots []merkle.Hash) merkle.Hash {
	return merkle.RootFromLeafHashes(dataRoots)
}

// CheckRoots checks a trainer's piece roots against the state root: there is one per
// piece of l, each 32 bytes, and the data pieces' tree is stateRoot. It is what the chain
// runs on MsgSubmitCheckpoint.
func CheckRoots(l Layout, stateRoot []byte, pieceRoots [][]byte) error {
	if len(pieceRoots) != int(l.Pieces()) {
		return fmt.Errorf("%w: a state of %d bytes in %d+%d pieces of %d bytes needs %d piece roots, got %d",
			ErrInvalidLayout, l.StateSize, l.DataPieces, l.ParityPieces, l.PieceSize, l.Pieces(), len(pieceRoots))
	}
	data := make([]merkle.Hash, l.DataPieces)
	for i, r := range pieceRoots {
		h, err := merkle.HashFromBytes(r)
		if err != nil {
			return fmt.Errorf("%w: piece_roots[%d]: %v", ErrInvalidLayout, i, err)
		}
		if i < len(data) {
			data[i] = h
		}
	}
	if got := DataRoot(data); string(got[:]) != string(stateRoot) {
		return fmt.Errorf("%w: the %d data pieces' roots make the root %x, not the state root %x",
			ErrInvalidLayout, l.DataPieces, got[:], stateRoot)
	}
	return nil
}
