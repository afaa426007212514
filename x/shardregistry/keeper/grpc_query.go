package keeper

import (
	"context"
	"errors"

	"cosmossdk.io/collections"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

type queryServer struct {
	Keeper
}

var _ types.QueryServer = queryServer{}

// NewQueryServerImpl returns the x/shardregistry Query service.
func NewQueryServerImpl(k Keeper) types.QueryServer { return queryServer{Keeper: k} }

// queryError answers a keeper error: NotFound for missing objects, InvalidArgument for
// bad input, Internal for anything else.
func queryError(err error) error {
	switch {
	case errors.Is(err, types.ErrDatasetNotFound), errors.Is(err, types.ErrShardNotFound), errors.Is(err, types.ErrPieceNotFound),
		errors.Is(err, types.ErrReplicaNotFound), errors.Is(err, types.ErrJobNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, types.ErrNoDataset), errors.Is(err, sdkerrors.ErrInvalidAddress), errors.Is(err, types.ErrInvalidWorker):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, types.ErrChallengeNotOpen), errors.Is(err, types.ErrBlockHashUnavailable):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func checkPage(req *query.PageRequest) error {
	if req != nil && len(req.Key) > 0 && req.Offset > 0 {
		return status.Error(codes.InvalidArgument, "invalid page request: use either key or offset, not both")
	}
	return nil
}

func (q queryServer) Params(ctx context.Context, _ *types.QueryParamsRequest) (*types.QueryParamsResponse, error) {
	params, err := q.Keeper.Params.Get(ctx)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryParamsResponse{Params: params}, nil
}

func (q queryServer) Dataset(ctx context.Context, req *types.QueryDatasetRequest) (*types.QueryDatasetResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	d, err := q.GetDataset(ctx, req.DatasetId)
	if err != nil {
		return nil, queryError(err)
	}
	resp := &types.QueryDatasetResponse{Dataset: d}
	if err := q.UnderReplicated.Walk(ctx, collections.NewPrefixedPairRange[string, uint32](d.Id), func(collections.Pair[string, uint32]) (bool, error) {
		resp.UnderReplicatedShards++
		return false, nil
	}); err != nil {
		return nil, queryError(err)
	}
	if err := q.OpenSlots.Walk(ctx, collections.NewPrefixedTripleRange[string, uint32, uint32](d.Id), func(collections.Triple[string, uint32, uint32]) (bool, error) {
		resp.OpenSlots++
		return false, nil
	}); err != nil {
		return nil, queryError(err)
	}
	return resp, nil
}

func (q queryServer) Datasets(ctx context.Context, req *types.QueryDatasetsRequest) (*types.QueryDatasetsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if err := checkPage(req.Pagination); err != nil {
		return nil, err
	}
	var (
		datasets []types.Dataset
		page     *query.PageResponse
		err      error
	)
	if req.Owner != "" {
		owner, aerr := q.addressCodec.StringToBytes(req.Owner)
		if aerr != nil {
			return nil, status.Errorf(codes.InvalidArgument, "owner: invalid address %q", req.Owner)
		}
		datasets, page, err = query.CollectionPaginate(ctx, q.datasetsByOwnerPages, req.Pagination,
			func(key collections.Pair[[]byte, string], _ collections.NoValue) (types.Dataset, error) {
				return q.Keeper.Datasets.Get(ctx, key.K2())
			}, query.WithCollectionPaginationPairPrefix[[]byte, string](owner))
	} else {
		datasets, page, err = query.CollectionPaginate(ctx, q.Keeper.Datasets, req.Pagination,
			func(_ string, d types.Dataset) (types.Dataset, error) { return d, nil })
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryDatasetsResponse{Datasets: datasets, Pagination: page}, nil
}

// pieceView is a piece with its CID and holder counts.
func (k Keeper) pieceView(ctx context.Context, d types.Dataset, shard uint32, pc types.Piece) (types.PieceView, error) {
	n, err := k.pieceHolders(ctx, d.Id, shard, pc.Index)
	if err != nil {
		return types.PieceView{}, err
	}
	return types.PieceView{Piece: pc, Cid: types.PieceCID(pc.Root), LiveHolders: n, RequiredHolders: d.Encoding.HoldersPerPiece()}, nil
}

// shardView is a shard with its pieces' CIDs and its live counts.
func (k Keeper) shardView(ctx context.Context, d types.Dataset, s types.Shard) (types.ShardView, error) {
	v := types.ShardView{
		DatasetId: s.DatasetId, Index: s.Index, SampleStart: s.SampleStart, SampleEnd: s.SampleEnd, SizeBytes: s.SizeBytes,
		Target: d.Encoding.Target(), MinLive: d.Encoding.MinLive(),
	}
	for _, pc := range s.Pieces {
		pv, err := k.pieceView(ctx, d, s.Index, pc)
		if err != nil {
			return v, err
		}
		if d.Encoding.IsReedSolomon() {
			if pv.LiveHolders > 0 {
				v.Live++
			}
		} else {
			v.Live += pv.LiveHolders
		}
		v.Pieces = append(v.Pieces, pv)
	}
	return v, nil
}

func (q queryServer) Shard(ctx context.Context, req *types.QueryShardRequest) (*types.QueryShardResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	d, err := q.GetDataset(ctx, req.DatasetId)
	if err != nil {
		return nil, queryError(err)
	}
	s, err := q.GetShard(ctx, req.DatasetId, req.Index)
	if err != nil {
		return nil, queryError(err)
	}
	view, err := q.shardView(ctx, d, s)
	if err != nil {
		return nil, queryError(err)
	}
	resp := &types.QueryShardResponse{Shard: view}
	iter, err := q.Keeper.Replicas.Indexes.Shard.MatchExact(ctx, collections.Join(d.Id, s.Index))
	if err != nil {
		return nil, queryError(err)
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return nil, queryError(err)
	}
	for _, id := range ids {
		r, err := q.Keeper.Replicas.Get(ctx, id)
		if err != nil {
			return nil, queryError(err)
		}
		if r.Status == types.REPLICA_STATUS_ACTIVE {
			resp.Replicas = append(resp.Replicas, r)
		}
	}
	return resp, nil
}

func (q queryServer) Shards(ctx context.Context, req *types.QueryShardsRequest) (*types.QueryShardsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if err := checkPage(req.Pagination); err != nil {
		return nil, err
	}
	d, err := q.GetDataset(ctx, req.DatasetId)
	if err != nil {
		return nil, queryError(err)
	}
	shards, page, err := query.CollectionPaginate(ctx, q.Keeper.Shards, req.Pagination,
		func(_ collections.Pair[string, uint32], s types.Shard) (types.ShardView, error) {
			return q.shardView(ctx, d, s)
		},
		query.WithCollectionPaginationPairPrefix[string, uint32](d.Id))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryShardsResponse{Shards: shards, Pagination: page}, nil
}

func (q queryServer) Replica(ctx context.Context, req *types.QueryReplicaRequest) (*types.QueryReplicaResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	r, err := q.GetReplica(ctx, req.ReplicaId)
	if err != nil {
		return nil, queryError(err)
	}
	return &types.QueryReplicaResponse{Replica: r}, nil
}

func (q queryServer) Replicas(ctx context.Context, req *types.QueryReplicasRequest) (*types.QueryReplicasResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if err := checkPage(req.Pagination); err != nil {
		return nil, err
	}
	keep := func(r types.Replica) bool {
		return (!req.ActiveOnly || r.Status == types.REPLICA_STATUS_ACTIVE) &&
			(req.DatasetId == "" || r.DatasetId == req.DatasetId) && (req.Holder == "" || r.Holder == req.Holder)
	}
	var (
		replicas []types.Replica
		page     *query.PageResponse
		err      error
	)
	switch {
	case req.Holder != "":
		holder, aerr := q.addressCodec.StringToBytes(req.Holder)
		if aerr != nil {
			return nil, status.Errorf(codes.InvalidArgument, "holder: invalid address %q", req.Holder)
		}
		replicas, page, err = query.CollectionFilteredPaginate(ctx, q.replicasByHolderPages, req.Pagination,
			func(key collections.Pair[[]byte, uint64], _ collections.NoValue) (bool, error) {
				r, err := q.Keeper.Replicas.Get(ctx, key.K2())
				return err == nil && keep(r), err
			},
			func(key collections.Pair[[]byte, uint64], _ collections.NoValue) (types.Replica, error) {
				return q.Keeper.Replicas.Get(ctx, key.K2())
			}, query.WithCollectionPaginationPairPrefix[[]byte, uint64](holder))
	case req.DatasetId != "":
		replicas, page, err = query.CollectionFilteredPaginate(ctx, q.replicasByDatasetPages, req.Pagination,
			func(key collections.Pair[string, uint64], _ collections.NoValue) (bool, error) {
				r, err := q.Keeper.Replicas.Get(ctx, key.K2())
				return err == nil && keep(r), err
			},
			func(key collections.Pair[string, uint64], _ collections.NoValue) (types.Replica, error) {
				return q.Keeper.Replicas.Get(ctx, key.K2())
			}, query.WithCollectionPaginationPairPrefix[string, uint64](req.DatasetId))
	default:
		return nil, status.Error(codes.InvalidArgument, "replicas are listed by holder or by dataset_id: set one of them")
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryReplicasResponse{Replicas: replicas, Pagination: page}, nil
}

func (q queryServer) RepairSlots(ctx context.Context, req *types.QueryRepairSlotsRequest) (*types.QueryRepairSlotsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if err := checkPage(req.Pagination); err != nil {
		return nil, err
	}
	var opts []func(*query.CollectionsPaginateOptions[collections.Triple[string, uint32, uint32]])
	if req.DatasetId != "" {
		if _, err := q.GetDataset(ctx, req.DatasetId); err != nil {
			return nil, queryError(err)
		}
		opts = append(opts, func(o *query.CollectionsPaginateOptions[collections.Triple[string, uint32, uint32]]) {
			prefix := collections.TriplePrefix[string, uint32, uint32](req.DatasetId)
			o.Prefix = &prefix
		})
	}
	datasets := map[string]types.Dataset{}
	slots, page, err := query.CollectionPaginate(ctx, q.OpenSlots, req.Pagination,
		func(key collections.Triple[string, uint32, uint32], _ collections.NoValue) (types.RepairSlot, error) {
			d, ok := datasets[key.K1()]
			if !ok {
				var err error
				if d, err = q.GetDataset(ctx, key.K1()); err != nil {
					return types.RepairSlot{}, err
				}
				datasets[key.K1()] = d
			}
			s, err := q.GetShard(ctx, key.K1(), key.K2())
			if err != nil {
				return types.RepairSlot{}, err
			}
			pv, err := q.pieceView(ctx, d, s.Index, s.Pieces[key.K3()])
			return types.RepairSlot{DatasetId: d.Id, Shard: s.Index, Piece: pv}, err
		}, opts...)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryRepairSlotsResponse{Slots: slots, Pagination: page}, nil
}

func (q queryServer) UnderReplicatedShards(ctx context.Context, req *types.QueryUnderReplicatedShardsRequest) (*types.QueryUnderReplicatedShardsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if err := checkPage(req.Pagination); err != nil {
		return nil, err
	}
	var opts []func(*query.CollectionsPaginateOptions[collections.Pair[string, uint32]])
	if req.DatasetId != "" {
		if _, err := q.GetDataset(ctx, req.DatasetId); err != nil {
			return nil, queryError(err)
		}
		opts = append(opts, query.WithCollectionPaginationPairPrefix[string, uint32](req.DatasetId))
	}
	datasets := map[string]types.Dataset{}
	shards, page, err := query.CollectionPaginate(ctx, q.UnderReplicated, req.Pagination,
		func(key collections.Pair[string, uint32], _ collections.NoValue) (types.ShardHealth, error) {
			d, ok := datasets[key.K1()]
			if !ok {
				var err error
				if d, err = q.GetDataset(ctx, key.K1()); err != nil {
					return types.ShardHealth{}, err
				}
				datasets[key.K1()] = d
			}
			live, err := q.shardLive(ctx, d, key.K2())
			return health(d, key.K2(), live), err
		}, opts...)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryUnderReplicatedShardsResponse{Shards: shards, Pagination: page}, nil
}

// challengeView describes a challenge of a piece, with the indices once its seed block exists.
func (k Keeper) challengeView(ctx context.Context, params types.Params, d types.Dataset, piece types.Piece, key []byte, s types.Schedule) (types.Challenge, error) {
	c := types.Challenge{
		Period: s.Period, SeedHeight: s.SeedHeight, Deadline: s.Deadline, ChunkCount: piece.ChunkCount,
		ChunkSize: d.ChunkSize, PieceSize: piece.SizeBytes, PieceCid: types.PieceCID(piece.Root),
	}
	indices, err := k.challengeIndices(ctx, params, key, s.Period, s.SeedHeight, piece.ChunkCount, false)
	switch {
	case errors.Is(err, types.ErrChallengeNotOpen):
		return c, nil
	case err != nil:
		return c, err
	}
	c.Open, c.ChunkIndices = true, indices
	return c, nil
}

func (q queryServer) ChallengeSchedule(ctx context.Context, req *types.QueryChallengeScheduleRequest) (*types.QueryChallengeScheduleResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	r, err := q.GetReplica(ctx, req.ReplicaId)
	if err != nil {
		return nil, queryError(err)
	}
	if r.Status != types.REPLICA_STATUS_ACTIVE {
		return nil, status.Errorf(codes.FailedPrecondition, "replica %d is %s: it has no challenges", r.Id, r.Status)
	}
	params, err := q.Keeper.Params.Get(ctx)
	if err != nil {
		return nil, queryError(err)
	}
	d, err := q.GetDataset(ctx, r.DatasetId)
	if err != nil {
		return nil, queryError(err)
	}
	s, err := q.GetShard(ctx, r.DatasetId, r.Shard)
	if err != nil {
		return nil, queryError(err)
	}
	key, err := q.replicaKey(r)
	if err != nil {
		return nil, queryError(err)
	}
	c, err := q.challengeView(ctx, params, d, s.Pieces[r.Piece], key,
		types.Schedule{Period: r.NextPeriod, SeedHeight: r.NextSeedHeight, Deadline: r.NextDeadline})
	if err != nil {
		return nil, queryError(err)
	}
	return &types.QueryChallengeScheduleResponse{ReplicaId: r.Id, Challenge: c, Height: sdk.UnwrapSDKContext(ctx).BlockHeight()}, nil
}

func (q queryServer) ClaimChallenge(ctx context.Context, req *types.QueryClaimChallengeRequest) (*types.QueryClaimChallengeResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	holder, err := q.addressCodec.StringToBytes(req.Holder)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "holder: invalid address %q", req.Holder)
	}
	d, err := q.GetDataset(ctx, req.DatasetId)
	if err != nil {
		return nil, queryError(err)
	}
	s, err := q.GetShard(ctx, req.DatasetId, req.Shard)
	if err != nil {
		return nil, queryError(err)
	}
	if req.Piece >= uint32(len(s.Pieces)) {
		return nil, status.Errorf(codes.NotFound, "shard %d of %q has pieces 0..%d, not %d", s.Index, d.Id, len(s.Pieces)-1, req.Piece)
	}
	params, err := q.Keeper.Params.Get(ctx)
	if err != nil {
		return nil, queryError(err)
	}
	height := sdk.UnwrapSDKContext(ctx).BlockHeight()
	period := types.PeriodOf(height, params.PeriodBlocks)
	// A claim proves the current period's challenge any time within the period.
	sched := types.Schedule{Period: period, SeedHeight: types.PeriodStart(period, params.PeriodBlocks),
		Deadline: types.PeriodStart(period+1, params.PeriodBlocks) - 1}
	c, err := q.challengeView(ctx, params, d, s.Pieces[req.Piece], types.ReplicaKey(d.Id, s.Index, req.Piece, holder), sched)
	if err != nil {
		return nil, queryError(err)
	}
	return &types.QueryClaimChallengeResponse{Challenge: c, Height: height}, nil
}

func (q queryServer) Assignment(ctx context.Context, req *types.QueryAssignmentRequest) (*types.QueryAssignmentResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	d, assigned, err := q.Keeper.Assignment(ctx, req.JobId, req.Epoch)
	if err != nil {
		return nil, queryError(err)
	}
	resp := &types.QueryAssignmentResponse{JobId: req.JobId, DatasetId: d.Id, Epoch: req.Epoch, ShardCount: d.ShardCount}
	for w, shards := range assigned {
		resp.Workers = append(resp.Workers, types.WorkerAssignment{Worker: uint32(w), Shards: shards})
	}
	return resp, nil
}
