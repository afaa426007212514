package keeper

import (
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"

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

// Migrate2to3 fills in the transformer bounds version 3 added to the params
// (max_transformer_params, max_tokens_per_step) and closes every live job of kind
// reference: until v3 that kind trained the fixed-point MLP, which the exact transformer
// replaced, and its leases could never commit a checkpoint that chains on from an MLP
// state. Each is closed as an owner's cancel would close it (work already final stays
// paid, the unspent escrow goes back to the owner), with a reason that says why.
func (m Migrator) Migrate2to3(ctx sdk.Context) error {
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	defaults := types.DefaultParams()
	if params.MaxTransformerParams == 0 {
		params.MaxTransformerParams = defaults.MaxTransformerParams
	}
	if params.MaxTokensPerStep == 0 {
		params.MaxTokensPerStep = defaults.MaxTokensPerStep
	}
	if err := m.keeper.Params.Set(ctx, params); err != nil {
		return err
	}
	var retired []types.Job
	if err := m.keeper.Jobs.Walk(ctx, nil, func(_ uint64, job types.Job) (bool, error) {
		if !job.State.IsTerminal() && job.Spec.Workload.Kind == types.WORKLOAD_KIND_REFERENCE {
			retired = append(retired, job)
		}
		return false, nil
	}); err != nil {
		return err
	}
	for i := range retired {
		if _, err := m.keeper.closeJob(ctx, &retired[i], types.JOB_STATE_CANCELLED, types.LEASE_CLOSE_REASON_CANCELLED,
			"the v3 upgrade retired the MLP reference workload: resubmit as kind reference (now the exact transformer) or transformer"); err != nil {
			return err
		}
	}
	return nil
}
