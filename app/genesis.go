package app

import (
	"encoding/json"

	"cosmossdk.io/math"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	govv1 "github.com/cosmos/cosmos-sdk/x/gov/types/v1"
	minttypes "github.com/cosmos/cosmos-sdk/x/mint/types"
	stakingtypes "github.com/cosmos/cosmos-sdk/x/staking/types"
)

// udepinGenesis replaces a standard module's default genesis with one denominated in
// udepin, so `depinchaind init` produces a chain whose staking, inflation and governance
// deposits all use the chain's own token rather than the SDK's placeholder "stake".
type udepinGenesis struct {
	module.AppModuleBasic
	defaultGenesis func(cdc codec.JSONCodec) json.RawMessage
}

func (m udepinGenesis) DefaultGenesis(cdc codec.JSONCodec) json.RawMessage {
	return m.defaultGenesis(cdc)
}

func (m udepinGenesis) ValidateGenesis(cdc codec.JSONCodec, cfg client.TxEncodingConfig, bz json.RawMessage) error {
	return m.AppModuleBasic.(module.HasGenesisBasics).ValidateGenesis(cdc, cfg, bz)
}

func withUdepinGenesis(basic module.AppModuleBasic) module.AppModuleBasic {
	switch basic.Name() {
	case stakingtypes.ModuleName:
		return udepinGenesis{basic, func(cdc codec.JSONCodec) json.RawMessage {
			gs := stakingtypes.DefaultGenesisState()
			gs.Params.BondDenom = BondDenom
			return cdc.MustMarshalJSON(gs)
		}}
	case minttypes.ModuleName:
		return udepinGenesis{basic, func(cdc codec.JSONCodec) json.RawMessage {
			gs := minttypes.DefaultGenesisState()
			gs.Params.MintDenom = BondDenom
			return cdc.MustMarshalJSON(gs)
		}}
	case "gov":
		return udepinGenesis{basic, func(cdc codec.JSONCodec) json.RawMessage {
			gs := govv1.DefaultGenesisState()
			gs.Params.MinDeposit = sdk.NewCoins(sdk.NewCoin(BondDenom, math.NewInt(10_000_000)))
			gs.Params.ExpeditedMinDeposit = sdk.NewCoins(sdk.NewCoin(BondDenom, math.NewInt(50_000_000)))
			return cdc.MustMarshalJSON(gs)
		}}
	}
	return basic
}
