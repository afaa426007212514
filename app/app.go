// Package app wires depinchain: the SDK's standard modules plus the
// project's own (x/stakingext, x/market), on a classic explicitly-wired
// BaseApp so every keeper dependency is visible in one place.
package app

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	abci "github.com/cometbft/cometbft/abci/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/spf13/cast"

	autocliv1 "cosmossdk.io/api/cosmos/autocli/v1"
	reflectionv1 "cosmossdk.io/api/cosmos/reflection/v1"
	"cosmossdk.io/client/v2/autocli"
	"cosmossdk.io/core/appmodule"
	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"
	"cosmossdk.io/x/evidence"
	evidencekeeper "cosmossdk.io/x/evidence/keeper"
	evidencetypes "cosmossdk.io/x/evidence/types"
	"cosmossdk.io/x/feegrant"
	feegrantkeeper "cosmossdk.io/x/feegrant/keeper"
	feegrantmodule "cosmossdk.io/x/feegrant/module"
	"cosmossdk.io/x/upgrade"
	upgradekeeper "cosmossdk.io/x/upgrade/keeper"
	upgradetypes "cosmossdk.io/x/upgrade/types"

	"github.com/cosmos/cosmos-sdk/baseapp"
	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/client/grpc/cmtservice"
	nodeservice "github.com/cosmos/cosmos-sdk/client/grpc/node"
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/codec/address"
	"github.com/cosmos/cosmos-sdk/codec/types"
	"github.com/cosmos/cosmos-sdk/runtime"
	runtimeservices "github.com/cosmos/cosmos-sdk/runtime/services"
	"github.com/cosmos/cosmos-sdk/server"
	"github.com/cosmos/cosmos-sdk/server/api"
	"github.com/cosmos/cosmos-sdk/server/config"
	servertypes "github.com/cosmos/cosmos-sdk/server/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	"github.com/cosmos/cosmos-sdk/version"
	"github.com/cosmos/cosmos-sdk/x/auth"
	"github.com/cosmos/cosmos-sdk/x/auth/ante"
	authcodec "github.com/cosmos/cosmos-sdk/x/auth/codec"
	authkeeper "github.com/cosmos/cosmos-sdk/x/auth/keeper"
	"github.com/cosmos/cosmos-sdk/x/auth/posthandler"
	authtx "github.com/cosmos/cosmos-sdk/x/auth/tx"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	"github.com/cosmos/cosmos-sdk/x/authz"
	authzkeeper "github.com/cosmos/cosmos-sdk/x/authz/keeper"
	authzmodule "github.com/cosmos/cosmos-sdk/x/authz/module"
	"github.com/cosmos/cosmos-sdk/x/bank"
	bankkeeper "github.com/cosmos/cosmos-sdk/x/bank/keeper"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"
	consensus "github.com/cosmos/cosmos-sdk/x/consensus"
	consensusparamkeeper "github.com/cosmos/cosmos-sdk/x/consensus/keeper"
	consensusparamtypes "github.com/cosmos/cosmos-sdk/x/consensus/types"
	distr "github.com/cosmos/cosmos-sdk/x/distribution"
	distrkeeper "github.com/cosmos/cosmos-sdk/x/distribution/keeper"
	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"
	"github.com/cosmos/cosmos-sdk/x/genutil"
	genutiltypes "github.com/cosmos/cosmos-sdk/x/genutil/types"
	"github.com/cosmos/cosmos-sdk/x/gov"
	govclient "github.com/cosmos/cosmos-sdk/x/gov/client"
	govkeeper "github.com/cosmos/cosmos-sdk/x/gov/keeper"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	govv1beta1 "github.com/cosmos/cosmos-sdk/x/gov/types/v1beta1"
	"github.com/cosmos/cosmos-sdk/x/mint"
	mintkeeper "github.com/cosmos/cosmos-sdk/x/mint/keeper"
	minttypes "github.com/cosmos/cosmos-sdk/x/mint/types"
	paramsclient "github.com/cosmos/cosmos-sdk/x/params/client"
	"github.com/cosmos/cosmos-sdk/x/slashing"
	slashingkeeper "github.com/cosmos/cosmos-sdk/x/slashing/keeper"
	slashingtypes "github.com/cosmos/cosmos-sdk/x/slashing/types"
	"github.com/cosmos/cosmos-sdk/x/staking"
	stakingkeeper "github.com/cosmos/cosmos-sdk/x/staking/keeper"
	stakingtypes "github.com/cosmos/cosmos-sdk/x/staking/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/x/market"
	marketkeeper "github.com/depinchain/depinchain/x/market/keeper"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry"
	shardregistrykeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingext "github.com/depinchain/depinchain/x/staking_ext"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify"
	verifykeeper "github.com/depinchain/depinchain/x/verify/keeper"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const (
	// Name is the application name used in logs and the default home folder.
	Name = "depinchain"
	// Bech32Prefix is the account address prefix (re-exported from pkg/chainparams).
	Bech32Prefix = chainparams.Bech32Prefix
	// BondDenom is the staking and fee denomination (re-exported from pkg/chainparams).
	BondDenom = chainparams.BondDenom
)

