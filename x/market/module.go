// Package market is the x/market module: GPU training jobs, sealed-price auctions,
// leases, escrow and lazily streamed payments.
package market

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

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/market/client/cli"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/simulation"
	"github.com/depinchain/depinchain/x/market/types"
)

// ConsensusVersion is bumped whenever the state layout changes and a migration is registered.
// 2: leases are indexed by state (migrations/v2).
// 3: transformer bounds in the params; the MLP reference workload retired.
// 4: pay for work — committed rates on bids and leases, per-step claims, rate checks.
// 5: rounds of sync jobs — sync specs, rounds, round commits, the round params.
const ConsensusVersion = 5

var (
	_ module.AppModuleBasic      = AppModule{}
	_ module.HasGenesis          = AppModule{}
	_ module.HasServices         = AppModule{}
	_ module.HasConsensusVersion = AppModule{}
	_ appmodule.AppModule        = AppModule{}
	_ appmodule.HasBeginBlocker  = AppModule{}
	_ appmodule.HasEndBlocker    = AppModule{}

	_ module.AppModuleSimulation = AppModule{}
	_ module.HasProposalMsgs     = AppModule{}
)

// AppModule implements the x/market module.
type AppModule struct {
	cdc    codec.Codec
	keeper keeper.Keeper
	// The simulation signs with the account and bank keepers, finds bidders in
	// x/stakingext and datasets for jobs in x/shardregistry.
	accountKeeper simutil.AccountKeeper
	bankKeeper    simutil.BankKeeper
	providers     simulation.ProviderKeeper
	datasets      simulation.DatasetKeeper
}

// NewAppModule creates the module. The account and bank keepers, x/stakingext's
// providers and x/shardregistry's datasets serve the simulation's operations.
func NewAppModule(cdc codec.Codec, k keeper.Keeper, ak simutil.AccountKeeper, bk simutil.BankKeeper,
	providers simulation.ProviderKeeper, datasets simulation.DatasetKeeper,
) AppModule {
	return AppModule{cdc: cdc, keeper: k, accountKeeper: ak, bankKeeper: bk, providers: providers, datasets: datasets}
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

// RegisterGRPCGatewayRoutes registers the REST routes under /depinchain/market/v1.
func (AppModule) RegisterGRPCGatewayRoutes(clientCtx client.Context, mux *gwruntime.ServeMux) {
	if err := types.RegisterQueryHandlerClient(context.Background(), mux, types.NewQueryClient(clientCtx)); err != nil {
		panic(err)
	}
}

// GetTxCmd returns the hand-written tx commands (submit-job reads a YAML file); AutoCLI adds the rest.
func (AppModule) GetTxCmd() *cobra.Command { return cli.NewTxCmd() }

// RegisterServices registers the Msg and Query services.
func (am AppModule) RegisterServices(cfg module.Configurator) {
	types.RegisterMsgServer(cfg.MsgServer(), keeper.NewMsgServerImpl(am.keeper))
	types.RegisterQueryServer(cfg.QueryServer(), keeper.NewQueryServerImpl(am.keeper))
	am.registerMigrations(cfg)
}

// ConsensusVersion implements module.HasConsensusVersion.
func (AppModule) ConsensusVersion() uint64 { return consensusVersion() }

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

// BeginBlock records the block hash (the randomness beacon).
func (am AppModule) BeginBlock(ctx context.Context) error { return am.keeper.BeginBlocker(ctx) }

// EndBlock processes due auctions and deadlines.
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
		Keeper: am.keeper, Providers: am.providers, Datasets: am.datasets,
	})
}

// ProposalMsgs implements module.HasProposalMsgs: governance changes the params.
func (am AppModule) ProposalMsgs(module.SimulationState) []simtypes.WeightedProposalMsg {
	return simulation.ProposalMsgs(am.keeper)
}
