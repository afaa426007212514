package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/market/types"
)

// queryMarket is a market with two owners' jobs in several states:
//
//	job 1 owner LEASED (lease 1, alice)   job 2 other LEASED (lease 2, alice)
//	job 3 owner CANCELLED (lease 3, bob, closed)
//	job 4 owner OPEN (bids of alice, bob, carol)   job 5 other OPEN
type queryMarket struct {
	*env
	other              sdk.AccAddress
	alice, bob, carol  sdk.AccAddress
	l1, l2, l3         types.Lease
	j1, j2, j3, j4, j5 uint64
}

func newQueryMarket(t *testing.T) *queryMarket {
	e := newEnv(t)
	m := &queryMarket{env: e, other: addr("other-owner")}
	e.Fund(t, m.other, ownerFunds)
	m.alice, m.bob, m.carol = e.registerProvider("alice"), e.registerProvider("bob"), e.registerProvider("carol")
	m.j1, m.l1 = e.leaseJob(m.alice, 1000)
	owner := e.owner
	e.owner = m.other
	m.j2, m.l2 = e.leaseJob(m.alice, 1100)
	e.owner = owner
	m.j3, m.l3 = e.leaseJob(m.bob, 1200)
	_, err := e.msg.CancelJob(e.Ctx, &types.MsgCancelJob{Owner: owner.String(), JobId: m.j3})
	require.NoError(t, err)
	m.j4 = e.submitJob()
	e.bid(m.alice, m.j4, 1000)
	e.bid(m.bob, m.j4, 900)
	e.bid(m.carol, m.j4, 800)
	e.owner = m.other
	m.j5 = e.submitJob()
	e.owner = owner
	return m
}

func jobIDs(jobs []types.Job) []uint64 {
	ids := []uint64{}
	for _, j := range jobs {
		ids = append(ids, j.Id)
	}
	return ids
}

func leaseIDs(leases []types.Lease) []uint64 {
	ids := []uint64{}
	for _, l := range leases {
		ids = append(ids, l.Id)
	}
	return ids
}

func TestQueryParamsAndJob(t *testing.T) {
	m := newQueryMarket(t)
	ctx := m.queryCtx()
	params, err := m.query.Params(ctx, &types.QueryParamsRequest{})
	require.NoError(t, err)
	want := types.DefaultParams()
	want.DefaultCustody = types.CustodySpec{} // the fixture runs no storage holders
	require.Equal(t, want, params.Params)

	res, err := m.query.Job(ctx, &types.QueryJobRequest{JobId: m.j4})
	require.NoError(t, err)
	require.Equal(t, m.job(m.j4), res.Job)

	// A leased job is shown as stored: time without checkpoints costs nothing.
	m.advance(10)
	res, err = m.query.Job(m.queryCtx(), &types.QueryJobRequest{JobId: m.j1})
	require.NoError(t, err)
	require.Equal(t, m.job(m.j1), res.Job)
	require.Equal(t, coin(jobDeposit), res.Job.Escrow)

	_, err = m.query.Job(ctx, &types.QueryJobRequest{JobId: 99})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = m.query.Job(ctx, nil)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

func TestQueryJobsFilters(t *testing.T) {
	m := newQueryMarket(t)
	cases := []struct {
		name string
		req  *types.QueryJobsRequest
		want []uint64
	}{
		{"all", &types.QueryJobsRequest{}, []uint64{m.j1, m.j2, m.j3, m.j4, m.j5}},
		{"by owner", &types.QueryJobsRequest{Owner: m.owner.String()}, []uint64{m.j1, m.j3, m.j4}},
		{"by other owner", &types.QueryJobsRequest{Owner: m.other.String()}, []uint64{m.j2, m.j5}},
		{"by state open", &types.QueryJobsRequest{State: types.JOB_STATE_OPEN}, []uint64{m.j4, m.j5}},
		{"by state leased", &types.QueryJobsRequest{State: types.JOB_STATE_LEASED}, []uint64{m.j1, m.j2}},
		{"by state cancelled", &types.QueryJobsRequest{State: types.JOB_STATE_CANCELLED}, []uint64{m.j3}},
		{"by state without jobs", &types.QueryJobsRequest{State: types.JOB_STATE_COMPLETED}, []uint64{}},
		{"by owner and state", &types.QueryJobsRequest{Owner: m.owner.String(), State: types.JOB_STATE_OPEN}, []uint64{m.j4}},
		{"by owner and state, other owner", &types.QueryJobsRequest{Owner: m.other.String(), State: types.JOB_STATE_LEASED}, []uint64{m.j2}},
		{"by owner without jobs", &types.QueryJobsRequest{Owner: addr("nobody").String()}, []uint64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := m.query.Jobs(m.queryCtx(), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, jobIDs(res.Jobs))
		})
	}
}

