package keeper

import (
	"context"
	"math"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/deadline"
)

// BeginBlocker records the block hash for the module's randomness beacon.
func (k Keeper) BeginBlocker(ctx context.Context) error {
	return k.recordBlockHash(sdk.UnwrapSDKContext(ctx))
}

// EndBlocker closes due auctions, closes leases that missed their checkpoint deadline,
// fails jobs whose escrow cannot pay their next checkpoints or whose leases hit max
// duration, and holds leases whose rate check is due against their committed rate. Each index is walked
// from its start up to now, and at most max_deadlines_per_block entries are processed in
// all: anything beyond waits for the next block, still in deadline order.
func (k Keeper) EndBlocker(ctx context.Context) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	budget := int(params.MaxDeadlinesPerBlock)
	height := sdkCtx.BlockHeight()

	work := []struct {
		name    string
		index   collections.KeySet[collections.Pair[int64, uint64]]
		dueUpTo int64
		handle  func(sdk.Context, uint64) error
	}{
		{"auction close", k.BiddingDeadlines, height, k.closeAuction},
		{"checkpoint deadline", k.CheckpointDeadlines, height, k.closeForNonPerformance},
		{"escrow or duration deadline", k.TimeDeadlines, sdkCtx.BlockTime().UnixNano(), k.processTimeDeadline},
		{"rate check", k.RateChecks, sdkCtx.BlockTime().UnixNano(), k.processRateCheck},
	}
	for _, w := range work {
		due, err := deadline.Due(ctx, w.index, collections.Join(w.dueUpTo, uint64(math.MaxUint64)), budget)
		if err != nil {
			return err
		}
		budget -= len(due)
		for _, key := range due {
			if err := w.index.Remove(ctx, key); err != nil {
				return err
			}
			// Each entry runs in its own cache so that one failing entry cannot leave
			// half-written state; it is logged and dropped rather than halting the chain.
			cacheCtx, write := sdkCtx.CacheContext()
			if err := w.handle(cacheCtx, key.K2()); err != nil {
				k.Logger(ctx).Error("deadline processing failed", "kind", w.name, "id", key.K2(), "err", err)
				continue
			}
			write()
		}
	}
	return k.processRoundDeadlines(sdkCtx, height, budget)
}

// processRoundDeadlines walks RoundDeadlines up to height with what is left of the
// block's budget, each entry in its own cache like the other deadlines.
func (k Keeper) processRoundDeadlines(ctx sdk.Context, height int64, budget int) error {
	due, err := deadline.Due(ctx, k.RoundDeadlines, collections.Join3(height, uint64(math.MaxUint64), uint64(math.MaxUint64)), budget)
	if err != nil {
		return err
	}
	for _, key := range due {
		if err := k.RoundDeadlines.Remove(ctx, key); err != nil {
			return err
		}
		cacheCtx, write := ctx.CacheContext()
		if err := k.processRoundDeadline(cacheCtx, key.K2(), key.K3()); err != nil {
			k.Logger(ctx).Error("deadline processing failed", "kind", "round deadline", "job", key.K2(), "round", key.K3(), "err", err)
			continue
		}
		write()
	}
	return nil
}
