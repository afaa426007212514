package disputes

import (
	"context"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/metrics"
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
		switch r.opts.Operator {
		case e.Provider:
			return func() {
				r.opened(e.ChallengeId, dispute.Defender)
				r.enqueueGame(e.ChallengeId)
			}, nil
		case e.Challenger:
			return func() { r.opened(e.ChallengeId, dispute.Challenger) }, nil
		}
		return nil, nil
	case *verifytypes.EventCheckpointSubmitted:
		if e.Provider == r.opts.Operator || !r.opts.Verifier.Enabled {
			return nil, nil
		}
		return func() { r.enqueueCheck(checkpoint.Ref{LeaseID: e.LeaseId, Index: e.Index}) }, nil
	case *verifytypes.EventChallengeResolved:
		var side dispute.Side
		switch r.opts.Operator {
		case e.Provider:
			side = dispute.Defender
		case e.Challenger:
			side = dispute.Challenger
		default:
			return nil, nil
		}
		recheck, err := r.challengeResolved(tx, e)
		return func() {
			r.resolved(e.ChallengeId, side, e.Outcome)
			for _, ref := range recheck {
				r.enqueueCheck(ref)
			}
		}, err
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

// opened counts a game the operator became a party to.
func (r *Role) opened(challengeID uint64, side dispute.Side) {
	r.opts.Metrics.DisputeOpened(side.String())
	r.setOpen(challengeID, side)
	r.publishOpen()
}

// resolved counts the end of a game the operator played on side.
func (r *Role) resolved(challengeID uint64, side dispute.Side, outcome verifytypes.ChallengeOutcome) {
	result := metrics.DisputeMoot
	switch {
	case outcome == verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON && side == dispute.Defender,
		outcome == verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON && side == dispute.Challenger:
		result = metrics.DisputeWon
	case outcome == verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON, outcome == verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON:
		result = metrics.DisputeLost
	}
	r.opts.Metrics.DisputeResolved(side.String(), result)
	r.setOpen(challengeID, 0)
	r.publishOpen()
}

// challengeResolved logs the end of a game the operator played and records
// the outcome of the verifier's own challenges. It returns the later
// checkpoints of the lease whose challenge waited behind one that did not
// convict: they are checked again.
func (r *Role) challengeResolved(tx *db.Tx, e *verifytypes.EventChallengeResolved) ([]checkpoint.Ref, error) {
	switch r.opts.Operator {
	case e.Challenger:
		r.log.Info("our challenge resolved", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex,
			"outcome", e.Outcome.String(), "reason", e.Reason, "reward", e.Reward.String(), "slashed", e.Slashed.String())
		rec, ok, err := tx.Verification(e.LeaseId, e.CheckpointIndex)
		if err != nil || !ok {
			return nil, err
		}
		rec.Outcome = e.Outcome.String()
		if err := tx.PutVerification(rec); err != nil {
			return nil, err
		}
		if e.Outcome == verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON {
			return nil, nil // the lease is closed and its later checkpoints rejected
		}
		all, err := tx.Verifications()
		if err != nil {
			return nil, err
		}
		var recheck []checkpoint.Ref
		for _, v := range all {
			if v.DeferredBehind == e.ChallengeId {
				recheck = append(recheck, checkpoint.Ref{LeaseID: v.LeaseID, Index: v.Index})
			}
		}
		return recheck, nil
	case e.Provider:
		r.log.Info("challenge resolved", "challenge", e.ChallengeId, "lease", e.LeaseId, "index", e.CheckpointIndex,
			"outcome", e.Outcome.String(), "reason", e.Reason)
	}
	return nil, nil
}
