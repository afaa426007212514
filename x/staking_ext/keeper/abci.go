package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// EndBlocker pays out matured unbondings. It walks the completion-time index
// from the earliest entry up to the block time and stops after
// max_unbondings_per_block entries, so a block's cost depends on what is due,
// never on how long the queue is; entries beyond the cap wait for the next block.
// An entry is mature once its completion height has been reached too; the walk stops
// at the first one that is not (see dueUnbondings).
func (k Keeper) EndBlocker(ctx context.Context) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	now, err := types.CompletionTimeKey(sdk.UnwrapSDKContext(ctx).BlockTime())
	if err != nil {
		return err
	}
	due, err := k.dueUnbondings(ctx, now, sdk.UnwrapSDKContext(ctx).BlockHeight(), params.MaxUnbondingsPerBlock)
	if err != nil {
		return err
	}
	for _, id := range due {
		if err := k.completeUnbonding(ctx, id); err != nil {
			return fmt.Errorf("completing unbonding %d: %w", id, err)
		}
	}
	return nil
}

// dueUnbondings lists up to limit ids of unbondings completing at or before
// now, earliest first (ties by id), stopping at the first whose completion height is
// above height. Entries are created with completion time = creation time +
// unbonding_period and completion height = creation height + unbonding_blocks, so
// while those params stay the same the time order is the height order and nothing
// behind that entry is mature either; after governance changes one, an entry may wait
// behind an earlier-timed one for at most unbonding_blocks blocks: a payout can come
// late, never early. It only collects: removing entries while the index iterator is
// open is not allowed.
func (k Keeper) dueUnbondings(ctx context.Context, now, height int64, limit uint32) ([]uint64, error) {
	iter, err := k.Unbondings.Indexes.CompletionTime.Iterate(ctx, collections.NewPrefixUntilPairRange[int64, uint64](now))
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var due []uint64
	for ; iter.Valid() && uint32(len(due)) < limit; iter.Next() {
		id, err := iter.PrimaryKey()
		if err != nil {
			return nil, err
		}
		unbonding, err := k.Unbondings.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if unbonding.CompletionHeight > height {
			break
		}
		due = append(due, id)
	}
	return due, nil
}

// completeUnbonding removes an unbonding and sends its amount to the operator.
func (k Keeper) completeUnbonding(ctx context.Context, id uint64) error {
	unbonding, err := k.Unbondings.Get(ctx, id)
	if err != nil {
		return err
	}
	operator, err := k.addressCodec.StringToBytes(unbonding.Operator)
	if err != nil {
		return err
	}
	if err := k.Unbondings.Remove(ctx, id); err != nil {
		return err
	}
	if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, operator, sdk.NewCoins(unbonding.Amount)); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventUnbondingCompleted{UnbondingId: id, Operator: unbonding.Operator, Amount: unbonding.Amount})
}
