// Package verify is the x/verify module: checkpoint commitments, optimistic finality
// after a challenge window, bisection dispute games and the one-step referee.
package verify

import (
	"context"
	"encoding/json"
	"fmt"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/runtime"
	"github.com/spf13/cobra"

	"cosmossdk.io/core/appmodule"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/internal/release"
	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/verify/client/cli"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/simulation"
	"github.com/depinchain/depinchain/x/verify/types"
)

// ConsensusVersion is bumped whenever the state layout changes and a migration is
// registered. Version 2 (the v3 upgrade) removed the challenge cap and added audits;
// version 3 (the same v3 upgrade, which runs 1 → 2 → 3) retired the MLP workload and
// added phases 2–3 of a game.
// Version 4 added custody of checkpoint states (params, the custody queue). Version 5 (the
// v5 upgrade) added file queries (a param, four collections).
const ConsensusVersion = 5

var (
	_ module.AppModuleBasic      = AppModule{}
	_ module.HasGenesis          = AppModule{}
	_ module.HasServices         = AppModule{}
	_ module.HasConsensusVersion = AppModule{}
	_ appmodule.AppModule        = AppModule{}
	_ appmodule.HasEndBlocker    = AppModule{}

	_ module.AppModuleSimulation = AppModule{}
	_ module.HasProposalMsgs     = AppModule{}
)

// AppModule implements the x/verify module.
type AppModule struct {
	cdc    codec.Codec
	keeper keeper.Keeper
	// The simulation signs with the account and bank keepers, finds leases and jobs in
	// x/market and rebuilds dataset-backed training streams from x/shardregistry.
	accountKeeper simutil.AccountKeeper
	bankKeeper    simutil.BankKeeper
	marketKeeper  simulation.MarketKeeper
	shardKeeper   types.ShardKeeper
}

// NewAppModule creates the module. The account and bank keepers, x/market's jobs and
// leases and x/shardregistry's datasets serve the simulation's operations.
func NewAppModule(cdc codec.Codec, k keeper.Keeper, ak simutil.AccountKeeper, bk simutil.BankKeeper,
	mk simulation.MarketKeeper, shk types.ShardKeeper,
) AppModule {
	return AppModule{cdc: cdc, keeper: k, accountKeeper: ak, bankKeeper: bk, marketKeeper: mk, shardKeeper: shk}
}

// IsAppModule implements appmodule.AppModule.
func (AppModule) IsAppModule() {}

// IsOnePerModuleType implements depinject.OnePerModuleType.
func (AppModule) IsOnePerModuleType() {}

// Name returns the module name.
func (AppModule) Name() string { return types.ModuleName }

// RegisterLegacyAminoCodec registers the amino codec.
func (AppModule) RegisterLegacyAminoCodec(cdc *codec.LegacyAmino) {
	types.RegisterLegacyAminoCodec(cdc)
}

// RegisterInterfaces registers the module's interface types.
func (AppModule) RegisterInterfaces(registry codectypes.InterfaceRegistry) {
	types.RegisterInterfaces(registry)
}

// RegisterGRPCGatewayRoutes registers the REST routes under /depinchain/verify/v1.
func (AppModule) RegisterGRPCGatewayRoutes(clientCtx client.Context, mux *gwruntime.ServeMux) {
	if err := types.RegisterQueryHandlerClient(context.Background(), mux, types.NewQueryClient(clientCtx)); err != nil {
		panic(err)
	}
}

// GetTxCmd returns the hand-written tx commands (those that read trace, state or data files); AutoCLI adds the rest.
func (AppModule) GetTxCmd() *cobra.Command { return cli.NewTxCmd() }

