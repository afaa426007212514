package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/shardregistry/keeper"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// The custody migration gives version-1 params (no custody params: zero, which Validate
// refuses) the custody defaults, and leaves the rest alone.
func TestMigrate1to2SetsCustodyParams(t *testing.T) {
	e := newEnv(t)
	p, err := e.ShardRegistry.Params.Get(e.Ctx)
	require.NoError(t, err)
	p.CustodyMaxRetentionSeconds, p.CustodyMaxStateSize, p.CustodyStorageFeePerPiecePeriod = 0, 0, 0
	p.PeriodBlocks = 77
	require.Error(t, p.Validate())
	require.NoError(t, e.ShardRegistry.Params.Set(e.Ctx, p))

	require.NoError(t, keeper.NewMigrator(e.ShardRegistry).Migrate1to2(e.Ctx))

	got, err := e.ShardRegistry.Params.Get(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, types.DefaultParams().CustodyMaxRetentionSeconds, got.CustodyMaxRetentionSeconds)
	require.Equal(t, types.DefaultParams().CustodyMaxStateSize, got.CustodyMaxStateSize)
	require.Equal(t, types.DefaultParams().CustodyStorageFeePerPiecePeriod, got.CustodyStorageFeePerPiecePeriod)
	require.Equal(t, uint64(77), got.PeriodBlocks)
	require.NoError(t, got.Validate())
}
