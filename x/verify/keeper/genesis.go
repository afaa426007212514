package keeper

import (
	"context"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/verify/types"
)

// InitGenesis loads the state and rebuilds the deadline indexes from it.
func (k Keeper) InitGenesis(ctx context.Context, gs *types.GenesisState) error {
	if err := k.Params.Set(ctx, gs.Params); err != nil {
		return err
	}
	for _, cp := range gs.Checkpoints {
		if err := k.saveCheckpoint(ctx, cp); err != nil {
			return err
		}
		if cp.Status == types.CHECKPOINT_STATUS_PENDING {
			if err := k.FinalizationQueue.Set(ctx, collections.Join3(cp.ChallengeDeadline, cp.LeaseId, cp.Index)); err != nil {
				return err
			}
		}
	}
	for _, ch := range gs.Challenges {
		if err := k.Challenges.Set(ctx, ch.Id, ch); err != nil {
			return err
		}
		if ch.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED {
			if err := k.MoveDeadlines.Set(ctx, collections.Join(ch.Deadline, ch.Id)); err != nil {
				return err
			}
		}
	}
	for _, o := range gs.Openings {
		if err := k.Openings.Set(ctx, collections.Join3(o.LeaseId, o.CheckpointIndex, o.Step), o.Hash); err != nil {
			return err
		}
	}
	return k.NextChallengeID.Set(ctx, gs.NextChallengeId)
}

// ExportGenesis writes out the whole state.
func (k Keeper) ExportGenesis(ctx context.Context) (*types.GenesisState, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	gs := &types.GenesisState{Params: params}
	if err := k.Checkpoints.Walk(ctx, nil, func(_ CheckpointKey, cp types.Checkpoint) (bool, error) {
		gs.Checkpoints = append(gs.Checkpoints, cp)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Challenges.Walk(ctx, nil, func(_ uint64, ch types.Challenge) (bool, error) {
		gs.Challenges = append(gs.Challenges, ch)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Openings.Walk(ctx, nil, func(key collections.Triple[uint64, uint64, uint64], h []byte) (bool, error) {
		gs.Openings = append(gs.Openings, types.Opening{LeaseId: key.K1(), CheckpointIndex: key.K2(), Step: key.K3(), Hash: h})
		return false, nil
	}); err != nil {
		return nil, err
	}
	gs.NextChallengeId, err = k.NextChallengeID.Peek(ctx)
	return gs, err
}
