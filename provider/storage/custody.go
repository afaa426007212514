package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// custodyPiece gets piece target of a checkpoint state's custody object: from the
// trainer, which serves every piece of the states it committed, or — once the trainer
// is gone — rebuilt from any k pieces the other holders serve. Either way it is checked
// against its registered root before it is returned.
func (r *Role) custodyPiece(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32) ([]byte, error) {
	data, fromTrainer := r.download.Download(ctx, info, info.Custody.Trainer, target)
	if fromTrainer == nil {
		return data, nil
	}
	data, err := r.rebuildCustodyPiece(ctx, info, replicas, target)
	if err != nil {
		return nil, errors.Join(err, fromTrainer)
	}
	return data, nil
}

// rebuildCustodyPiece rebuilds the state from k pieces of other holders and encodes it
// again to cut out piece target. It holds the state in memory: it is the repair path of
// one piece (the rebuild that streams is custody.Rebuild itself, used by resumes and
// `depinchaind job fetch`).
func (r *Role) rebuildCustodyPiece(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32) ([]byte, error) {
	l, roots, err := custodyLayout(info)
	if err != nil {
		return nil, err
	}
	have := make([][]byte, l.Pieces())
	var sources []uint32
	for i := range l.Pieces() {
		if i != target {
			sources = append(sources, i)
		}
	}
	n, failures := r.download.Gather(ctx, info, have, sources, pieces.ActiveHolders(replicas, r.opts.Operator), int(l.DataPieces))
	if n < int(l.DataPieces) {
		err := fmt.Errorf("%w: custody object %s: %d of the %d pieces needed are served by their holders",
			manifest.ErrNotEnoughPieces, info.DatasetID, n, l.DataPieces)
		return nil, errors.Join(append([]error{err}, failures...)...)
	}
	readers := make([]io.Reader, l.Pieces())
	for i, p := range have {
		if p != nil {
			readers[i] = bytes.NewReader(p)
		}
	}
	state := &memoryFile{}
	if err := custody.Rebuild(l, roots, readers, state); err != nil {
		return nil, err
	}
	out := make([]io.Writer, l.Pieces())
	var piece bytes.Buffer
	out[target] = &piece
	if _, err := custody.Encode(bytes.NewReader(state.data), l, out, 0); err != nil {
		return nil, err
	}
	if err := info.Check(target, piece.Bytes()); err != nil {
		err = fmt.Errorf("rebuilt piece %d: %w", target, err)
		if target >= l.DataPieces {
			// The data was checked against its roots: the registered parity is wrong.
			err = errors.Join(err, r.proveParityFault(ctx, info, l, roots, replicas, target, state.data))
		}
		return nil, err
	}
	return piece.Bytes(), nil
}

// custodyLayout is a custody object's layout and its pieces' registered roots.
func custodyLayout(info *shardInfo) (custody.Layout, []merkle.Hash, error) {
	l, err := custody.NewLayout(info.Shard.SizeBytes, info.Encoding.DataPieces, info.Encoding.ParityPieces)
	if err != nil {
		return l, nil, err
	}
	if int(l.Pieces()) != len(info.Shard.Pieces) {
		return l, nil, fmt.Errorf("custody object %s has %d pieces, its layout %d", info.DatasetID, len(info.Shard.Pieces), l.Pieces())
	}
	roots := make([]merkle.Hash, l.Pieces())
	for i, p := range info.Shard.Pieces {
		if roots[i], err = merkle.HashFromBytes(p.Root); err != nil {
			return l, nil, err
		}
	}
	return l, roots, nil
}

// memoryFile is an io.WriterAt into a growing byte slice.
type memoryFile struct{ data []byte }

func (m *memoryFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.data) {
		m.data = append(m.data, make([]byte, end-len(m.data))...)
	}
	return copy(m.data[off:], p), nil
}
