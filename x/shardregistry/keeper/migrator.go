package keeper

import (
	"fmt"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// Migrator runs x/shardregistry's in-place store migrations; the module registers each
// with the configurator and x/upgrade's RunMigrations calls them.
type Migrator struct {
	keeper Keeper
}

// NewMigrator returns the migrator of a keeper's store.
func NewMigrator(k Keeper) Migrator { return Migrator{keeper: k} }

// Migrate1to2 adds custody objects: the custody params (bounds and the storage fee) get their defaults (version 1
// params have them zero, which Validate refuses). Stored datasets have no custody record
// and keep their layout, so nothing else changes.
func (m Migrator) Migrate1to2(ctx sdk.Context) error {
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	defaults := types.DefaultParams()
	params.CustodyMaxRetentionSeconds = defaults.CustodyMaxRetentionSeconds
	params.CustodyMaxStateSize = defaults.CustodyMaxStateSize
	params.CustodyStorageFeePerPiecePeriod = defaults.CustodyStorageFeePerPiecePeriod
	if err := params.Validate(); err != nil {
		return fmt.Errorf("x/shardregistry params after the custody migration: %w", err)
	}
	return m.keeper.Params.Set(ctx, params)
}