// pageThrough follows next_key with pages of limit and returns the pages and the total
// reported on the first page.
func pageThrough[T any](t *testing.T, limit uint64, fetch func(*query.PageRequest) ([]T, *query.PageResponse, error)) ([][]T, uint64) {
	t.Helper()
	var pages [][]T
	req := &query.PageRequest{Limit: limit, CountTotal: true}
	var total uint64
	for i := 0; ; i++ {
		require.Less(t, i, 20, "pagination does not end")
		items, page, err := fetch(req)
		require.NoError(t, err)
		if i == 0 {
			total = page.Total
		}
		pages = append(pages, items)
		if page.NextKey == nil {
			return pages, total
		}
		req = &query.PageRequest{Key: page.NextKey, Limit: limit}
	}
}

func TestQueryJobsPagination(t *testing.T) {
	m := newQueryMarket(t)
	cases := []struct {
		name  string
		req   types.QueryJobsRequest
		pages [][]uint64
		total uint64
	}{
		{"all", types.QueryJobsRequest{}, [][]uint64{{m.j1, m.j2}, {m.j3, m.j4}, {m.j5}}, 5},
		{"by owner", types.QueryJobsRequest{Owner: m.owner.String()}, [][]uint64{{m.j1, m.j3}, {m.j4}}, 3},
		{"by state", types.QueryJobsRequest{State: types.JOB_STATE_LEASED}, [][]uint64{{m.j1, m.j2}}, 2},
		{"by owner and state", types.QueryJobsRequest{Owner: m.owner.String(), State: types.JOB_STATE_LEASED}, [][]uint64{{m.j1}}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pages, total := pageThrough(t, 2, func(p *query.PageRequest) ([]types.Job, *query.PageResponse, error) {
				req := tc.req
				req.Pagination = p
				res, err := m.query.Jobs(m.queryCtx(), &req)
				if err != nil {
					return nil, nil, err
				}
				return res.Jobs, res.Pagination, nil
			})
			var got [][]uint64
			for _, p := range pages {
				got = append(got, jobIDs(p))
			}
			require.Equal(t, tc.pages, got)
			require.Equal(t, tc.total, total)
		})
	}

	// Offset pagination on an index.
	res, err := m.query.Jobs(m.queryCtx(), &types.QueryJobsRequest{Owner: m.owner.String(), Pagination: &query.PageRequest{Offset: 1, Limit: 1}})
	require.NoError(t, err)
	require.Equal(t, []uint64{m.j3}, jobIDs(res.Jobs))
	require.NotNil(t, res.Pagination.NextKey)
}

