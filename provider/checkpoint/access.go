package checkpoint

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/depinchain/depinchain/pkg/reqauth"
)

// StateReaders decides who may read the states of a lease's checkpoints.
type StateReaders interface {
	// MayReadState returns nil when reader (a bech32 address that signed the request)
	// may read the states of lease leaseID's checkpoints, an error wrapping
	// ErrNotAStateReader when it may not, another error when it could not be decided.
	MayReadState(ctx context.Context, reader string, leaseID uint64) error
}

// ErrNotAStateReader: the signer may not read a checkpoint's state.
var ErrNotAStateReader = fmt.Errorf("may not read the states of this lease's checkpoints: %w", reqauth.ErrForbidden)

// RestrictStates wraps the checkpoint handler: a checkpoint's state — GET …/state and
// every chunk of …/chunks/{i} but chunk 0 — is served only to requests signed per
// pkg/reqauth by a reader the chain allows (401 unsigned or badly signed, 403 not
// allowed), as holders serve its custody pieces. Chunk 0 is the state's header
// (config, step, the loss that made it; tensors start on later chunks), which the
// dashboard shows; metadata and the trace (hashes) stay public too: they let anyone
// check a commitment, not rebuild the model.
func RestrictStates(next http.Handler, v *reqauth.Verifier, readers StateReaders) http.Handler {
	return reqauth.Restrict(next, v, stateRequest, func(ctx context.Context, signer, lease string) error {
		id, err := strconv.ParseUint(lease, 10, 64)
		if err != nil {
			return err
		}
		return readers.MayReadState(ctx, signer, id)
	})
}

// stateRequest names the lease whose checkpoint state a request reads, if it reads one.
func stateRequest(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	if _, err := strconv.ParseUint(parts[0], 10, 64); err != nil {
		return "", false // the handler refuses it
	}
	switch {
	case len(parts) == 3 && parts[2] == "state":
		return parts[0], true
	case len(parts) == 4 && parts[2] == "chunks":
		if c, err := strconv.ParseUint(parts[3], 10, 64); err == nil && c == 0 {
			return "", false // the header
		}
		return parts[0], true
	}
	return "", false
}
