package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// PiecePath is where a piece's file lives under the pieces folder: the
// dataset's folder is what `depinchaind dataset build --out` writes, so an
// operator places a build's output (or only the piece files it will hold) at
// <pieces dir>/<dataset id>/pieces/sSSSSSS-pPPP.piece.
func PiecePath(piecesDir, datasetID string, shard, piece uint32) string {
	return filepath.Join(piecesDir, datasetID, manifest.PieceFile(shard, piece))
}

// localPiece is a piece file found under the pieces folder.
type localPiece struct {
	shard, piece uint32
}

// localDatasets lists the folders of the pieces folder named like dataset ids.
func localDatasets(piecesDir string) ([]string, error) {
	entries, err := os.ReadDir(piecesDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && types.ValidateDatasetID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// localPieces lists the piece files of a dataset folder, in file name order
// (shard, then piece). Files not named like pieces are ignored.
func localPieces(piecesDir, datasetID string) ([]localPiece, error) {
	entries, err := os.ReadDir(filepath.Join(piecesDir, datasetID, manifest.PiecesDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []localPiece
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if p, ok := parsePieceName(e.Name()); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// parsePieceName reads "s000012-p003.piece" as shard 12, piece 3.
func parsePieceName(name string) (localPiece, bool) {
	var shard, piece uint32
	if n, err := fmt.Sscanf(name, "s%06d-p%03d.piece", &shard, &piece); err != nil || n != 2 {
		return localPiece{}, false
	}
	// Sscanf accepts more digits and leading signs; only Build's exact names count.
	if filepath.Base(manifest.PieceFile(shard, piece)) != name {
		return localPiece{}, false
	}
	return localPiece{shard: shard, piece: piece}, true
}

// pieceProblem is what is wrong with a local copy of a piece: missing, the
// wrong size, or bytes whose Merkle root is not the registered one.
type pieceProblem struct {
	msg string
}

func (p *pieceProblem) Error() string { return p.msg }

// isPieceProblem reports whether err says the local copy is bad (as opposed
// to a read error worth retrying).
func isPieceProblem(err error) bool {
	var p *pieceProblem
	return errors.As(err, &p)
}

// errNoPiecesFolder means a dataset's pieces folder is not there at all.
var errNoPiecesFolder = errors.New("no pieces folder")

// openPiece opens a piece file. A file missing from its dataset's pieces
// folder is a lost piece (a pieceProblem); a missing folder is not: an
// unmounted disk or a mistyped pieces_dir must not make the role declare
// every piece it holds lost, so it is reported as an ordinary error and the
// operator has until the deadlines to fix it.
func openPiece(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, dirErr := os.Stat(filepath.Dir(path)); dirErr != nil {
			return nil, fmt.Errorf("%w: %s (is the disk mounted?): %w", errNoPiecesFolder, filepath.Dir(path), dirErr)
		}
		return nil, &pieceProblem{"piece file missing: " + path}
	}
	return f, err
}

// checkPieceFile hashes the file at path into its Merkle root and compares
// it and the size with what the chain registered. The file is streamed, so
// memory does not grow with the piece.
func checkPieceFile(path string, size uint64, chunkSize uint32, root []byte) error {
	f, err := openPiece(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if uint64(info.Size()) != size {
		return &pieceProblem{fmt.Sprintf("piece file %s is %d bytes, the piece is %d", path, info.Size(), size)}
	}
	got, n, err := merkle.StreamRoot(f, int(chunkSize))
	if err != nil {
		return err
	}
	if n != types.ChunkCount(size, chunkSize) || !bytes.Equal(got[:], root) {
		return &pieceProblem{fmt.Sprintf("piece file %s does not match its registered root %x", path, root)}
	}
	return nil
}

// inMemoryProofLimit is the largest piece proved from memory; larger pieces
// are read once per challenged chunk instead of held whole. (A variable so
// tests can take the other path.)
var inMemoryProofLimit uint64 = 64 << 20

// provePieceFile answers challenge c from the file at path and checks every
// answer against the piece's root (which the challenge names by its CID)
// before it is sent: a piece whose challenged chunks do not verify is
// reported as a pieceProblem, never submitted.
func provePieceFile(path string, c types.Challenge) ([]types.ChunkProof, error) {
	root, err := types.ParsePieceCID(c.PieceCid)
	if err != nil {
		return nil, fmt.Errorf("challenge names piece %q: %w", c.PieceCid, err)
	}
	f, err := openPiece(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if uint64(info.Size()) != c.PieceSize {
		return nil, &pieceProblem{fmt.Sprintf("piece file %s is %d bytes, the piece is %d", path, info.Size(), c.PieceSize)}
	}
	var proofs []types.ChunkProof
	if c.PieceSize <= inMemoryProofLimit {
		data, err := io.ReadAll(f)
		if err != nil {
			return nil, err
		}
		if proofs, err = manifest.Prove(data, c.ChunkSize, c.ChunkIndices); err != nil {
			return nil, err
		}
	} else {
		for _, idx := range c.ChunkIndices {
			chunk, path, err := merkle.ProofFromReaderAt(f, info.Size(), int(c.ChunkSize), idx)
			if err != nil {
				return nil, err
			}
			p := types.ChunkProof{Index: idx, Chunk: chunk}
			for _, h := range path {
				p.Proof = append(p.Proof, bytes.Clone(h[:]))
			}
			proofs = append(proofs, p)
		}
	}
	if err := verifyProofs(root, c.ChunkCount, proofs); err != nil {
		return nil, &pieceProblem{fmt.Sprintf("piece file %s: %v", path, err)}
	}
	return proofs, nil
}

// verifyProofs checks proofs as the chain will: each chunk's inclusion
// proof against root in a tree of chunkCount leaves.
func verifyProofs(rootBytes []byte, chunkCount uint64, proofs []types.ChunkProof) error {
	root, err := merkle.HashFromBytes(rootBytes)
	if err != nil {
		return err
	}
	for _, p := range proofs {
		path := make([]merkle.Hash, len(p.Proof))
		for i, h := range p.Proof {
			if path[i], err = merkle.HashFromBytes(h); err != nil {
				return err
			}
		}
		if err := merkle.VerifyInclusion(root, p.Index, chunkCount, merkle.LeafHash(p.Chunk), path); err != nil {
			return fmt.Errorf("chunk %d does not verify against the registered root: %w", p.Index, err)
		}
	}
	return nil
}

// NewPieceHandler serves the piece files under piecesDirs (the first folder that has
// a piece wins) to other storage providers rebuilding a lost piece, and a trainer's
// custody pieces to the holders fetching them:
//
//	GET /pieces/{dataset}/{shard}/{piece}   the piece's bytes (Range requests supported)
//
// Anything served is checked by its receiver against the root registered on
// chain, so the handler does not re-hash what it serves. The daemon mounts it
// on the public server whose URL the provider registered as its endpoint.
func NewPieceHandler(piecesDirs ...string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pieces.Route, func(w http.ResponseWriter, req *http.Request) {
		id := req.PathValue("dataset")
		shard, err1 := strconv.ParseUint(req.PathValue("shard"), 10, 32)
		piece, err2 := strconv.ParseUint(req.PathValue("piece"), 10, 32)
		if types.ValidateDatasetID(id) != nil || err1 != nil || err2 != nil {
			http.Error(w, "want /pieces/{dataset id}/{shard}/{piece}", http.StatusBadRequest)
			return
		}
		var f *os.File
		for _, dir := range piecesDirs {
			if opened, err := os.Open(PiecePath(dir, id, uint32(shard), uint32(piece))); err == nil {
				f = opened
				break
			}
		}
		if f == nil {
			http.Error(w, "no such piece here", http.StatusNotFound)
			return
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil || !info.Mode().IsRegular() {
			http.Error(w, "no such piece here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, req, "", info.ModTime(), f)
	})
	return mux
}
