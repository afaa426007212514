package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// CustodyPieceRoots is a custody object's layout and the root registered for each of its
// pieces (data pieces first): what x/verify checks a parity fraud proof
// (MsgProveParityFault) against.
func (k Keeper) CustodyPieceRoots(ctx context.Context, id string) (custody.Layout, []merkle.Hash, error) {
	d, err := k.GetDataset(ctx, id)
	if err != nil {
		return custody.Layout{}, nil, err
	}
	if d.Custody == nil {
		return custody.Layout{}, nil, errorsmod.Wrapf(types.ErrInvalidCustody, "dataset %q is not a custody object", id)
	}
	l, err := types.CustodyLayout(d)
	if err != nil {
		return custody.Layout{}, nil, errorsmod.Wrapf(types.ErrInvalidCustody, "custody object %q: %v", id, err)
	}
	shard, err := k.GetShard(ctx, id, 0)
	if err != nil {
		return custody.Layout{}, nil, err
	}
	if len(shard.Pieces) != int(l.Pieces()) {
		return custody.Layout{}, nil, errorsmod.Wrapf(types.ErrInvalidCustody, "custody object %q has %d pieces, its layout %d", id, len(shard.Pieces), l.Pieces())
	}
	roots := make([]merkle.Hash, len(shard.Pieces))
	for i, p := range shard.Pieces {
		if roots[i], err = merkle.HashFromBytes(p.Root); err != nil {
			return custody.Layout{}, nil, errorsmod.Wrapf(types.ErrInvalidCustody, "custody object %q piece %d: %v", id, i, err)
		}
	}
	return l, roots, nil
}
