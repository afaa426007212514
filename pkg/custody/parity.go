package custody

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// Parity fraud proofs. Reed-Solomon (klauspost/reedsolomon) works byte position by byte
// position: byte b of every parity piece depends only on byte b of every data piece. So
// chunk c of a parity piece is the parity of chunk c of the data pieces, each zero-padded
// to ChunkSize (the short last data piece's chunk c is shorter or absent, and Encode pads
// it with zeros), and one column of k+1 chunks with their Merkle openings against the
// registered piece roots proves or refutes a parity piece's chunk c.

// ErrBadParityProof: a parity fraud proof that is malformed or whose openings do not
// match the registered roots; it proves nothing.
var ErrBadParityProof = errors.New("custody: bad parity proof")

// ErrParityConsistent: the opened parity chunk is the Reed-Solomon parity of the opened
// data chunks; there is no fault.
var ErrParityConsistent = errors.New("custody: the parity chunk is the parity of the data chunks")

// ChunkOpening is chunk c of one piece with its RFC 6962 inclusion proof against the
// piece's root. A data piece whose bytes end before chunk c has an empty opening.
type ChunkOpening struct {
	Data  []byte
	Proof []merkle.Hash
}

// ChunkBytes is the length of chunk c of piece i: ChunkSize, less in the last chunk of
// the short last data piece, 0 past its end.
func (l Layout) ChunkBytes(i uint32, c uint64) int {
	size := l.PieceBytes(i)
	if c*ChunkSize >= size {
		return 0
	}
	return int(min(ChunkSize, size-c*ChunkSize))
}

// ParityColumn is chunk c of every parity piece, computed from chunk c of every data
// piece (data[j] exactly ChunkBytes(j, c) bytes) as Encode computes it.
func ParityColumn(l Layout, c uint64, data [][]byte) ([][]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if c >= l.ChunksPerPiece() {
		return nil, fmt.Errorf("%w: chunk %d, a piece has %d chunks", ErrBadParityProof, c, l.ChunksPerPiece())
	}
	if len(data) != int(l.DataPieces) {
		return nil, fmt.Errorf("%w: %d data chunks, the layout has %d data pieces", ErrBadParityProof, len(data), l.DataPieces)
	}
	shards := make([][]byte, l.Pieces())
	for j, d := range data {
		if want := l.ChunkBytes(uint32(j), c); len(d) != want {
			return nil, fmt.Errorf("%w: chunk %d of data piece %d has %d bytes, want %d", ErrBadParityProof, c, j, len(d), want)
		}
		shards[j] = make([]byte, ChunkSize)
		copy(shards[j], d)
	}
	for i := l.DataPieces; i < l.Pieces(); i++ {
		shards[i] = make([]byte, ChunkSize)
	}
	enc, err := newEncoder(l)
	if err != nil {
		return nil, err
	}
	if err := enc.Encode(shards); err != nil {
		return nil, err
	}
	return shards[l.DataPieces:], nil
}

// ProofHashes is how many hashes checking a parity fraud proof about chunk c costs: one
// leaf hash per non-empty opening plus its proof's node hashes. The chain charges gas
// for them before checking.
func ProofHashes(data []ChunkOpening, parity ChunkOpening) uint64 {
	n := uint64(len(parity.Proof)) + 1
	for _, o := range data {
		n += uint64(len(o.Proof)) + 1
	}
	return n
}

