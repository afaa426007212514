package jobview

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cosmos/cosmos-sdk/types/query"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// What became of a round commit's claim: released to the worker (entered a round whose
// next global is final), still held, or returned to the job (left out of the average:
// excluded, or not entered, or its job closed before the round's global was committed).
const (
	PayPaid     = "paid"
	PayPending  = "pending"
	PayReturned = "returned"
)

// Sync is a training-together job's `sync:` section and where its rounds stand.
type Sync struct {
	Every         uint32  `json:"every"`
	OuterLR       float64 `json:"outer_lr"`
	OuterMomentum float64 `json:"outer_momentum"`
	TopK          uint32  `json:"top_k"`
	// Round is the current open round (the highest that exists) of TotalRounds
	// (total_steps ÷ every).
	Round       uint64 `json:"round"`
	TotalRounds uint64 `json:"total_rounds"`
}

// Round is one round of a sync job.
type Round struct {
	Round uint64 `json:"round"`
	// State is OPEN, AGGREGATING, CHALLENGE or FINAL.
	State        string `json:"state"`
	OpenedHeight int64  `json:"opened_height"`
	// Deadline is the height at whose end the current state's deadline passes (commits
	// while OPEN, the aggregation while AGGREGATING); 0 afterwards.
	Deadline int64 `json:"deadline,omitempty"`
	// Workers are the slots that could commit (active when the round opened); Entered
	// those whose pseudo-gradients are in the average; Missed those that did not commit
	// in time; Excluded those convicted after committing.
	Workers    []uint32 `json:"workers"`
	Entered    []uint32 `json:"entered"`
	Missed     []uint32 `json:"missed"`
	Excluded   []uint32 `json:"excluded"`
	Aggregator string   `json:"aggregator,omitempty"`
	// NextGlobalRoot is the aggregated global's root, short hex; it may become final after
	// ChallengeDeadline.
	NextGlobalRoot    string        `json:"next_global_root,omitempty"`
	ChallengeDeadline int64         `json:"challenge_deadline,omitempty"`
	Commits           []RoundCommit `json:"commits"`
}

// RoundCommit is one worker's commit in a round and what became of its pay.
type RoundCommit struct {
	Worker          uint32 `json:"worker"`
	LeaseID         uint64 `json:"lease_id"`
	Provider        string `json:"provider"`
	CommittedHeight int64  `json:"committed_height"`
	// Claim is what the worker's round-end checkpoint claimed for the round.
	Claim          string `json:"claim"`
	Excluded       bool   `json:"excluded"`
	ExcludedReason string `json:"excluded_reason,omitempty"`
	// Pay is PayPaid, PayPending or PayReturned.
	Pay string `json:"pay"`
}

// syncOf is the summary of a sync job's spec and current round; nil for other jobs.
func syncOf(job markettypes.Job) *Sync {
	y := job.Spec.Sync
	if y == nil {
		return nil
	}
	out := &Sync{Every: y.Every, OuterLR: math.Ldexp(float64(y.OuterLrQ30), -30),
		OuterMomentum: math.Ldexp(float64(y.OuterMomentumQ30), -30), TopK: y.TopK, Round: job.Round}
	if y.Every != 0 {
		out.TotalRounds = job.Spec.TotalSteps / uint64(y.Every)
	}
	return out
}

// rounds reads every round of a sync job with its commits. A commit's claim is zeroed on
// chain once settled, so the claim shown then is its round-end checkpoint's (among cps:
// the commit's lease's checkpoint ending where the round ends).
func (s *Source) rounds(ctx context.Context, job markettypes.Job, cps []Checkpoint) ([]Round, error) {
	var rounds []markettypes.Round
	err := pages(func(p *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Market.Rounds(ctx, &markettypes.QueryRoundsRequest{JobId: job.Id, Pagination: p})
		if err != nil {
			return nil, err
		}
		rounds = append(rounds, resp.Rounds...)
		return resp.Pagination, nil
	})
	if err != nil {
		return nil, fmt.Errorf("rounds of job %d: %w", job.Id, err)
	}
	type leaseEnd struct {
		lease uint64
		end   uint64
	}
	claims := map[leaseEnd]string{}
	for _, cp := range cps {
		claims[leaseEnd{cp.LeaseID, cp.EndStep}] = cp.Claim
	}
	out := make([]Round, 0, len(rounds))
	for _, r := range rounds {
		resp, err := s.Market.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: job.Id, Round: r.Round})
		if err != nil {
			return nil, fmt.Errorf("commits of round %d of job %d: %w", r.Round, job.Id, err)
		}
		v := Round{Round: r.Round, State: strings.TrimPrefix(r.State.String(), "ROUND_STATE_"), OpenedHeight: r.OpenedHeight,
			Deadline: r.Deadline, Workers: orEmpty(r.Workers), Entered: orEmpty(r.Entered), Missed: orEmpty(r.Missed),
			Excluded: []uint32{}, Aggregator: r.Aggregator, ChallengeDeadline: r.ChallengeDeadline, Commits: []RoundCommit{}}
		if len(r.NextGlobalRoot) > 0 {
			v.NextGlobalRoot = hex.EncodeToString(r.NextGlobalRoot[:min(len(r.NextGlobalRoot), 6)])
		}
		end := job.Spec.Sync.Diloco().RoundStart(r.Round + 1)
		for _, c := range resp.Commits {
			rc := RoundCommit{Worker: c.Worker, LeaseID: c.LeaseId, Provider: c.Provider, CommittedHeight: c.CommittedHeight,
				Claim: c.Claim.String(), Excluded: c.Excluded, ExcludedReason: c.ExcludedReason, Pay: payOf(job, r, c)}
			if !c.Claim.IsPositive() {
				if claim, ok := claims[leaseEnd{c.LeaseId, end}]; ok {
					rc.Claim = claim
				}
			}
			if c.Excluded {
				v.Excluded = append(v.Excluded, c.Worker)
			}
			v.Commits = append(v.Commits, rc)
		}
		out = append(out, v)
	}
	return out, nil
}

// payOf is what became of commit c's claim in round r (x/market's payRound and
// settleRoundClaims): paid to an entered worker when the next global is final, returned
// for a worker left out, and returned when the job closed before the global was committed.
func payOf(job markettypes.Job, r markettypes.Round, c markettypes.RoundCommit) string {
	_, entered := slices.BinarySearch(r.Entered, c.Worker)
	switch {
	case c.Excluded:
		return PayReturned
	case r.State == markettypes.ROUND_STATE_FINAL && entered:
		return PayPaid
	case r.State == markettypes.ROUND_STATE_FINAL, r.State != markettypes.ROUND_STATE_OPEN && !entered:
		return PayReturned
	case job.State.IsTerminal() && r.State != markettypes.ROUND_STATE_CHALLENGE:
		return PayReturned
	}
	return PayPending
}

// orEmpty keeps an empty list a list in the JSON (the dashboard joins it).
func orEmpty(slots []uint32) []uint32 {
	if slots == nil {
		return []uint32{}
	}
	return slots
}
