package keeper

import (
	"context"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// InitGenesis loads the state and rebuilds the deadline indexes from it: the
// finalization queue and the audit draws of pending checkpoints, the move deadlines of
// open games, the deadlines and the by-commit index of open file queries. It also holds the params to the rule that spans x/verify and x/stakingext
// (whose genesis runs first): unbonding_blocks must cover the challenge window and the
// longest dispute.
func (k Keeper) InitGenesis(ctx context.Context, gs *types.GenesisState) error {
	if err := k.checkUnbondingCover(ctx, gs.Params); err != nil {
		return err
	}
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
			if cp.AuditRequested > 0 && !cp.AuditDrawn {
				if err := k.AuditDrawQueue.Set(ctx, collections.Join3(cp.SubmittedHeight+1, cp.LeaseId, cp.Index)); err != nil {
					return err
				}
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
		key := collections.Join3(o.LeaseId, o.CheckpointIndex, o.Step)
		if err := k.Openings.Set(ctx, key, o.Hash); err != nil {
			return err
		}
		if o.RevealedHeight != 0 {
			if err := k.OpeningHeights.Set(ctx, key, o.RevealedHeight); err != nil {
				return err
			}
		}
	}
	for _, a := range gs.Audits {
		if err := k.Assignments.Set(ctx, auditKey(a.LeaseId, a.CheckpointIndex, a.Auditor), a); err != nil {
			return err
		}
	}
	for _, tg := range gs.TileGames {
		if err := k.TileGames.Set(ctx, tg.ChallengeId, tg); err != nil {
			return err
		}
	}
	for _, q := range gs.FileQueries {
		if err := k.FileQueries.Set(ctx, q.Id, q); err != nil {
			return err
		}
		if err := k.FileQueryDeadlines.Set(ctx, collections.Join(q.Deadline, q.Id)); err != nil {
			return err
		}
		if err := k.FileQueriesByCommit.Set(ctx, fileQueryKey(q)); err != nil {
			return err
		}
	}
	// A genesis from before file queries has no next_file_query_id: ids start at 1.
	if err := k.FileQuerySeq.Set(ctx, max(gs.NextFileQueryId, 1)); err != nil {
		return err
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
		revealed, _, err := keeperutil.Optional(k.OpeningHeights.Get(ctx, key))
		if err != nil {
			return true, err
		}
		gs.Openings = append(gs.Openings, types.Opening{LeaseId: key.K1(), CheckpointIndex: key.K2(), Step: key.K3(), Hash: h, RevealedHeight: revealed})
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Assignments.Walk(ctx, nil, func(_ AuditKey, a types.Audit) (bool, error) {
		gs.Audits = append(gs.Audits, a)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.TileGames.Walk(ctx, nil, func(_ uint64, tg types.TileGame) (bool, error) {
		gs.TileGames = append(gs.TileGames, tg)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.FileQueries.Walk(ctx, nil, func(_ uint64, q types.FileQuery) (bool, error) {
		gs.FileQueries = append(gs.FileQueries, q)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if gs.NextFileQueryId, err = k.FileQuerySeq.Peek(ctx); err != nil {
		return nil, err
	}
	gs.NextChallengeId, err = k.NextChallengeID.Peek(ctx)
	return gs, err
}
