package jobview

import (
	"context"
	"fmt"
	"sort"

	"github.com/cosmos/cosmos-sdk/types/query"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// JobRow is one line of the jobs list.
type JobRow struct {
	ID          uint64 `json:"id"`
	Name        string `json:"name"`
	Owner       string `json:"owner"`
	State       string `json:"state"`
	Kind        string `json:"kind"`
	Workers     uint32 `json:"workers"`
	Step        uint64 `json:"step"` // the slowest worker's step
	TotalSteps  uint64 `json:"total_steps"`
	Deposited   string `json:"deposited"`
	CreatedAt   int64  `json:"created_height"`
	CloseReason string `json:"close_reason,omitempty"`
}

// Jobs lists jobs, filtered by owner and by state (a JobState name such as
// JOB_STATE_OPEN, or "" for all), newest first.
func (s *Source) Jobs(ctx context.Context, owner, state string) ([]JobRow, error) {
	var st markettypes.JobState
	if state != "" {
		v, ok := markettypes.JobState_value[state]
		if !ok {
			return nil, fmt.Errorf("unknown job state %q", state)
		}
		st = markettypes.JobState(v)
	}
	out := []JobRow{}
	err := pages(func(p *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Market.Jobs(ctx, &markettypes.QueryJobsRequest{Owner: owner, State: st, Pagination: p})
		if err != nil {
			return nil, err
		}
		for _, j := range resp.Jobs {
			out = append(out, jobRow(j))
		}
		return resp.Pagination, nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, err
}

func jobRow(j markettypes.Job) JobRow {
	r := JobRow{ID: j.Id, Name: j.Spec.Name, Owner: j.Owner, State: j.State.String(), Kind: j.Spec.Workload.Kind.String(),
		Workers: j.Spec.Workers, TotalSteps: j.Spec.TotalSteps, Deposited: j.Deposited.String(), CreatedAt: j.CreatedHeight,
		CloseReason: j.CloseReason}
	for i, p := range j.Progress {
		if i == 0 || p.Step < r.Step {
			r.Step = p.Step
		}
	}
	return r
}

// ProviderView is a provider as a job owner judges it.
type ProviderView struct {
	Operator     string          `json:"operator"`
	Moniker      string          `json:"moniker"`
	Endpoint     string          `json:"endpoint"`
	Region       string          `json:"region"`
	Status       string          `json:"status"`
	GPUs         []GPU           `json:"gpus"`
	Bond         string          `json:"bond"`
	Locked       string          `json:"collateral_locked"`
	Completed    uint64          `json:"leases_completed"`
	Failed       uint64          `json:"leases_failed"`
	Slashes      uint64          `json:"slashes"`
	Registered   int64           `json:"registered_height"`
	ActiveLeases []Lease         `json:"active_leases"`
	Locks        []CollateralRef `json:"locks"`
}

// GPU is a kind of card and how many of it.
type GPU struct {
	Model   string `json:"model"`
	VRAMMiB uint64 `json:"vram_mib"`
	Count   uint32 `json:"count"`
}

// CollateralRef is collateral locked for one purpose (a lease, a bid).
type CollateralRef struct {
	Ref    string `json:"ref"`
	Amount string `json:"amount"`
}

// Provider assembles the view of a provider.
func (s *Source) Provider(ctx context.Context, operator string) (*ProviderView, error) {
	pr, err := s.Staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: operator})
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", operator, err)
	}
	p := pr.Provider
	v := &ProviderView{Operator: p.Operator, Moniker: p.Moniker, Endpoint: p.Endpoint, Region: p.Region,
		Status: p.Status.String(), Bond: p.Bond.String(), Locked: p.Locked.String(),
		Completed: p.Reputation.LeasesCompleted, Failed: p.Reputation.LeasesFailed, Slashes: p.Reputation.Slashes,
		Registered: p.RegisteredHeight, GPUs: []GPU{}, ActiveLeases: []Lease{}, Locks: []CollateralRef{}}
	for _, g := range p.Gpus {
		v.GPUs = append(v.GPUs, GPU{Model: g.Model, VRAMMiB: g.VramMib, Count: g.Count})
	}
	leases, err := s.leases(ctx, &markettypes.QueryLeasesRequest{Provider: operator, ActiveOnly: true})
	if err != nil {
		return nil, fmt.Errorf("leases of %s: %w", operator, err)
	}
	for _, l := range leases {
		v.ActiveLeases = append(v.ActiveLeases, leaseOf(l))
	}
	err = pages(func(pg *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Staking.Locks(ctx, &stakingexttypes.QueryLocksRequest{Operator: operator, Pagination: pg})
		if err != nil {
			return nil, err
		}
		for _, l := range resp.Locks {
			v.Locks = append(v.Locks, CollateralRef{Ref: l.Ref, Amount: l.Amount.String()})
		}
		return resp.Pagination, nil
	})
	if err != nil {
		return nil, fmt.Errorf("collateral of %s: %w", operator, err)
	}
	return v, nil
}

