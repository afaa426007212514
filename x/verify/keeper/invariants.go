package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/math"

	"github.com/depinchain/depinchain/x/verify/types"
)

// Invariant checks one property of the verify state; it returns a description and whether
// it is broken. Tests and simulation call them (x/crisis is deprecated).
type Invariant func(ctx context.Context) (string, bool)

// AllInvariants bundles every x/verify invariant.
func AllInvariants(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		for _, inv := range []Invariant{BondsInvariant(k), OpenChallengesInvariant(k), AuditsInvariant(k)} {
			if msg, broken := inv(ctx); broken {
				return msg, true
			}
		}
		return "", false
	}
}

// BondsInvariant: the module account holds exactly the bonds of unresolved challenges,
// the fees of audits not yet settled (reserved from escrows at the draw) and the
// deposits of open file queries. Slashes a
// conviction moves through the account leave it within the same transaction.
func BondsInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		params, err := k.Params.Get(ctx)
		if err != nil {
			return err.Error(), true
		}
		held := math.ZeroInt()
		if err := k.Challenges.Walk(ctx, nil, func(_ uint64, ch types.Challenge) (bool, error) {
			if ch.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED {
				held = held.Add(ch.Bond.Amount)
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		fees := math.ZeroInt()
		if err := k.Assignments.Walk(ctx, nil, func(_ AuditKey, a types.Audit) (bool, error) {
			if !a.Settled && a.Fee.Denom == params.ChallengerBond.Denom {
				fees = fees.Add(a.Fee.Amount)
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		deposits := math.ZeroInt()
		if err := k.FileQueries.Walk(ctx, nil, func(_ uint64, q types.FileQuery) (bool, error) {
			if q.Deposit.Denom == params.ChallengerBond.Denom {
				deposits = deposits.Add(q.Deposit.Amount)
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		balance := k.bankKeeper.GetBalance(ctx, k.moduleAddress(), params.ChallengerBond.Denom)
		if !balance.Amount.Equal(held.Add(fees).Add(deposits)) {
			return fmt.Sprintf("verify: module balance %s != open challenge bonds %s + unsettled audit fees %s + open file query deposits %s",
				balance, held, fees, deposits), true
		}
		return "", false
	}
}

// OpenChallengesInvariant: each checkpoint's open_challenges counts its unresolved games.
func OpenChallengesInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		type key struct{ lease, index uint64 }
		open := map[key]uint32{}
		if err := k.Challenges.Walk(ctx, nil, func(_ uint64, ch types.Challenge) (bool, error) {
			if ch.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED {
				open[key{ch.LeaseId, ch.CheckpointIndex}]++
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		var msg string
		err := k.Checkpoints.Walk(ctx, nil, func(_ CheckpointKey, cp types.Checkpoint) (bool, error) {
			if n := open[key{cp.LeaseId, cp.Index}]; n != cp.OpenChallenges {
				msg = fmt.Sprintf("verify: checkpoint %d/%d counts %d open challenges, found %d", cp.LeaseId, cp.Index, cp.OpenChallenges, n)
			}
			return msg != "", nil
		})
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}

// AuditsInvariant: each checkpoint counts its assignments and their reports, an
// unsettled assignment belongs to a pending checkpoint (or is unanswered at a window
// not yet closed by the end blocker), and a resolved checkpoint has every assignment
// settled.
func AuditsInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		type key struct{ lease, index uint64 }
		auditors, reports := map[key]uint32{}, map[key]uint32{}
		unsettled := map[key]int{}
		if err := k.Assignments.Walk(ctx, nil, func(_ AuditKey, a types.Audit) (bool, error) {
			kk := key{a.LeaseId, a.CheckpointIndex}
			auditors[kk]++
			if a.Status == types.AUDIT_STATUS_REPORTED {
				reports[kk]++
			}
			if !a.Settled {
				unsettled[kk]++
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		var msg string
		err := k.Checkpoints.Walk(ctx, nil, func(_ CheckpointKey, cp types.Checkpoint) (bool, error) {
			kk := key{cp.LeaseId, cp.Index}
			switch {
			case cp.Auditors != auditors[kk] || cp.UnavailableReports != reports[kk]:
				msg = fmt.Sprintf("verify: checkpoint %d/%d counts %d auditors and %d reports, found %d and %d",
					cp.LeaseId, cp.Index, cp.Auditors, cp.UnavailableReports, auditors[kk], reports[kk])
			case cp.Status != types.CHECKPOINT_STATUS_PENDING && unsettled[kk] > 0:
				msg = fmt.Sprintf("verify: checkpoint %d/%d is %s with %d audits unsettled", cp.LeaseId, cp.Index, cp.Status, unsettled[kk])
			}
			return msg != "", nil
		})
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}
