package keeper

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// queryServer answers the module's gRPC (and, through the gateway, REST) queries.
type queryServer struct {
	k Keeper
}

var _ types.QueryServer = queryServer{}

// NewQueryServerImpl returns the Query service implementation.
func NewQueryServerImpl(k Keeper) types.QueryServer {
	return queryServer{k: k}
}

// Params returns the current params.
func (q queryServer) Params(ctx context.Context, req *types.QueryParamsRequest) (*types.QueryParamsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	params, err := q.k.Params.Get(ctx)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryParamsResponse{Params: params}, nil
}

// Provider returns one provider by operator address.
func (q queryServer) Provider(ctx context.Context, req *types.QueryProviderRequest) (*types.QueryProviderResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	operator, err := q.operatorArgument(req.Operator)
	if err != nil {
		return nil, err
	}
	provider, err := q.k.GetProvider(ctx, operator)
	if errors.Is(err, types.ErrProviderNotFound) {
		return nil, status.Errorf(codes.NotFound, "no provider is registered by %s", req.Operator)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryProviderResponse{Provider: provider}, nil
}

// Providers lists providers ordered by operator address. With a status it
// pages through the status index, so listing the few jailed providers does
// not read all the active ones.
func (q queryServer) Providers(ctx context.Context, req *types.QueryProvidersRequest) (*types.QueryProvidersResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	if _, known := types.ProviderStatus_name[int32(req.Status)]; !known {
		return nil, status.Errorf(codes.InvalidArgument, "unknown provider status %d", req.Status)
	}
	if req.Status == types.PROVIDER_STATUS_UNSPECIFIED {
		providers, page, err := query.CollectionPaginate(ctx, q.k.Providers, req.Pagination,
			func(_ sdk.AccAddress, provider types.Provider) (types.Provider, error) { return provider, nil })
		if err != nil {
			return nil, paginationError(err)
		}
		return &types.QueryProvidersResponse{Providers: providers, Pagination: page}, nil
	}
	providers, page, err := query.CollectionPaginate(ctx, q.k.providersByStatusPages, req.Pagination,
		func(key collections.Pair[int32, sdk.AccAddress], _ collections.NoValue) (types.Provider, error) {
			return q.k.Providers.Get(ctx, key.K2())
		},
		query.WithCollectionPaginationPairPrefix[int32, sdk.AccAddress](int32(req.Status)))
	if err != nil {
		return nil, paginationError(err)
	}
	return &types.QueryProvidersResponse{Providers: providers, Pagination: page}, nil
}

// Unbondings lists one operator's queued unbondings in id order.
func (q queryServer) Unbondings(ctx context.Context, req *types.QueryUnbondingsRequest) (*types.QueryUnbondingsResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	operator, err := q.operatorArgument(req.Operator)
	if err != nil {
		return nil, err
	}
	unbondings, page, err := query.CollectionPaginate(ctx, q.k.unbondingsByOperatorPages, req.Pagination,
		func(key collections.Pair[sdk.AccAddress, uint64], _ collections.NoValue) (types.Unbonding, error) {
			return q.k.Unbondings.Get(ctx, key.K2())
		},
		query.WithCollectionPaginationPairPrefix[sdk.AccAddress, uint64](operator))
	if err != nil {
		return nil, paginationError(err)
	}
	return &types.QueryUnbondingsResponse{Unbondings: unbondings, Pagination: page}, nil
}

// Locks lists the collateral locks on one operator's bond, ordered by ref.
func (q queryServer) Locks(ctx context.Context, req *types.QueryLocksRequest) (*types.QueryLocksResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	operator, err := q.operatorArgument(req.Operator)
	if err != nil {
		return nil, err
	}
	locks, page, err := query.CollectionPaginate(ctx, q.k.Locks, req.Pagination,
		func(_ collections.Pair[sdk.AccAddress, string], lock types.CollateralLock) (types.CollateralLock, error) {
			return lock, nil
		},
		query.WithCollectionPaginationPairPrefix[sdk.AccAddress, string](operator))
	if err != nil {
		return nil, paginationError(err)
	}
	return &types.QueryLocksResponse{Locks: locks, Pagination: page}, nil
}

// operatorArgument decodes a required operator address argument.
func (q queryServer) operatorArgument(operator string) (sdk.AccAddress, error) {
	if operator == "" {
		return nil, status.Error(codes.InvalidArgument, "operator address is required")
	}
	addr, err := q.k.addressCodec.StringToBytes(operator)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "invalid operator address %q: %s", operator, err)
	}
	return addr, nil
}

// paginationError reports a failed page read. CollectionPaginate fails on
// malformed page requests (e.g. both key and offset set, or a foreign key).
func paginationError(err error) error {
	return status.Errorf(codes.InvalidArgument, "pagination: %s", err)
}

// Verifier returns one verifier by operator address, with its audit-set position.
func (q queryServer) Verifier(ctx context.Context, req *types.QueryVerifierRequest) (*types.QueryVerifierResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	operator, err := q.operatorArgument(req.Operator)
	if err != nil {
		return nil, err
	}
	v, err := q.k.GetVerifier(ctx, operator)
	if errors.Is(err, types.ErrVerifierNotFound) {
		return nil, status.Errorf(codes.NotFound, "no verifier is registered by %s", req.Operator)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	pos, err := q.k.AuditSetPositions.Get(ctx, operator)
	if err != nil && !errors.Is(err, collections.ErrNotFound) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &types.QueryVerifierResponse{Verifier: v, Position: pos}, nil
}

// Verifiers lists verifiers by operator address, or with active_only the audit set in
// position order (the order a draw reads it in).
func (q queryServer) Verifiers(ctx context.Context, req *types.QueryVerifiersRequest) (*types.QueryVerifiersResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "empty request")
	}
	size, err := q.k.auditSetSize(ctx)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	var (
		verifiers []types.Verifier
		page      *query.PageResponse
	)
	if req.ActiveOnly {
		verifiers, page, err = query.CollectionPaginate(ctx, q.k.AuditSet, req.Pagination,
			func(_ uint64, operator sdk.AccAddress) (types.Verifier, error) {
				return q.k.Verifiers.Get(ctx, operator)
			})
	} else {
		verifiers, page, err = query.CollectionPaginate(ctx, q.k.Verifiers, req.Pagination,
			func(_ sdk.AccAddress, v types.Verifier) (types.Verifier, error) { return v, nil })
	}
	if err != nil {
		return nil, paginationError(err)
	}
	return &types.QueryVerifiersResponse{Verifiers: verifiers, Pagination: page, SetSize: size}, nil
}