// CheckParityFault checks a parity fraud proof against the registered piece roots:
// data[j] is chunk c of data piece j and parity chunk c of piece parityPiece (an index
// ≥ DataPieces), each opened against its root. It returns nil when the proof holds (the
// parity chunk is not the parity of the data chunks), ErrParityConsistent when the
// openings are right but the parity is too, and ErrBadParityProof for anything else
// (wrong index, wrong chunk length, an opening that does not match its root).
func CheckParityFault(l Layout, roots []merkle.Hash, parityPiece uint32, c uint64, data []ChunkOpening, parity ChunkOpening) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if len(roots) != int(l.Pieces()) {
		return fmt.Errorf("%w: %d roots for %d pieces", ErrInvalidLayout, len(roots), l.Pieces())
	}
	if parityPiece < l.DataPieces || parityPiece >= l.Pieces() {
		return fmt.Errorf("%w: piece %d is not a parity piece (parity pieces are %d–%d)", ErrBadParityProof, parityPiece, l.DataPieces, l.Pieces()-1)
	}
	if c >= l.ChunksPerPiece() {
		return fmt.Errorf("%w: chunk %d, a piece has %d chunks", ErrBadParityProof, c, l.ChunksPerPiece())
	}
	if len(data) != int(l.DataPieces) {
		return fmt.Errorf("%w: %d data chunk openings, the layout has %d data pieces", ErrBadParityProof, len(data), l.DataPieces)
	}
	open := func(i uint32, o ChunkOpening) error {
		want := l.ChunkBytes(i, c)
		if len(o.Data) != want {
			return fmt.Errorf("%w: chunk %d of piece %d has %d bytes, want %d", ErrBadParityProof, c, i, len(o.Data), want)
		}
		if want == 0 {
			if len(o.Proof) != 0 {
				return fmt.Errorf("%w: piece %d ends before chunk %d: its opening must be empty", ErrBadParityProof, i, c)
			}
			return nil
		}
		size := merkle.ChunkCount(int64(l.PieceBytes(i)), ChunkSize)
		if err := merkle.VerifyInclusion(roots[i], c, size, merkle.LeafHash(o.Data), o.Proof); err != nil {
			return fmt.Errorf("%w: chunk %d of piece %d: %v", ErrBadParityProof, c, i, err)
		}
		return nil
	}
	chunks := make([][]byte, len(data))
	for j, o := range data {
		if err := open(uint32(j), o); err != nil {
			return err
		}
		chunks[j] = o.Data
	}
	if err := open(parityPiece, parity); err != nil {
		return err
	}
	column, err := ParityColumn(l, c, chunks)
	if err != nil {
		return err
	}
	if bytes.Equal(column[parityPiece-l.DataPieces], parity.Data) {
		return fmt.Errorf("%w: chunk %d of parity piece %d", ErrParityConsistent, c, parityPiece)
	}
	return nil
}

// OpenChunk is chunk c of piece i (its exact bytes readable from piece) with its proof:
// an opening for a parity fraud proof.
func (l Layout) OpenChunk(piece io.ReaderAt, i uint32, c uint64) (ChunkOpening, error) {
	if l.ChunkBytes(i, c) == 0 {
		return ChunkOpening{}, nil
	}
	data, proof, err := merkle.ProofFromReaderAt(piece, int64(l.PieceBytes(i)), ChunkSize, c)
	if err != nil {
		return ChunkOpening{}, fmt.Errorf("custody: opening chunk %d of piece %d: %w", c, i, err)
	}
	return ChunkOpening{Data: data, Proof: proof}, nil
}

// FindParityFault looks for a chunk of parity piece parityPiece that is not the parity of
// the data pieces: pieces[i] reads piece i's exact bytes for every data piece and for
// parityPiece (others may be nil). It returns the first such chunk with its proof's
// openings, or found false when the parity piece is right. It reads each piece once, a
// chunk at a time; the openings it returns re-read the pieces to hash their proofs.
func FindParityFault(l Layout, pieces []io.ReaderAt, parityPiece uint32) (c uint64, data []ChunkOpening, parity ChunkOpening, found bool, err error) {
	if err := l.Validate(); err != nil {
		return 0, nil, ChunkOpening{}, false, err
	}
	if parityPiece < l.DataPieces || parityPiece >= l.Pieces() || len(pieces) != int(l.Pieces()) {
		return 0, nil, ChunkOpening{}, false, fmt.Errorf("%w: parity piece %d of %d pieces, %d readers", ErrInvalidLayout, parityPiece, l.Pieces(), len(pieces))
	}
	read := func(i uint32, c uint64) ([]byte, error) {
		b := make([]byte, l.ChunkBytes(i, c))
		if len(b) == 0 {
			return b, nil
		}
		if n, err := pieces[i].ReadAt(b, int64(c*ChunkSize)); n < len(b) {
			return nil, &PieceError{Index: i, Err: fmt.Errorf("reading chunk %d: %w", c, err)}
		}
		return b, nil
	}
	for c = 0; c < l.ChunksPerPiece(); c++ {
		chunks := make([][]byte, l.DataPieces)
		for j := range l.DataPieces {
			if chunks[j], err = read(j, c); err != nil {
				return 0, nil, ChunkOpening{}, false, err
			}
		}
		got, err := read(parityPiece, c)
		if err != nil {
			return 0, nil, ChunkOpening{}, false, err
		}
		column, err := ParityColumn(l, c, chunks)
		if err != nil {
			return 0, nil, ChunkOpening{}, false, err
		}
		if bytes.Equal(column[parityPiece-l.DataPieces], got) {
			continue
		}
		data = make([]ChunkOpening, l.DataPieces)
		for j := range l.DataPieces {
			if data[j], err = l.OpenChunk(pieces[j], j, c); err != nil {
				return 0, nil, ChunkOpening{}, false, err
			}
		}
		if parity, err = l.OpenChunk(pieces[parityPiece], parityPiece, c); err != nil {
			return 0, nil, ChunkOpening{}, false, err
		}
		return c, data, parity, true, nil
	}
	return 0, nil, ChunkOpening{}, false, nil
}
