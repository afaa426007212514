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
// against its registered root before it is returned. A parity piece from the trainer
// is also checked to be the parity of the state (checkParity) before it is held.
func (r *Role) custodyPiece(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32) ([]byte, error) {
	data, fromTrainer := r.download.Download(ctx, info, info.Custody.Trainer, target)
	if fromTrainer == nil {
		if target >= info.Encoding.DataPieces {
			if err := r.checkParity(ctx, info, replicas, target, data); err != nil {
				return nil, err
			}
		}
		return data, nil
	}
	data, err := r.rebuildCustodyPiece(ctx, info, replicas, target)
	if err != nil {
		return nil, errors.Join(err, fromTrainer)
	}
	return data, nil
}

// checkParity checks a parity piece the trainer served (its root matches: the trainer
// registered it) against the state its data pieces rebuild, downloaded from the trainer
// or the holders. The data pieces are bound to the state root, the parity roots are
// not: a trainer could register garbage parity and, with m ≥ k, have its checkpoint
// made final by holders of parity alone, nothing of the state held. A parity piece that
// is not the state's parity is not held; its fault is proven (MsgProveParityFault). It
// costs k piece downloads (the state's size) per parity piece taken, once.
func (r *Role) checkParity(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32, piece []byte) error {
	l, roots, err := custodyLayout(info)
	if err != nil {
		return err
	}
	holders := pieces.ActiveHolders(replicas, r.opts.Operator)
	for i := range l.Pieces() {
		holders[i] = append([]string{info.Custody.Trainer}, holders[i]...)
	}
	state, parity, err := r.reencode(ctx, info, l, roots, holders, target)
	if err != nil {
		return fmt.Errorf("checking parity piece %d against the state: %w", target, err)
	}
	if bytes.Equal(parity, piece) {
		return nil
	}
	err = fmt.Errorf("custody object %s: the trainer's parity piece %d is not the parity of its state", info.DatasetID, target)
	return errors.Join(err, r.proveParityFault(ctx, info, l, roots, target, state, piece))
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
	state, piece, err := r.reencode(ctx, info, l, roots, pieces.ActiveHolders(replicas, r.opts.Operator), target)
	if err != nil {
		return nil, err
	}
	if err := info.Check(target, piece); err != nil {
		err = fmt.Errorf("rebuilt piece %d: %w", target, err)
		if target >= l.DataPieces {
			// The data was checked against its roots: the registered parity is wrong.
			err = errors.Join(err, r.proveRegisteredParityFault(ctx, info, l, roots, replicas, target, state))
		}
		return nil, err
	}
	return piece, nil
}

// reencode rebuilds the state from k pieces other than target, downloaded from holders
// (by piece index) and each checked against its root, and encodes it again: it returns
// the state and piece target as the state makes it.
func (r *Role) reencode(ctx context.Context, info *shardInfo, l custody.Layout, roots []merkle.Hash, holders map[uint32][]string, target uint32) (state, piece []byte, err error) {
	have := make([][]byte, l.Pieces())
	var sources []uint32
	for i := range l.Pieces() {
		if i != target {
			sources = append(sources, i)
		}
	}
	n, failures := r.download.Gather(ctx, info, have, sources, holders, int(l.DataPieces))
	if n < int(l.DataPieces) {
		err := fmt.Errorf("%w: custody object %s: %d of the %d pieces needed are served by their holders",
			manifest.ErrNotEnoughPieces, info.DatasetID, n, l.DataPieces)
		return nil, nil, errors.Join(append([]error{err}, failures...)...)
	}
	readers := make([]io.Reader, l.Pieces())
	for i, p := range have {
		if p != nil {
			readers[i] = bytes.NewReader(p)
		}
	}
	rebuilt := &memoryFile{}
	if err := custody.Rebuild(l, roots, readers, rebuilt); err != nil {
		return nil, nil, err
	}
	out := make([]io.Writer, l.Pieces())
	var buf bytes.Buffer
	out[target] = &buf
	if _, err := custody.Encode(bytes.NewReader(rebuilt.data), l, out, 0); err != nil {
		return nil, nil, err
	}
	return rebuilt.data, buf.Bytes(), nil
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
