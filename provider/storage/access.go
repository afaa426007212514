package storage

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/depinchain/depinchain/pkg/reqauth"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// PieceReaders decides who may read the pieces of a checkpoint state's custody object.
type PieceReaders interface {
	// MayRead returns nil when reader (a bech32 address that signed the request) may
	// read the pieces of custody object datasetID, else an error that says why not.
	MayRead(ctx context.Context, reader, datasetID string) error
}

// RestrictCustodyPieces wraps the piece handler: the pieces of checkpoint states
// (custody objects, "ckpt-" ids) are served only to requests signed per pkg/reqauth by a
// reader the chain allows (401 unsigned or badly signed, 403 not allowed); dataset
// pieces stay public, as datasets are registered for anyone to train on.
func RestrictCustodyPieces(next http.Handler, v *reqauth.Verifier, readers PieceReaders) http.Handler {
	return reqauth.Restrict(next, v, func(req *http.Request) (string, bool) {
		rest, _ := strings.CutPrefix(req.URL.Path, "/pieces/")
		id, _, _ := strings.Cut(rest, "/")
		return id, types.IsCustodyDatasetID(id)
	}, readers.MayRead)
}

// ErrNotAReader: the signer may not read a custody object's pieces.
var ErrNotAReader = fmt.Errorf("may not read the pieces of this checkpoint state: %w", reqauth.ErrForbidden)
