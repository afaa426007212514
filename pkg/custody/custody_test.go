package custody

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
)

func TestChunkSizeIsTheCheckpointChunkSize(t *testing.T) {
	if ChunkSize != trace.CheckpointChunkSize {
		t.Fatalf("custody.ChunkSize %d, trace.CheckpointChunkSize %d: the binding needs the same chunks", ChunkSize, trace.CheckpointChunkSize)
	}
}

func randomState(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func encodeToMemory(t *testing.T, state []byte, l Layout) ([]merkle.Hash, [][]byte) {
	t.Helper()
	bufs := make([]*bytes.Buffer, l.Pieces())
	out := make([]io.Writer, l.Pieces())
	for i := range bufs {
		bufs[i] = new(bytes.Buffer)
		out[i] = bufs[i]
	}
	roots, err := Encode(bytes.NewReader(state), l, out, 2)
	if err != nil {
		t.Fatal(err)
	}
	pieces := make([][]byte, l.Pieces())
	for i, b := range bufs {
		pieces[i] = b.Bytes()
		if uint64(len(pieces[i])) != l.PieceBytes(uint32(i)) {
			t.Fatalf("piece %d has %d bytes, layout says %d", i, len(pieces[i]), l.PieceBytes(uint32(i)))
		}
	}
	return roots, pieces
}

// TestBinding checks the split rule's claim for every chunk count up to 70, with full and
// short last chunks, and 1 to 6 data pieces: the tree over the data pieces' roots is the
// state's root over its chunks, and CheckRoots accepts exactly the right roots.
func TestBinding(t *testing.T) {
	state := randomState(1, 70*ChunkSize)
	for chunks := 1; chunks <= 70; chunks++ {
		for _, tail := range []int{0, 1, ChunkSize - 1} {
			size := chunks * ChunkSize
			if tail > 0 {
				size = (chunks-1)*ChunkSize + tail
			}
			s := state[:size]
			want := merkle.RootOfBytes(s, ChunkSize)
			for k := uint32(1); k <= 6; k++ {
				l, err := NewLayout(uint64(size), k, 2)
				if err != nil {
					t.Fatal(err)
				}
				if l.DataPieces > k || l.DataPieces == 0 {
					t.Fatalf("size %d k %d: %d data pieces", size, k, l.DataPieces)
				}
				// Every data piece is its own bytes, consecutive, the last shorter at most.
				var data []merkle.Hash
				for j := range l.DataPieces {
					from := uint64(j) * l.PieceSize
					data = append(data, merkle.RootOfBytes(s[from:from+l.PieceBytes(j)], ChunkSize))
				}
				if got := DataRoot(data); got != want {
					t.Fatalf("size %d, k %d (layout %+v): data pieces' tree %x, state root %x", size, k, l, got, want)
				}
				roots, _ := encodeToMemory(t, s, l)
				if !slicesEqual(roots[:l.DataPieces], data) {
					t.Fatalf("size %d k %d: Encode's data roots differ from the pieces' roots", size, k)
				}
				if err := CheckRoots(l, want[:], merkle.HashesToBytes(roots)); err != nil {
					t.Fatalf("size %d k %d: %v", size, k, err)
				}
			}
		}
	}
}

func slicesEqual(a, b []merkle.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLayoutPiecesArePowersOfTwoAndNeverEmpty(t *testing.T) {
	l, err := NewLayout(5*ChunkSize, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 5 chunks in at most 4 pieces: pieces of 2 chunks, 3 of them, the last 1 chunk.
	if l.PieceSize != 2*ChunkSize || l.DataPieces != 3 || l.PieceBytes(2) != ChunkSize || l.PieceBytes(3) != 2*ChunkSize {
		t.Fatalf("layout %+v", l)
	}
	for _, bad := range []struct {
		size uint64
		k, m uint32
	}{{0, 4, 2}, {100, 0, 2}, {100, 4, 0}, {100, 200, 57}} {
		if _, err := NewLayout(bad.size, bad.k, bad.m); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("NewLayout(%d, %d, %d): %v, want ErrInvalidLayout", bad.size, bad.k, bad.m, err)
		}
	}
	l.PieceSize *= 2
	if err := l.Validate(); err == nil {
		t.Fatal("a layout with the wrong piece size validated")
	}
}

func TestCheckRootsRefusesWrongRoots(t *testing.T) {
	state := randomState(2, 10*ChunkSize+7)
	l, _ := NewLayout(uint64(len(state)), 4, 2)
	roots, _ := encodeToMemory(t, state, l)
	root := merkle.RootOfBytes(state, ChunkSize)
	good := merkle.HashesToBytes(roots)
	if err := CheckRoots(l, root[:], good[:len(good)-1]); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("missing root: %v", err)
	}
	bad := merkle.HashesToBytes(roots)
	bad[1][0] ^= 1
	if err := CheckRoots(l, root[:], bad); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("wrong data root: %v", err)
	}
	bad = merkle.HashesToBytes(roots)
	bad[0] = bad[0][:31]
	if err := CheckRoots(l, root[:], bad); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("short root: %v", err)
	}
}

