package fetch

import (
	"fmt"
	"io"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// ParityFault checks parity piece parityPiece of custody object o, whose exact bytes
// parity reads, against the checkpoint's state (a state that Rebuild checked against
// its root: its data pieces are the registered ones). It returns the MsgProveParityFault
// that convicts the trainer when a chunk of the piece is not the Reed-Solomon parity of
// the data, nil when the piece is right. Bytes that do not hash to the piece's registered
// root are an error: a proof from them would not open against the root.
func ParityFault(prover string, o Object, state io.ReaderAt, parityPiece uint32, parity io.ReaderAt) (*verifytypes.MsgProveParityFault, error) {
	l := o.Layout
	if parityPiece < l.DataPieces || parityPiece >= l.Pieces() || len(o.Roots) != int(l.Pieces()) {
		return nil, fmt.Errorf("custody object %s: piece %d is not a parity piece of its %d+%d", o.DatasetID, parityPiece, l.DataPieces, l.ParityPieces)
	}
	size := int64(l.PieceBytes(parityPiece))
	root, _, err := merkle.StreamRoot(io.NewSectionReader(parity, 0, size), custody.ChunkSize)
	if err != nil {
		return nil, fmt.Errorf("custody object %s: reading parity piece %d: %w", o.DatasetID, parityPiece, err)
	}
	if root != o.Roots[parityPiece] {
		return nil, fmt.Errorf("custody object %s: parity piece %d: %w (root %x, registered %x)",
			o.DatasetID, parityPiece, custody.ErrRootMismatch, root[:], o.Roots[parityPiece][:])
	}
	pieces := make([]io.ReaderAt, l.Pieces())
	for j := range l.DataPieces {
		pieces[j] = io.NewSectionReader(state, int64(uint64(j)*l.PieceSize), int64(l.PieceBytes(j)))
	}
	pieces[parityPiece] = parity
	c, data, opening, found, err := custody.FindParityFault(l, pieces, parityPiece)
	if err != nil || !found {
		return nil, err
	}
	return NewParityFaultMsg(prover, o.Custody.LeaseId, o.Custody.CheckpointIndex, parityPiece, c, data, opening), nil
}

// NewParityFaultMsg is the MsgProveParityFault for a fault custody.FindParityFault found.
func NewParityFaultMsg(prover string, leaseID, index uint64, parityPiece uint32, c uint64, data []custody.ChunkOpening, parity custody.ChunkOpening) *verifytypes.MsgProveParityFault {
	conv := func(o custody.ChunkOpening) verifytypes.PieceChunk {
		return verifytypes.PieceChunk{Data: o.Data, Proof: merkle.HashesToBytes(o.Proof)}
	}
	msg := &verifytypes.MsgProveParityFault{
		Prover: prover, LeaseId: leaseID, CheckpointIndex: index, ParityPiece: parityPiece, Chunk: c,
		Data: make([]verifytypes.PieceChunk, len(data)), Parity: conv(parity),
	}
	for j, o := range data {
		msg.Data[j] = conv(o)
	}
	return msg
}