// DefaultNodeHome is where depinchaind keeps its config and data unless --home says otherwise.
var DefaultNodeHome = os.ExpandEnv("$HOME/.depinchain")

// maccPerms lists every module account and what it may do with coins.
// The project's modules only hold and move coins: they never mint or burn,
// which is what their token-conservation invariants rely on.
var maccPerms = map[string][]string{
	authtypes.FeeCollectorName:     nil,
	distrtypes.ModuleName:          nil,
	minttypes.ModuleName:           {authtypes.Minter},
	stakingtypes.BondedPoolName:    {authtypes.Burner, authtypes.Staking},
	stakingtypes.NotBondedPoolName: {authtypes.Burner, authtypes.Staking},
	govtypes.ModuleName:            {authtypes.Burner},
	stakingexttypes.ModuleName:     nil,
	markettypes.ModuleName:         nil,
	verifytypes.ModuleName:         nil,
	shardregistrytypes.ModuleName:  nil,
}

var (
	_ runtime.AppI            = (*App)(nil)
	_ servertypes.Application = (*App)(nil)
)

// App is the depinchain application.
type App struct {
	*baseapp.BaseApp

	legacyAmino       *codec.LegacyAmino
	appCodec          codec.Codec
	txConfig          client.TxConfig
	interfaceRegistry types.InterfaceRegistry

	keys map[string]*storetypes.KVStoreKey

	AccountKeeper         authkeeper.AccountKeeper
	BankKeeper            bankkeeper.BaseKeeper
	StakingKeeper         *stakingkeeper.Keeper
	SlashingKeeper        slashingkeeper.Keeper
	MintKeeper            mintkeeper.Keeper
	DistrKeeper           distrkeeper.Keeper
	GovKeeper             govkeeper.Keeper
	UpgradeKeeper         *upgradekeeper.Keeper
	EvidenceKeeper        evidencekeeper.Keeper
	FeeGrantKeeper        feegrantkeeper.Keeper
	AuthzKeeper           authzkeeper.Keeper
	ConsensusParamsKeeper consensusparamkeeper.Keeper

	StakingExtKeeper stakingextkeeper.Keeper
	MarketKeeper     marketkeeper.Keeper
	VerifyKeeper     verifykeeper.Keeper
	ShardKeeper      shardregistrykeeper.Keeper

	ModuleManager      *module.Manager
	BasicModuleManager module.BasicManager
	sm                 *module.SimulationManager
	configurator       module.Configurator
}