// Network is the market at a glance.
type Network struct {
	OpenJobs       []JobRow      `json:"open_jobs"`
	ActiveLeases   []Lease       `json:"active_leases"`
	GPUsByModel    []GPU         `json:"gpus_by_model"`
	Providers      []ProviderRow `json:"providers"`
	RecentDisputes []Dispute     `json:"recent_disputes"`
}

// ProviderRow is one line of the providers list.
type ProviderRow struct {
	Operator string `json:"operator"`
	Moniker  string `json:"moniker"`
	Status   string `json:"status"`
	GPUs     uint32 `json:"gpus"`
	Bond     string `json:"bond"`
}

// Network assembles the network view; at most recent disputes are listed,
// newest first.
func (s *Source) Network(ctx context.Context, recent int) (*Network, error) {
	n := &Network{ActiveLeases: []Lease{}, GPUsByModel: []GPU{}, Providers: []ProviderRow{}, RecentDisputes: []Dispute{}}
	var err error
	if n.OpenJobs, err = s.Jobs(ctx, "", markettypes.JOB_STATE_OPEN.String()); err != nil {
		return nil, err
	}
	leases, err := s.leases(ctx, &markettypes.QueryLeasesRequest{ActiveOnly: true})
	if err != nil {
		return nil, fmt.Errorf("active leases: %w", err)
	}
	for _, l := range leases {
		n.ActiveLeases = append(n.ActiveLeases, leaseOf(l))
	}
	byModel := map[string]*GPU{}
	err = pages(func(pg *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Staking.Providers(ctx, &stakingexttypes.QueryProvidersRequest{Pagination: pg})
		if err != nil {
			return nil, err
		}
		for _, p := range resp.Providers {
			row := ProviderRow{Operator: p.Operator, Moniker: p.Moniker, Status: p.Status.String(), Bond: p.Bond.String()}
			for _, g := range p.Gpus {
				row.GPUs += g.Count
				m := byModel[g.Model]
				if m == nil {
					m = &GPU{Model: g.Model, VRAMMiB: g.VramMib}
					byModel[g.Model] = m
				}
				m.Count += g.Count
			}
			n.Providers = append(n.Providers, row)
		}
		return resp.Pagination, nil
	})
	if err != nil {
		return nil, fmt.Errorf("providers: %w", err)
	}
	for _, g := range byModel {
		n.GPUsByModel = append(n.GPUsByModel, *g)
	}
	sort.Slice(n.GPUsByModel, func(i, j int) bool { return n.GPUsByModel[i].Model < n.GPUsByModel[j].Model })
	resp, err := s.Verify.Challenges(ctx, &verifytypes.QueryChallengesRequest{Pagination: &query.PageRequest{Limit: uint64(recent), Reverse: true}})
	if err != nil {
		return nil, fmt.Errorf("disputes: %w", err)
	}
	for _, ch := range resp.Challenges {
		n.RecentDisputes = append(n.RecentDisputes, disputeOf(ch))
	}
	return n, nil
}
