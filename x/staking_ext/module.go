// Package stakingext is the x/stakingext module: the registry of GPU
// providers, their bonds in the module account, collateral locks for leases
// and disputes, the unbonding queue, slashing, jailing, tombstoning and
// reputation. Validator staking stays with the SDK's x/staking.
package stakingext

import (
	"context"
	"encoding/json"
	"fmt"

	gwruntime "github.com/grpc-ecosystem/grpc-gateway/runtime"

	"cosmossdk.io/core/appmodule"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/staking_ext/keeper"
	"github.com/depinchain/depinchain/x/staking_ext/simulation"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// ConsensusVersion is bumped with every state migration. Version 2 (the v3 upgrade)
// added the verifier registry, unbonding_blocks and the unbondings' completion heights.
const ConsensusVersion = 2

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

// AppModule wires the keeper into the app: services, genesis and EndBlock.
type AppModule struct {
	keeper keeper.Keeper
	// accountKeeper and bankKeeper are used by the simulation only, to sign and fund
	// simulated transactions.
	accountKeeper simutil.AccountKeeper
	bankKeeper    simutil.BankKeeper
}

// NewAppModule returns the module. The codec argument is not kept, as the
// genesis methods get the app's JSON codec passed in; it keeps the
// constructor shape of the SDK's modules, which app.go follows. The account
// and bank keepers serve the simulation's operations.
func NewAppModule(_ codec.Codec, keeper keeper.Keeper, ak simutil.AccountKeeper, bk simutil.BankKeeper) AppModule {
	return AppModule{keeper: keeper, accountKeeper: ak, bankKeeper: bk}
}

// IsAppModule implements appmodule.AppModule.
func (AppModule) IsAppModule() {}

// IsOnePerModuleType implements depinject.OnePerModuleType.
func (AppModule) IsOnePerModuleType() {}

// Name returns the module name.
func (AppModule) Name() string { return types.ModuleName }

// RegisterLegacyAminoCodec registers the messages for amino JSON signing.
func (AppModule) RegisterLegacyAminoCodec(cdc *codec.LegacyAmino) {
	types.RegisterLegacyAminoCodec(cdc)
}

// RegisterInterfaces registers the messages and the Msg service.
func (AppModule) RegisterInterfaces(registry codectypes.InterfaceRegistry) {
	types.RegisterInterfaces(registry)
}

// RegisterGRPCGatewayRoutes serves the queries over REST under /depinchain/stakingext/v1/.
func (AppModule) RegisterGRPCGatewayRoutes(clientCtx client.Context, mux *gwruntime.ServeMux) {
	if err := types.RegisterQueryHandlerClient(context.Background(), mux, types.NewQueryClient(clientCtx)); err != nil {
		panic(err)
	}
}

// RegisterServices registers the Msg and Query services.
func (am AppModule) RegisterServices(cfg module.Configurator) {
	types.RegisterMsgServer(cfg.MsgServer(), keeper.NewMsgServerImpl(am.keeper))
	types.RegisterQueryServer(cfg.QueryServer(), keeper.NewQueryServerImpl(am.keeper))
	m := keeper.NewMigrator(am.keeper)
	if err := cfg.RegisterMigration(types.ModuleName, 1, m.Migrate1to2); err != nil {
		panic(fmt.Errorf("registering the %s migration from version 1: %w", types.ModuleName, err))
	}
}

// DefaultGenesis returns the default genesis state as JSON.
func (AppModule) DefaultGenesis(cdc codec.JSONCodec) json.RawMessage {
	return cdc.MustMarshalJSON(types.DefaultGenesis())
}

// ValidateGenesis checks a genesis state on its own (see GenesisState.Validate).
func (am AppModule) ValidateGenesis(cdc codec.JSONCodec, _ client.TxEncodingConfig, raw json.RawMessage) error {
	var gs types.GenesisState
	if err := cdc.UnmarshalJSON(raw, &gs); err != nil {
		return fmt.Errorf("decoding %s genesis state: %w", types.ModuleName, err)
	}
	return gs.Validate(am.keeper.AddressCodec())
}

// InitGenesis loads the genesis state; an invalid one stops the chain from starting.
func (am AppModule) InitGenesis(ctx sdk.Context, cdc codec.JSONCodec, raw json.RawMessage) {
	var gs types.GenesisState
	cdc.MustUnmarshalJSON(raw, &gs)
	if err := am.keeper.InitGenesis(ctx, &gs); err != nil {
		panic(fmt.Errorf("initializing %s genesis state: %w", types.ModuleName, err))
	}
}

// ExportGenesis exports the whole module state as JSON.
func (am AppModule) ExportGenesis(ctx sdk.Context, cdc codec.JSONCodec) json.RawMessage {
	gs, err := am.keeper.ExportGenesis(ctx)
	if err != nil {
		panic(fmt.Errorf("exporting %s genesis state: %w", types.ModuleName, err))
	}
	return cdc.MustMarshalJSON(gs)
}

// EndBlock pays out matured unbondings.
func (am AppModule) EndBlock(ctx context.Context) error {
	return am.keeper.EndBlocker(ctx)
}

// ConsensusVersion implements module.HasConsensusVersion.
func (AppModule) ConsensusVersion() uint64 { return ConsensusVersion }

// GenerateGenesisState implements module.AppModuleSimulation: random params and bonded
// providers (see simulation.RandomizedGenState).
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
		Keeper: am.keeper,
	})
}

// ProposalMsgs implements module.HasProposalMsgs: governance changes the params.
func (am AppModule) ProposalMsgs(module.SimulationState) []simtypes.WeightedProposalMsg {
	return simulation.ProposalMsgs(am.keeper)
}
