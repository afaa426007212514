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
		for _, inv := range []Invariant{BondsInvariant(k), OpenChallengesInvariant(k)} {
			if msg, broken := inv(ctx); broken {
				return msg, true
			}
		}
		return "", false
	}
}

// BondsInvariant: the module account holds exactly the bonds of unresolved challenges.
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
		balance := k.bankKeeper.GetBalance(ctx, k.moduleAddress(), params.ChallengerBond.Denom)
		if !balance.Amount.Equal(held) {
			return fmt.Sprintf("verify: module balance %s != open challenge bonds %s", balance, held), true
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