// New returns a fully wired depinchain application.
func New(
	logger log.Logger,
	db dbm.DB,
	traceStore io.Writer,
	loadLatest bool,
	appOpts servertypes.AppOptions,
	baseAppOptions ...func(*baseapp.BaseApp),
) *App {
	enc := chainparams.MakeEncodingConfig()
	appCodec, legacyAmino, interfaceRegistry, txConfig := enc.Codec, enc.Amino, enc.InterfaceRegistry, enc.TxConfig

	bApp := baseapp.NewBaseApp(Name, logger, db, txConfig.TxDecoder(), baseAppOptions...)
	bApp.SetCommitMultiStoreTracer(traceStore)
	bApp.SetVersion(version.Version)
	bApp.SetInterfaceRegistry(interfaceRegistry)
	bApp.SetTxEncoder(txConfig.TxEncoder())

	keys := storetypes.NewKVStoreKeys(
		authtypes.StoreKey, banktypes.StoreKey, stakingtypes.StoreKey, minttypes.StoreKey,
		distrtypes.StoreKey, slashingtypes.StoreKey, govtypes.StoreKey, consensusparamtypes.StoreKey,
		upgradetypes.StoreKey, feegrant.StoreKey, evidencetypes.StoreKey, authzkeeper.StoreKey,
		stakingexttypes.StoreKey, markettypes.StoreKey, verifytypes.StoreKey, shardregistrytypes.StoreKey,
	)

	app := &App{
		BaseApp:           bApp,
		legacyAmino:       legacyAmino,
		appCodec:          appCodec,
		txConfig:          txConfig,
		interfaceRegistry: interfaceRegistry,
		keys:              keys,
	}

	authority := authtypes.NewModuleAddress(govtypes.ModuleName).String()
	addrCodec := address.NewBech32Codec(Bech32Prefix)
	valCodec := address.NewBech32Codec(Bech32Prefix + sdk.PrefixValidator + sdk.PrefixOperator)
	consCodec := address.NewBech32Codec(Bech32Prefix + sdk.PrefixValidator + sdk.PrefixConsensus)

	app.ConsensusParamsKeeper = consensusparamkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[consensusparamtypes.StoreKey]), authority, runtime.EventService{})
	bApp.SetParamStore(app.ConsensusParamsKeeper.ParamsStore)

	app.AccountKeeper = authkeeper.NewAccountKeeper(appCodec, runtime.NewKVStoreService(keys[authtypes.StoreKey]),
		authtypes.ProtoBaseAccount, maccPerms, addrCodec, Bech32Prefix, authority)
	app.BankKeeper = bankkeeper.NewBaseKeeper(appCodec, runtime.NewKVStoreService(keys[banktypes.StoreKey]),
		app.AccountKeeper, BlockedAddresses(), authority, logger)

	app.StakingKeeper = stakingkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[stakingtypes.StoreKey]),
		app.AccountKeeper, app.BankKeeper, authority, valCodec, consCodec)
	app.MintKeeper = mintkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[minttypes.StoreKey]),
		app.StakingKeeper, app.AccountKeeper, app.BankKeeper, authtypes.FeeCollectorName, authority)
	app.DistrKeeper = distrkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[distrtypes.StoreKey]),
		app.AccountKeeper, app.BankKeeper, app.StakingKeeper, authtypes.FeeCollectorName, authority)
	app.SlashingKeeper = slashingkeeper.NewKeeper(appCodec, legacyAmino, runtime.NewKVStoreService(keys[slashingtypes.StoreKey]),
		app.StakingKeeper, authority)
	app.FeeGrantKeeper = feegrantkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[feegrant.StoreKey]), app.AccountKeeper)
	app.StakingKeeper.SetHooks(stakingtypes.NewMultiStakingHooks(app.DistrKeeper.Hooks(), app.SlashingKeeper.Hooks()))
	app.AuthzKeeper = authzkeeper.NewKeeper(runtime.NewKVStoreService(keys[authzkeeper.StoreKey]), appCodec,
		app.MsgServiceRouter(), app.AccountKeeper).SetBankKeeper(app.BankKeeper)

	skipUpgradeHeights := map[int64]bool{}
	for _, h := range cast.ToIntSlice(appOpts.Get(server.FlagUnsafeSkipUpgrades)) {
		skipUpgradeHeights[int64(h)] = true
	}
	homePath := cast.ToString(appOpts.Get("home"))
	app.UpgradeKeeper = upgradekeeper.NewKeeper(skipUpgradeHeights, runtime.NewKVStoreService(keys[upgradetypes.StoreKey]),
		appCodec, homePath, app.BaseApp, authority)

	govConfig := govtypes.DefaultConfig()
	govKeeper := govkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[govtypes.StoreKey]), app.AccountKeeper,
		app.BankKeeper, app.StakingKeeper, app.DistrKeeper, app.MsgServiceRouter(), govConfig, authority)
	// Legacy (v1beta1) content proposals run through this router: without one, every
	// MsgExecLegacyContent (a text proposal) panics inside the gov keeper.
	govKeeper.SetLegacyRouter(govv1beta1.NewRouter().AddRoute(govtypes.RouterKey, govv1beta1.ProposalHandler))
	app.GovKeeper = *govKeeper.SetHooks(govtypes.NewMultiGovHooks())

	evidenceKeeper := evidencekeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[evidencetypes.StoreKey]),
		app.StakingKeeper, app.SlashingKeeper, addrCodec, runtime.ProvideCometInfoService())
	app.EvidenceKeeper = *evidenceKeeper

	app.StakingExtKeeper = stakingextkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[stakingexttypes.StoreKey]),
		addrCodec, app.AccountKeeper, app.BankKeeper, app.DistrKeeper, authority)
	app.MarketKeeper = marketkeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[markettypes.StoreKey]),
		addrCodec, app.AccountKeeper, app.BankKeeper, app.StakingExtKeeper, authority)
	app.ShardKeeper = shardregistrykeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[shardregistrytypes.StoreKey]),
		addrCodec, app.StakingExtKeeper, app.MarketKeeper, authority)
	app.MarketKeeper.SetCustodyKeeper(app.ShardKeeper)
	app.VerifyKeeper = verifykeeper.NewKeeper(appCodec, runtime.NewKVStoreService(keys[verifytypes.StoreKey]),
		addrCodec, app.AccountKeeper, app.BankKeeper, app.MarketKeeper, app.StakingExtKeeper, app.ShardKeeper, app.DistrKeeper, authority)
	// x/stakingext's params must cover x/verify's longest dispute (unbonding_blocks).
	app.StakingExtKeeper.SetSlashWindow(app.VerifyKeeper)
	// x/market refuses jobs whose steps x/verify's referee could not re-execute.
	app.MarketKeeper.SetWorkloadReferee(app.VerifyKeeper)
	// A round's global is not final while an entered worker's round checkpoint may still be
	// proven wrong (x/verify's game excludes the worker and the round is re-aggregated).
	app.MarketKeeper.SetRoundTraceKeeper(app.VerifyKeeper)

	app.ModuleManager = module.NewManager(
		genutil.NewAppModule(app.AccountKeeper, app.StakingKeeper, app, txConfig),
		auth.NewAppModule(appCodec, app.AccountKeeper, nil, nil),
		bank.NewAppModule(appCodec, app.BankKeeper, app.AccountKeeper, nil),
		feegrantmodule.NewAppModule(appCodec, app.AccountKeeper, app.BankKeeper, app.FeeGrantKeeper, app.interfaceRegistry),
		gov.NewAppModule(appCodec, &app.GovKeeper, app.AccountKeeper, app.BankKeeper, nil),
		mint.NewAppModule(appCodec, app.MintKeeper, app.AccountKeeper, nil, nil),
		slashing.NewAppModule(appCodec, app.SlashingKeeper, app.AccountKeeper, app.BankKeeper, app.StakingKeeper, nil, app.interfaceRegistry),
		distr.NewAppModule(appCodec, app.DistrKeeper, app.AccountKeeper, app.BankKeeper, app.StakingKeeper, nil),
		staking.NewAppModule(appCodec, app.StakingKeeper, app.AccountKeeper, app.BankKeeper, nil),
		upgrade.NewAppModule(app.UpgradeKeeper, addrCodec),
		evidence.NewAppModule(app.EvidenceKeeper),
		authzmodule.NewAppModule(appCodec, app.AuthzKeeper, app.AccountKeeper, app.BankKeeper, app.interfaceRegistry),
		consensus.NewAppModule(appCodec, app.ConsensusParamsKeeper),
		stakingext.NewAppModule(appCodec, app.StakingExtKeeper, app.AccountKeeper, app.BankKeeper),
		market.NewAppModule(appCodec, app.MarketKeeper, app.AccountKeeper, app.BankKeeper, app.StakingExtKeeper, app.ShardKeeper),
		verify.NewAppModule(appCodec, app.VerifyKeeper, app.AccountKeeper, app.BankKeeper, app.MarketKeeper, app.ShardKeeper),
		shardregistry.NewAppModule(appCodec, app.ShardKeeper, app.AccountKeeper, app.BankKeeper, app.StakingExtKeeper),
	)

	app.BasicModuleManager = module.NewBasicManagerFromManager(app.ModuleManager,
		map[string]module.AppModuleBasic{
			genutiltypes.ModuleName: genutil.NewAppModuleBasic(genutiltypes.DefaultMessageValidator),
			govtypes.ModuleName: gov.NewAppModuleBasic([]govclient.ProposalHandler{
				paramsclient.ProposalHandler,
			}),
		})
	for name, basic := range app.BasicModuleManager {
		app.BasicModuleManager[name] = withUdepinGenesis(basic)
	}
	app.BasicModuleManager.RegisterLegacyAminoCodec(legacyAmino)
	app.BasicModuleManager.RegisterInterfaces(interfaceRegistry)

	app.ModuleManager.SetOrderPreBlockers(upgradetypes.ModuleName, authtypes.ModuleName)
	// x/market records the block hash first thing in BeginBlock: it is the
	// randomness beacon every later module reads from.
	app.ModuleManager.SetOrderBeginBlockers(
		markettypes.ModuleName, minttypes.ModuleName, distrtypes.ModuleName, slashingtypes.ModuleName,
		evidencetypes.ModuleName, stakingtypes.ModuleName, authz.ModuleName,
	)
	// x/verify runs first so that a checkpoint finalized this block has
	// released its payment and recorded progress before x/market closes
	// leases for missed deadlines; x/shardregistry's storage deadlines follow
	// x/market; x/stakingext's unbonding queue runs last.
	app.ModuleManager.SetOrderEndBlockers(
		govtypes.ModuleName, stakingtypes.ModuleName, feegrant.ModuleName,
		verifytypes.ModuleName, markettypes.ModuleName, shardregistrytypes.ModuleName, stakingexttypes.ModuleName,
	)
	genesisOrder := []string{
		authtypes.ModuleName, banktypes.ModuleName, distrtypes.ModuleName, stakingtypes.ModuleName,
		slashingtypes.ModuleName, govtypes.ModuleName, minttypes.ModuleName, genutiltypes.ModuleName,
		evidencetypes.ModuleName, authz.ModuleName, feegrant.ModuleName, upgradetypes.ModuleName,
		consensusparamtypes.ModuleName, stakingexttypes.ModuleName, markettypes.ModuleName, verifytypes.ModuleName,
		shardregistrytypes.ModuleName,
	}
	app.ModuleManager.SetOrderInitGenesis(genesisOrder...)
	app.ModuleManager.SetOrderExportGenesis(genesisOrder...)

	app.configurator = module.NewConfigurator(app.appCodec, app.MsgServiceRouter(), app.GRPCQueryRouter())
	if err := app.ModuleManager.RegisterServices(app.configurator); err != nil {
		panic(err)
	}
	app.setUpgrades(homePath)

	autocliv1.RegisterQueryServer(app.GRPCQueryRouter(), runtimeservices.NewAutoCLIQueryService(app.ModuleManager.Modules))
	reflectionSvc, err := runtimeservices.NewReflectionService()
	if err != nil {
		panic(err)
	}
	reflectionv1.RegisterReflectionServiceServer(app.GRPCQueryRouter(), reflectionSvc)

	// x/auth's simulation needs a genesis-accounts generator (simulation.go).
	app.sm = module.NewSimulationManagerFromAppModules(app.ModuleManager.Modules, map[string]module.AppModuleSimulation{
		authtypes.ModuleName: auth.NewAppModule(appCodec, app.AccountKeeper, randomGenesisAccounts, nil),
	})
	app.sm.RegisterStoreDecoders()

	app.MountKVStores(keys)
	app.SetInitChainer(app.InitChainer)
	app.SetPreBlocker(app.PreBlocker)
	app.SetBeginBlocker(app.BeginBlocker)
	app.SetEndBlocker(app.EndBlocker)
	app.setAnteHandler(txConfig)
	app.setPostHandler()

	if loadLatest {
		if err := app.LoadLatestVersion(); err != nil {
			panic(fmt.Errorf("loading latest version: %w", err))
		}
	}
	return app
}