func TestQueryInvalidRequests(t *testing.T) {
	m := newQueryMarket(t)
	keyAndOffset := &query.PageRequest{Key: []byte{0, 0, 0, 0, 0, 0, 0, 1}, Offset: 1}
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"job: nil request", func() error { _, err := m.query.Job(m.queryCtx(), nil); return err }, codes.InvalidArgument},
		{"job: unknown", func() error {
			_, err := m.query.Job(m.queryCtx(), &types.QueryJobRequest{JobId: 42})
			return err
		}, codes.NotFound},
		{"jobs: nil request", func() error { _, err := m.query.Jobs(m.queryCtx(), nil); return err }, codes.InvalidArgument},
		{"jobs: malformed owner", func() error {
			_, err := m.query.Jobs(m.queryCtx(), &types.QueryJobsRequest{Owner: "depin1bogus"})
			return err
		}, codes.InvalidArgument},
		{"jobs: unknown state", func() error {
			_, err := m.query.Jobs(m.queryCtx(), &types.QueryJobsRequest{State: 99})
			return err
		}, codes.InvalidArgument},
		{"jobs: key and offset", func() error {
			_, err := m.query.Jobs(m.queryCtx(), &types.QueryJobsRequest{Pagination: keyAndOffset})
			return err
		}, codes.InvalidArgument},
		{"jobs by owner: key and offset", func() error {
			_, err := m.query.Jobs(m.queryCtx(), &types.QueryJobsRequest{Owner: m.owner.String(), Pagination: keyAndOffset})
			return err
		}, codes.InvalidArgument},
		{"jobs by owner: malformed key", func() error {
			_, err := m.query.Jobs(m.queryCtx(), &types.QueryJobsRequest{Owner: m.owner.String(), Pagination: &query.PageRequest{Key: []byte{1, 2, 3}}})
			return err
		}, codes.InvalidArgument},
		{"bids: nil request", func() error { _, err := m.query.Bids(m.queryCtx(), nil); return err }, codes.InvalidArgument},
		{"bids: unknown job", func() error {
			_, err := m.query.Bids(m.queryCtx(), &types.QueryBidsRequest{JobId: 42})
			return err
		}, codes.NotFound},
		{"bids: key and offset", func() error {
			_, err := m.query.Bids(m.queryCtx(), &types.QueryBidsRequest{JobId: m.j4, Pagination: keyAndOffset})
			return err
		}, codes.InvalidArgument},
		{"lease: nil request", func() error { _, err := m.query.Lease(m.queryCtx(), nil); return err }, codes.InvalidArgument},
		{"lease: unknown", func() error {
			_, err := m.query.Lease(m.queryCtx(), &types.QueryLeaseRequest{LeaseId: 42})
			return err
		}, codes.NotFound},
		{"leases: nil request", func() error { _, err := m.query.Leases(m.queryCtx(), nil); return err }, codes.InvalidArgument},
		{"leases: malformed provider", func() error {
			_, err := m.query.Leases(m.queryCtx(), &types.QueryLeasesRequest{Provider: "depin1bogus"})
			return err
		}, codes.InvalidArgument},
		{"leases by provider: key and offset", func() error {
			_, err := m.query.Leases(m.queryCtx(), &types.QueryLeasesRequest{Provider: m.alice.String(), Pagination: keyAndOffset})
			return err
		}, codes.InvalidArgument},
		{"leases: key and offset", func() error {
			_, err := m.query.Leases(m.queryCtx(), &types.QueryLeasesRequest{Pagination: keyAndOffset})
			return err
		}, codes.InvalidArgument},
		{"escrow: nil request", func() error { _, err := m.query.Escrow(m.queryCtx(), nil); return err }, codes.InvalidArgument},
		{"escrow: unknown job", func() error {
			_, err := m.query.Escrow(m.queryCtx(), &types.QueryEscrowRequest{JobId: 42})
			return err
		}, codes.NotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			require.Equal(t, tc.want, status.Code(err), err.Error())
		})
	}
}

func TestQueryBids(t *testing.T) {
	m := newQueryMarket(t)
	res, err := m.query.Bids(m.queryCtx(), &types.QueryBidsRequest{JobId: m.j4})
	require.NoError(t, err)
	require.Len(t, res.Bids, 3)
	seen := map[string]int64{}
	for _, b := range res.Bids {
		require.Equal(t, m.j4, b.JobId)
		seen[b.Provider] = b.PricePerGpuHour.Amount.Int64()
	}
	require.Equal(t, map[string]int64{m.alice.String(): 1000, m.bob.String(): 900, m.carol.String(): 800}, seen)

	pages, total := pageThrough(t, 2, func(p *query.PageRequest) ([]types.Bid, *query.PageResponse, error) {
		res, err := m.query.Bids(m.queryCtx(), &types.QueryBidsRequest{JobId: m.j4, Pagination: p})
		if err != nil {
			return nil, nil, err
		}
		return res.Bids, res.Pagination, nil
	})
	require.Equal(t, uint64(3), total)
	require.Len(t, pages, 2)
	require.Len(t, pages[0], 2)
	require.Len(t, pages[1], 1)

	res, err = m.query.Bids(m.queryCtx(), &types.QueryBidsRequest{JobId: m.j1})
	require.NoError(t, err)
	require.Empty(t, res.Bids, "a closed auction has no bids left")
	res, err = m.query.Bids(m.queryCtx(), &types.QueryBidsRequest{JobId: m.j5})
	require.NoError(t, err)
	require.Empty(t, res.Bids, "bids of other jobs are not listed")
}

