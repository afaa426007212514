package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// ErrNotEnoughPieces is returned by Rebuild when too few intact pieces are left.
var ErrNotEnoughPieces = errors.New("not enough intact pieces to rebuild the shard")

// Rebuild returns the bytes of shard index from its pieces: pieces[i] is piece i, nil
// when missing. Every given piece is checked against its root in the manifest first, and
// one that does not match is treated as missing. Under Reed-Solomon k+m any k intact
// pieces rebuild the shard byte for byte (the rebuilt data pieces are checked against
// their roots too); under replicas one intact piece is the shard. With fewer, the error
// (ErrNotEnoughPieces) says which pieces were usable.
func (m *Manifest) Rebuild(index uint32, pieces [][]byte) ([]byte, error) {
	if int(index) >= len(m.Shards) {
		return nil, fmt.Errorf("the dataset has shards 0..%d, not %d", len(m.Shards)-1, index)
	}
	s := m.Shards[index]
	enc, err := m.ChainEncoding()
	if err != nil {
		return nil, err
	}
	if len(pieces) != len(s.Pieces) {
		return nil, fmt.Errorf("shard %d has %d pieces; pass a slice of %d with nil for the missing ones, got %d", index, len(s.Pieces), len(s.Pieces), len(pieces))
	}
	work := make([][]byte, len(pieces))
	var intact, corrupt []uint32
	for i, p := range pieces {
		if p == nil {
			continue
		}
		want, err := decodeRoot(s.Pieces[i])
		if err != nil {
			return nil, fmt.Errorf("shard %d piece %d: %w", index, i, err)
		}
		if uint64(len(p)) != s.Pieces[i].Size || merkle.RootOfBytes(p, int(m.ChunkSize)) != want {
			corrupt = append(corrupt, uint32(i))
			continue
		}
		work[i] = p
		intact = append(intact, uint32(i))
	}
	need := int(enc.MinLive())
	if len(intact) < need {
		msg := fmt.Sprintf("shard %d: %d of its %d pieces are intact (%v), %s needs at least %d", index, len(intact), len(pieces), intact, enc.Describe(), need)
		if len(corrupt) > 0 {
			msg += fmt.Sprintf("; pieces %v do not match their roots", corrupt)
		}
		return nil, fmt.Errorf("%w: %s", ErrNotEnoughPieces, msg)
	}
	if !enc.IsReedSolomon() {
		return bytes.Clone(work[intact[0]]), nil
	}
	rs, err := newEncoder(enc)
	if err != nil {
		return nil, err
	}
	if err := rs.ReconstructData(work); err != nil {
		return nil, fmt.Errorf("shard %d: reconstructing: %w", index, err)
	}
	for i := 0; i < int(enc.DataPieces); i++ {
		want, _ := decodeRoot(s.Pieces[i])
		if merkle.RootOfBytes(work[i], int(m.ChunkSize)) != want {
			return nil, fmt.Errorf("shard %d: rebuilt data piece %d does not match its root", index, i)
		}
	}
	var out bytes.Buffer
	out.Grow(int(s.Size))
	if err := rs.Join(&out, work, int(s.Size)); err != nil {
		return nil, fmt.Errorf("shard %d: joining: %w", index, err)
	}
	return out.Bytes(), nil
}

// RebuildFromDir is Rebuild reading the pieces from the files the manifest names under
// dir; a missing file is a missing piece.
func (m *Manifest) RebuildFromDir(dir string, index uint32) ([]byte, error) {
	if int(index) >= len(m.Shards) {
		return nil, fmt.Errorf("the dataset has shards 0..%d, not %d", len(m.Shards)-1, index)
	}
	s := m.Shards[index]
	pieces := make([][]byte, len(s.Pieces))
	for i, p := range s.Pieces {
		b, err := os.ReadFile(filepath.Join(dir, p.File))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pieces[i] = b
	}
	return m.Rebuild(index, pieces)
}

// Prove answers a storage challenge from a piece's bytes: for each challenged index (in
// the challenge's order), the chunk and its RFC 6962 inclusion proof.
func Prove(piece []byte, chunkSize uint32, indices []uint64) ([]types.ChunkProof, error) {
	leaves := merkle.LeafHashesOfBytes(piece, int(chunkSize))
	proofs := make([]types.ChunkProof, 0, len(indices))
	for _, idx := range indices {
		path, err := merkle.InclusionProof(leaves, idx)
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", idx, err)
		}
		start := idx * uint64(chunkSize)
		end := min(start+uint64(chunkSize), uint64(len(piece)))
		p := types.ChunkProof{Index: idx, Chunk: bytes.Clone(piece[start:end])}
		for _, h := range path {
			p.Proof = append(p.Proof, bytes.Clone(h[:]))
		}
		proofs = append(proofs, p)
	}
	return proofs, nil
}

// Summary writes a human-readable summary of the dataset: totals, the manifest root and
// each shard's pieces with their CIDs (the first maxShards shards; 0 means all).
func (m *Manifest) Summary(maxShards int) string {
	var b bytes.Buffer
	enc, _ := m.ChainEncoding()
	fmt.Fprintf(&b, "dataset        %s\n", orDash(m.ID))
	if m.Name != "" {
		fmt.Fprintf(&b, "name           %s\n", m.Name)
	}
	fmt.Fprintf(&b, "source         %s %s\n", m.Source.Kind, m.Source.Path)
	fmt.Fprintf(&b, "encoding       %s\n", enc.Describe())
	fmt.Fprintf(&b, "chunk size     %d bytes\n", m.ChunkSize)
	fmt.Fprintf(&b, "samples        %d\n", m.SampleCount)
	fmt.Fprintf(&b, "size           %d bytes in %d shards\n", m.TotalSize, len(m.Shards))
	var stored uint64
	for _, s := range m.Shards {
		for _, p := range s.Pieces {
			stored += p.Size * uint64(enc.HoldersPerPiece())
		}
	}
	fmt.Fprintf(&b, "stored         %d bytes across holders (%.2fx)\n", stored, float64(stored)/float64(max(m.TotalSize, 1)))
	fmt.Fprintf(&b, "manifest root  %s\n", m.ManifestRoot)
	fmt.Fprintf(&b, "piece CIDs are CIDv1 (raw, sha2-256) of each piece's RFC 6962 Merkle root over %d-byte chunks, not of its plain bytes\n", m.ChunkSize)
	shards := m.Shards
	if maxShards > 0 && len(shards) > maxShards {
		shards = shards[:maxShards]
	}
	for _, s := range shards {
		fmt.Fprintf(&b, "shard %d  samples [%d, %d)  %d bytes\n", s.Index, s.SampleStart, s.SampleEnd, s.Size)
		for _, p := range s.Pieces {
			fmt.Fprintf(&b, "  piece %-3d %s  %d bytes  %s\n", p.Index, p.CID, p.Size, p.File)
		}
	}
	if len(shards) < len(m.Shards) {
		fmt.Fprintf(&b, "... %d more shards in the manifest\n", len(m.Shards)-len(shards))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "- (set at registration)"
	}
	return s
}
