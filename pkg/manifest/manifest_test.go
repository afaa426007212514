package manifest_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func rs(k, m uint32) types.Encoding {
	return types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: k, ParityPieces: m}
}

func readPieces(t testing.TB, out string, s manifest.Shard) [][]byte {
	t.Helper()
	pieces := make([][]byte, len(s.Pieces))
	for i, p := range s.Pieces {
		b, err := os.ReadFile(filepath.Join(out, p.File))
		require.NoError(t, err)
		pieces[i] = b
	}
	return pieces
}

// TestAnyKOfKPlusMRebuilds: for every subset of a 4+2 shard's pieces, any 4 or more
// rebuild the shard byte for byte, and 3 or fewer fail with ErrNotEnoughPieces naming
// what was there.
func TestAnyKOfKPlusMRebuilds(t *testing.T) {
	dir := t.TempDir()
	data := randomBytes(1, 50_001) // not a multiple of anything: the last data piece is padded
	writeFile(t, filepath.Join(dir, "tokens.bin"), data)
	out := filepath.Join(dir, "out")
	m, err := manifest.Build(filepath.Join(dir, "tokens.bin"), out, manifest.Options{ShardSize: 20_000, Encoding: rs(4, 2), SampleBytes: 1000})
	require.NoError(t, err)
	require.Len(t, m.Shards, 3)
	last := m.Shards[2]
	require.Equal(t, uint64(10_001), last.Size)
	want := data[40_000:]
	all := readPieces(t, out, last)
	for mask := 0; mask < 1<<6; mask++ {
		pieces := make([][]byte, 6)
		for i := range pieces {
			if mask&(1<<i) != 0 {
				pieces[i] = bytes.Clone(all[i])
			}
		}
		got, err := m.Rebuild(2, pieces)
		if bits.OnesCount(uint(mask)) >= 4 {
			require.NoError(t, err, "pieces %06b", mask)
			require.Equal(t, want, got, "pieces %06b", mask)
			continue
		}
		require.ErrorIs(t, err, manifest.ErrNotEnoughPieces, "pieces %06b", mask)
		require.Contains(t, err.Error(), fmt.Sprintf("%d of its 6 pieces are intact", bits.OnesCount(uint(mask))))
		require.Contains(t, err.Error(), "Reed-Solomon 4+2 needs at least 4")
	}

	// A corrupted piece does not match its root and counts as missing.
	pieces := [][]byte{bytes.Clone(all[0]), bytes.Clone(all[1]), bytes.Clone(all[2]), bytes.Clone(all[3]), nil, nil}
	pieces[1][17] ^= 1
	_, err = m.Rebuild(2, pieces)
	require.ErrorIs(t, err, manifest.ErrNotEnoughPieces)
	require.Contains(t, err.Error(), "pieces [1] do not match their roots")
	pieces[4] = bytes.Clone(all[4])
	got, err := m.Rebuild(2, pieces)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// From the files, with two of them gone.
	require.NoError(t, os.Remove(filepath.Join(out, m.Shards[0].Pieces[0].File)))
	require.NoError(t, os.Remove(filepath.Join(out, m.Shards[0].Pieces[5].File)))
	got, err = m.RebuildFromDir(out, 0)
	require.NoError(t, err)
	require.Equal(t, data[:20_000], got)
}

func TestReplicasRebuild(t *testing.T) {
	dir := t.TempDir()
	data := []byte(strings.Repeat("line of text\n", 500))
	writeFile(t, filepath.Join(dir, "corpus.txt"), data)
	out := filepath.Join(dir, "out")
	m, err := manifest.Build(filepath.Join(dir, "corpus.txt"), out, manifest.Options{
		ShardSize: 1000, Encoding: types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 3}, SampleBytes: -1, ChunkSize: 256,
	})
	require.NoError(t, err)
	require.Equal(t, uint64(500), m.SampleCount, "one sample per line")
	var rebuilt []byte
	for _, s := range m.Shards {
		require.Len(t, s.Pieces, 1)
		require.Equal(t, uint64(0), s.Size%13, "shards hold whole lines")
		got, err := m.Rebuild(s.Index, readPieces(t, out, s))
		require.NoError(t, err)
		rebuilt = append(rebuilt, got...)
	}
	require.Equal(t, data, rebuilt)
	_, err = m.Rebuild(0, [][]byte{nil})
	require.ErrorIs(t, err, manifest.ErrNotEnoughPieces)
	require.Contains(t, err.Error(), "3 replicas needs at least 1")
}

