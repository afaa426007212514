package keeper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

func requireStatus(t *testing.T, err error, want codes.Code, message string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, status.Code(err), err.Error())
	require.Contains(t, status.Convert(err).Message(), message)
}

func TestQueryParams(t *testing.T) {
	f := newFixture(t)
	response, err := f.queryServer.Params(f.ctx, &types.QueryParamsRequest{})
	require.NoError(t, err)
	require.Equal(t, types.DefaultParams(), response.Params)

	_, err = f.queryServer.Params(f.ctx, nil)
	requireStatus(t, err, codes.InvalidArgument, "empty request")
}

func TestQueryProvider(t *testing.T) {
	f := newFixture(t)
	operator := f.registerProvider("operator", 8_000_000, 8_000_000)

	response, err := f.queryServer.Provider(f.ctx, &types.QueryProviderRequest{Operator: f.addressText(operator)})
	require.NoError(t, err)
	require.Equal(t, f.provider(operator), response.Provider)

	stranger := f.addressText(account("stranger"))
	_, err = f.queryServer.Provider(f.ctx, &types.QueryProviderRequest{Operator: stranger})
	requireStatus(t, err, codes.NotFound, "no provider is registered by "+stranger)
	_, err = f.queryServer.Provider(f.ctx, &types.QueryProviderRequest{})
	requireStatus(t, err, codes.InvalidArgument, "operator address is required")
	_, err = f.queryServer.Provider(f.ctx, &types.QueryProviderRequest{Operator: "cosmos1qypqxpqpqgpsgqgzqvzqzqsrqsqsyqcyy2wt4y"})
	requireStatus(t, err, codes.InvalidArgument, "invalid operator address")
	_, err = f.queryServer.Provider(f.ctx, nil)
	requireStatus(t, err, codes.InvalidArgument, "empty request")
}

// pageThrough collects every item of a paginated query, limit items per
// page, following next_key.
func pageThrough[T any](t *testing.T, limit uint64, fetch func(*query.PageRequest) ([]T, *query.PageResponse, error)) []T {
	t.Helper()
	var all []T
	var key []byte
	for {
		items, page, err := fetch(&query.PageRequest{Key: key, Limit: limit})
		require.NoError(t, err)
		require.LessOrEqual(t, uint64(len(items)), limit)
		all = append(all, items...)
		if len(page.NextKey) == 0 {
			return all
		}
		key = page.NextKey
	}
}

func TestQueryProvidersByStatus(t *testing.T) {
	f := newFixture(t)
	var operators []sdk.AccAddress
	for i := range 7 {
		operators = append(operators, f.registerProvider(fmt.Sprintf("provider-%d", i), 8_000_000, 8_000_000))
	}
	for _, jailed := range operators[:3] {
		require.NoError(t, f.keeper.Jail(f.ctx, jailed, f.ctx.BlockTime().Add(time.Hour), "downtime"))
	}
	require.NoError(t, f.keeper.Tombstone(f.ctx, operators[3], "forged checkpoint"))

	operatorsOf := func(providers []types.Provider) []string {
		var texts []string
		for _, provider := range providers {
			texts = append(texts, provider.Operator)
		}
		return texts
	}
	listAll := func(status types.ProviderStatus, limit uint64) []string {
		return operatorsOf(pageThrough(t, limit, func(page *query.PageRequest) ([]types.Provider, *query.PageResponse, error) {
			response, err := f.queryServer.Providers(f.ctx, &types.QueryProvidersRequest{Status: status, Pagination: page})
			if err != nil {
				return nil, nil, err
			}
			return response.Providers, response.Pagination, nil
		}))
	}
	statusOf := func(status types.ProviderStatus) []string {
		var texts []string
		for _, operator := range operators {
			if f.provider(operator).Status == status {
				texts = append(texts, f.addressText(operator))
			}
		}
		return texts
	}

	all := listAll(types.PROVIDER_STATUS_UNSPECIFIED, 2)
	require.Len(t, all, 7)
	require.IsIncreasing(t, addressBytes(t, f, all), "providers are listed in operator address order")
	require.ElementsMatch(t, statusOf(types.PROVIDER_STATUS_JAILED), listAll(types.PROVIDER_STATUS_JAILED, 2))
	require.ElementsMatch(t, statusOf(types.PROVIDER_STATUS_ACTIVE), listAll(types.PROVIDER_STATUS_ACTIVE, 1))
	require.Len(t, listAll(types.PROVIDER_STATUS_ACTIVE, 10), 3)
	require.Equal(t, statusOf(types.PROVIDER_STATUS_TOMBSTONED), listAll(types.PROVIDER_STATUS_TOMBSTONED, 5))

	response, err := f.queryServer.Providers(f.ctx, &types.QueryProvidersRequest{
		Status:     types.PROVIDER_STATUS_JAILED,
		Pagination: &query.PageRequest{Limit: 1, CountTotal: true},
	})
	require.NoError(t, err)
	require.Len(t, response.Providers, 1)
	require.Equal(t, uint64(3), response.Pagination.Total)

	response, err = f.queryServer.Providers(f.ctx, &types.QueryProvidersRequest{
		Status:     types.PROVIDER_STATUS_ACTIVE,
		Pagination: &query.PageRequest{Offset: 2, Limit: 5},
	})
	require.NoError(t, err)
	require.Len(t, response.Providers, 1)

	_, err = f.queryServer.Providers(f.ctx, &types.QueryProvidersRequest{Status: 42})
	requireStatus(t, err, codes.InvalidArgument, "unknown provider status 42")
	_, err = f.queryServer.Providers(f.ctx, &types.QueryProvidersRequest{Pagination: &query.PageRequest{Key: []byte{1}, Offset: 1}})
	requireStatus(t, err, codes.InvalidArgument, "pagination")
	_, err = f.queryServer.Providers(f.ctx, nil)
	requireStatus(t, err, codes.InvalidArgument, "empty request")
}