func TestQueryLeasesFilters(t *testing.T) {
	m := newQueryMarket(t)
	cases := []struct {
		name string
		req  *types.QueryLeasesRequest
		want []uint64
	}{
		{"all", &types.QueryLeasesRequest{}, []uint64{m.l1.Id, m.l2.Id, m.l3.Id}},
		{"active only", &types.QueryLeasesRequest{ActiveOnly: true}, []uint64{m.l1.Id, m.l2.Id}},
		{"by provider", &types.QueryLeasesRequest{Provider: m.alice.String()}, []uint64{m.l1.Id, m.l2.Id}},
		{"by provider, closed lease included", &types.QueryLeasesRequest{Provider: m.bob.String()}, []uint64{m.l3.Id}},
		{"by provider, active only", &types.QueryLeasesRequest{Provider: m.bob.String(), ActiveOnly: true}, []uint64{}},
		{"by job", &types.QueryLeasesRequest{JobId: m.j3}, []uint64{m.l3.Id}},
		{"by job, active only", &types.QueryLeasesRequest{JobId: m.j3, ActiveOnly: true}, []uint64{}},
		{"by job and provider", &types.QueryLeasesRequest{JobId: m.j2, Provider: m.alice.String()}, []uint64{m.l2.Id}},
		{"by job and another provider", &types.QueryLeasesRequest{JobId: m.j1, Provider: m.bob.String()}, []uint64{}},
		{"by provider without leases", &types.QueryLeasesRequest{Provider: m.carol.String()}, []uint64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := m.query.Leases(m.queryCtx(), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, leaseIDs(res.Leases))
		})
	}

	pages, total := pageThrough(t, 1, func(p *query.PageRequest) ([]types.Lease, *query.PageResponse, error) {
		res, err := m.query.Leases(m.queryCtx(), &types.QueryLeasesRequest{Provider: m.alice.String(), Pagination: p})
		if err != nil {
			return nil, nil, err
		}
		return res.Leases, res.Pagination, nil
	})
	require.Equal(t, uint64(2), total)
	require.Len(t, pages, 2)
	require.Equal(t, []uint64{m.l1.Id}, leaseIDs(pages[0]))
	require.Equal(t, []uint64{m.l2.Id}, leaseIDs(pages[1]))
}

func TestQueryLeaseShowsClaimedPay(t *testing.T) {
	m := newQueryMarket(t)
	m.advance(25)
	require.True(t, m.queryLease(m.l2.Id).Pending.IsZero(), "no checkpoint, no pay")
	claim, err := m.Market.OnCheckpointSubmitted(m.Ctx, m.l2.Id, 100)
	require.NoError(t, err)
	lease := m.queryLease(m.l2.Id)
	require.Equal(t, payFor(1100, 2, testRate, 100), lease.Pending.Amount.Int64())
	require.Equal(t, claim, lease.Pending)
	require.Equal(t, m.lease(m.l2.Id), lease)
	closed := m.queryLease(m.l3.Id)
	require.Equal(t, m.lease(m.l3.Id), closed, "a closed lease is shown as stored")
}

func TestQueryEscrowAddsUp(t *testing.T) {
	m := newQueryMarket(t)
	m.advance(12)
	claim, err := m.Market.OnCheckpointSubmitted(m.Ctx, m.l1.Id, 100)
	require.NoError(t, err)
	require.NoError(t, m.Market.OnCheckpointFinal(m.Ctx, m.l1.Id, claim, 100, []byte("h"), "", ""))
	m.advance(6)
	_, err = m.msg.WithdrawEarnings(m.Ctx, &types.MsgWithdrawEarnings{Provider: m.alice.String(), LeaseIds: []uint64{m.l1.Id}})
	require.NoError(t, err)
	m.advance(6)
	claim2, err := m.Market.OnCheckpointSubmitted(m.Ctx, m.l1.Id, 200)
	require.NoError(t, err)

	res := m.queryEscrow(m.j1)
	require.Equal(t, m.j1, res.JobId)
	require.Equal(t, coin(jobDeposit), res.Deposited)
	require.Equal(t, claim, res.Withdrawn)
	require.True(t, res.Withdrawable.IsZero())
	require.Equal(t, claim2, res.Pending)
	require.Equal(t, coin(jobDeposit-payFor(1000, 2, testRate, 200)), res.Unspent)

	// A cancelled job: what it does not show any more went back to its owner.
	cancelled := m.queryEscrow(m.j3)
	require.True(t, cancelled.Unspent.IsZero())
	var refunded sdk.Coin
	for _, ev := range typedEvents[*types.EventJobClosed](m.env) {
		if ev.JobId == m.j3 {
			refunded = ev.Refunded
		}
	}
	require.True(t, refunded.IsPositive())
	require.Equal(t, cancelled.Deposited,
		cancelled.Unspent.Add(cancelled.Pending).Add(cancelled.Withdrawable).Add(cancelled.Withdrawn).Add(refunded),
		"deposited = unspent + pending + withdrawable + withdrawn + refunded to the owner")
}
