package storage

import (
	"context"
	"errors"
	"fmt"
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
// serve, streamed block by block (fetch.Fetcher.RebuildPiece), so memory stays at a few
// blocks per piece whatever the state's size. Either way every byte is checked against
// the registered roots before the file is in place. A rebuilt parity piece that is not
// the registered one while the data pieces are convicts the trainer (proveParityFault).
func (r *Role) custodyPiece(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32, path string) error {
	obj, err := custodyObject(info, replicas, r.opts.Operator)
	if err != nil {
		return err
	}
	return writePieceFileWith(path, func(f *os.File) error {
		fromTrainer := r.custody.Piece(ctx, obj, target, []string{info.Custody.Trainer}, f)
		if fromTrainer == nil {
			return nil
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
		err := r.custody.RebuildPiece(ctx, obj, target, f)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, custody.ErrWrongParity):
			err = errors.Join(err, r.proveParityFault(ctx, obj, target, path))
		case errors.Is(err, fetch.ErrNotEnoughHolders):
			err = fmt.Errorf("%w: custody object %s: %w", manifest.ErrNotEnoughPieces, info.DatasetID, err)
		}
		return errors.Join(err, fromTrainer)
	})
}

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
