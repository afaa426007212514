package custody

import (
	"errors"
	"fmt"
	"io"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// ErrWrongParity: a parity piece rebuilt from data pieces that match their roots does
// not match its own registered root, so the trainer registered parity that is not the
// parity of its state (FindParityFault proves which chunk).
var ErrWrongParity = errors.New("custody: the registered parity piece is not the parity of the state")

// RebuildPiece writes piece target's bytes to out (at their offsets in the piece) from
// any DataPieces of the other pieces: pieces[i] reads piece i's exact bytes or is nil
// (pieces[target] is never read). It is the repair of one lost piece: like Rebuild it
// reads one block of every piece used at a time, all at once, so memory stays at about
// Pieces() × BlockSize whatever the state's size, and it reconstructs only what the
// target needs: the target alone for a data piece; every data piece, then the target,
// for a parity piece (parity is computed from the whole column).
//
// Every piece read is hashed against its root (a *PieceError names a bad one), and so is
// the target. A data target off its root means a parity piece used is not the parity of
// the data (ErrRootMismatch, as in Rebuild). For a parity target every data piece is
// hashed against its root too: a data piece off its root is ErrRootMismatch; all of them
// right and the target wrong is ErrWrongParity. The bytes written to out are the
// target's only when RebuildPiece returns nil.
func RebuildPiece(l Layout, roots []merkle.Hash, pieces []io.Reader, target uint32, out io.WriterAt) error {
	if target >= l.Pieces() {
		return fmt.Errorf("%w: piece %d of %d+%d pieces", ErrInvalidLayout, target, l.DataPieces, l.ParityPieces)
	}
	c, err := newColumns(l, roots, pieces, target)
	if err != nil {
		return err
	}
	parity := target >= l.DataPieces
	required := make([]bool, l.Pieces())
	required[target] = true
	var data *pieceHashers
	written := make([][]byte, l.DataPieces)
	if parity {
		data = newPieceHashers(l.DataPieces, 0)
		for j := range l.DataPieces {
			required[j] = true
		}
	}
	rebuilt := newPieceHashers(l.Pieces(), 0)
	one := make([][]byte, l.Pieces())
	for off := uint64(0); off < l.PieceSize; off += c.block {
		b, err := c.next(off)
		if err != nil {
			return err
		}
		// (required has every piece's flag: reedsolomon v1.14 indexes it past the data
		// pieces even when it is given only theirs.)
		if err := c.enc.ReconstructSome(c.shards, required); err != nil {
			return err
		}
		if parity {
			for j := range l.DataPieces {
				written[j] = nil
				if n := l.blockLen(j, off, b); n > 0 {
					written[j] = c.shards[j][:n]
				}
			}
			data.add(written)
		}
		n := l.blockLen(target, off, b)
		if n == 0 {
			continue
		}
		one[target] = c.shards[target][:n]
		rebuilt.add(one)
		if _, err := out.WriteAt(one[target], int64(off)); err != nil {
			return fmt.Errorf("custody: writing piece %d at %d: %w", target, off, err)
		}
	}
	if err := c.checkInputs(); err != nil {
		return err
	}
	if parity {
		for j := range l.DataPieces {
			if got := data.root(j); got != roots[j] {
				return fmt.Errorf("custody: rebuilding parity piece %d, data piece %d: %w (root %x, registered %x): a parity piece used is not the parity of the data",
					target, j, ErrRootMismatch, got[:], roots[j][:])
			}
		}
	}
	if got := rebuilt.root(target); got != roots[target] {
		if parity {
			return fmt.Errorf("%w: parity piece %d rebuilt from the data has root %x, registered %x", ErrWrongParity, target, got[:], roots[target][:])
		}
		return fmt.Errorf("custody: rebuilt data piece %d: %w (root %x, registered %x): a parity piece used is not the parity of the data",
			target, ErrRootMismatch, got[:], roots[target][:])
	}
	return nil
}