type memAt struct{ b []byte }

func (m *memAt) WriteAt(p []byte, off int64) (int, error) {
	if need := int(off) + len(p); need > len(m.b) {
		m.b = append(m.b, make([]byte, need-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

func readers(pieces [][]byte, missing ...int) []io.Reader {
	out := make([]io.Reader, len(pieces))
	for i, p := range pieces {
		out[i] = bytes.NewReader(p)
	}
	for _, i := range missing {
		out[i] = nil
	}
	return out
}

// TestRebuildFromAnyK rebuilds states spanning several blocks from every choice of
// missing pieces of a 4+2 layout, and checks the bytes.
func TestRebuildFromAnyK(t *testing.T) {
	for _, size := range []int{1, ChunkSize, 3*BlockSize + 5*ChunkSize + 11, 9 * BlockSize} {
		state := randomState(uint64(size), size)
		l, _ := NewLayout(uint64(size), 4, 2)
		roots, pieces := encodeToMemory(t, state, l)
		n := int(l.Pieces())
		for a := 0; a < n; a++ {
			for b := a; b < n; b++ {
				if int(l.DataPieces) > n-2 && a != b {
					continue
				}
				var out memAt
				if err := Rebuild(l, roots, readers(pieces, a, b), &out); err != nil {
					t.Fatalf("size %d without %d,%d: %v", size, a, b, err)
				}
				if !bytes.Equal(out.b, state) {
					t.Fatalf("size %d without %d,%d: rebuilt state differs", size, a, b)
				}
			}
		}
	}
}

func TestRebuildCatchesBadPieces(t *testing.T) {
	state := randomState(3, 2*BlockSize+123)
	l, _ := NewLayout(uint64(len(state)), 4, 2)
	roots, pieces := encodeToMemory(t, state, l)

	// A data piece with one flipped byte is named.
	bad := append([][]byte(nil), pieces...)
	bad[1] = append([]byte(nil), pieces[1]...)
	bad[1][100] ^= 1
	var out memAt
	var pe *PieceError
	if err := Rebuild(l, roots, readers(bad), &out); !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, ErrRootMismatch) {
		t.Fatalf("flipped byte in piece 1: %v", err)
	}
	// (3 data pieces of 1 MiB here, pieces 3 and 4 parity.) A parity piece that is not the
	// parity of the data, but matches its own (wrong)
	// registered root, is caught by the rebuilt data piece's root.
	forged := append([]byte(nil), pieces[4]...)
	forged[0] ^= 1
	forgedRoots := append([]merkle.Hash(nil), roots...)
	forgedRoots[4] = merkle.RootOfBytes(forged, ChunkSize)
	withForged := append([][]byte(nil), pieces...)
	withForged[4] = forged
	if err := Rebuild(l, forgedRoots, readers(withForged, 0, 3), &out); !errors.Is(err, ErrRootMismatch) || errors.As(err, &pe) {
		t.Fatalf("forged parity: %v", err)
	}
	// A truncated piece is named.
	short := append([][]byte(nil), pieces...)
	short[2] = pieces[2][:10]
	if err := Rebuild(l, roots, readers(short), &out); !errors.As(err, &pe) || pe.Index != 2 {
		t.Fatalf("short piece 2: %v", err)
	}
	// Too few pieces.
	if err := Rebuild(l, roots, readers(pieces, 0, 1, 2), &out); !errors.Is(err, ErrNotEnoughPieces) {
		t.Fatalf("3 of 6: %v", err)
	}
}

// TestRebuildPieceEveryIndex repairs every piece of 4+2 layouts spanning several blocks
// (the last data piece short) from every choice of other pieces available, byte for byte.
func TestRebuildPieceEveryIndex(t *testing.T) {
	for _, size := range []int{ChunkSize + 1, 3*BlockSize + 5*ChunkSize + 11, 9 * BlockSize} {
		state := randomState(uint64(size)+9, size)
		l, _ := NewLayout(uint64(size), 4, 2)
		roots, pieces := encodeToMemory(t, state, l)
		n := int(l.Pieces())
		for target := range n {
			for other := range n {
				// The target is lost; with room for it, one other piece is too.
				if n-2 < int(l.DataPieces) && other != target {
					continue
				}
				var out memAt
				if err := RebuildPiece(l, roots, readers(pieces, target, other), uint32(target), &out); err != nil {
					t.Fatalf("size %d, piece %d without %d: %v", size, target, other, err)
				}
				if !bytes.Equal(out.b, pieces[target]) {
					t.Fatalf("size %d, piece %d without %d: rebuilt bytes differ", size, target, other)
				}
			}
		}
	}
}

func TestRebuildPieceCatchesBadPieces(t *testing.T) {
	state := randomState(4, 3*BlockSize+77)
	l, _ := NewLayout(uint64(len(state)), 4, 2) // 4 data pieces of 1 MiB (the last short), parity 4 and 5
	roots, pieces := encodeToMemory(t, state, l)
	var out memAt
	var pe *PieceError

	// A piece read with a flipped byte is named.
	bad := append([][]byte(nil), pieces...)
	bad[2] = append([]byte(nil), pieces[2]...)
	bad[2][5] ^= 1
	if err := RebuildPiece(l, roots, readers(bad), 0, &out); !errors.As(err, &pe) || pe.Index != 2 || !errors.Is(err, ErrRootMismatch) {
		t.Fatalf("flipped byte in piece 2: %v", err)
	}
	// The trainer registered parity piece 5 that is not the parity of its state (its root
	// is the garbage's): rebuilding it from the true data is ErrWrongParity...
	forged := append([]byte(nil), pieces[5]...)
	forged[len(forged)-1] ^= 1
	forgedRoots := append([]merkle.Hash(nil), roots...)
	forgedRoots[5] = merkle.RootOfBytes(forged, ChunkSize)
	withForged := append([][]byte(nil), pieces...)
	withForged[5] = forged
	if err := RebuildPiece(l, forgedRoots, readers(withForged), 5, &out); !errors.Is(err, ErrWrongParity) || errors.Is(err, ErrRootMismatch) {
		t.Fatalf("repairing the forged parity piece: %v", err)
	}
	// ...while a data piece rebuilt through it is off its root, nobody's piece named.
	if err := RebuildPiece(l, forgedRoots, readers(withForged, 4), 1, &out); !errors.Is(err, ErrRootMismatch) || errors.As(err, &pe) {
		t.Fatalf("data piece 1 through the forged parity: %v", err)
	}
	// And so is a parity target rebuilt through it (data piece 0 reconstructed).
	if err := RebuildPiece(l, forgedRoots, readers(withForged, 0), 4, &out); !errors.Is(err, ErrRootMismatch) || errors.Is(err, ErrWrongParity) {
		t.Fatalf("parity piece 4 through the forged parity: %v", err)
	}
	// Too few pieces; a target out of range.
	if err := RebuildPiece(l, roots, readers(pieces, 0, 1, 2), 0, &out); !errors.Is(err, ErrNotEnoughPieces) {
		t.Fatalf("3 of 6 with piece 0 the target: %v", err)
	}
	if err := RebuildPiece(l, roots, readers(pieces), 6, &out); !errors.Is(err, ErrInvalidLayout) {
		t.Fatalf("piece 6 of 6: %v", err)
	}
}