// RegisterServices registers the Msg and Query services.
func (am AppModule) RegisterServices(cfg module.Configurator) {
	types.RegisterMsgServer(cfg.MsgServer(), keeper.NewMsgServerImpl(am.keeper))
	types.RegisterQueryServer(cfg.QueryServer(), keeper.NewQueryServerImpl(am.keeper))
	m := keeper.NewMigrator(am.keeper)
	if err := cfg.RegisterMigration(types.ModuleName, 1, m.Migrate1to2); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 1: %w", types.ModuleName, err))
	}
	if err := cfg.RegisterMigration(types.ModuleName, 2, m.Migrate2to3); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 2: %w", types.ModuleName, err))
	}
	if err := cfg.RegisterMigration(types.ModuleName, 3, m.Migrate3to4); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 3: %w", types.ModuleName, err))
	}
	if err := cfg.RegisterMigration(types.ModuleName, 4, m.Migrate4to5); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 4: %w", types.ModuleName, err))
	}
}

// ConsensusVersion implements module.HasConsensusVersion: the state layout this binary
// writes, 4 in the upgrade test's stand-in for the previous release (internal/release).
func (AppModule) ConsensusVersion() uint64 {
	if release.Previous {
		return 4
	}
	return ConsensusVersion
}

// DefaultGenesis returns the default genesis state.
func (am AppModule) DefaultGenesis(cdc codec.JSONCodec) json.RawMessage {
	return cdc.MustMarshalJSON(types.DefaultGenesis())
}

// ValidateGenesis checks a genesis state.
func (am AppModule) ValidateGenesis(cdc codec.JSONCodec, _ client.TxEncodingConfig, bz json.RawMessage) error {
	var gs types.GenesisState
	if err := cdc.UnmarshalJSON(bz, &gs); err != nil {
		return fmt.Errorf("decoding %s genesis: %w", types.ModuleName, err)
	}
	return gs.Validate()
}

// InitGenesis loads the genesis state.
func (am AppModule) InitGenesis(ctx sdk.Context, cdc codec.JSONCodec, bz json.RawMessage) {
	var gs types.GenesisState
	cdc.MustUnmarshalJSON(bz, &gs)
	if err := am.keeper.InitGenesis(ctx, &gs); err != nil {
		panic(fmt.Errorf("initialising %s genesis: %w", types.ModuleName, err))
	}
}

// ExportGenesis exports the module state.
func (am AppModule) ExportGenesis(ctx sdk.Context, cdc codec.JSONCodec) json.RawMessage {
	gs, err := am.keeper.ExportGenesis(ctx)
	if err != nil {
		panic(fmt.Errorf("exporting %s genesis: %w", types.ModuleName, err))
	}
	return cdc.MustMarshalJSON(gs)
}

// EndBlock finalizes checkpoints and times out dispute moves.
func (am AppModule) EndBlock(ctx context.Context) error { return am.keeper.EndBlocker(ctx) }

// GenerateGenesisState implements module.AppModuleSimulation: random params.
func (AppModule) GenerateGenesisState(simState *module.SimulationState) {
	simulation.RandomizedGenState(simState)
}

// RegisterStoreDecoder implements module.AppModuleSimulation: store entries are decoded
// through the collections schema.
func (am AppModule) RegisterStoreDecoder(sdr simtypes.StoreDecoderRegistry) {
	sdr[types.StoreKey] = simtypes.NewStoreDecoderFuncFromCollectionsSchema(am.keeper.Schema)
}

// WeightedOperations implements module.AppModuleSimulation: an operation per message.
func (am AppModule) WeightedOperations(simState module.SimulationState) []simtypes.WeightedOperation {
	return simulation.WeightedOperations(simState.AppParams, simulation.Deps{
		Signer: simutil.Signer{TxGen: simState.TxConfig, AK: am.accountKeeper, BK: am.bankKeeper},
		Keeper: am.keeper, Market: am.marketKeeper, Shards: am.shardKeeper,
	})
}

// ProposalMsgs implements module.HasProposalMsgs: governance changes the params.
func (am AppModule) ProposalMsgs(module.SimulationState) []simtypes.WeightedProposalMsg {
	return simulation.ProposalMsgs(am.keeper)
}
