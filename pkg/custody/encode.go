package custody

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/reedsolomon"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// BlockSize is how many bytes of every piece Encode and Rebuild hold at once: memory is
// about (data + parity pieces) × BlockSize whatever the state's size.
const BlockSize = 1 << 20

// PieceError is a failure that one piece caused: it could not be read, or its bytes do
// not hash to its root. A rebuild that fails with one can be retried without that piece.
type PieceError struct {
	Index uint32
	Err   error
}

func (e *PieceError) Error() string { return fmt.Sprintf("custody: piece %d: %v", e.Index, e.Err) }
func (e *PieceError) Unwrap() error { return e.Err }

// ErrRootMismatch: bytes that do not hash to the root registered for them.
var ErrRootMismatch = errors.New("bytes do not match the registered root")

// ErrNotEnoughPieces: fewer than DataPieces pieces to rebuild from.
var ErrNotEnoughPieces = errors.New("custody: not enough pieces")

// blockLen is how many bytes of piece i fall in the block at offset off of each piece.
func (l Layout) blockLen(i uint32, off, block uint64) int {
	size := l.PieceBytes(i)
	if off >= size {
		return 0
	}
	return int(min(block, size-off))
}

func (l Layout) blockSize() uint64 { return min(BlockSize, l.PieceSize) }

func newEncoder(l Layout) (reedsolomon.Encoder, error) {
	return reedsolomon.New(int(l.DataPieces), int(l.ParityPieces))
}

// pieceHashers folds each piece's chunks into its Merkle root, block by block, hashing
// the pieces of a block on up to workers goroutines.
type pieceHashers struct {
	builders []merkle.Builder
	sem      chan struct{}
}

func newPieceHashers(pieces uint32, workers int) *pieceHashers {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return &pieceHashers{builders: make([]merkle.Builder, pieces), sem: make(chan struct{}, workers)}
}

// add hashes data[i] into piece i's tree for every i in which (nil entries are skipped).
// A block is a whole number of chunks except at a piece's end, so chunks never straddle.
func (h *pieceHashers) add(data [][]byte) {
	var wg sync.WaitGroup
	for i, d := range data {
		if d == nil {
			continue
		}
		wg.Add(1)
		h.sem <- struct{}{}
		go func() {
			defer func() { <-h.sem; wg.Done() }()
			b := &h.builders[i]
			lh := merkle.NewLeafHasher()
			for len(d) > 0 {
				n := min(ChunkSize, len(d))
				b.AddLeafHash(lh.Sum(d[:n]))
				d = d[n:]
			}
		}()
	}
	wg.Wait()
}

func (h *pieceHashers) root(i uint32) merkle.Hash { return h.builders[i].Root() }

// Encode cuts the state (StateSize bytes readable from state) into l's pieces, writes
// piece i's bytes to out[i] (a nil writer, or a nil out, discards them) and returns every
// piece's root. It holds l.Pieces() blocks of BlockSize bytes and hashes on up to workers
// goroutines (GOMAXPROCS when ≤ 0).
func Encode(state io.ReaderAt, l Layout, out []io.Writer, workers int) ([]merkle.Hash, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	enc, err := newEncoder(l)
	if err != nil {
		return nil, err
	}
	block := l.blockSize()
	shards := make([][]byte, l.Pieces())
	for i := range shards {
		shards[i] = make([]byte, block)
	}
	hashers := newPieceHashers(l.Pieces(), workers)
	piece := make([][]byte, l.Pieces())
	column := make([][]byte, l.Pieces())
	for off := uint64(0); off < l.PieceSize; off += block {
		b := min(block, l.PieceSize-off)
		for j := range l.DataPieces {
			s := shards[j][:b]
			n := l.blockLen(j, off, b)
			if n > 0 {
				at := int64(uint64(j)*l.PieceSize + off)
				if got, err := state.ReadAt(s[:n], at); got < n {
					return nil, fmt.Errorf("custody: reading the state at %d: %d of %d bytes: %w", at, got, n, err)
				}
			}
			clear(s[n:])
		}
		for i := range column {
			column[i] = shards[i][:b]
		}
		if err := enc.Encode(column); err != nil {
			return nil, err
		}
		for i := range l.Pieces() {
			n := l.blockLen(i, off, b)
			piece[i] = nil
			if n > 0 {
				piece[i] = column[i][:n]
			}
		}
		hashers.add(piece)
		for i, p := range piece {
			if p != nil && i < len(out) && out[i] != nil {
				if _, err := out[i].Write(p); err != nil {
					return nil, fmt.Errorf("custody: writing piece %d: %w", i, err)
				}
			}
		}
	}
	roots := make([]merkle.Hash, l.Pieces())
	for i := range roots {
		roots[i] = hashers.root(uint32(i))
	}
	return roots, nil
}

