package pieces

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// WriteCustodyObject cuts the file at src into the pieces of custody object id
// (dataPieces + parityPieces) under custodyDir/<id>/pieces/, where the public server
// serves them to the storage holders, and returns the layout and every piece's root
// (data pieces, then parity) for the commitment that registers the object. A folder of
// an earlier, interrupted attempt is replaced; the pieces appear at once, synced.
func WriteCustodyObject(custodyDir, id, src string, dataPieces, parityPieces uint32, rewrite RewritePieces) (custody.Layout, []merkle.Hash, error) {
	if custodyDir == "" {
		return custody.Layout{}, nil, fmt.Errorf("custody object %s: this sidecar has no custody folder", id)
	}
	f, err := os.Open(src)
	if err != nil {
		return custody.Layout{}, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return custody.Layout{}, nil, err
	}
	l, err := custody.NewLayout(uint64(info.Size()), dataPieces, parityPieces)
	if err != nil {
		return custody.Layout{}, nil, err
	}
	final := filepath.Join(custodyDir, id)
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return l, nil, err
	}
	if err := os.MkdirAll(filepath.Join(tmp, manifest.PiecesDir), 0o755); err != nil {
		return l, nil, err
	}
	files := make([]*os.File, l.Pieces())
	defer func() {
		for _, pf := range files {
			if pf != nil {
				pf.Close()
			}
		}
	}()
	writers := make([]io.Writer, l.Pieces())
	for i := range files {
		if files[i], err = os.Create(filepath.Join(tmp, manifest.PieceFile(0, uint32(i)))); err != nil {
			return l, nil, err
		}
		writers[i] = files[i]
	}
	roots, err := custody.Encode(f, l, writers, 0)
	if err != nil {
		return l, nil, err
	}
	for _, pf := range files {
		if err := pf.Sync(); err != nil {
			return l, nil, err
		}
	}
	if rewrite != nil {
		if roots, err = rewrite(tmp, l, roots); err != nil {
			return l, nil, err
		}
	}
	if err := os.RemoveAll(final); err != nil {
		return l, nil, err
	}
	return l, roots, os.Rename(tmp, final)
}

// RewritePieces may rewrite the pieces of a custody object written under dir
// (dir/manifest.PieceFile(0, piece)) before they are served, returning the roots to
// commit: the tests' cheating trainers (leases.Hooks.CustodyPieces). nil keeps them.
type RewritePieces func(dir string, l custody.Layout, roots []merkle.Hash) ([]merkle.Hash, error)
