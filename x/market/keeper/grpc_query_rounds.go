package keeper

import (
	"context"

	"cosmossdk.io/collections"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

func (q queryServer) Round(ctx context.Context, req *types.QueryRoundRequest) (*types.QueryRoundResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	r, err := q.GetRound(ctx, req.JobId, req.Round)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	return &types.QueryRoundResponse{Round: r}, nil
}

func (q queryServer) Rounds(ctx context.Context, req *types.QueryRoundsRequest) (*types.QueryRoundsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if err := checkPageRequest(req.Pagination); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if _, err := q.GetJob(ctx, req.JobId); err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	rounds, pageRes, err := query.CollectionPaginate(ctx, q.Keeper.Rounds, req.Pagination,
		func(_ collections.Pair[uint64, uint64], r types.Round) (types.Round, error) { return r, nil },
		query.WithCollectionPaginationPairPrefix[uint64, uint64](req.JobId))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryRoundsResponse{Rounds: rounds, Pagination: pageRes}, nil
}

// RoundCommits lists a round's commits; a round has at most max_sync_workers of them, so
// the answer is not paginated.
func (q queryServer) RoundCommits(ctx context.Context, req *types.QueryRoundCommitsRequest) (*types.QueryRoundCommitsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if _, err := q.GetRound(ctx, req.JobId, req.Round); err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	commits, err := q.roundCommits(ctx, req.JobId, req.Round)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryRoundCommitsResponse{Commits: commits}, nil
}
