package types

import (
	"fmt"
	sdk "github.com/cosmos/cosmos-sdk/types"
)

// DefaultGenesis is an empty market with default params.
func DefaultGenesis() *GenesisState {
	return &GenesisState{Params: DefaultParams(), NextJobId: 1, NextLeaseId: 1, NextBidSequence: 1}
}

// Validate checks the genesis for internal consistency: params, unique ids below the
// next-id counters, bids and leases that point at existing jobs, and coins in the market denom.
func (gs GenesisState) Validate() error {
	if err := gs.Params.Validate(); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	denom := gs.Params.Denom
	jobs := make(map[uint64]Job, len(gs.Jobs))
	for _, j := range gs.Jobs {
		if j.Id == 0 || j.Id >= gs.NextJobId {
			return fmt.Errorf("job %d: id must be in [1, next_job_id=%d)", j.Id, gs.NextJobId)
		}
		if _, dup := jobs[j.Id]; dup {
			return fmt.Errorf("job %d: duplicate id", j.Id)
		}
		if err := j.Spec.ValidateStateless(); err != nil {
			return fmt.Errorf("job %d: %w", j.Id, err)
		}
		if j.Escrow.Denom != denom || j.Escrow.IsNegative() || j.Deposited.Denom != denom {
			return fmt.Errorf("job %d: escrow and deposited must be non-negative %s", j.Id, denom)
		}
		// Jobs from before audits (or storage pay) existed have none of these fields (empty denom).
		for name, c := range map[string]sdk.Coin{
			"audit_fees": j.AuditFees, "compensation": j.Compensation, "storage_escrow": j.StorageEscrow, "storage_fees": j.StorageFees,
		} {
			if c.Denom != "" && (c.Denom != denom || c.Amount.IsNil() || c.IsNegative()) {
				return fmt.Errorf("job %d: %s must be a non-negative %s amount, got %s", j.Id, name, denom, c)
			}
		}
		jobs[j.Id] = j
	}
	type bidKey struct {
		job      uint64
		provider string
	}
	bids := map[bidKey]bool{}
	for _, b := range gs.Bids {
		j, ok := jobs[b.JobId]
		if !ok {
			return fmt.Errorf("bid of %s: unknown job %d", b.Provider, b.JobId)
		}
		if j.State != JOB_STATE_OPEN {
			return fmt.Errorf("bid of %s on job %d: job is not open", b.Provider, b.JobId)
		}
		k := bidKey{b.JobId, b.Provider}
		if bids[k] {
			return fmt.Errorf("bid of %s on job %d: duplicate", b.Provider, b.JobId)
		}
		bids[k] = true
		if b.Sequence == 0 || b.Sequence >= gs.NextBidSequence {
			return fmt.Errorf("bid of %s on job %d: sequence must be in [1, next_bid_sequence)", b.Provider, b.JobId)
		}
	}
	leases := map[uint64]bool{}
	for _, l := range gs.Leases {
		if l.Id == 0 || l.Id >= gs.NextLeaseId {
			return fmt.Errorf("lease %d: id must be in [1, next_lease_id=%d)", l.Id, gs.NextLeaseId)
		}
		if leases[l.Id] {
			return fmt.Errorf("lease %d: duplicate id", l.Id)
		}
		leases[l.Id] = true
		if _, ok := jobs[l.JobId]; !ok {
			return fmt.Errorf("lease %d: unknown job %d", l.Id, l.JobId)
		}
		if l.Pending.IsNegative() || l.Committed.IsNegative() || l.Withdrawable.IsNegative() || l.Pending.IsLT(l.Committed) {
			return fmt.Errorf("lease %d: balances must be non-negative with committed <= pending", l.Id)
		}
	}
	for _, h := range gs.BlockHashes {
		if h.Height <= 0 || len(h.Hash) == 0 {
			return fmt.Errorf("block hash at height %d: must have a positive height and a hash", h.Height)
		}
	}
	return validateRounds(gs, jobs, leases)
}

// validateRounds checks that every round belongs to a sync job, once, with a known
// state, and every commit to an existing round and lease, once.
func validateRounds(gs GenesisState, jobs map[uint64]Job, leases map[uint64]bool) error {
	type roundKey struct{ job, round uint64 }
	rounds := map[roundKey]bool{}
	for _, r := range gs.Rounds {
		j, ok := jobs[r.JobId]
		if !ok || j.Spec.Sync == nil {
			return fmt.Errorf("round %d of job %d: no such sync job", r.Round, r.JobId)
		}
		k := roundKey{r.JobId, r.Round}
		if rounds[k] {
			return fmt.Errorf("round %d of job %d: duplicate", r.Round, r.JobId)
		}
		rounds[k] = true
		if _, ok := RoundState_name[int32(r.State)]; !ok || r.State == ROUND_STATE_UNSPECIFIED {
			return fmt.Errorf("round %d of job %d: invalid state %d", r.Round, r.JobId, r.State)
		}
	}
	type commitKey struct {
		job, round uint64
		worker     uint32
	}
	commits := map[commitKey]bool{}
	for _, c := range gs.RoundCommits {
		if !rounds[roundKey{c.JobId, c.Round}] {
			return fmt.Errorf("commit of worker %d in round %d of job %d: no such round", c.Worker, c.Round, c.JobId)
		}
		if !leases[c.LeaseId] {
			return fmt.Errorf("commit of worker %d in round %d of job %d: unknown lease %d", c.Worker, c.Round, c.JobId, c.LeaseId)
		}
		k := commitKey{c.JobId, c.Round, c.Worker}
		if commits[k] {
			return fmt.Errorf("commit of worker %d in round %d of job %d: duplicate", c.Worker, c.Round, c.JobId)
		}
		commits[k] = true
	}
	return nil
}
