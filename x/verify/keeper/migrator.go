package keeper

import (
	"fmt"

	sdk "github.com/cosmos/cosmos-sdk/types"

	v2 "github.com/depinchain/depinchain/x/verify/migrations/v2"
	"github.com/depinchain/depinchain/x/verify/types"
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

// RetiredWorkloadVersion is the workload version of the fixed-point MLP that kind
// reference trained before the v3 upgrade made it the exact transformer
// (types.ExactWorkloadVersion). No referee of this release re-executes its steps.
const RetiredWorkloadVersion = 1

// Migrate2to3 retires the MLP and adds phases 2–3 (operators and tiles).
//
// Every open game over a checkpoint of the retired MLP workload ends moot, refunding
// the challenger's bond as any moot game does: nobody can play its one-step phase any
// more, and a game that cannot be decided must not be lost by a timeout. Its checkpoint
// finalizes after its window like an unchallenged one. (x/market's 2→3 migration closes
// the MLP jobs themselves.)
//
// Phases 2–3 add a collection (TileGames, prefix 12, empty until a game reaches them) and
// two game turns, so no stored value changes; the longest dispute grows by
// types.MaxTileMoves moves, so the rule spanning x/verify and x/stakingext is checked
// again as in Migrate1to2: an unbonding_blocks that no longer covers it is logged for
// governance to raise.
func (m Migrator) Migrate2to3(ctx sdk.Context) error {
	var open []types.Challenge
	err := m.keeper.Challenges.Walk(ctx, nil, func(_ uint64, ch types.Challenge) (bool, error) {
		if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED {
			return false, nil
		}
		cp, err := m.keeper.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex)
		if err != nil {
			return true, err
		}
		if cp.WorkloadVersion == RetiredWorkloadVersion {
			open = append(open, ch)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	for _, ch := range open {
		if err := m.keeper.resolve(ctx, ch, types.CHALLENGE_OUTCOME_MOOT,
			"the v3 upgrade retired the MLP workload this checkpoint trained: no referee can re-execute its steps", false); err != nil {
			return err
		}
	}
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := m.keeper.checkUnbondingCover(ctx, params); err != nil {
		m.keeper.Logger(ctx).Error("x/verify's phases 2–3 need a longer x/stakingext unbonding_blocks", "err", err)
	}
	return nil
}

// Migrate3to4 adds custody of checkpoint states: the two params it brings get their
// defaults (stored params from version 3 have them zero, which Validate refuses), and
// the custody queue (prefix 13) starts empty. No stored checkpoint changes: those of
// version 3 have no custody_id and finalize as before.
func (m Migrator) Migrate3to4(ctx sdk.Context) error {
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	defaults := types.DefaultParams()
	params.CustodyGraceBlocks = defaults.CustodyGraceBlocks
	params.CustodyRecheckBlocks = defaults.CustodyRecheckBlocks
	// The file query deposit (version 5) is still zero here; Migrate4to5 fills it in.
	check := params
	check.FileQueryDeposit = sdk.NewCoin(params.ChallengerBond.Denom, defaults.FileQueryDeposit.Amount)
	if err := check.Validate(); err != nil {
		return fmt.Errorf("x/verify params after the custody migration: %w", err)
	}
	return m.keeper.Params.Set(ctx, params)
}

// Migrate4to5 adds file queries: file_query_deposit gets its default (stored params from
// version 4 have it zero, which Validate refuses), and the file query id sequence starts
// at 1 like the challenge ids (id 0 is never a query's). The file query collections
// (prefixes 14–17) start empty; no stored value changes.
func (m Migrator) Migrate4to5(ctx sdk.Context) error {
	params, err := m.keeper.Params.Get(ctx)
	if err != nil {
		return err
	}
	// In the bonds' denomination, should governance have moved them to another one.
	params.FileQueryDeposit = sdk.NewCoin(params.ChallengerBond.Denom, types.DefaultParams().FileQueryDeposit.Amount)
	if err := params.Validate(); err != nil {
		return fmt.Errorf("x/verify params after the file query migration: %w", err)
	}
	if err := m.keeper.Params.Set(ctx, params); err != nil {
		return err
	}
	return m.keeper.FileQuerySeq.Set(ctx, 1)
}
