package keeper

import (
	"context"
	"math"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/deadline"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// EndBlocker times out games and file queries whose party to move missed its deadline,
// draws the auditors of checkpoints submitted in the previous block, and closes the
// challenge windows that end (missed audits, then finalization). Each walks a
// height-ordered index up to the current height, at most max_deadlines_per_block entries
// per block in all.
func (k Keeper) EndBlocker(ctx context.Context) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	budget := int(params.MaxDeadlinesPerBlock)
	height := sdkCtx.BlockHeight()

	// Timeouts first: a game lost by timeout in this block may unfreeze a checkpoint
	// that is due to finalize in this same block.
	timeouts, err := deadline.Due(ctx, k.MoveDeadlines, collections.Join(height, uint64(math.MaxUint64)), budget)
	if err != nil {
		return err
	}
	budget -= len(timeouts)
	for _, key := range timeouts {
		// Dropped before the work, like a finalization entry: a timeout that fails must not
		// come back every block and eat the budget of every later deadline.
		if err := k.MoveDeadlines.Remove(ctx, key); err != nil {
			return err
		}
		k.runIsolated(sdkCtx, "move timeout", func(c sdk.Context) error { return k.timeOut(c, key.K2()) })
	}
	queries, err := deadline.Due(ctx, k.FileQueryDeadlines, collections.Join(height, uint64(math.MaxUint64)), budget)
	if err != nil {
		return err
	}
	budget -= len(queries)
	for _, key := range queries {
		if err := k.FileQueryDeadlines.Remove(ctx, key); err != nil {
			return err
		}
		k.runIsolated(sdkCtx, "file query timeout", func(c sdk.Context) error { return k.fileQueryTimeout(c, key.K2()) })
	}
	draws, err := deadline.Due(ctx, k.AuditDrawQueue, collections.Join3(height, uint64(math.MaxUint64), uint64(math.MaxUint64)), budget)
	if err != nil {
		return err
	}
	budget -= len(draws)
	for _, key := range draws {
		if err := k.AuditDrawQueue.Remove(ctx, key); err != nil {
			return err
		}
		k.runIsolated(sdkCtx, "audit draw", func(c sdk.Context) error { return k.drawAudits(c, key.K2(), key.K3()) })
	}
	due, err := deadline.Due(ctx, k.FinalizationQueue, collections.Join3(height, uint64(math.MaxUint64), uint64(math.MaxUint64)), budget)
	if err != nil {
		return err
	}
	budget -= len(due)
	for _, key := range due {
		if err := k.FinalizationQueue.Remove(ctx, key); err != nil {
			return err
		}
		k.runIsolated(sdkCtx, "finalization", func(c sdk.Context) error { return k.closeWindow(c, key.K2(), key.K3()) })
	}
	// Checkpoints past their window waiting for custody holders: finalized once held,
	// withheld at their custody deadline.
	rechecks, err := deadline.Due(ctx, k.CustodyQueue, collections.Join3(height, uint64(math.MaxUint64), uint64(math.MaxUint64)), budget)
	if err != nil {
		return err
	}
	for _, key := range rechecks {
		if err := k.CustodyQueue.Remove(ctx, key); err != nil {
			return err
		}
		k.runIsolated(sdkCtx, "custody recheck", func(c sdk.Context) error { return k.tryFinalize(c, key.K2(), key.K3(), true) })
	}
	return nil
}

// closeWindow runs at the end of a checkpoint's challenge window: auditors that did not
// answer missed their assignment, then the checkpoint finalizes if nothing holds it.
func (k Keeper) closeWindow(ctx sdk.Context, leaseID, index uint64) error {
	cp, found, err := keeperutil.Optional(k.Checkpoints.Get(ctx, collections.Join(leaseID, index)))
	if err != nil || !found {
		return err
	}
	if cp.Status == types.CHECKPOINT_STATUS_PENDING {
		params, err := k.Params.Get(ctx)
		if err != nil {
			return err
		}
		if err := k.closeAuditWindow(ctx, params, cp); err != nil {
			return err
		}
	}
	return k.tryFinalize(ctx, leaseID, index, true)
}

// runIsolated runs one deadline's work in a cache so a failure cannot leave half-written
// state; the failure is logged and that entry dropped rather than halting the chain.
func (k Keeper) runIsolated(ctx sdk.Context, kind string, fn func(sdk.Context) error) {
	cacheCtx, write := ctx.CacheContext()
	if err := fn(cacheCtx); err != nil {
		k.Logger(ctx).Error("deadline processing failed", "kind", kind, "err", err)
		return
	}
	write()
}
