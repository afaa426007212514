package keeper

import (
	"context"
	"errors"

	"cosmossdk.io/collections"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

type queryServer struct {
	Keeper
}

var _ types.QueryServer = queryServer{}

// NewQueryServerImpl returns the x/market Query service.
func NewQueryServerImpl(k Keeper) types.QueryServer { return queryServer{Keeper: k} }

func (q queryServer) Params(ctx context.Context, _ *types.QueryParamsRequest) (*types.QueryParamsResponse, error) {
	params, err := q.Keeper.Params.Get(ctx)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryParamsResponse{Params: params}, nil
}

func (q queryServer) Job(ctx context.Context, req *types.QueryJobRequest) (*types.QueryJobResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	job, err := q.GetJob(ctx, req.JobId)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	return &types.QueryJobResponse{Job: job}, nil
}

func (q queryServer) Jobs(ctx context.Context, req *types.QueryJobsRequest) (*types.QueryJobsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	var owner []byte
	if req.Owner != "" {
		var err error
		if owner, err = q.addressCodec.StringToBytes(req.Owner); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "owner: invalid address %q", req.Owner)
		}
	}
	if _, ok := types.JobState_name[int32(req.State)]; !ok {
		return nil, status.Errorf(codes.InvalidArgument, "state: unknown job state %d", req.State)
	}
	if err := checkPageRequest(req.Pagination); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var (
		jobs    []types.Job
		pageRes *query.PageResponse
		err     error
	)
	load := func(id uint64) (types.Job, bool, error) {
		job, err := q.Keeper.Jobs.Get(ctx, id)
		return job, err == nil && (req.State == types.JOB_STATE_UNSPECIFIED || job.State == req.State), err
	}
	switch {
	case owner != nil:
		jobs, pageRes, err = paginateIndex(ctx, q.Keeper.Jobs.Indexes.Owner, owner, req.Pagination, load)
	case req.State != types.JOB_STATE_UNSPECIFIED:
		jobs, pageRes, err = paginateIndex(ctx, q.Keeper.Jobs.Indexes.State, int32(req.State), req.Pagination, load)
	default:
		jobs, pageRes, err = query.CollectionPaginate(ctx, q.Keeper.Jobs, req.Pagination,
			func(_ uint64, job types.Job) (types.Job, error) { return job, nil })
	}
	if err != nil {
		return nil, pageError(err)
	}
	return &types.QueryJobsResponse{Jobs: jobs, Pagination: pageRes}, nil
}

func (q queryServer) Bids(ctx context.Context, req *types.QueryBidsRequest) (*types.QueryBidsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if _, err := q.GetJob(ctx, req.JobId); err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	if err := checkPageRequest(req.Pagination); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	bids, pageRes, err := query.CollectionPaginate(ctx, q.Keeper.Bids, req.Pagination,
		func(_ collections.Pair[uint64, []byte], bid types.Bid) (types.Bid, error) { return bid, nil },
		query.WithCollectionPaginationPairPrefix[uint64, []byte](req.JobId))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryBidsResponse{Bids: bids, Pagination: pageRes}, nil
}

func (q queryServer) Lease(ctx context.Context, req *types.QueryLeaseRequest) (*types.QueryLeaseResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	lease, err := q.GetLease(ctx, req.LeaseId)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	return &types.QueryLeaseResponse{Lease: lease}, nil
}

func (q queryServer) Leases(ctx context.Context, req *types.QueryLeasesRequest) (*types.QueryLeasesResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	var provider []byte
	if req.Provider != "" {
		var err error
		if provider, err = q.addressCodec.StringToBytes(req.Provider); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "provider: invalid address %q", req.Provider)
		}
	}
	if err := checkPageRequest(req.Pagination); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	keep := func(l types.Lease) bool {
		return (req.JobId == 0 || l.JobId == req.JobId) &&
			(provider == nil || l.Provider == req.Provider) &&
			(!req.ActiveOnly || l.State == types.LEASE_STATE_ACTIVE)
	}
	var (
		leases  []types.Lease
		pageRes *query.PageResponse
		err     error
	)
	load := func(id uint64) (types.Lease, bool, error) {
		l, err := q.Keeper.Leases.Get(ctx, id)
		return l, err == nil && keep(l), err
	}
	switch {
	case provider != nil:
		leases, pageRes, err = paginateIndex(ctx, q.Keeper.Leases.Indexes.Provider, provider, req.Pagination, load)
	case req.JobId != 0:
		leases, pageRes, err = paginateIndex(ctx, q.Keeper.Leases.Indexes.Job, req.JobId, req.Pagination, load)
	case req.ActiveOnly:
		leases, pageRes, err = paginateIndex(ctx, q.Keeper.Leases.Indexes.State, int32(types.LEASE_STATE_ACTIVE), req.Pagination, load)
	default:
		leases, pageRes, err = query.CollectionFilteredPaginate(ctx, q.Keeper.Leases, req.Pagination,
			func(_ uint64, l types.Lease) (bool, error) { return keep(l), nil },
			func(_ uint64, l types.Lease) (types.Lease, error) { return l, nil })
	}
	if err != nil {
		return nil, pageError(err)
	}
	return &types.QueryLeasesResponse{Leases: leases, Pagination: pageRes}, nil
}

// pageError answers a failed page read: InvalidArgument for a malformed page request,
// Internal for anything else.
func pageError(err error) error {
	if errors.Is(err, errInvalidPageRequest) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func (q queryServer) Escrow(ctx context.Context, req *types.QueryEscrowRequest) (*types.QueryEscrowResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	job, err := q.GetJob(ctx, req.JobId)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	resp := &types.QueryEscrowResponse{
		JobId:        job.Id,
		Deposited:    job.Deposited,
		Unspent:      job.Escrow,
		Pending:      sdk.NewInt64Coin(job.Escrow.Denom, 0),
		Withdrawable: sdk.NewInt64Coin(job.Escrow.Denom, 0),
		Withdrawn:    sdk.NewInt64Coin(job.Escrow.Denom, 0),
		AuditFees:    coinOrZero(job.AuditFees, job.Escrow.Denom),
		Compensation: coinOrZero(job.Compensation, job.Escrow.Denom),
	}
	iter, err := q.Keeper.Leases.Indexes.Job.MatchExact(ctx, job.Id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	for _, id := range ids {
		l, err := q.Keeper.Leases.Get(ctx, id)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.Pending = resp.Pending.Add(l.Pending)
		resp.Withdrawable = resp.Withdrawable.Add(l.Withdrawable)
		resp.Withdrawn = resp.Withdrawn.Add(l.Withdrawn)
	}
	return resp, nil
}
