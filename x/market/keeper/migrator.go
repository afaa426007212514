package keeper

import (
	sdk "github.com/cosmos/cosmos-sdk/types"

	v2 "github.com/depinchain/depinchain/x/market/migrations/v2"
)

// Migrator runs x/market's in-place store migrations; the module registers
// each with the configurator and x/upgrade's RunMigrations calls them.
type Migrator struct {
	keeper Keeper
}

// NewMigrator returns the migrator of a keeper's store.
func NewMigrator(k Keeper) Migrator { return Migrator{keeper: k} }

// Migrate1to2 back-fills the leases-by-state index (see migrations/v2).
func (m Migrator) Migrate1to2(ctx sdk.Context) error {
	return v2.MigrateStore(ctx, m.keeper.storeService, m.keeper.cdc)
}