func (app *App) setAnteHandler(txConfig client.TxConfig) {
	anteHandler, err := ante.NewAnteHandler(ante.HandlerOptions{
		AccountKeeper:   app.AccountKeeper,
		BankKeeper:      app.BankKeeper,
		SignModeHandler: txConfig.SignModeHandler(),
		FeegrantKeeper:  app.FeeGrantKeeper,
		SigGasConsumer:  ante.DefaultSigVerificationGasConsumer,
	})
	if err != nil {
		panic(err)
	}
	app.SetAnteHandler(anteHandler)
}

func (app *App) setPostHandler() {
	postHandler, err := posthandler.NewPostHandler(posthandler.HandlerOptions{})
	if err != nil {
		panic(err)
	}
	app.SetPostHandler(postHandler)
}

// Name returns the application's name.
func (app *App) Name() string { return app.BaseApp.Name() }

// PreBlocker runs the upgrade module's pre-block logic.
func (app *App) PreBlocker(ctx sdk.Context, _ *abci.RequestFinalizeBlock) (*sdk.ResponsePreBlock, error) {
	return app.ModuleManager.PreBlock(ctx)
}

// BeginBlocker runs every module's BeginBlock.
func (app *App) BeginBlocker(ctx sdk.Context) (sdk.BeginBlock, error) {
	return app.ModuleManager.BeginBlock(ctx)
}

