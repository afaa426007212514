package keeper_test

import (
	"context"
	"crypto/sha256"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/core/address"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/log"
	"cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"

	"github.com/cosmos/cosmos-sdk/codec"
	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	codectestutil "github.com/cosmos/cosmos-sdk/codec/testutil"
	"github.com/cosmos/cosmos-sdk/runtime"
	"github.com/cosmos/cosmos-sdk/testutil"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authkeeper "github.com/cosmos/cosmos-sdk/x/auth/keeper"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	bankkeeper "github.com/cosmos/cosmos-sdk/x/bank/keeper"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/staking_ext/keeper"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

const (
	bech32Prefix = "depin"
	bondDenom    = types.DefaultBondDenom
	// mintModule funds test accounts; distributionModule stands in for the
	// community pool the fake distribution keeper pays into.
	mintModule         = "mint"
	distributionModule = "distribution"
	govModule          = "gov"
)

// genesisTime is the block time every fixture starts at.
var genesisTime = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	// sdk.AccAddress.String and x/bank's blocked-address lookup use the
	// global prefix; make it the chain's.
	config := sdk.GetConfig()
	config.SetBech32PrefixForAccount(bech32Prefix, bech32Prefix+sdk.PrefixPublic)
	os.Exit(m.Run())
}

// fakeDistribution is the one part of x/distribution stakingext uses: the
// community pool, here the distribution module account reached through the
// real bank keeper.
type fakeDistribution struct {
	bank bankkeeper.Keeper
}

func (d fakeDistribution) FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error {
	return d.bank.SendCoinsFromAccountToModule(ctx, sender, distributionModule, amount)
}

// newCodec is a proto codec for the auth, bank and stakingext types with
// the chain's address prefixes.
func newCodec() *codec.ProtoCodec {
	cdc := codectestutil.CodecOptions{AccAddressPrefix: bech32Prefix, ValAddressPrefix: bech32Prefix + "valoper"}.NewCodec()
	authtypes.RegisterInterfaces(cdc.InterfaceRegistry())
	banktypes.RegisterInterfaces(cdc.InterfaceRegistry())
	types.RegisterInterfaces(cdc.InterfaceRegistry())
	return cdc
}

// fixture is a stakingext keeper on real x/auth and x/bank keepers over an
// in-memory multistore.
type fixture struct {
	t            *testing.T
	ctx          sdk.Context
	keys         map[string]*storetypes.KVStoreKey
	keeper       keeper.Keeper
	msgServer    types.MsgServer
	queryServer  types.QueryServer
	bank         bankkeeper.BaseKeeper
	addressCodec address.Codec

	authority      string
	moduleAddress  sdk.AccAddress
	communityPool  sdk.AccAddress
	blockedAddress sdk.AccAddress
}

// newFixture builds a chain at genesisTime with default params. Every test
// that uses it has the module invariants checked when it ends.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	keys := storetypes.NewKVStoreKeys(authtypes.StoreKey, banktypes.StoreKey, types.StoreKey)
	ctx := testutil.DefaultContextWithKeys(keys, nil, nil).WithBlockHeight(1).WithBlockTime(genesisTime)
	cdc := newCodec()

	addressCodec := addresscodec.NewBech32Codec(bech32Prefix)
	authority, err := addressCodec.BytesToString(authtypes.NewModuleAddress(govModule))
	require.NoError(t, err)
	moduleAccountPerms := map[string][]string{
		mintModule:         {authtypes.Minter},
		distributionModule: nil,
		govModule:          nil,
		types.ModuleName:   nil,
	}
	accounts := authkeeper.NewAccountKeeper(cdc, runtime.NewKVStoreService(keys[authtypes.StoreKey]),
		authtypes.ProtoBaseAccount, moduleAccountPerms, addressCodec, bech32Prefix, authority)
	// As in app.go, module accounts other than stakingext's cannot receive
	// plain sends (gov stands for such an account in tests).
	blocked := map[string]bool{authtypes.NewModuleAddress(govModule).String(): true}
	bank := bankkeeper.NewBaseKeeper(cdc, runtime.NewKVStoreService(keys[banktypes.StoreKey]),
		accounts, blocked, authority, log.NewNopLogger())
	require.NoError(t, bank.SetParams(ctx, banktypes.DefaultParams()))
	for name := range moduleAccountPerms {
		accounts.GetModuleAccount(ctx, name)
	}

	k := keeper.NewKeeper(cdc, runtime.NewKVStoreService(keys[types.StoreKey]), addressCodec,
		accounts, bank, fakeDistribution{bank: bank}, authority)
	require.NoError(t, k.InitGenesis(ctx, types.DefaultGenesis()))

	f := &fixture{
		t:              t,
		ctx:            ctx,
		keys:           keys,
		keeper:         k,
		msgServer:      keeper.NewMsgServerImpl(k),
		queryServer:    keeper.NewQueryServerImpl(k),
		bank:           bank,
		addressCodec:   addressCodec,
		authority:      authority,
		moduleAddress:  authtypes.NewModuleAddress(types.ModuleName),
		communityPool:  authtypes.NewModuleAddress(distributionModule),
		blockedAddress: authtypes.NewModuleAddress(govModule),
	}
	t.Cleanup(f.requireInvariants)
	return f
}

