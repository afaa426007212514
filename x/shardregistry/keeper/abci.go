package keeper

import (
	"context"
	"math"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/deadline"
)

// EndBlocker processes the storage-proof deadlines due at or before this height. The
// index is walked from its start, and at most max_deadlines_per_block entries are
// processed: anything beyond waits for the next block, still in deadline order. Because
// every replica's deadline sits at its own offset in the period, a block's work depends
// on how many deadlines fall in it, never on how many replicas exist. It returns how
// many entries it processed.
func (k Keeper) EndBlocker(ctx context.Context) (int, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	due, err := k.dueDeadlines(ctx, sdkCtx.BlockHeight(), int(params.MaxDeadlinesPerBlock))
	if err != nil {
		return 0, err
	}
	for _, key := range due {
		if err := k.Deadlines.Remove(ctx, key); err != nil {
			return 0, err
		}
		// Each entry runs in its own cache so that one failing entry cannot leave
		// half-written state; it is logged and dropped rather than halting the chain.
		cacheCtx, write := sdkCtx.CacheContext()
		if err := k.processDeadline(cacheCtx, params, key.K2(), key.K1()); err != nil {
			k.Logger(ctx).Error("storage deadline processing failed", "replica", key.K2(), "deadline", key.K1(), "err", err)
			continue
		}
		write()
	}
	// Custody objects whose retention ended: at most max_deadlines_per_block releases, a
	// cap of their own.
	released, err := k.releaseDueCustody(sdkCtx, int(params.MaxDeadlinesPerBlock))
	if err != nil {
		return 0, err
	}
	return len(due) + released, nil
}

// dueDeadlines collects up to limit deadline entries at or before height.
func (k Keeper) dueDeadlines(ctx context.Context, height int64, limit int) ([]collections.Pair[int64, uint64], error) {
	return deadline.Due(ctx, k.Deadlines, collections.Join(height, uint64(math.MaxUint64)), limit)
}