// EndBlocker runs every module's EndBlock.
func (app *App) EndBlocker(ctx sdk.Context) (sdk.EndBlock, error) {
	return app.ModuleManager.EndBlock(ctx)
}

// InitChainer decodes the genesis state and initialises every module.
func (app *App) InitChainer(ctx sdk.Context, req *abci.RequestInitChain) (*abci.ResponseInitChain, error) {
	var genesisState GenesisState
	if err := json.Unmarshal(req.AppStateBytes, &genesisState); err != nil {
		return nil, fmt.Errorf("decoding app genesis state: %w", err)
	}
	if err := app.UpgradeKeeper.SetModuleVersionMap(ctx, app.ModuleManager.GetVersionMap()); err != nil {
		return nil, err
	}
	return app.ModuleManager.InitGenesis(ctx, app.appCodec, genesisState)
}

// LoadHeight loads the state at a given height.
func (app *App) LoadHeight(height int64) error { return app.LoadVersion(height) }

// LegacyAmino returns the app's amino codec.
func (app *App) LegacyAmino() *codec.LegacyAmino { return app.legacyAmino }

// AppCodec returns the app's protobuf codec.
func (app *App) AppCodec() codec.Codec { return app.appCodec }

// InterfaceRegistry returns the app's interface registry.
func (app *App) InterfaceRegistry() types.InterfaceRegistry { return app.interfaceRegistry }