// requireInvariants fails the test when any module invariant is broken.
func (f *fixture) requireInvariants() {
	f.t.Helper()
	message, broken := keeper.AllInvariants(f.keeper)(f.ctx)
	require.False(f.t, broken, message)
}

// account derives a fresh test address from a label.
func account(label string) sdk.AccAddress {
	hash := sha256.Sum256([]byte(label))
	return sdk.AccAddress(hash[:20])
}

func (f *fixture) addressText(addr sdk.AccAddress) string {
	f.t.Helper()
	text, err := f.addressCodec.BytesToString(addr)
	require.NoError(f.t, err)
	return text
}

func udepin(amount int64) sdk.Coin {
	return sdk.NewInt64Coin(bondDenom, amount)
}

// fund mints amount udepin to addr.
func (f *fixture) fund(addr sdk.AccAddress, amount int64) {
	f.t.Helper()
	coins := sdk.NewCoins(udepin(amount))
	require.NoError(f.t, f.bank.MintCoins(f.ctx, mintModule, coins))
	require.NoError(f.t, f.bank.SendCoinsFromModuleToAccount(f.ctx, mintModule, addr, coins))
}

func (f *fixture) balance(addr sdk.AccAddress) math.Int {
	return f.bank.GetBalance(f.ctx, addr, bondDenom).Amount
}

// advance moves the chain forward by blocks blocks and d of time.
func (f *fixture) advance(blocks int64, d time.Duration) {
	f.ctx = f.ctx.WithBlockHeight(f.ctx.BlockHeight() + blocks).WithBlockTime(f.ctx.BlockTime().Add(d))
}

func h100s(count uint32) types.GPUInventory {
	return types.GPUInventory{Model: "H100-SXM5-80GB", VramMib: 81920, Count: count}
}

func a100s(count uint32) types.GPUInventory {
	return types.GPUInventory{Model: "A100-SXM4-40GB", VramMib: 40960, Count: count}
}

// registerMsg is a valid registration of operator with 8 H100s and the
// minimum bond of 8 DEPIN.
func (f *fixture) registerMsg(operator sdk.AccAddress) *types.MsgRegisterProvider {
	return &types.MsgRegisterProvider{
		Operator: f.addressText(operator),
		Moniker:  "gpu-farm-1",
		Endpoint: "https://gpu1.example.com:8443",
		Region:   "eu-west",
		Gpus:     []types.GPUInventory{h100s(8)},
		Bond:     udepin(8_000_000),
	}
}

// registerProvider funds operator with funds udepin and registers it with
// bond udepin bonded (8 H100s).
func (f *fixture) registerProvider(label string, funds, bond int64) sdk.AccAddress {
	f.t.Helper()
	operator := account(label)
	f.fund(operator, funds)
	msg := f.registerMsg(operator)
	msg.Bond = udepin(bond)
	_, err := f.msgServer.RegisterProvider(f.ctx, msg)
	require.NoError(f.t, err)
	return operator
}

func (f *fixture) provider(operator sdk.AccAddress) types.Provider {
	f.t.Helper()
	provider, err := f.keeper.GetProvider(f.ctx, operator)
	require.NoError(f.t, err)
	return provider
}

// snapshot is every byte of the auth, bank and stakingext stores plus the number of
// events emitted so far.
func (f *fixture) snapshot() keepers.Snapshot {
	f.t.Helper()
	var parts []keepers.Part
	for _, name := range slices.Sorted(maps.Keys(f.keys)) {
		parts = append(parts, keepers.StorePart("the "+name+" store", func() sdk.Context { return f.ctx }, f.keys[name]))
	}
	return keepers.TakeSnapshot(f.t, func() sdk.Context { return f.ctx }, parts...)
}

// requireRejected runs call, requires it to fail with want, and requires
// that it left every store byte-for-byte as it was and emitted no event.
// It returns the error for further checks of its message.
func (f *fixture) requireRejected(want *errorsmod.Error, call func() error) error {
	f.t.Helper()
	return keepers.RequireRejected(f.t, want, f.snapshot, call)
}

// eventsOfType returns the emitted events of one typed event type, e.g. "depinchain.stakingext.v1.EventBonded".
func (f *fixture) eventsOfType(eventType string) []sdk.Event {
	var events []sdk.Event
	for _, event := range f.ctx.EventManager().Events() {
		if event.Type == eventType {
			events = append(events, event)
		}
	}
	return events
}

// newEvents gives the fixture a fresh event manager, so that a test sees
// only the events of what it does next.
func (f *fixture) newEvents() {
	f.ctx = f.ctx.WithEventManager(sdk.NewEventManager())
}

func TestNewKeeperRequiresModuleAccount(t *testing.T) {
	f := newFixture(t)
	accountsWithoutModule := authkeeper.NewAccountKeeper(codectestutil.CodecOptions{}.NewCodec(),
		runtime.NewKVStoreService(f.keys[authtypes.StoreKey]), authtypes.ProtoBaseAccount,
		map[string][]string{}, f.addressCodec, bech32Prefix, f.authority)
	require.PanicsWithValue(t, "the stakingext module account has not been set", func() {
		keeper.NewKeeper(nil, runtime.NewKVStoreService(f.keys[types.StoreKey]), f.addressCodec,
			accountsWithoutModule, f.bank, fakeDistribution{bank: f.bank}, f.authority)
	})
}