// Rebuild writes the state to out from any DataPieces of the pieces: pieces[i] reads
// piece i's exact bytes (PieceBytes(i)) or is nil when piece i is not available; roots
// are the registered roots of every piece. Pieces are read a block at a time, all at
// once (so pieces fetched over the network stream in parallel), and memory stays at
// about Pieces() × BlockSize. Every piece read is hashed against its root and every data
// piece written is hashed against its root: a piece whose bytes are wrong or that cannot
// be read fails the rebuild with a *PieceError naming it (retry without it); a
// reconstructed data piece that does not match its root (a parity piece that is not the
// parity of the data) fails it with ErrRootMismatch.
func Rebuild(l Layout, roots []merkle.Hash, pieces []io.Reader, out io.WriterAt) error {
	c, err := newColumns(l, roots, pieces, l.Pieces())
	if err != nil {
		return err
	}
	outputs := newPieceHashers(l.DataPieces, 0)
	written := make([][]byte, l.DataPieces)
	for off := uint64(0); off < l.PieceSize; off += c.block {
		b, err := c.next(off)
		if err != nil {
			return err
		}
		if err := c.enc.ReconstructData(c.shards); err != nil {
			return err
		}
		for j := range l.DataPieces {
			written[j] = nil
			n := l.blockLen(j, off, b)
			if n == 0 {
				continue
			}
			written[j] = c.shards[j][:n]
			if _, err := out.WriteAt(written[j], int64(uint64(j)*l.PieceSize+off)); err != nil {
				return fmt.Errorf("custody: writing the state at %d: %w", uint64(j)*l.PieceSize+off, err)
			}
		}
		outputs.add(written)
	}
	if err := c.checkInputs(); err != nil {
		return err
	}
	for j := range l.DataPieces {
		if got := outputs.root(j); got != roots[j] {
			return fmt.Errorf("custody: rebuilt data piece %d: %w (root %x, registered %x): a parity piece used is not the parity of the data",
				j, ErrRootMismatch, got[:], roots[j][:])
		}
	}
	return nil
}

// columns reads DataPieces of the available pieces a block at a time, all at once, and
// hashes every byte read into its piece's tree: the input side of Rebuild and
// RebuildPiece. Its buffers are Pieces() blocks, reused from block to block.
type columns struct {
	l      Layout
	roots  []merkle.Hash
	pieces []io.Reader
	enc    reedsolomon.Encoder
	block  uint64
	use    []uint32 // the pieces read
	bufs   [][]byte
	shards [][]byte // this block's column: read pieces filled, the others empty for the decoder
	read   [][]byte
	errs   []error
	inputs *pieceHashers
}

// newColumns picks the first DataPieces available pieces other than skip (data pieces
// first: they need no decoding); skip ≥ Pieces() skips none.
func newColumns(l Layout, roots []merkle.Hash, pieces []io.Reader, skip uint32) (*columns, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if len(roots) != int(l.Pieces()) || len(pieces) != int(l.Pieces()) {
		return nil, fmt.Errorf("%w: %d roots and %d piece readers for %d pieces", ErrInvalidLayout, len(roots), len(pieces), l.Pieces())
	}
	c := &columns{l: l, roots: roots, pieces: pieces, block: l.blockSize()}
	for i, p := range pieces {
		if p != nil && uint32(i) != skip && len(c.use) < int(l.DataPieces) {
			c.use = append(c.use, uint32(i))
		}
	}
	if len(c.use) < int(l.DataPieces) {
		return nil, fmt.Errorf("%w: %d of the %d pieces are available, %d+%d Reed-Solomon needs %d",
			ErrNotEnoughPieces, len(c.use), l.Pieces(), l.DataPieces, l.ParityPieces, l.DataPieces)
	}
	var err error
	if c.enc, err = newEncoder(l); err != nil {
		return nil, err
	}
	c.bufs = make([][]byte, l.Pieces())
	for i := range c.bufs {
		c.bufs[i] = make([]byte, c.block)
	}
	c.shards = make([][]byte, l.Pieces())
	c.read = make([][]byte, l.Pieces())
	c.errs = make([]error, len(c.use))
	c.inputs = newPieceHashers(l.Pieces(), 0)
	return c, nil
}

// next fills the column of the block at offset off of every piece from the pieces used,
// in parallel, hashes what it read and returns the block's length.
func (c *columns) next(off uint64) (uint64, error) {
	b := min(c.block, c.l.PieceSize-off)
	for i := range c.shards {
		c.shards[i] = c.bufs[i][:0] // missing: the decoder fills it in place
		c.read[i] = nil
	}
	var wg sync.WaitGroup
	for u, i := range c.use {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.bufs[i][:b]
			n := c.l.blockLen(i, off, b)
			if _, err := io.ReadFull(c.pieces[i], s[:n]); err != nil {
				c.errs[u] = &PieceError{Index: i, Err: fmt.Errorf("reading bytes %d–%d: %w", off, off+uint64(n), err)}
				return
			}
			clear(s[n:])
			c.shards[i] = s
			if n > 0 {
				c.read[i] = s[:n]
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(c.errs...); err != nil {
		return 0, err
	}
	c.inputs.add(c.read)
	return b, nil
}

// checkInputs checks every piece read against its root, once all of it was read.
func (c *columns) checkInputs() error {
	for _, i := range c.use {
		if got := c.inputs.root(i); got != c.roots[i] {
			return &PieceError{Index: i, Err: fmt.Errorf("%w: root %x, registered %x", ErrRootMismatch, got[:], c.roots[i][:])}
		}
	}
	return nil
}