// TxConfig returns the app's transaction config.
func (app *App) TxConfig() client.TxConfig { return app.txConfig }

// GetKey returns the store key of a module, for tests.
func (app *App) GetKey(storeKey string) *storetypes.KVStoreKey { return app.keys[storeKey] }

// SimulationManager implements runtime.AppI.
func (app *App) SimulationManager() *module.SimulationManager { return app.sm }

// DefaultGenesis returns every module's default genesis state.
func (app *App) DefaultGenesis() map[string]json.RawMessage {
	return app.BasicModuleManager.DefaultGenesis(app.appCodec)
}

// AutoCliOpts returns the options AutoCLI builds the tx and query commands from.
func (app *App) AutoCliOpts() autocli.AppOptions {
	modules := make(map[string]appmodule.AppModule)
	for _, m := range app.ModuleManager.Modules {
		if moduleWithName, ok := m.(module.HasName); ok {
			if appModule, ok := moduleWithName.(appmodule.AppModule); ok {
				modules[moduleWithName.Name()] = appModule
			}
		}
	}
	return autocli.AppOptions{
		Modules:               modules,
		ModuleOptions:         runtimeservices.ExtractAutoCLIOptions(app.ModuleManager.Modules),
		AddressCodec:          authcodec.NewBech32Codec(Bech32Prefix),
		ValidatorAddressCodec: authcodec.NewBech32Codec(Bech32Prefix + sdk.PrefixValidator + sdk.PrefixOperator),
		ConsensusAddressCodec: authcodec.NewBech32Codec(Bech32Prefix + sdk.PrefixValidator + sdk.PrefixConsensus),
	}
}

