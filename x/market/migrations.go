package market

import (
	"fmt"

	"github.com/cosmos/cosmos-sdk/types/module"

	"github.com/depinchain/depinchain/internal/release"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
)

// registerMigrations registers x/market's in-place store migrations, one per
// consensus version step; x/upgrade runs the due ones in an upgrade handler.
func (am AppModule) registerMigrations(cfg module.Configurator) {
	m := keeper.NewMigrator(am.keeper)
	if err := cfg.RegisterMigration(types.ModuleName, 1, m.Migrate1to2); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 1: %w", types.ModuleName, err))
	}
	if err := cfg.RegisterMigration(types.ModuleName, 2, m.Migrate2to3); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 2: %w", types.ModuleName, err))
	}
	if err := cfg.RegisterMigration(types.ModuleName, 3, m.Migrate3to4); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 3: %w", types.ModuleName, err))
	}
	if err := cfg.RegisterMigration(types.ModuleName, 4, m.Migrate4to5); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 4: %w", types.ModuleName, err))
	}
}

// consensusVersion is the state layout this binary writes: 5 (rounds of sync jobs), or
// 4 in the upgrade test's stand-in for the previous release (internal/release).
func consensusVersion() uint64 {
	if release.Previous {
		return 4
	}
	return ConsensusVersion
}
