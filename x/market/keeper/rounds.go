package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// GetRound returns round `round` of a sync job or ErrRoundNotFound.
func (k Keeper) GetRound(ctx context.Context, jobID, round uint64) (types.Round, error) {
	r, err := k.Rounds.Get(ctx, collections.Join(jobID, round))
	if err != nil {
		return r, keeperutil.NotFound(err, types.ErrRoundNotFound, "round %d of job %d", round, jobID)
	}
	return r, nil
}

// GetRoundCommit returns worker's commit in a round or ErrRoundCommitNotFound.
func (k Keeper) GetRoundCommit(ctx context.Context, jobID, round uint64, worker uint32) (types.RoundCommit, error) {
	c, err := k.RoundCommits.Get(ctx, collections.Join3(jobID, round, worker))
	if err != nil {
		return c, keeperutil.NotFound(err, types.ErrRoundCommitNotFound, "commit of worker %d in round %d of job %d", worker, round, jobID)
	}
	return c, nil
}

// roundCommits is every commit of a round, by worker.
func (k Keeper) roundCommits(ctx context.Context, jobID, round uint64) ([]types.RoundCommit, error) {
	iter, err := k.RoundCommits.Iterate(ctx, collections.NewSuperPrefixedTripleRange[uint64, uint64, uint32](jobID, round))
	if err != nil {
		return nil, err
	}
	return iter.Values()
}

// ExcludeRoundWorker is not implemented yet (PROTO READY commit only).
func (k Keeper) ExcludeRoundWorker(_ context.Context, _, _ uint64, _ uint32, _ string) error {
	return errorsmod.Wrap(types.ErrInvalidRoundCommit, "not implemented yet")
}

// RejectGlobal is not implemented yet (PROTO READY commit only).
func (k Keeper) RejectGlobal(_ context.Context, _, _ uint64) (string, error) {
	return "", errorsmod.Wrap(types.ErrInvalidRoundCommit, "not implemented yet")
}
