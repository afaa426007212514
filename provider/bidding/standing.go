package bidding

import (
	"context"
	"sync"

	"github.com/depinchain/depinchain/provider/chain"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// standing is the operator's standing in x/stakingext as bidding needs it: why the chain
// refuses every bid of this provider (jailed, tombstoned, bond below the minimum), read
// once and kept until an event about the provider or its params may have changed it, so
// deciding on a job costs no provider query.
type standing struct {
	mu sync.Mutex
	// refused is why every bid would be refused; "" when none is.
	refused string
	// read says refused holds a reading taken after the last change (gen).
	read bool
	// gen counts the changes seen; a reading begun before one is stale when it ends.
	gen uint64
}

// changed records that the provider's record or x/stakingext's params changed.
func (s *standing) changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.read = false
}

// changesStanding says whether ev may change whether the chain accepts operator's bids:
// its status (jailed, unjailed, tombstoned), its bond or its GPU count (the minimum bond
// is per GPU), or the params that set the minimum.
func changesStanding(ev chain.Event, operator string) bool {
	switch e := ev.Message.(type) {
	case *stakingexttypes.EventProviderJailed:
		return e.Operator == operator
	case *stakingexttypes.EventProviderUnjailed:
		return e.Operator == operator
	case *stakingexttypes.EventProviderTombstoned:
		return e.Operator == operator
	case *stakingexttypes.EventProviderSlashed:
		return e.Operator == operator
	case *stakingexttypes.EventBonded:
		return e.Operator == operator
	case *stakingexttypes.EventUnbondingStarted:
		return e.Operator == operator
	case *stakingexttypes.EventProviderUpdated:
		return e.Operator == operator
	case *stakingexttypes.EventParamsUpdated:
		return true
	}
	return false
}

// refusal returns why the chain refuses every bid of the operator, "" when it may bid,
// reading the provider only when the cached standing is stale. Without a Bond querier
// nothing is read and nothing refused.
func (r *Role) refusal(ctx context.Context) (string, error) {
	if r.opts.Bond == nil {
		return "", nil
	}
	r.standing.mu.Lock()
	refused, read := r.standing.refused, r.standing.read
	r.standing.mu.Unlock()
	if read {
		return refused, nil
	}
	if err := r.refreshBond(ctx); err != nil {
		return "", err
	}
	r.standing.mu.Lock()
	defer r.standing.mu.Unlock()
	return r.standing.refused, nil
}

// noteStanding records a reading of the provider begun at change gen: why its bids are
// refused (nil: they are not). A new refusal is logged once, at ERROR, since the
// sidecar places no bid until the operator acts (or never again, when tombstoned).
func (r *Role) noteStanding(gen uint64, refusal error) {
	why := ""
	if refusal != nil {
		why = refusal.Error()
	}
	r.standing.mu.Lock()
	prev := r.standing.refused
	r.standing.refused = why
	r.standing.read = gen == r.standing.gen
	r.standing.mu.Unlock()
	switch {
	case why != "" && why != prev:
		r.log.Error("the chain refuses every bid of this provider; placing none until it accepts them again", "why", why)
	case why == "" && prev != "":
		r.log.Info("the chain accepts this provider's bids again")
	}
}
