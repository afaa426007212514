package rounds

import (
	"context"
	"os"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// Pieces are a round file's custody pieces as its commitment registers them.
type Pieces struct {
	ObjectID string
	Size     uint64
	// Roots are the data pieces' roots, then the parity pieces'.
	Roots []merkle.Hash
}

// WritePieces cuts a round file into custody object id's pieces under custodyDir, where
// the public server serves them to the storage holders (the checkpoints' code).
func WritePieces(custodyDir, id, path string, dataPieces, parityPieces uint32) (Pieces, error) {
	l, roots, err := pieces.WriteCustodyObject(custodyDir, id, path, dataPieces, parityPieces, nil)
	if err != nil {
		return Pieces{}, err
	}
	return Pieces{ObjectID: id, Size: l.StateSize, Roots: roots}, nil
}

// CustodyFetch fetches the job's pseudo-gradients from their custody holders, each piece
// checked against its root on chain (the file itself is then checked against the
// worker's commitment by Aggregate).
func CustodyFetch(src *fetch.Source, jobID uint64) Fetch {
	return func(ctx context.Context, round uint64, worker uint32, path string) error {
		return rebuildTo(ctx, src, markettypes.PseudoGradientCustodyID(jobID, round, worker), path)
	}
}

// FetchGlobal puts the job's G_round at path from its custody holders (a joiner's start).
func FetchGlobal(ctx context.Context, src *fetch.Source, jobID, round uint64, path string) error {
	return rebuildTo(ctx, src, markettypes.GlobalCustodyID(jobID, round), path)
}

// rebuildTo rebuilds custody object id into path through a temporary file (a joiner
// has no folder of the job yet: WriteFileAtomic creates it).
func rebuildTo(ctx context.Context, src *fetch.Source, id, path string) error {
	return pieces.WriteFileAtomic(path, func(f *os.File) error {
		_, err := src.RebuildObject(ctx, id, f)
		return err
	})
}
