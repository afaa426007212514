package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// newCustodyFetcher streams custody pieces from the trainer's and the holders' public
// servers (GET <endpoint>/pieces/ckpt-…/0/<piece>), requests signed by authorize. A
// holder that does not start answering within DefaultFetchTimeout is given up on; the
// body itself is not time-bounded (a piece of a large state takes as long as it takes).
func newCustodyFetcher(endpoints *pieces.Endpoints, authorize func(*http.Request) error) fetch.Fetcher {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = DefaultFetchTimeout
	return fetch.Fetcher{Client: &http.Client{Transport: transport}, Endpoint: endpoints.Of, Authorize: authorize}
}

// custodyPiece writes piece target of a checkpoint state's custody object to path
// (atomically): streamed from the trainer, which serves every piece of the states it
// committed, or — once the trainer is gone — rebuilt from any k pieces the other holders
// serve (rebuildPiece). Either way every byte is checked against the registered roots
// before the file is in place, and a parity piece from the trainer is also checked to be
// the parity of the state (checkParity) before it is held.
func (r *Role) custodyPiece(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32, path string) error {
	obj, err := custodyObject(info, replicas, r.opts.Operator)
	if err != nil {
		return err
	}
	return pieces.WriteFileAtomic(path, func(f *os.File) error {
		fromTrainer := r.custody.Piece(ctx, obj, target, []string{info.Custody.Trainer}, f)
		if fromTrainer == nil {
			if target < obj.Layout.DataPieces {
				return nil
			}
			return r.checkParity(ctx, obj, target, path)
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
		if err := r.rebuildPiece(ctx, obj, target, path, f); err != nil {
			return errors.Join(err, fromTrainer)
		}
		return nil
	})
}

// rebuildPiece writes piece target of the object to out, rebuilt from k other pieces
// streamed from their holders block by block (fetch.Fetcher.RebuildPiece), so memory
// stays at a few blocks per piece whatever the state's size. A rebuilt parity piece
// that is not the registered one while the data pieces are convicts the trainer
// (proveParityFault, its temporary files beside path).
func (r *Role) rebuildPiece(ctx context.Context, obj fetch.Object, target uint32, path string, out io.WriterAt) error {
	err := r.custody.RebuildPiece(ctx, obj, target, out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, custody.ErrWrongParity):
		return errors.Join(err, r.proveParityFault(ctx, obj, target, path))
	case errors.Is(err, fetch.ErrNotEnoughHolders):
		return fmt.Errorf("%w: custody object %s: %w", manifest.ErrNotEnoughPieces, obj.DatasetID, err)
	}
	return err
}

// checkParity checks a parity piece the trainer served (its root matches: the trainer
// registered it) against the state its data pieces make: it rebuilds the piece from k
// pieces of the trainer or the holders (rebuildPiece), which fails with
// custody.ErrWrongParity, the fault proven, when the data pieces match their roots and
// the parity rebuilt from them does not match the registered root, that is, the piece
// served. The data pieces are bound to the state root, the parity roots are not: a
// trainer could register garbage parity and, with m ≥ k, have its checkpoint made final
// by holders of parity alone, nothing of the state held. A parity piece that is not the
// state's parity (or that cannot be checked) is not held. It costs k piece downloads
// (the state's size) per parity piece taken, once, streamed like a repair.
func (r *Role) checkParity(ctx context.Context, obj fetch.Object, target uint32, path string) error {
	withTrainer := obj
	withTrainer.Holders = make([][]string, len(obj.Holders))
	for i, holders := range obj.Holders {
		withTrainer.Holders[i] = append([]string{obj.Custody.Trainer}, holders...)
	}
	if err := r.rebuildPiece(ctx, withTrainer, target, path, discardAt{}); err != nil {
		return fmt.Errorf("custody object %s: checking the trainer's parity piece %d against the state: %w", obj.DatasetID, target, err)
	}
	return nil
}

// discardAt is an io.WriterAt that keeps nothing: checkParity needs only the rebuilt
// piece's root, which custody.RebuildPiece computes on the way.
type discardAt struct{}

func (discardAt) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// custodyObject is a custody object's layout, its pieces' registered roots and their
// active holders other than the operator.
func custodyObject(info *shardInfo, replicas []types.Replica, operator string) (fetch.Object, error) {
	l, err := custody.NewLayout(info.Shard.SizeBytes, info.Encoding.DataPieces, info.Encoding.ParityPieces)
	if err != nil {
		return fetch.Object{}, err
	}
	if int(l.Pieces()) != len(info.Shard.Pieces) {
		return fetch.Object{}, fmt.Errorf("custody object %s has %d pieces, its layout %d", info.DatasetID, len(info.Shard.Pieces), l.Pieces())
	}
	obj := fetch.Object{DatasetID: info.DatasetID, Custody: *info.Custody, Layout: l, Roots: make([]merkle.Hash, l.Pieces()), Holders: make([][]string, l.Pieces())}
	for i, p := range info.Shard.Pieces {
		if obj.Roots[i], err = merkle.HashFromBytes(p.Root); err != nil {
			return fetch.Object{}, err
		}
	}
	for piece, holders := range pieces.ActiveHolders(replicas, operator) {
		if int(piece) < len(obj.Holders) {
			obj.Holders[piece] = holders
		}
	}
	return obj, nil
}
