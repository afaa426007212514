package keeper_test

import (
	"context"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"

	"cosmossdk.io/log"
	"cosmossdk.io/math"
	"cosmossdk.io/store"
	"cosmossdk.io/store/metrics"
	storetypes "cosmossdk.io/store/types"
	dbm "github.com/cosmos/cosmos-db"

	"github.com/cosmos/cosmos-sdk/codec"
	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	"github.com/cosmos/cosmos-sdk/runtime"
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
	"github.com/depinchain/depinchain/x/shardregistry/keeper"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// denom is the test chain's only denomination.
const denom = "udepin"

// fixture is a block-driven test chain of real keepers: auth, bank, stakingext, market
// (the randomness beacon and jobs) and shardregistry, over an in-memory multistore. It
// follows the shape of testutil/keepers, with x/shardregistry added.
type fixture struct {
	Ctx       sdk.Context
	Codec     codec.Codec
	Authority string

	AccountKeeper authkeeper.AccountKeeper
	BankKeeper    bankkeeper.BaseKeeper
	StakingExt    stakingextkeeper.Keeper
	Market        marketkeeper.Keeper
	Shards        keeper.Keeper

	cms storetypes.CommitMultiStore

	// processed counts the deadline entries EndBlock processed, per height.
	processed map[int64]int
	// eventsAt keeps the events of every finished block; the current block's are in Ctx.
	eventsAt map[int64][]abci.Event
}

// communityPool stands in for x/distribution, which would drag in x/staking: it keeps
// the pool in the distribution module account, where the real keeper keeps it.
type communityPool struct{ bank bankkeeper.BaseKeeper }

func (c communityPool) FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error {
	return c.bank.SendCoinsFromAccountToModule(ctx, sender, distrtypes.ModuleName, amount)
}

// newFixture builds a fixture at height 1 with default params for every module except
// x/shardregistry, whose genesis is given.
func newFixture(t testing.TB, gs *types.GenesisState) *fixture {
	t.Helper()
	chainparams.SetAddressPrefixes()
	enc := chainparams.MakeEncodingConfig()
	authtypes.RegisterInterfaces(enc.InterfaceRegistry)
	markettypes.RegisterInterfaces(enc.InterfaceRegistry)
	stakingexttypes.RegisterInterfaces(enc.InterfaceRegistry)
	types.RegisterInterfaces(enc.InterfaceRegistry)

	keys := storetypes.NewKVStoreKeys(authtypes.StoreKey, banktypes.StoreKey, stakingexttypes.StoreKey, markettypes.StoreKey, types.StoreKey)
	// The fixture keeps the multistore so that it can commit every block as a node does:
	// an uncommitted IAVL tree makes every iteration re-sort all pending writes.
	cms := store.NewCommitMultiStore(dbm.NewMemDB(), log.NewNopLogger(), metrics.NewNoOpMetrics())
	for _, key := range keys {
		cms.MountStoreWithDB(key, storetypes.StoreTypeIAVL, nil)
	}
	if err := cms.LoadLatestVersion(); err != nil {
		t.Fatal(err)
	}
	ctx := sdk.NewContext(cms, cmtproto.Header{}, false, log.NewNopLogger()).WithBlockHeader(cmtproto.Header{Height: 1, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).
		WithHeaderHash(blockHash(1)).
		WithEventManager(sdk.NewEventManager())

	authority := authtypes.NewModuleAddress(govtypes.ModuleName).String()
	addrCodec := addresscodec.NewBech32Codec(chainparams.Bech32Prefix)
	maccPerms := map[string][]string{
		minttypes.ModuleName:       {authtypes.Minter},
		distrtypes.ModuleName:      nil,
		stakingexttypes.ModuleName: nil,
		markettypes.ModuleName:     nil,
		types.ModuleName:           nil,
	}
	ak := authkeeper.NewAccountKeeper(enc.Codec, runtime.NewKVStoreService(keys[authtypes.StoreKey]),
		authtypes.ProtoBaseAccount, maccPerms, addrCodec, chainparams.Bech32Prefix, authority)
	bk := bankkeeper.NewBaseKeeper(enc.Codec, runtime.NewKVStoreService(keys[banktypes.StoreKey]), ak,
		map[string]bool{}, authority, log.NewNopLogger())
	sk := stakingextkeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[stakingexttypes.StoreKey]),
		addrCodec, ak, bk, communityPool{bk}, authority)
	mk := marketkeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[markettypes.StoreKey]),
		addrCodec, ak, bk, sk, authority)
	rk := keeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[types.StoreKey]), addrCodec, sk, mk, authority)

	for name := range maccPerms {
		ak.GetModuleAccount(ctx, name)
	}
	if err := sk.InitGenesis(ctx, stakingexttypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	if err := mk.InitGenesis(ctx, markettypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	if err := gs.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := rk.InitGenesis(ctx, gs); err != nil {
		t.Fatal(err)
	}
	f := &fixture{Ctx: ctx, Codec: enc.Codec, Authority: authority, AccountKeeper: ak, BankKeeper: bk,
		StakingExt: sk, Market: mk, Shards: rk, cms: cms, processed: map[int64]int{}, eventsAt: map[int64][]abci.Event{}}
	if err := mk.BeginBlocker(ctx); err != nil { // height 1's hash seeds period 0
		t.Fatal(err)
	}
	return f
}

// blockHash is the fixture's header hash at a height.
func blockHash(height int64) []byte {
	hash := make([]byte, 32)
	copy(hash, "block-hash")
	hash[29] = byte(height >> 16)
	hash[30] = byte(height >> 8)
	hash[31] = byte(height)
	return hash
}

// Fund mints coins to an address.
func (f *fixture) Fund(t testing.TB, addr sdk.AccAddress, amount int64) {
	t.Helper()
	coins := sdk.NewCoins(sdk.NewInt64Coin(denom, amount))
	if err := f.BankKeeper.MintCoins(f.Ctx, minttypes.ModuleName, coins); err != nil {
		t.Fatal(err)
	}
	if err := f.BankKeeper.SendCoinsFromModuleToAccount(f.Ctx, minttypes.ModuleName, addr, coins); err != nil {
		t.Fatal(err)
	}
}

// Balance returns an address's balance of the test denom.
func (f *fixture) Balance(addr sdk.AccAddress) math.Int {
	return f.BankKeeper.GetBalance(f.Ctx, addr, denom).Amount
}

// EndBlock runs the end blockers in app order: market, shardregistry, stakingext.
func (f *fixture) EndBlock(t testing.TB) {
	t.Helper()
	if err := f.Market.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
	n, err := f.Shards.EndBlocker(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.processed[f.Ctx.BlockHeight()] = n
	if err := f.StakingExt.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
	f.eventsAt[f.Ctx.BlockHeight()] = f.Ctx.EventManager().ABCIEvents()
	f.cms.Commit()
}

// NextBlock ends the current block and begins the next one, 6 s later.
func (f *fixture) NextBlock(t testing.TB) {
	t.Helper()
	f.EndBlock(t)
	header := f.Ctx.BlockHeader()
	header.Height++
	header.Time = header.Time.Add(6 * time.Second)
	f.Ctx = f.Ctx.WithBlockHeader(header).WithHeaderHash(blockHash(header.Height)).WithEventManager(sdk.NewEventManager())
	if err := f.Market.BeginBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
}

// JumpTo ends the current block and begins height h directly, skipping the blocks in
// between; only for tests where nothing is due in them.
func (f *fixture) JumpTo(t testing.TB, h int64) {
	t.Helper()
	f.EndBlock(t)
	header := f.Ctx.BlockHeader()
	header.Time = header.Time.Add(time.Duration(h-header.Height) * 6 * time.Second)
	header.Height = h
	f.Ctx = f.Ctx.WithBlockHeader(header).WithHeaderHash(blockHash(h)).WithEventManager(sdk.NewEventManager())
	if err := f.Market.BeginBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
}

// AdvanceTo runs blocks until the current height is h (h itself is begun, not ended).
func (f *fixture) AdvanceTo(t testing.TB, h int64) {
	t.Helper()
	for f.Ctx.BlockHeight() < h {
		f.NextBlock(t)
	}
}