// RegisterAPIRoutes registers the gRPC-gateway routes of every module on the API server.
// Enum-typed query parameters take the value's name as well as its number
// (see gateway.go).
func (app *App) RegisterAPIRoutes(apiSvr *api.Server, apiConfig config.APIConfig) {
	if err := gatewayEnumsOnce(); err != nil {
		app.Logger().Error("REST enum query parameters take numbers only", "err", err)
	}
	clientCtx := apiSvr.ClientCtx
	authtx.RegisterGRPCGatewayRoutes(clientCtx, apiSvr.GRPCGatewayRouter)
	cmtservice.RegisterGRPCGatewayRoutes(clientCtx, apiSvr.GRPCGatewayRouter)
	nodeservice.RegisterGRPCGatewayRoutes(clientCtx, apiSvr.GRPCGatewayRouter)
	app.BasicModuleManager.RegisterGRPCGatewayRoutes(clientCtx, apiSvr.GRPCGatewayRouter)
}

// RegisterTxService registers the tx simulation and broadcast gRPC service.
func (app *App) RegisterTxService(clientCtx client.Context) {
	authtx.RegisterTxService(app.BaseApp.GRPCQueryRouter(), clientCtx, app.BaseApp.Simulate, app.interfaceRegistry)
}

// RegisterTendermintService registers the CometBFT query gRPC service.
func (app *App) RegisterTendermintService(clientCtx client.Context) {
	cmtservice.RegisterTendermintService(clientCtx, app.BaseApp.GRPCQueryRouter(), app.interfaceRegistry, app.Query)
}

// RegisterNodeService registers the node status gRPC service.
func (app *App) RegisterNodeService(clientCtx client.Context, cfg config.Config) {
	nodeservice.RegisterNodeService(clientCtx, app.GRPCQueryRouter(), cfg)
}

// BlockedAddresses lists the module accounts that may not receive plain bank sends:
// tokens sent there by mistake would break the modules' balance invariants.
func BlockedAddresses() map[string]bool {
	blocked := make(map[string]bool)
	for acc := range maccPerms {
		blocked[authtypes.NewModuleAddress(acc).String()] = true
	}
	// Anyone may fund the community pool through distribution's account.
	delete(blocked, authtypes.NewModuleAddress(distrtypes.ModuleName).String())
	return blocked
}

// ModuleAccountPermissions returns a copy of the module account permissions.
func ModuleAccountPermissions() map[string][]string {
	out := make(map[string][]string, len(maccPerms))
	for k, v := range maccPerms {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// GenesisState is the app's genesis: module name to raw JSON.
type GenesisState map[string]json.RawMessage
