package keeper

import (
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// migrateRoundParams fills in the round params consensus version 5 added (round_quorum,
// max_missed_rounds, the round windows, max_sync_workers) with their defaults; a value
// already set is kept. No job had a sync section before v5, so no job, round or commit
// needs writing: the new collections start empty.
func migrateRoundParams(ctx sdk.Context, k Keeper) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	defaults := types.DefaultParams()
	if params.RoundQuorum.IsNil() || params.RoundQuorum.IsZero() {
		params.RoundQuorum = defaults.RoundQuorum
	}
	if params.MaxMissedRounds == 0 {
		params.MaxMissedRounds = defaults.MaxMissedRounds
	}
	if params.DefaultRoundCommitBlocks == 0 {
		params.DefaultRoundCommitBlocks = defaults.DefaultRoundCommitBlocks
	}
	if params.RoundAggregateBlocks == 0 {
		params.RoundAggregateBlocks = defaults.RoundAggregateBlocks
	}
	if params.RoundChallengeBlocks == 0 {
		params.RoundChallengeBlocks = defaults.RoundChallengeBlocks
	}
	if params.MaxSyncWorkers == 0 {
		params.MaxSyncWorkers = defaults.MaxSyncWorkers
	}
	return k.Params.Set(ctx, params)
}
