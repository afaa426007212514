package keeper

import (
	"context"

	"cosmossdk.io/collections"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

type queryServer struct {
	Keeper
}

var _ types.QueryServer = queryServer{}

// NewQueryServerImpl returns the x/verify Query service.
func NewQueryServerImpl(k Keeper) types.QueryServer { return queryServer{Keeper: k} }

func (q queryServer) Params(ctx context.Context, _ *types.QueryParamsRequest) (*types.QueryParamsResponse, error) {
	p, err := q.Keeper.Params.Get(ctx)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryParamsResponse{Params: p}, nil
}

func (q queryServer) Checkpoint(ctx context.Context, req *types.QueryCheckpointRequest) (*types.QueryCheckpointResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	cp, err := q.GetCheckpoint(ctx, req.LeaseId, req.Index)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	return &types.QueryCheckpointResponse{Checkpoint: cp}, nil
}

func (q queryServer) Checkpoints(ctx context.Context, req *types.QueryCheckpointsRequest) (*types.QueryCheckpointsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	cps, page, err := query.CollectionPaginate(ctx, q.Keeper.Checkpoints, req.Pagination,
		func(_ CheckpointKey, cp types.Checkpoint) (types.Checkpoint, error) { return cp, nil },
		query.WithCollectionPaginationPairPrefix[uint64, uint64](req.LeaseId))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryCheckpointsResponse{Checkpoints: cps, Pagination: page}, nil
}

func (q queryServer) Challenge(ctx context.Context, req *types.QueryChallengeRequest) (*types.QueryChallengeResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	ch, err := q.GetChallenge(ctx, req.ChallengeId)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	if ch, err = q.Effective(sdk.UnwrapSDKContext(ctx), ch); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	res := &types.QueryChallengeResponse{Challenge: ch}
	if tg, found, err := keeperutil.Optional(q.TileGames.Get(ctx, ch.Id)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if found {
		res.TileGame = &tg
	}
	return res, nil
}

func (q queryServer) Challenges(ctx context.Context, req *types.QueryChallengesRequest) (*types.QueryChallengesResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if req.AllCheckpoints && (req.LeaseId == 0 || req.CheckpointIndex != 0) {
		return nil, status.Error(codes.InvalidArgument, "all_checkpoints filters by lease_id alone: set lease_id and leave checkpoint_index unset")
	}
	open := func(ch types.Challenge) bool {
		return !req.OpenOnly || ch.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED
	}
	var (
		chs  []types.Challenge
		page *query.PageResponse
		err  error
	)
	if req.LeaseId == 0 {
		chs, page, err = query.CollectionFilteredPaginate(ctx, q.Keeper.Challenges, req.Pagination,
			func(_ uint64, ch types.Challenge) (bool, error) { return open(ch), nil },
			func(_ uint64, ch types.Challenge) (types.Challenge, error) { return ch, nil })
	} else {
		// The lease's challenges come from the checkpoint index in (index, id) order; one
		// checkpoint's are therefore in id order, as in the unfiltered list.
		chs, page, err = query.CollectionFilteredPaginate(ctx, q.challengesByLease, req.Pagination,
			func(key collections.Pair[uint64, CheckpointKey], _ collections.NoValue) (bool, error) {
				if !req.AllCheckpoints && key.K2().K1() != req.CheckpointIndex {
					return false, nil
				}
				ch, err := q.Keeper.Challenges.Get(ctx, key.K2().K2())
				return err == nil && open(ch), err
			},
			func(key collections.Pair[uint64, CheckpointKey], _ collections.NoValue) (types.Challenge, error) {
				return q.Keeper.Challenges.Get(ctx, key.K2().K2())
			},
			query.WithCollectionPaginationPairPrefix[uint64, CheckpointKey](req.LeaseId))
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	// Games show as they stand now: a reveal moved the games waiting on it to their
	// challengers (effective).
	for i := range chs {
		if chs[i], err = q.Effective(sdk.UnwrapSDKContext(ctx), chs[i]); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &types.QueryChallengesResponse{Challenges: chs, Pagination: page}, nil
}

// Audits lists audit assignments: a checkpoint's (lease_id, checkpoint_index), in auditor
// order, or an auditor's, in (lease, index) order through the auditor index.
func (q queryServer) Audits(ctx context.Context, req *types.QueryAuditsRequest) (*types.QueryAuditsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	keep := func(a types.Audit) bool { return !req.OpenOnly || a.Status == types.AUDIT_STATUS_ASSIGNED }
	var (
		audits []types.Audit
		page   *query.PageResponse
		err    error
	)
	switch {
	case req.Auditor != "" && req.LeaseId != 0:
		return nil, status.Error(codes.InvalidArgument, "filter by auditor or by lease_id and checkpoint_index, not both")
	case req.Auditor != "":
		_, auditor, perr := keeperutil.ParseAddressCanonical(q.addressCodec, "auditor", req.Auditor)
		if perr != nil {
			return nil, status.Error(codes.InvalidArgument, perr.Error())
		}
		audits, page, err = query.CollectionFilteredPaginate(ctx, q.auditsByAuditor, req.Pagination,
			func(key collections.Pair[string, AuditKey], _ collections.NoValue) (bool, error) {
				a, err := q.Assignments.Get(ctx, key.K2())
				return err == nil && keep(a), err
			},
			func(key collections.Pair[string, AuditKey], _ collections.NoValue) (types.Audit, error) {
				return q.Assignments.Get(ctx, key.K2())
			},
			query.WithCollectionPaginationPairPrefix[string, AuditKey](auditor))
	case req.LeaseId != 0:
		audits, page, err = query.CollectionFilteredPaginate(ctx, q.Assignments, req.Pagination,
			func(_ AuditKey, a types.Audit) (bool, error) { return keep(a), nil },
			func(_ AuditKey, a types.Audit) (types.Audit, error) { return a, nil },
			func(o *query.CollectionsPaginateOptions[AuditKey]) {
				prefix := collections.TripleSuperPrefix[uint64, uint64, string](req.LeaseId, req.CheckpointIndex)
				o.Prefix = &prefix
			})
	default:
		return nil, status.Error(codes.InvalidArgument, "set auditor, or lease_id (and checkpoint_index)")
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryAuditsResponse{Audits: audits, Pagination: page}, nil
}

func (q queryServer) DataRoot(ctx context.Context, req *types.QueryDataRootRequest) (*types.QueryDataRootResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	job, err := q.marketKeeper.GetJob(ctx, req.JobId)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	if job.Spec.DatasetId != "" {
		return nil, status.Errorf(codes.FailedPrecondition,
			"job %d trains on dataset %q: each worker's data is the data pieces of its assigned shards (query shardregistry assignment)", job.Id, job.Spec.DatasetId)
	}
	data := types.BuiltinData()
	seg := data.Segments[0]
	return &types.QueryDataRootResponse{
		Root: seg.Root[:], DataSize: seg.Size, ChunkSize: seg.ChunkSize, Chunks: seg.Chunks(),
	}, nil
}

func (q queryServer) FileQuery(ctx context.Context, req *types.QueryFileQueryRequest) (*types.QueryFileQueryResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	fq, err := q.GetFileQuery(ctx, req.QueryId)
	if err != nil {
		return nil, keeperutil.LookupStatus(err)
	}
	return &types.QueryFileQueryResponse{FileQuery: fq}, nil
}
