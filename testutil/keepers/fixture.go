// Package keepers builds a test context with the real x/auth, x/bank, x/stakingext,
// x/market, x/verify and x/shardregistry keepers over an in-memory multistore, so module tests exercise the
// real cross-module behaviour (escrow transfers, bonds, collateral) rather than fakes.
package keepers

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"

	"cosmossdk.io/log"
	"cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"

	"github.com/cosmos/cosmos-sdk/codec"
	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	"github.com/cosmos/cosmos-sdk/runtime"
	"github.com/cosmos/cosmos-sdk/testutil"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authkeeper "github.com/cosmos/cosmos-sdk/x/auth/keeper"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	bankkeeper "github.com/cosmos/cosmos-sdk/x/bank/keeper"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"
	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	minttypes "github.com/cosmos/cosmos-sdk/x/mint/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
	marketkeeper "github.com/depinchain/depinchain/x/market/keeper"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrykeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifykeeper "github.com/depinchain/depinchain/x/verify/keeper"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Denom is the test chain's only denomination.
const Denom = "udepin"

// Fixture is a block-driven test chain made of real keepers.
type Fixture struct {
	Ctx       sdk.Context
	Codec     codec.Codec
	Authority string

	AccountKeeper authkeeper.AccountKeeper
	BankKeeper    bankkeeper.BaseKeeper
	StakingExt    stakingextkeeper.Keeper
	Market        marketkeeper.Keeper
	Verify        verifykeeper.Keeper
	ShardRegistry shardregistrykeeper.Keeper
}

// communityPool stands in for x/distribution, which would drag in x/staking: it keeps
// the pool in the distribution module account, exactly where the real keeper keeps it.
type communityPool struct{ bank bankkeeper.BaseKeeper }

func (c communityPool) FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error {
	return c.bank.SendCoinsFromAccountToModule(ctx, sender, distrtypes.ModuleName, amount)
}

// New builds a fixture at height 1 with default params for every module.
func New(t testing.TB) *Fixture {
	t.Helper()
	chainparams.SetAddressPrefixes()
	enc := chainparams.MakeEncodingConfig()
	authtypes.RegisterInterfaces(enc.InterfaceRegistry) // module accounts are stored as Any
	markettypes.RegisterInterfaces(enc.InterfaceRegistry)
	verifytypes.RegisterInterfaces(enc.InterfaceRegistry)
	shardregistrytypes.RegisterInterfaces(enc.InterfaceRegistry)
	stakingexttypes.RegisterInterfaces(enc.InterfaceRegistry)

	keys := storetypes.NewKVStoreKeys(authtypes.StoreKey, banktypes.StoreKey, stakingexttypes.StoreKey, markettypes.StoreKey, verifytypes.StoreKey, shardregistrytypes.StoreKey)
	testCtx := testutil.DefaultContextWithKeys(keys, nil, nil)
	ctx := testCtx.WithBlockHeader(cmtproto.Header{Height: 1, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).
		WithHeaderHash([]byte("block-hash-at-height-1__________")).
		WithEventManager(sdk.NewEventManager())

	authority := authtypes.NewModuleAddress(govtypes.ModuleName).String()
	addrCodec := addresscodec.NewBech32Codec(chainparams.Bech32Prefix)
	maccPerms := map[string][]string{
		minttypes.ModuleName:          {authtypes.Minter},
		distrtypes.ModuleName:         nil,
		stakingexttypes.ModuleName:    nil,
		markettypes.ModuleName:        nil,
		verifytypes.ModuleName:        nil,
		shardregistrytypes.ModuleName: nil,
	}
	ak := authkeeper.NewAccountKeeper(enc.Codec, runtime.NewKVStoreService(keys[authtypes.StoreKey]),
		authtypes.ProtoBaseAccount, maccPerms, addrCodec, chainparams.Bech32Prefix, authority)
	bk := bankkeeper.NewBaseKeeper(enc.Codec, runtime.NewKVStoreService(keys[banktypes.StoreKey]), ak,
		map[string]bool{}, authority, log.NewNopLogger())
	sk := stakingextkeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[stakingexttypes.StoreKey]),
		addrCodec, ak, bk, communityPool{bk}, authority)
	mk := marketkeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[markettypes.StoreKey]),
		addrCodec, ak, bk, sk, authority)
	rk := shardregistrykeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[shardregistrytypes.StoreKey]),
		addrCodec, sk, mk, authority)
	vk := verifykeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[verifytypes.StoreKey]),
		addrCodec, ak, bk, mk, sk, rk, authority)

	// In a fixed order: account numbers (and so account sizes and gas) must not depend on
	// map iteration order.
	for _, name := range slices.Sorted(maps.Keys(maccPerms)) {
		ak.GetModuleAccount(ctx, name) // creates the module account
	}
	if err := sk.InitGenesis(ctx, stakingexttypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	if err := mk.InitGenesis(ctx, markettypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	if err := vk.InitGenesis(ctx, verifytypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	if err := rk.InitGenesis(ctx, shardregistrytypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	return &Fixture{Ctx: ctx, Codec: enc.Codec, Authority: authority, AccountKeeper: ak, BankKeeper: bk, StakingExt: sk, Market: mk, Verify: vk, ShardRegistry: rk}
}

// Fund mints coins to an address.
func (f *Fixture) Fund(t testing.TB, addr sdk.AccAddress, amount int64) {
	t.Helper()
	coins := sdk.NewCoins(sdk.NewInt64Coin(Denom, amount))
	if err := f.BankKeeper.MintCoins(f.Ctx, minttypes.ModuleName, coins); err != nil {
		t.Fatal(err)
	}
	if err := f.BankKeeper.SendCoinsFromModuleToAccount(f.Ctx, minttypes.ModuleName, addr, coins); err != nil {
		t.Fatal(err)
	}
}

// Balance returns an address's balance of the test denom.
func (f *Fixture) Balance(addr sdk.AccAddress) math.Int {
	return f.BankKeeper.GetBalance(f.Ctx, addr, Denom).Amount
}

// ModuleBalance returns a module account's balance of the test denom.
func (f *Fixture) ModuleBalance(module string) math.Int {
	return f.Balance(authtypes.NewModuleAddress(module))
}

// EndBlock runs the modules' end blockers in app order (verify, market, shardregistry, stakingext).
func (f *Fixture) EndBlock(t testing.TB) {
	t.Helper()
	if err := f.Verify.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Market.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ShardRegistry.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.StakingExt.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
}

// NextBlock ends the current block and begins the next one, blockTime later.
func (f *Fixture) NextBlock(t testing.TB, blockTime time.Duration) {
	t.Helper()
	f.EndBlock(t)
	height := f.Ctx.BlockHeight() + 1
	header := f.Ctx.BlockHeader()
	header.Height = height
	header.Time = header.Time.Add(blockTime)
	hash := make([]byte, 32)
	copy(hash, []byte("block-hash"))
	hash[31] = byte(height)
	hash[30] = byte(height >> 8)
	f.Ctx = f.Ctx.WithBlockHeader(header).WithHeaderHash(hash).WithEventManager(sdk.NewEventManager())
	if err := f.Market.BeginBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
}

// AdvanceBlocks runs n blocks of blockTime each.
func (f *Fixture) AdvanceBlocks(t testing.TB, n int, blockTime time.Duration) {
	t.Helper()
	for i := 0; i < n; i++ {
		f.NextBlock(t, blockTime)
	}
}
