// Package keepers builds a test context with the real x/auth, x/bank, x/stakingext,
// x/market, x/verify and x/shardregistry keepers over an in-memory multistore, so module
// tests exercise the real cross-module behaviour (escrow transfers, bonds, collateral)
// rather than fakes; and it holds what the modules' keeper tests share: snapshots of the
// state a rejected message must leave alone (snapshot.go) and typed events.
package keepers

import (
	"context"
	"maps"
	"slices"
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
	// Keys are the modules' store keys, by store name.
	Keys map[string]*storetypes.KVStoreKey

	AccountKeeper authkeeper.AccountKeeper
	BankKeeper    bankkeeper.BaseKeeper
	StakingExt    stakingextkeeper.Keeper
	Market        marketkeeper.Keeper
	Verify        verifykeeper.Keeper
	ShardRegistry shardregistrykeeper.Keeper

	// EventsAt keeps the events of every finished block; the current block's are in Ctx.
	EventsAt map[int64][]abci.Event
	// Processed counts the deadline entries x/shardregistry's end blocker processed, per
	// finished block.
	Processed map[int64]int

	cms storetypes.CommitMultiStore
}

// An Option changes how New builds the chain.
type Option func(*options)

type options struct {
	shardGenesis *shardregistrytypes.GenesisState
	committing   bool
	beginFirst   bool
	// defaultCustody is x/market's default_custody (off unless WithDefaultCustody).
	defaultCustody markettypes.CustodySpec
	verifyMarket   func(marketkeeper.Keeper) verifytypes.MarketKeeper
}

// WithDefaultCustody starts x/market with default_custody c (the fixture's is off).
func WithDefaultCustody(c markettypes.CustodySpec) Option {
	return func(o *options) { o.defaultCustody = c }
}

// WithShardRegistryGenesis starts x/shardregistry from gs (validated first) instead of
// its default genesis.
func WithShardRegistryGenesis(gs *shardregistrytypes.GenesisState) Option {
	return func(o *options) { o.shardGenesis = gs }
}

// Committing keeps the state in a multistore that EndBlock commits after every block, as
// a node does: an uncommitted IAVL tree makes every iteration re-sort all pending writes,
// which scenarios with thousands of entries notice.
func Committing() Option { return func(o *options) { o.committing = true } }

// BeginFirstBlock begins height 1 as a node begins a block: its header hash is
// BlockHash(1) and x/market records it, so storage challenges of period 0 have a seed.
func BeginFirstBlock() Option { return func(o *options) { o.beginFirst = true } }

// WithVerifyMarket builds x/verify with wrap(the market keeper) as its MarketKeeper: a
// referee test fakes the rounds x/market holds (a round's roots and commits) without
// running every round through x/market.
func WithVerifyMarket(wrap func(marketkeeper.Keeper) verifytypes.MarketKeeper) Option {
	return func(o *options) { o.verifyMarket = wrap }
}

// BlockHash is the fixture's header hash at a height (after the first block, unless
// BeginFirstBlock).
func BlockHash(height int64) []byte {
	hash := make([]byte, 32)
	copy(hash, "block-hash")
	hash[29] = byte(height >> 16)
	hash[30] = byte(height >> 8)
	hash[31] = byte(height)
	return hash
}

// communityPool stands in for x/distribution, which would drag in x/staking: it keeps
// the pool in the distribution module account, exactly where the real keeper keeps it.
type communityPool struct{ bank bankkeeper.BaseKeeper }

func (c communityPool) FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error {
	return c.bank.SendCoinsFromAccountToModule(ctx, sender, distrtypes.ModuleName, amount)
}

