package keeper

import (
	"context"
	"fmt"
	"slices"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/market/types"
)

// RoundsInvariant: every round belongs to a sync job whose current round is the highest
// one; a round is in RoundDeadlines exactly at its deadline (and every entry is a
// round's); entered and missed are sorted subsets of the round's workers, entered only
// of committed workers (not excluded while its global is not final); a commit belongs
// to an existing round, is in its workers and claims at most its `every` steps at its
// lease's price.
func RoundsInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		broken := func(format string, args ...any) (string, bool) {
			return "market: " + fmt.Sprintf(format, args...), true
		}
		highest := map[uint64]uint64{}
		var msg string
		err := k.Rounds.Walk(ctx, nil, func(key collections.Pair[uint64, uint64], r types.Round) (bool, error) {
			job, err := k.GetJob(ctx, r.JobId)
			if err != nil || job.Spec.Sync == nil || key.K1() != r.JobId || key.K2() != r.Round {
				msg = fmt.Sprintf("round %d/%d has no sync job or a wrong key", r.JobId, r.Round)
				return true, nil
			}
			highest[r.JobId] = max(highest[r.JobId], r.Round)
			if r.Deadline != 0 {
				has, err := k.RoundDeadlines.Has(ctx, collections.Join3(r.Deadline, r.JobId, r.Round))
				if err != nil || !has {
					msg = fmt.Sprintf("round %d/%d has deadline %d but no index entry", r.JobId, r.Round, r.Deadline)
					return true, nil
				}
			}
			if !slices.IsSorted(r.Workers) || !slices.IsSorted(r.Entered) {
				msg = fmt.Sprintf("round %d/%d: workers or entered not sorted", r.JobId, r.Round)
				return true, nil
			}
			for _, w := range append(slices.Clone(r.Entered), r.Missed...) {
				if _, ok := slices.BinarySearch(r.Workers, w); !ok {
					msg = fmt.Sprintf("round %d/%d: worker %d entered or missed but not one of its workers", r.JobId, r.Round, w)
					return true, nil
				}
			}
			for _, w := range r.Entered {
				c, err := k.GetRoundCommit(ctx, r.JobId, r.Round, w)
				if err != nil || (c.Excluded && r.State != types.ROUND_STATE_FINAL) {
					msg = fmt.Sprintf("round %d/%d: worker %d entered without a live commit", r.JobId, r.Round, w)
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err.Error(), true
		}
		if msg != "" {
			return broken("%s", msg)
		}
		for jobID, r := range highest {
			job, err := k.GetJob(ctx, jobID)
			if err != nil || job.Round != r {
				return broken("job %d's round is %d, its highest round %d", jobID, job.Round, r)
			}
		}
		err = k.RoundDeadlines.Walk(ctx, nil, func(key collections.Triple[int64, uint64, uint64]) (bool, error) {
			r, err := k.GetRound(ctx, key.K2(), key.K3())
			if err != nil || r.Deadline != key.K1() {
				msg = fmt.Sprintf("round deadline entry (%d, %d, %d) matches no round", key.K1(), key.K2(), key.K3())
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return err.Error(), true
		}
		if msg != "" {
			return broken("%s", msg)
		}
		err = k.RoundCommits.Walk(ctx, nil, func(_ collections.Triple[uint64, uint64, uint32], c types.RoundCommit) (bool, error) {
			r, err := k.GetRound(ctx, c.JobId, c.Round)
			if err != nil {
				msg = fmt.Sprintf("commit of worker %d in round %d/%d has no round", c.Worker, c.JobId, c.Round)
				return true, nil
			}
			if _, ok := slices.BinarySearch(r.Workers, c.Worker); !ok {
				msg = fmt.Sprintf("commit of worker %d in round %d/%d is not one of its workers", c.Worker, c.JobId, c.Round)
				return true, nil
			}
			lease, err := k.GetLease(ctx, c.LeaseId)
			job, jerr := k.GetJob(ctx, c.JobId)
			if err != nil || jerr != nil {
				msg = fmt.Sprintf("commit of worker %d in round %d/%d has no lease or job", c.Worker, c.JobId, c.Round)
				return true, nil
			}
			most := types.PayForSteps(lease.PricePerGpuHour.Amount, lease.Gpus, lease.StepsPerHour, uint64(job.Spec.Sync.Every)).AddRaw(1)
			if !c.Claim.Amount.IsNil() && c.Claim.Amount.GT(most) {
				msg = fmt.Sprintf("commit of worker %d in round %d/%d claims %s, more than its %d steps' pay", c.Worker, c.JobId, c.Round, c.Claim, job.Spec.Sync.Every)
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return err.Error(), true
		}
		if msg != "" {
			return broken("%s", msg)
		}
		return "", false
	}
}
