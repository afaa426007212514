package v2_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"

	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	"github.com/cosmos/cosmos-sdk/runtime"
	"github.com/cosmos/cosmos-sdk/testutil"
	sdk "github.com/cosmos/cosmos-sdk/types"

	v2 "github.com/depinchain/depinchain/x/verify/migrations/v2"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Version 1 params: what the first two releases stored, field 6 (the challenge cap)
// included, none of version 2's fields.
func TestMigrateFillsTheNewParams(t *testing.T) {
	key := storetypes.NewKVStoreKey(types.StoreKey)
	ctx := testutil.DefaultContextWithDB(t, key, storetypes.NewTransientStoreKey("transient_test")).Ctx
	cdc := codec.NewProtoCodec(codectypes.NewInterfaceRegistry())
	sb := collections.NewSchemaBuilder(runtime.NewKVStoreService(key))
	params := collections.NewItem(sb, types.ParamsKey, "params", codec.CollValue[types.Params](cdc))
	_, err := sb.Build()
	require.NoError(t, err)

	old := types.Params{
		ChallengeWindow: 40, MoveTimeout: 7, ChallengerBond: sdk.NewInt64Coin("udepin", 123),
		FraudSlashFraction: math.LegacyNewDecWithPrec(3, 1), WhistleblowerShare: math.LegacyNewDecWithPrec(6, 1),
		MaxStepMacs: 1 << 20, GasPerMac: 2, GasPerHash: 40, GasPerByte: 3, MaxDeadlinesPerBlock: 9, MaxMetrics: 4,
	}
	bz, err := old.Marshal()
	require.NoError(t, err)
	// Append field 6 (varint 8) as version 1 wrote it: it must be skipped.
	bz = append(bz, 6<<3, 8)
	store := ctx.KVStore(key)
	store.Set(types.ParamsKey, bz)

	require.NoError(t, v2.Migrate(ctx, params))
	got, err := params.Get(ctx)
	require.NoError(t, err)
	d := types.DefaultParams()
	want := old
	want.LostBondProviderShare, want.LostBondOwnerShare, want.OwnerCompensationRatio = d.LostBondProviderShare, d.LostBondOwnerShare, d.OwnerCompensationRatio
	want.AuditFeePerStep = d.AuditFeePerStep
	want.AuditFraudSlashFraction, want.AuditMissSlashFraction, want.WithheldThreshold = d.AuditFraudSlashFraction, d.AuditMissSlashFraction, d.WithheldThreshold
	require.Equal(t, want.String(), got.String())
	// The custody params come with version 4's own migration, the file query deposit with
	// version 5's.
	got.CustodyGraceBlocks, got.CustodyRecheckBlocks = d.CustodyGraceBlocks, d.CustodyRecheckBlocks
	got.FileQueryDeposit = d.FileQueryDeposit
	require.NoError(t, got.Validate())
}