// New builds a fixture at height 1 with default params for every module.
func New(t testing.TB, opts ...Option) *Fixture {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	chainparams.SetAddressPrefixes()
	enc := chainparams.MakeEncodingConfig()
	authtypes.RegisterInterfaces(enc.InterfaceRegistry) // module accounts are stored as Any
	markettypes.RegisterInterfaces(enc.InterfaceRegistry)
	verifytypes.RegisterInterfaces(enc.InterfaceRegistry)
	shardregistrytypes.RegisterInterfaces(enc.InterfaceRegistry)
	stakingexttypes.RegisterInterfaces(enc.InterfaceRegistry)

	keys := storetypes.NewKVStoreKeys(authtypes.StoreKey, banktypes.StoreKey, stakingexttypes.StoreKey, markettypes.StoreKey, verifytypes.StoreKey, shardregistrytypes.StoreKey)
	var ctx sdk.Context
	var cms storetypes.CommitMultiStore
	if o.committing {
		cms = store.NewCommitMultiStore(dbm.NewMemDB(), log.NewNopLogger(), metrics.NewNoOpMetrics())
		for _, key := range keys {
			cms.MountStoreWithDB(key, storetypes.StoreTypeIAVL, nil)
		}
		if err := cms.LoadLatestVersion(); err != nil {
			t.Fatal(err)
		}
		ctx = sdk.NewContext(cms, cmtproto.Header{}, false, log.NewNopLogger())
	} else {
		ctx = testutil.DefaultContextWithKeys(keys, nil, nil)
	}
	firstHash := []byte("block-hash-at-height-1__________")
	if o.beginFirst {
		firstHash = BlockHash(1)
	}
	ctx = ctx.WithBlockHeader(cmtproto.Header{Height: 1, Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).
		WithHeaderHash(firstHash).
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
	// Before x/verify copies the market keeper (it registers checkpoint custody, excludes
	// round workers and rejects globals, which release their custody objects).
	mk.SetCustodyKeeper(rk)
	var vm verifytypes.MarketKeeper = mk
	if o.verifyMarket != nil {
		vm = o.verifyMarket(mk)
	}
	vk := verifykeeper.NewKeeper(enc.Codec, runtime.NewKVStoreService(keys[verifytypes.StoreKey]),
		addrCodec, ak, bk, vm, sk, rk, communityPool{bk}, authority)
	sk.SetSlashWindow(vk)
	mk.SetWorkloadReferee(vk)
	mk.SetRoundTraceKeeper(vk)

	// In a fixed order: account numbers (and so account sizes and gas) must not depend on
	// map iteration order.
	for _, name := range slices.Sorted(maps.Keys(maccPerms)) {
		ak.GetModuleAccount(ctx, name) // creates the module account
	}
	if err := sk.InitGenesis(ctx, stakingexttypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	// No storage holder runs in the fixture unless a test registers one, so x/market's
	// default custody is off and custody is opt-in (a job spec's custody section);
	// WithDefaultCustody turns it on.
	marketGenesis := markettypes.DefaultGenesis()
	marketGenesis.Params.DefaultCustody = o.defaultCustody
	if err := mk.InitGenesis(ctx, marketGenesis); err != nil {
		t.Fatal(err)
	}
	if err := vk.InitGenesis(ctx, verifytypes.DefaultGenesis()); err != nil {
		t.Fatal(err)
	}
	shardGenesis := shardregistrytypes.DefaultGenesis()
	if o.shardGenesis != nil {
		shardGenesis = o.shardGenesis
		if err := shardGenesis.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rk.InitGenesis(ctx, shardGenesis); err != nil {
		t.Fatal(err)
	}
	f := &Fixture{
		Ctx: ctx, Codec: enc.Codec, Authority: authority, Keys: keys,
		AccountKeeper: ak, BankKeeper: bk, StakingExt: sk, Market: mk, Verify: vk, ShardRegistry: rk,
		EventsAt: map[int64][]abci.Event{}, Processed: map[int64]int{}, cms: cms,
	}
	if o.beginFirst {
		if err := mk.BeginBlocker(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return f
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
	n, err := f.ShardRegistry.EndBlocker(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.Processed[f.Ctx.BlockHeight()] = n
	if err := f.StakingExt.EndBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
	f.EventsAt[f.Ctx.BlockHeight()] = f.Ctx.EventManager().ABCIEvents()
	if f.cms != nil {
		f.cms.Commit()
	}
}

// Commit writes the working state to the IAVL trees of a Committing fixture (EndBlock
// does it after every block), so that later reads go to committed state.
func (f *Fixture) Commit(t testing.TB) {
	t.Helper()
	if f.cms == nil {
		t.Fatal("Commit needs a fixture built with Committing()")
	}
	f.cms.Commit()
}

// NextBlock ends the current block and begins the next one, blockTime later.
func (f *Fixture) NextBlock(t testing.TB, blockTime time.Duration) {
	t.Helper()
	f.JumpTo(t, f.Ctx.BlockHeight()+1, blockTime)
}

// JumpTo ends the current block and begins height h directly, blockTime per skipped
// height later, skipping the blocks in between; only for tests where nothing is due in
// them.
func (f *Fixture) JumpTo(t testing.TB, h int64, blockTime time.Duration) {
	t.Helper()
	f.EndBlock(t)
	header := f.Ctx.BlockHeader()
	header.Time = header.Time.Add(time.Duration(h-header.Height) * blockTime)
	header.Height = h
	f.Ctx = f.Ctx.WithBlockHeader(header).WithHeaderHash(BlockHash(h)).WithEventManager(sdk.NewEventManager())
	if err := f.Market.BeginBlocker(f.Ctx); err != nil {
		t.Fatal(err)
	}
}

// AdvanceTo runs blocks of blockTime until the current height is h (h itself is begun,
// not ended).
func (f *Fixture) AdvanceTo(t testing.TB, h int64, blockTime time.Duration) {
	t.Helper()
	for f.Ctx.BlockHeight() < h {
		f.NextBlock(t, blockTime)
	}
}

// Events is every event so far: those of finished blocks, in order, and the current
// block's.
func (f *Fixture) Events() []abci.Event {
	var out []abci.Event
	for _, h := range slices.Sorted(maps.Keys(f.EventsAt)) {
		out = append(out, f.EventsAt[h]...)
	}
	return append(out, f.Ctx.EventManager().ABCIEvents()...)
}

// AdvanceBlocks runs n blocks of blockTime each.
func (f *Fixture) AdvanceBlocks(t testing.TB, n int, blockTime time.Duration) {
	t.Helper()
	for i := 0; i < n; i++ {
		f.NextBlock(t, blockTime)
	}
}

// Snapshot reads the parts of the state a rejected message must leave alone, counting
// the current context's events.
func (f *Fixture) Snapshot(t testing.TB, parts ...Part) Snapshot {
	t.Helper()
	return TakeSnapshot(t, f.context, parts...)
}

func (f *Fixture) context() sdk.Context { return f.Ctx }

// MarketState is x/market's exported genesis.
func (f *Fixture) MarketState() Part {
	return GenesisPart("market state", f.Codec, f.context, f.Market.ExportGenesis)
}

// StakingExtState is x/stakingext's exported genesis.
func (f *Fixture) StakingExtState() Part {
	return GenesisPart("stakingext state", f.Codec, f.context, f.StakingExt.ExportGenesis)
}

// VerifyState is x/verify's exported genesis.
func (f *Fixture) VerifyState() Part {
	return GenesisPart("verify state", f.Codec, f.context, f.Verify.ExportGenesis)
}

// ShardRegistryState is x/shardregistry's exported genesis.
func (f *Fixture) ShardRegistryState() Part {
	return GenesisPart("shardregistry state", f.Codec, f.context, f.ShardRegistry.ExportGenesis)
}

// Balances is every bank balance and the supply.
func (f *Fixture) Balances() Part {
	return GenesisPart("balances", f.Codec, f.context, func(ctx context.Context) (*banktypes.GenesisState, error) {
		return f.BankKeeper.ExportGenesis(ctx), nil
	})
}

// MarketDeadlines are x/market's deadline indexes, which its genesis leaves out.
func (f *Fixture) MarketDeadlines() []Part {
	return []Part{
		KeySetPart("market bidding deadlines", f.context, f.Market.BiddingDeadlines),
		KeySetPart("market checkpoint deadlines", f.context, f.Market.CheckpointDeadlines),
		KeySetPart("market time deadlines", f.context, f.Market.TimeDeadlines),
		KeySetPart("market rate checks", f.context, f.Market.RateChecks),
		KeySetPart("market round deadlines", f.context, f.Market.RoundDeadlines),
	}
}

// VerifyDeadlines are x/verify's finalization queue and move deadlines, which its
// genesis leaves out.
func (f *Fixture) VerifyDeadlines() []Part {
	return []Part{
		KeySetPart("verify finalization queue", f.context, f.Verify.FinalizationQueue),
		KeySetPart("verify move deadlines", f.context, f.Verify.MoveDeadlines),
		KeySetPart("verify file query deadlines", f.context, f.Verify.FileQueryDeadlines),
	}
}

// ShardRegistryIndexes are x/shardregistry's proof deadlines and open slots, which its
// genesis leaves out.
func (f *Fixture) ShardRegistryIndexes() []Part {
	return []Part{
		KeySetPart("shardregistry deadlines", f.context, f.ShardRegistry.Deadlines),
		KeySetPart("shardregistry open slots", f.context, f.ShardRegistry.OpenSlots),
	}
}
