package checkpoint

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/trainer"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// CheckpointQuerier reads commitments from the chain; the generated x/verify
// query client satisfies it.
type CheckpointQuerier interface {
	Checkpoint(ctx context.Context, in *verifytypes.QueryCheckpointRequest, opts ...grpc.CallOption) (*verifytypes.QueryCheckpointResponse, error)
}

// Fetcher downloads other providers' checkpoints named by the URIs on chain
// and checks them against their commitments on chain: a re-leased job's
// resume state, a verifier's start state.
type Fetcher struct {
	Chain CheckpointQuerier
	// WorkDir holds downloads while they are verified.
	WorkDir string
	// MaxStateBytes bounds a downloaded state.
	MaxStateBytes int64
	// Authorize signs the requests (Client.Authorize).
	Authorize func(*http.Request) error
}

// At names the checkpoint a URI serves and reads its commitment on chain,
// which is what everything downloaded from the URI is checked against.
func (f Fetcher) At(ctx context.Context, uri string) (Client, Ref, verifytypes.Checkpoint, error) {
	base, ref, err := ParseURI(uri)
	if err != nil {
		return Client{}, ref, verifytypes.Checkpoint{}, err
	}
	res, err := f.Chain.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: ref.LeaseID, Index: ref.Index})
	if err != nil {
		return Client{}, ref, verifytypes.Checkpoint{}, fmt.Errorf("reading checkpoint %s on chain: %w", ref, err)
	}
	return Client{BaseURL: base, Authorize: f.Authorize}, ref, res.Checkpoint, nil
}

// State fetches a checkpoint's state from its provider, every chunk verified
// against the state_root on chain as it arrives.
func (f Fetcher) State(ctx context.Context, client Client, ref Ref, onChain verifytypes.Checkpoint) ([]byte, error) {
	root, err := merkle.HashFromBytes(onChain.StateRoot)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(f.WorkDir, "download-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, trainer.StateFileName)
	if _, err := client.DownloadState(ctx, ref, root, path, f.MaxStateBytes); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
