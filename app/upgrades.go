package app

import (
	"context"
	"fmt"

	storetypes "cosmossdk.io/store/types"
	upgradetypes "cosmossdk.io/x/upgrade/types"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"

	"github.com/depinchain/depinchain/internal/release"
)

// UpgradeV5 is the name of the software upgrade from the previous release (v4)
// to this one. A governance proposal schedules it (MsgSoftwareUpgrade with a
// plan of this name and a height); the old binary halts at that height with
// "UPGRADE "v5" NEEDED", and this binary, started on the same home, applies
// it. docs/upgrades.md is the operator's guide.
const UpgradeV5 = "v5"

// Upgrade is a software upgrade this binary knows how to apply.
type Upgrade struct {
	// Name is the plan name governance schedules.
	Name string
	// StoreUpgrades lists the KV stores the upgrade adds, renames or deletes;
	// they are applied when the store is loaded at the upgrade height.
	StoreUpgrades storetypes.StoreUpgrades
	// Handler returns the handler x/upgrade runs at the upgrade height.
	Handler func(app *App) upgradetypes.UpgradeHandler
}

// Upgrades are the software upgrades this binary applies, oldest first. A chain
// that still runs v1 upgrades to v2 with the v2 binary first.
var Upgrades = []Upgrade{
	{
		// v5 runs the modules' in-place store migrations: x/market goes from consensus
		// version 4 to 5 (rounds of sync jobs: the round params' defaults, new empty
		// collections in its existing store; keeper.Migrator.Migrate4to5), and so does
		// x/verify (file queries: the file_query_deposit default, new empty collections
		// in its existing store; its keeper.Migrator.Migrate4to5). It runs every
		// module's due migration, so other modules' version steps of the same release
		// join it without changing the handler. No store is added or removed.
		Name: UpgradeV5,
		Handler: func(app *App) upgradetypes.UpgradeHandler {
			return func(ctx context.Context, plan upgradetypes.Plan, fromVM module.VersionMap) (module.VersionMap, error) {
				sdk.UnwrapSDKContext(ctx).Logger().Info("applying software upgrade", "name", plan.Name, "height", plan.Height)
				return app.ModuleManager.RunMigrations(ctx, app.configurator, fromVM)
			}
		},
	},
}

// setUpgrades registers the upgrade handlers with x/upgrade and, when the node
// restarts at an upgrade height that changes stores, the store loader that
// changes them. It runs before the latest version is loaded.
//
// The upgrade test's stand-in for the previous release (internal/release)
// knows no upgrade, which is what makes it halt at the v5 height.
func (app *App) setUpgrades(homePath string) {
	if release.Previous {
		return
	}
	for _, u := range Upgrades {
		app.UpgradeKeeper.SetUpgradeHandler(u.Name, u.Handler(app))
	}

	// The old binary wrote the plan it halted at into <home>/data/upgrade-info.json.
	// Apps without a home (the CLI's, tests') have no such file, and looking for
	// it would create ./data in the working directory.
	if homePath == "" {
		return
	}
	info, err := app.UpgradeKeeper.ReadUpgradeInfoFromDisk()
	if err != nil {
		panic(fmt.Errorf("reading the upgrade info: %w", err))
	}
	if info.Name == "" || app.UpgradeKeeper.IsSkipHeight(info.Height) {
		return
	}
	for _, u := range Upgrades {
		changes := u.StoreUpgrades
		if u.Name == info.Name && len(changes.Added)+len(changes.Renamed)+len(changes.Deleted) > 0 {
			app.SetStoreLoader(upgradetypes.UpgradeStoreLoader(info.Height, &changes))
		}
	}
}
