package keeper

import (
	sdk "github.com/cosmos/cosmos-sdk/types"

	v2 "github.com/depinchain/depinchain/x/verify/migrations/v2"
)

// Migrator runs x/verify's in-place store migrations; the module registers each with
// the configurator and x/upgrade's RunMigrations calls them.
type Migrator struct {
	keeper Keeper
}

// NewMigrator returns the migrator of a keeper's store.
func NewMigrator(k Keeper) Migrator { return Migrator{keeper: k} }

// Migrate1to2 fills in the params version 2 added (see migrations/v2). It then checks
// the rule that spans x/verify and x/stakingext (migrated before it, in module name
// order): if governance had raised move_timeout or challenge_window so far that the new
// unbonding_blocks default does not cover them, the upgrade logs it, and governance must
// raise unbonding_blocks, as every later change of either is checked.
func (m Migrator) Migrate1to2(ctx sdk.Context) error {
	if err := v2.Migrate(ctx, m.keeper.Params); err != nil {
		return err
	}
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := m.keeper.checkUnbondingCover(ctx, params); err != nil {
		m.keeper.Logger(ctx).Error("x/verify's params need a longer x/stakingext unbonding_blocks", "err", err)
	}
	return nil
}

// Migrate2to3 adds phases 2–3 (operators and tiles): a new collection (TileGames,
// prefix 12, empty until a game reaches them) and two game turns, so no stored value
// changes. The longest dispute grows by types.MaxTileMoves moves, so the rule spanning
// x/verify and x/stakingext is checked again as in Migrate1to2: an unbonding_blocks that
// no longer covers it is logged for governance to raise.
func (m Migrator) Migrate2to3(ctx sdk.Context) error {
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := m.keeper.checkUnbondingCover(ctx, params); err != nil {
		m.keeper.Logger(ctx).Error("x/verify's phases 2–3 need a longer x/stakingext unbonding_blocks", "err", err)
	}
	return nil
}