// TestBuildFolder: a folder makes one sample per file in lexical path order, shards hold
// whole files, the manifest is what the chain accepts, and the shards rebuild the files.
func TestBuildFolder(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "corpus")
	var files []string
	var want []byte
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("part-%c/doc-%02d.txt", 'a'+i%3, i)
		files = append(files, name)
		writeFile(t, filepath.Join(src, name), randomBytes(int64(i), 100+i*37))
	}
	writeFile(t, filepath.Join(src, "empty.txt"), nil)
	files = append(files, "empty.txt")
	// Lexical order of the paths.
	sortStrings(files)
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		want = append(want, b...)
	}
	out := filepath.Join(dir, "out")
	m, err := manifest.Build(src, out, manifest.Options{ShardSize: 4096, Encoding: rs(3, 2), ID: "corpus-v1", Name: "Corpus", ChunkSize: 512})
	require.NoError(t, err)
	require.Equal(t, uint64(len(files)), m.SampleCount)
	var listed []string
	var rebuilt []byte
	for _, s := range m.Shards {
		require.LessOrEqual(t, s.Size, uint64(4096))
		require.Equal(t, int(s.SampleEnd-s.SampleStart), len(s.Files))
		listed = append(listed, s.Files...)
		got, err := m.RebuildFromDir(out, s.Index)
		require.NoError(t, err)
		rebuilt = append(rebuilt, got...)
		for _, p := range s.Pieces {
			root, err := hexRoot(p.Root)
			require.NoError(t, err)
			require.Equal(t, types.PieceCID(root), p.CID)
		}
	}
	require.Equal(t, files, listed)
	require.Equal(t, want, rebuilt)

	loaded, err := manifest.Load(filepath.Join(out, manifest.ManifestFile))
	require.NoError(t, err)
	require.Equal(t, m, loaded)
	require.NoError(t, loaded.Validate(types.DefaultParams()))
	msg, err := loaded.RegisterMsg("owner", "", "")
	require.NoError(t, err)
	require.Equal(t, "corpus-v1", msg.DatasetId)
	_, err = types.ValidateManifest(types.DefaultParams(), msg.DatasetId, msg.Encoding, msg.ChunkSize, msg.TotalSize, msg.Shards, msg.ManifestRoot)
	require.NoError(t, err)
	require.Contains(t, m.Summary(0), "bafkrei")

	// Building again gives the same manifest root: the build is deterministic.
	again, err := manifest.Build(src, filepath.Join(dir, "out2"), manifest.Options{ShardSize: 4096, Encoding: rs(3, 2), ChunkSize: 512, Workers: 1})
	require.NoError(t, err)
	require.Equal(t, m.ManifestRoot, again.ManifestRoot)
}

func TestBuildRejects(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "big", "huge.bin"), make([]byte, 5000))
	_, err := manifest.Build(filepath.Join(dir, "big"), filepath.Join(dir, "o1"), manifest.Options{ShardSize: 4096, Encoding: rs(2, 1)})
	require.ErrorContains(t, err, "huge.bin is 5000 bytes, larger than the shard size 4096")
	writeFile(t, filepath.Join(dir, "t.bin"), make([]byte, 100))
	_, err = manifest.Build(filepath.Join(dir, "t.bin"), filepath.Join(dir, "o2"), manifest.Options{ShardSize: 4096, Encoding: rs(0, 1)})
	require.ErrorContains(t, err, "at least 1 data and 1 parity piece")
	_, err = manifest.Build(filepath.Join(dir, "t.bin"), filepath.Join(dir, "o3"), manifest.Options{ShardSize: 4096, Encoding: rs(2, 1), ChunkSize: 3})
	require.ErrorContains(t, err, "chunk size must be within")
	writeFile(t, filepath.Join(dir, "empty", "nothing"), nil)
	_, err = manifest.Build(filepath.Join(dir, "empty", "nothing"), filepath.Join(dir, "o4"), manifest.Options{ShardSize: 4096, Encoding: rs(2, 1)})
	require.ErrorContains(t, err, "holds no samples")

	_, err = manifest.ParseEncoding("4+x", 0)
	require.Error(t, err)
	_, err = manifest.ParseEncoding("4+2", 3)
	require.ErrorContains(t, err, "not both")
	enc, err := manifest.ParseEncoding("10+4", 0)
	require.NoError(t, err)
	require.Equal(t, rs(10, 4), enc)

	writeFile(t, filepath.Join(dir, "bad.json"), []byte(`{"version":1,"surprise":true}`))
	_, err = manifest.Load(filepath.Join(dir, "bad.json"))
	require.ErrorContains(t, err, "unknown field")
}

// TestProve: proofs from Prove verify against the piece root with the shared merkle package.
func TestProve(t *testing.T) {
	piece := randomBytes(3, 10_000)
	root := merkle.RootOfBytes(piece, 256)
	proofs, err := manifest.Prove(piece, 256, []uint64{39, 0, 17})
	require.NoError(t, err)
	for _, p := range proofs {
		path := make([]merkle.Hash, len(p.Proof))
		for i, h := range p.Proof {
			path[i], err = merkle.HashFromBytes(h)
			require.NoError(t, err)
		}
		require.NoError(t, merkle.VerifyInclusion(root, p.Index, 40, merkle.LeafHash(p.Chunk), path))
	}
	require.Len(t, proofs[0].Chunk, 10_000-39*256, "the last chunk is short")
	_, err = manifest.Prove(piece, 256, []uint64{40})
	require.True(t, errors.Is(err, merkle.ErrIndexOutOfRange))
}
