package storage

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

var rs21 = types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: 2, ParityPieces: 1}

// buildDataset builds a small dataset (1 KiB chunks, 8 KiB shards) into a
// temporary folder laid out as a pieces folder: <dir>/<id>/pieces/...
func buildDataset(t *testing.T, enc types.Encoding) (m *manifest.Manifest, piecesDir string) {
	t.Helper()
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus")
	if err := os.MkdirAll(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		text := strings.Repeat(fmt.Sprintf("sample %d of the unit corpus; ", i), 60+i*11)
		if err := os.WriteFile(filepath.Join(corpus, fmt.Sprintf("doc-%d.txt", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	piecesDir = filepath.Join(dir, "pieces")
	m, err := manifest.Build(corpus, filepath.Join(piecesDir, "unit-corpus"), manifest.Options{
		ShardSize: 8 << 10, ChunkSize: 1024, Encoding: enc, ID: "unit-corpus",
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, piecesDir
}

// infoOf is the chain's view of a built shard.
func infoOf(t *testing.T, m *manifest.Manifest, shard uint32) *shardInfo {
	t.Helper()
	enc, err := m.ChainEncoding()
	if err != nil {
		t.Fatal(err)
	}
	shards, err := m.ChainShards()
	if err != nil {
		t.Fatal(err)
	}
	return &shardInfo{DatasetID: m.ID, Encoding: enc, ChunkSize: m.ChunkSize, Shard: shards[shard]}
}

func readPiece(t *testing.T, piecesDir string, shard, piece uint32) []byte {
	t.Helper()
	b, err := os.ReadFile(PiecePath(piecesDir, "unit-corpus", shard, piece))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rootOf(t *testing.T, m *manifest.Manifest, shard, piece uint32) []byte {
	t.Helper()
	b, err := hex.DecodeString(m.Shards[shard].Pieces[piece].Root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPieceFolderLayout(t *testing.T) {
	m, piecesDir := buildDataset(t, rs21)
	if got, want := PiecePath(piecesDir, "unit-corpus", 1, 2), filepath.Join(piecesDir, "unit-corpus", m.Shards[1].Pieces[2].File); got != want {
		t.Fatalf("PiecePath = %s, want the file Build wrote, %s", got, want)
	}
	for name, want := range map[string]bool{
		"s000000-p000.piece": true, "s000012-p003.piece": true,
		"s12-p3.piece": false, "s0000000-p000.piece": false, "s000000-p000.piece.tmp": false, ".s000000-p000.piece.tmp-123": false, "manifest.json": false,
	} {
		if _, ok := parsePieceName(name); ok != want {
			t.Errorf("parsePieceName(%q) ok = %v, want %v", name, ok, want)
		}
	}

	// Folders not named like datasets and files that are not pieces are ignored.
	for _, p := range []string{"Not_A_Dataset", "x"} {
		if err := os.MkdirAll(filepath.Join(piecesDir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(piecesDir, "unit-corpus", "pieces", "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ids, err := localDatasets(piecesDir)
	if err != nil || !reflect.DeepEqual(ids, []string{"unit-corpus"}) {
		t.Fatalf("localDatasets = %v, %v", ids, err)
	}
	pieces, err := localPieces(piecesDir, "unit-corpus")
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) != 3*len(m.Shards) || pieces[0] != (localPiece{0, 0}) || pieces[4] != (localPiece{1, 1}) {
		t.Fatalf("localPieces = %v", pieces)
	}
	if ids, err := localDatasets(filepath.Join(piecesDir, "absent")); err != nil || ids != nil {
		t.Fatalf("an absent pieces folder: %v, %v", ids, err)
	}
}

func TestCheckPieceFileFindsMissingShortAndCorruptPieces(t *testing.T) {
	m, piecesDir := buildDataset(t, rs21)
	p := m.Shards[0].Pieces[1]
	path := PiecePath(piecesDir, "unit-corpus", 0, 1)
	root := rootOf(t, m, 0, 1)
	if err := checkPieceFile(path, p.Size, m.ChunkSize, root); err != nil {
		t.Fatalf("intact piece: %v", err)
	}
	good := readPiece(t, piecesDir, 0, 1)
	for name, bad := range map[string][]byte{
		"short":   good[:len(good)-1],
		"corrupt": append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1),
	} {
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := checkPieceFile(path, p.Size, m.ChunkSize, root); !isPieceProblem(err) {
			t.Errorf("%s piece: want a piece problem, got %v", name, err)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := checkPieceFile(path, p.Size, m.ChunkSize, root); !isPieceProblem(err) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing piece: %v", err)
	}

	// A whole folder gone is not a lost piece but a set-up problem (an
	// unmounted disk): the role must not declare every piece lost.
	if err := os.RemoveAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	other := PiecePath(piecesDir, "unit-corpus", 0, 0)
	if err := checkPieceFile(other, p.Size, m.ChunkSize, root); isPieceProblem(err) || !errors.Is(err, errNoPiecesFolder) {
		t.Errorf("missing folder: want errNoPiecesFolder, not a piece problem: %v", err)
	}
	if _, err := provePieceFile(other, types.Challenge{PieceCid: p.CID, PieceSize: p.Size, ChunkSize: m.ChunkSize}); isPieceProblem(err) || err == nil {
		t.Errorf("missing folder, proving: %v", err)
	}
}

func TestProvePieceFileAnswersAndChecksBeforeSending(t *testing.T) {
	m, piecesDir := buildDataset(t, rs21)
	p := m.Shards[1].Pieces[0]
	path := PiecePath(piecesDir, "unit-corpus", 1, 0)
	last := p.Chunks - 1
	c := types.Challenge{
		Period: 3, Open: true, ChunkIndices: []uint64{last, 0, 2}, ChunkCount: p.Chunks, ChunkSize: m.ChunkSize,
		PieceSize: p.Size, PieceCid: p.CID,
	}
	for _, limit := range []uint64{inMemoryProofLimit, 0} {
		t.Run(fmt.Sprintf("in-memory-limit-%d", limit), func(t *testing.T) {
			defer func(old uint64) { inMemoryProofLimit = old }(inMemoryProofLimit)
			inMemoryProofLimit = limit
			proofs, err := provePieceFile(path, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(proofs) != 3 || proofs[0].Index != last || proofs[1].Index != 0 {
				t.Fatalf("proofs out of the challenge's order: %+v", proofs)
			}
			if err := verifyProofs(rootOf(t, m, 1, 0), p.Chunks, proofs); err != nil {
				t.Fatal(err)
			}
			// The last chunk is the remainder, as the chain wants it.
			if want := p.Size - last*uint64(m.ChunkSize); uint64(len(proofs[0].Chunk)) != want {
				t.Fatalf("last chunk is %d bytes, want %d", len(proofs[0].Chunk), want)
			}
		})
	}

	// A corrupt challenged chunk is caught before anything is sent.
	good := readPiece(t, piecesDir, 1, 0)
	bad := bytes.Clone(good)
	bad[2*m.ChunkSize+5] ^= 0xff
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := provePieceFile(path, c); !isPieceProblem(err) || !strings.Contains(err.Error(), "chunk 2") {
		t.Fatalf("corrupt challenged chunk: want a piece problem naming chunk 2, got %v", err)
	}
	// A wrong size too; and a missing file.
	if err := os.WriteFile(path, good[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := provePieceFile(path, c); !isPieceProblem(err) {
		t.Fatalf("short piece: %v", err)
	}
	if _, err := provePieceFile(path+".absent", c); !isPieceProblem(err) {
		t.Fatalf("missing piece: %v", err)
	}
}

func TestRebuildPieceFromAnyKOthers(t *testing.T) {
	m, piecesDir := buildDataset(t, rs21)
	for shard := range uint32(len(m.Shards)) {
		info := infoOf(t, m, shard)
		for target := range uint32(3) {
			have := make([][]byte, 3)
			for i := range uint32(3) {
				if i != target {
					have[i] = readPiece(t, piecesDir, shard, i)
				}
			}
			got, err := info.RebuildPiece(have, target)
			if err != nil {
				t.Fatalf("shard %d piece %d: %v", shard, target, err)
			}
			if !bytes.Equal(got, readPiece(t, piecesDir, shard, target)) {
				t.Fatalf("shard %d piece %d: rebuilt bytes differ", shard, target)
			}
		}
	}

	// One of k=2 is not enough; a piece with the wrong bytes counts as missing.
	info := infoOf(t, m, 0)
	have := [][]byte{nil, readPiece(t, piecesDir, 0, 1), nil}
	if _, err := info.RebuildPiece(have, 0); !errors.Is(err, manifest.ErrNotEnoughPieces) {
		t.Fatalf("one piece: want ErrNotEnoughPieces, got %v", err)
	}
	wrong := bytes.Clone(readPiece(t, piecesDir, 0, 2))
	wrong[0] ^= 1
	have[2] = wrong
	if _, err := info.RebuildPiece(have, 0); !errors.Is(err, manifest.ErrNotEnoughPieces) {
		t.Fatalf("a corrupt second piece: want ErrNotEnoughPieces, got %v", err)
	}
	if _, err := info.RebuildPiece(have, 3); err == nil {
		t.Fatal("a piece the shard does not have was rebuilt")
	}

	// Under replicas the piece is the shard: one intact copy is enough.
	rm, rdir := buildDataset(t, types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 2})
	copyOf := readPiece(t, rdir, 0, 0)
	got, err := infoOf(t, rm, 0).RebuildPiece([][]byte{copyOf}, 0)
	if err != nil || !bytes.Equal(got, copyOf) {
		t.Fatalf("replicas: %v", err)
	}
}

func TestPieceHandlerServesWhatFetcherChecks(t *testing.T) {
	m, piecesDir := buildDataset(t, rs21)
	srv := httptest.NewServer(NewPieceHandler(piecesDir))
	defer srv.Close()
	fetch := pieces.HTTPFetcher(srv.Client(), 5*time.Second)
	ctx := context.Background()

	p := m.Shards[1].Pieces[2]
	got, err := fetch(ctx, srv.URL, "unit-corpus", 1, 2, p.Size)
	if err != nil || !bytes.Equal(got, readPiece(t, piecesDir, 1, 2)) {
		t.Fatalf("fetch: %v", err)
	}
	// Endpoints with a path prefix keep it.
	if u, err := pieces.URL("https://sp.example.com:8471/base/", "unit-corpus", 1, 2); err != nil || u != "https://sp.example.com:8471/base/pieces/unit-corpus/1/2" {
		t.Fatalf("pieces.URL = %q, %v", u, err)
	}
	for _, bad := range []string{"", "ftp://x/", "127.0.0.1:8471", "http://"} {
		if _, err := fetch(ctx, bad, "unit-corpus", 1, 2, p.Size); err == nil {
			t.Errorf("endpoint %q accepted", bad)
		}
	}
	// A piece this holder does not have, a size that is not the piece's.
	if _, err := fetch(ctx, srv.URL, "unit-corpus", 9, 0, p.Size); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("absent piece: %v", err)
	}
	if _, err := fetch(ctx, srv.URL, "unit-corpus", 1, 2, p.Size-1); err == nil {
		t.Fatal("a longer body than the piece was accepted")
	}
	// Paths that are not pieces are refused, whatever they try.
	for _, path := range []string{"/pieces/..%2F..%2Fetc/0/0", "/pieces/UPPER/0/0", "/pieces/unit-corpus/x/0", "/pieces/unit-corpus/0/-1"} {
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Errorf("GET %s: %s", path, res.Status)
		}
	}
}

func TestWritePieceFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ds", "pieces", "s000000-p000.piece")
	for _, content := range []string{"first", "second"} {
		if err := pieces.WriteBytesAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Fatalf("got %q, want %q", got, content)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}
