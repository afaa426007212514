package keeper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// An unbonding matures once its completion time and its completion height
// (creation height + unbonding_blocks) have both been reached: the height floor keeps it
// slashable for every dispute over what its operator committed before, whatever the
// block time.
func TestUnbondingMaturesAtCompletionTimeAndHeight(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 10_000_000, 10_000_000)
	_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(operator), Amount: udepin(4_000_000)})
	require.NoError(t, err)
	created := f.ctx.BlockHeight()

	f.advance(types.DefaultUnbondingBlocks, types.DefaultUnbondingPeriod-time.Nanosecond)
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.True(t, f.balance(operator).IsZero(), "one nanosecond early pays nothing")
	f.requireInvariants()

	// Time is up, but at fast blocks the height floor is not.
	f.ctx = f.ctx.WithBlockHeight(created + types.DefaultUnbondingBlocks - 1)
	f.advance(0, time.Nanosecond)
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.True(t, f.balance(operator).IsZero(), "one block below the completion height pays nothing")

	f.advance(1, 0)
	f.newEvents()
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.Equal(t, math.NewInt(4_000_000), f.balance(operator))
	require.Equal(t, math.NewInt(6_000_000), f.balance(f.moduleAddress))
	has, err := f.keeper.Unbondings.Has(f.ctx, 1)
	require.NoError(t, err)
	require.False(t, has)
	require.Len(t, f.eventsOfType("depinchain.stakingext.v1.EventUnbondingCompleted"), 1)

	// A paid-out entry frees its slot in the operator's entry limit.
	queue, err := f.queryServer.Unbondings(f.ctx, &types.QueryUnbondingsRequest{Operator: f.addressText(operator)})
	require.NoError(t, err)
	require.Empty(t, queue.Unbondings)
}

func TestEndBlockPaysAtMostTheCapPerBlock(t *testing.T) {
	f := newFixture(t)
	params := types.DefaultParams()
	params.MaxUnbondingsPerBlock = 2
	params.UnbondingPeriod = time.Hour
	params.UnbondingBlocks = 1
	_, err := f.msgServer.UpdateParams(f.ctx, &types.MsgUpdateParams{Authority: f.authority, Params: params})
	require.NoError(t, err)
	alice := f.registerProvider("alice", 10_000_000, 10_000_000)
	bob := f.registerProvider("bob", 10_000_000, 10_000_000)

	// Five entries completing a second apart, created alternately; one more
	// completing much later.
	for i, operator := range []sdk.AccAddress{alice, bob, alice, bob, alice} {
		_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(operator), Amount: udepin(int64(i + 1))})
		require.NoError(t, err)
		f.advance(1, time.Second)
	}
	f.advance(1, time.Hour)
	_, err = f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(alice), Amount: udepin(100)})
	require.NoError(t, err)

	remaining := func() []uint64 {
		var ids []uint64
		require.NoError(t, f.keeper.Unbondings.Walk(f.ctx, nil, func(id uint64, _ types.Unbonding) (bool, error) {
			ids = append(ids, id)
			return false, nil
		}))
		return ids
	}

	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.Equal(t, []uint64{3, 4, 5, 6}, remaining(), "the two earliest are paid first")
	require.Equal(t, math.NewInt(1), f.balance(alice))
	require.Equal(t, math.NewInt(2), f.balance(bob))
	f.requireInvariants()

	f.advance(1, time.Second)
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.Equal(t, []uint64{5, 6}, remaining())

	f.advance(1, time.Second)
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.Equal(t, []uint64{6}, remaining(), "the entry that is not due stays")
	require.Equal(t, math.NewInt(1+3+5), f.balance(alice))
	require.Equal(t, math.NewInt(2+4), f.balance(bob))

	f.advance(1, time.Hour)
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	require.Empty(t, remaining())
	require.Equal(t, math.NewInt(1+3+5+100), f.balance(alice))
}

func TestEndBlockWithEmptyQueue(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot()
	require.NoError(t, f.keeper.EndBlocker(f.ctx))
	before.RequireUnchanged(t)
}
