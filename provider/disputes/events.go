package disputes

import (
	"context"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// HandleEvent queues the games that wait on a move and, in verifier mode,
// the checkpoints other providers submit; it records how the verifier's
// challenges end.
func (r *Role) HandleEvent(_ context.Context, tx *db.Tx, ev chain.Event) (func(), error) {
	switch e := ev.Message.(type) {
	case *verifytypes.EventGameTurn:
		return func() { r.enqueueGame(e.ChallengeId) }, nil
	case *verifytypes.EventChallengeOpened:
		if e.Provider != r.opts.Operator {
			return nil, nil
		}
		return func() { r.enqueueGame(e.ChallengeId) }, nil
	case *verifytypes.EventCheckpointSubmitted:
		if e.Provider == r.opts.Operator || !r.opts.Verifier.Enabled {
			return nil, nil
		}
		return func() { r.enqueueCheck(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}) }, nil
	case *verifytypes.EventChallengeResolved:
		return nil, r.challengeResolved(tx, e)
	case *verifytypes.EventHashRevealed:
		// A reveal does not announce a turn for every game waiting on it (x/verify
		// keeps that one write): the verifier's open game on the checkpoint is now its
		// turn, if it was waiting there.
		rec, ok, err := tx.Verification(e.LeaseId, e.CheckpointIndex)
		if err != nil || !ok || rec.ChallengeID == 0 || rec.Outcome != "" {
			return nil, err
		}
		return func() { r.enqueueGame(rec.ChallengeID) }, nil
	}
	return nil, nil
}

// challengeResolved logs the end of a game the operator played and records
// the outcome of the verifier's own challenges.
func (r *Role) challengeResolved(tx *db.Tx, e *verifytypes.EventChallengeResolved) error {
	switch r.opts.Operator {
	case e.Challenger:
		r.log.Info("our challenge resolved", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex,
			"outcome", e.Outcome.String(), "reason", e.Reason, "reward", e.Reward.String(), "slashed", e.Slashed.String())
		rec, ok, err := tx.Verification(e.LeaseId, e.CheckpointIndex)
		if err != nil || !ok {
			return err
		}
		rec.Outcome = e.Outcome.String()
		return tx.PutVerification(rec)
	case e.Provider:
		r.log.Info("challenge resolved", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex,
			"outcome", e.Outcome.String(), "reason", e.Reason)
	}
	return nil
}
