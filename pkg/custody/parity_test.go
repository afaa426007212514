package custody

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
)

func readersAt(pieces [][]byte) []io.ReaderAt {
	out := make([]io.ReaderAt, len(pieces))
	for i, p := range pieces {
		out[i] = bytes.NewReader(p)
	}
	return out
}

// TestParityColumnIsEncodesParity: recomputing one column gives exactly Encode's parity
// chunks, including the columns where the short last data piece is partial or absent.
func TestParityColumnIsEncodesParity(t *testing.T) {
	for _, size := range []int{1, ChunkSize, 5*ChunkSize + 17, 13 * ChunkSize, 21*ChunkSize - 5} {
		l, err := NewLayout(uint64(size), 4, 3)
		if err != nil {
			t.Fatal(err)
		}
		_, pieces := encodeToMemory(t, randomState(uint64(size), size), l)
		for c := range l.ChunksPerPiece() {
			data := make([][]byte, l.DataPieces)
			for j := range l.DataPieces {
				start := min(c*ChunkSize, uint64(len(pieces[j])))
				data[j] = pieces[j][start : start+uint64(l.ChunkBytes(j, c))]
			}
			column, err := ParityColumn(l, c, data)
			if err != nil {
				t.Fatal(err)
			}
			for p := range l.ParityPieces {
				i := l.DataPieces + p
				if want := pieces[i][c*ChunkSize : (c+1)*ChunkSize]; !bytes.Equal(column[p], want) {
					t.Fatalf("size %d chunk %d parity piece %d: column differs from Encode", size, c, i)
				}
			}
		}
	}
}

func TestParityFaultFoundAndChecked(t *testing.T) {
	size := 9*ChunkSize + 100 // 4 data pieces of 4 chunks... last one short
	l, err := NewLayout(uint64(size), 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	roots, pieces := encodeToMemory(t, randomState(7, size), l)
	parity := l.DataPieces + 1
	if _, _, _, found, err := FindParityFault(l, readersAt(pieces), parity); err != nil || found {
		t.Fatalf("honest parity: found %v, err %v", found, err)
	}
	// Honest openings of every column: the check says the parity is consistent.
	for c := range l.ChunksPerPiece() {
		data := make([]ChunkOpening, l.DataPieces)
		for j := range l.DataPieces {
			if data[j], err = l.OpenChunk(bytes.NewReader(pieces[j]), j, c); err != nil {
				t.Fatal(err)
			}
		}
		p, err := l.OpenChunk(bytes.NewReader(pieces[parity]), parity, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckParityFault(l, roots, parity, c, data, p); !errors.Is(err, ErrParityConsistent) {
			t.Fatalf("chunk %d: honest parity: %v, want ErrParityConsistent", c, err)
		}
	}

	// Garbage in chunk 2 of the parity piece, registered under its own root.
	bad := bytes.Clone(pieces[parity])
	bad[2*ChunkSize+5] ^= 1
	pieces[parity] = bad
	roots[parity] = merkle.RootOfBytes(bad, ChunkSize)
	c, data, p, found, err := FindParityFault(l, readersAt(pieces), parity)
	if err != nil || !found || c != 2 {
		t.Fatalf("garbage parity: chunk %d found %v err %v, want chunk 2", c, found, err)
	}
	if err := CheckParityFault(l, roots, parity, c, data, p); err != nil {
		t.Fatalf("a true fault proof is refused: %v", err)
	}

	// Malformed proofs prove nothing.
	cases := map[string]func() ([]ChunkOpening, ChunkOpening, uint32, uint64){
		"data piece as parity": func() ([]ChunkOpening, ChunkOpening, uint32, uint64) { return data, p, 0, c },
		"piece out of range":   func() ([]ChunkOpening, ChunkOpening, uint32, uint64) { return data, p, l.Pieces(), c },
		"chunk out of range":   func() ([]ChunkOpening, ChunkOpening, uint32, uint64) { return data, p, parity, l.ChunksPerPiece() },
		"other chunk index":    func() ([]ChunkOpening, ChunkOpening, uint32, uint64) { return data, p, parity, c + 1 },
		"one data chunk short": func() ([]ChunkOpening, ChunkOpening, uint32, uint64) { return data[:len(data)-1], p, parity, c },
		"flipped data byte": func() ([]ChunkOpening, ChunkOpening, uint32, uint64) {
			d := bytes.Clone(data[1].Data)
			d[0] ^= 1
			out := append([]ChunkOpening(nil), data...)
			out[1] = ChunkOpening{Data: d, Proof: data[1].Proof}
			return out, p, parity, c
		},
		"truncated parity chunk": func() ([]ChunkOpening, ChunkOpening, uint32, uint64) {
			return data, ChunkOpening{Data: p.Data[:ChunkSize-1], Proof: p.Proof}, parity, c
		},
		"proof missing a hash": func() ([]ChunkOpening, ChunkOpening, uint32, uint64) {
			return data, ChunkOpening{Data: p.Data, Proof: p.Proof[1:]}, parity, c
		},
	}
	for name, mk := range cases {
		d, pp, piece, chunk := mk()
		if err := CheckParityFault(l, roots, piece, chunk, d, pp); !errors.Is(err, ErrBadParityProof) {
			t.Errorf("%s: %v, want ErrBadParityProof", name, err)
		}
	}
}