func addressBytes(t *testing.T, f *fixture, texts []string) []string {
	t.Helper()
	var raw []string
	for _, text := range texts {
		addr, err := f.addressCodec.StringToBytes(text)
		require.NoError(t, err)
		raw = append(raw, string(addr))
	}
	return raw
}

func TestQueryUnbondings(t *testing.T) {
	f := newFixture(t)
	alice := f.registerProvider("alice", 10_000_000, 10_000_000)
	bob := f.registerProvider("bob", 10_000_000, 10_000_000)
	for _, operator := range []sdk.AccAddress{alice, bob, alice, alice} {
		_, err := f.msgServer.Unbond(f.ctx, &types.MsgUnbond{Operator: f.addressText(operator), Amount: udepin(1_000)})
		require.NoError(t, err)
	}
	idsOf := func(operator sdk.AccAddress, limit uint64) []uint64 {
		unbondings := pageThrough(t, limit, func(page *query.PageRequest) ([]types.Unbonding, *query.PageResponse, error) {
			response, err := f.queryServer.Unbondings(f.ctx, &types.QueryUnbondingsRequest{Operator: f.addressText(operator), Pagination: page})
			if err != nil {
				return nil, nil, err
			}
			return response.Unbondings, response.Pagination, nil
		})
		var ids []uint64
		for _, unbonding := range unbondings {
			require.Equal(t, f.addressText(operator), unbonding.Operator)
			ids = append(ids, unbonding.Id)
		}
		return ids
	}

	require.Equal(t, []uint64{1, 3, 4}, idsOf(alice, 2))
	require.Equal(t, []uint64{2}, idsOf(bob, 2))
	require.Empty(t, idsOf(account("stranger"), 2))

	_, err := f.queryServer.Unbondings(f.ctx, &types.QueryUnbondingsRequest{})
	requireStatus(t, err, codes.InvalidArgument, "operator address is required")
	_, err = f.queryServer.Unbondings(f.ctx, nil)
	requireStatus(t, err, codes.InvalidArgument, "empty request")
}

func TestQueryLocks(t *testing.T) {
	f := newFixture(t)
	alice := f.registerProvider("alice", 10_000_000, 10_000_000)
	bob := f.registerProvider("bob", 10_000_000, 10_000_000)
	require.NoError(t, f.keeper.LockCollateral(f.ctx, alice, "market/lease/2", udepin(2)))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, bob, "market/lease/3", udepin(3)))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, alice, "market/lease/1", udepin(1)))
	require.NoError(t, f.keeper.LockCollateral(f.ctx, alice, "verify/dispute/1", udepin(4)))

	locks := pageThrough(t, 2, func(page *query.PageRequest) ([]types.CollateralLock, *query.PageResponse, error) {
		response, err := f.queryServer.Locks(f.ctx, &types.QueryLocksRequest{Operator: f.addressText(alice), Pagination: page})
		if err != nil {
			return nil, nil, err
		}
		return response.Locks, response.Pagination, nil
	})
	require.Equal(t, []types.CollateralLock{
		{Operator: f.addressText(alice), Ref: "market/lease/1", Amount: udepin(1)},
		{Operator: f.addressText(alice), Ref: "market/lease/2", Amount: udepin(2)},
		{Operator: f.addressText(alice), Ref: "verify/dispute/1", Amount: udepin(4)},
	}, locks)

	_, err := f.queryServer.Locks(f.ctx, &types.QueryLocksRequest{Operator: "depin1xyz"})
	requireStatus(t, err, codes.InvalidArgument, "invalid operator address")
	_, err = f.queryServer.Locks(f.ctx, nil)
	requireStatus(t, err, codes.InvalidArgument, "empty request")
}
