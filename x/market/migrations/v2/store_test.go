package v2_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/collections/indexes"
	"cosmossdk.io/core/address"
	"cosmossdk.io/core/store"
	storetypes "cosmossdk.io/store/types"

	"github.com/cosmos/cosmos-sdk/codec"
	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	"github.com/cosmos/cosmos-sdk/runtime"
	"github.com/cosmos/cosmos-sdk/testutil"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"

	"github.com/depinchain/depinchain/x/market/keeper"
	v2 "github.com/depinchain/depinchain/x/market/migrations/v2"
	"github.com/depinchain/depinchain/x/market/types"
)

// v1Leases is the version 1 layout of leases: the map with its provider and
// job indexes, and no state index. The test writes state through it the way
// the first release's keeper did.
type v1Leases struct {
	Provider *indexes.Multi[[]byte, uint64, types.Lease]
	Job      *indexes.Multi[uint64, uint64, types.Lease]
}

func (i v1Leases) IndexesList() []collections.Index[uint64, types.Lease] {
	return []collections.Index[uint64, types.Lease]{i.Provider, i.Job}
}

// accounts is the slice of x/auth the keeper's constructor checks.
type accounts struct{ codec address.Codec }

func (a accounts) AddressCodec() address.Codec { return a.codec }
func (accounts) GetModuleAddress(name string) sdk.AccAddress {
	return authtypes.NewModuleAddress(name)
}

func TestMigrateStoreBackfillsLeasesByState(t *testing.T) {
	key := storetypes.NewKVStoreKey(types.StoreKey)
	ctx := testutil.DefaultContextWithDB(t, key, storetypes.NewTransientStoreKey("transient_test")).Ctx
	storeService := runtime.NewKVStoreService(key)
	cdc := codec.NewProtoCodec(codectypes.NewInterfaceRegistry())
	addrCodec := addresscodec.NewBech32Codec("depin")
	alice, err := addrCodec.BytesToString(sdk.AccAddress("alice_______________"))
	require.NoError(t, err)
	bob, err := addrCodec.BytesToString(sdk.AccAddress("bob_________________"))
	require.NoError(t, err)

	// Version 1 state: three leases, two of them active.
	sb := collections.NewSchemaBuilder(storeService)
	old := collections.NewIndexedMap(sb, v2.LeasesKey, "leases", collections.Uint64Key, codec.CollValue[types.Lease](cdc),
		v1Leases{
			Provider: indexes.NewMulti(sb, collections.NewPrefix(6), "leases_by_provider", collections.BytesKey, collections.Uint64Key,
				func(_ uint64, l types.Lease) ([]byte, error) { return addrCodec.StringToBytes(l.Provider) }),
			Job: indexes.NewMulti(sb, collections.NewPrefix(7), "leases_by_job", collections.Uint64Key, collections.Uint64Key,
				func(_ uint64, l types.Lease) (uint64, error) { return l.JobId, nil }),
		})
	_, err = sb.Build()
	require.NoError(t, err)
	for _, l := range []types.Lease{
		{Id: 1, JobId: 1, Provider: alice, State: types.LEASE_STATE_ACTIVE},
		{Id: 2, JobId: 2, Provider: bob, State: types.LEASE_STATE_CLOSED, CloseReason: types.LEASE_CLOSE_REASON_COMPLETED},
		{Id: 3, JobId: 3, Provider: bob, State: types.LEASE_STATE_ACTIVE},
	} {
		require.NoError(t, old.Set(ctx, l.Id, l))
	}
	byState := indexEntries(t, ctx, storeService)
	require.Empty(t, byState, "version 1 has no leases-by-state index")

	authority, err := addrCodec.BytesToString(authtypes.NewModuleAddress("gov"))
	require.NoError(t, err)
	k := keeper.NewKeeper(cdc, storeService, addrCodec, accounts{addrCodec}, nil, nil, authority)
	require.NoError(t, keeper.NewMigrator(k).Migrate1to2(ctx))

	want := []collections.Pair[int32, uint64]{
		collections.Join(int32(types.LEASE_STATE_ACTIVE), uint64(1)),
		collections.Join(int32(types.LEASE_STATE_ACTIVE), uint64(3)),
		collections.Join(int32(types.LEASE_STATE_CLOSED), uint64(2)),
	}
	require.Equal(t, want, indexEntries(t, ctx, storeService))

	// The version 2 keeper reads the back-filled index: active leases are
	// listed from it, and the version 1 indexes still answer.
	query := keeper.NewQueryServerImpl(k)
	res, err := query.Leases(ctx, &types.QueryLeasesRequest{ActiveOnly: true})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 3}, leaseIDs(res.Leases))
	res, err = query.Leases(ctx, &types.QueryLeasesRequest{Provider: bob})
	require.NoError(t, err)
	require.Equal(t, []uint64{2, 3}, leaseIDs(res.Leases))

	// The keeper keeps the migrated entries up to date: closing lease 3 moves
	// it, leaving no stale "active" entry behind.
	lease, err := k.GetLease(ctx, 3)
	require.NoError(t, err)
	lease.State = types.LEASE_STATE_CLOSED
	require.NoError(t, k.Leases.Set(ctx, lease.Id, lease))
	res, err = query.Leases(ctx, &types.QueryLeasesRequest{ActiveOnly: true})
	require.NoError(t, err)
	require.Equal(t, []uint64{1}, leaseIDs(res.Leases))

	// Running it again changes nothing.
	before := indexEntries(t, ctx, storeService)
	require.NoError(t, v2.MigrateStore(ctx, storeService, cdc))
	require.Equal(t, before, indexEntries(t, ctx, storeService))
}

func TestMigrateStoreRejectsMisfiledLease(t *testing.T) {
	key := storetypes.NewKVStoreKey(types.StoreKey)
	ctx := testutil.DefaultContextWithDB(t, key, storetypes.NewTransientStoreKey("transient_test")).Ctx
	storeService := runtime.NewKVStoreService(key)
	cdc := codec.NewProtoCodec(codectypes.NewInterfaceRegistry())
	sb := collections.NewSchemaBuilder(storeService)
	leases := collections.NewMap(sb, v2.LeasesKey, "leases", collections.Uint64Key, codec.CollValue[types.Lease](cdc))
	_, err := sb.Build()
	require.NoError(t, err)
	require.NoError(t, leases.Set(ctx, 7, types.Lease{Id: 8, State: types.LEASE_STATE_ACTIVE}))

	require.ErrorContains(t, v2.MigrateStore(ctx, storeService, cdc), "lease stored under id 7 says it is lease 8")
}

// indexEntries reads the raw leases-by-state index.
func indexEntries(t *testing.T, ctx sdk.Context, storeService store.KVStoreService) []collections.Pair[int32, uint64] {
	t.Helper()
	sb := collections.NewSchemaBuilder(storeService)
	set := collections.NewKeySet(sb, v2.LeasesByStateKey, "leases_by_state",
		collections.PairKeyCodec(collections.Int32Key, collections.Uint64Key))
	_, err := sb.Build()
	require.NoError(t, err)
	iter, err := set.Iterate(ctx, nil)
	require.NoError(t, err)
	keys, err := iter.Keys()
	require.NoError(t, err)
	return keys
}

func leaseIDs(leases []types.Lease) []uint64 {
	ids := make([]uint64, 0, len(leases))
	for _, l := range leases {
		ids = append(ids, l.Id)
	}
	return ids
}
