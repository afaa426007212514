package keeper

import (
	sdk "github.com/cosmos/cosmos-sdk/types"

	v2 "github.com/depinchain/depinchain/x/staking_ext/migrations/v2"
)

// Migrator runs x/stakingext's in-place store migrations; the module registers each
// with the configurator and x/upgrade's RunMigrations calls them.
type Migrator struct {
	keeper Keeper
}

// NewMigrator returns the migrator of a keeper's store.
func NewMigrator(k Keeper) Migrator { return Migrator{keeper: k} }

// Migrate1to2 fills in the params version 2 added and the unbondings' completion
// heights (see migrations/v2). The unbondings are written through the keeper's indexed
// map, so its indexes stay in step.
func (m Migrator) Migrate1to2(ctx sdk.Context) error {
	return v2.Migrate(ctx, v2.Collections{Params: m.keeper.Params, Unbondings: m.keeper.Unbondings})
}
