package types

import (
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/codec/legacy"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/msgservice"
)

var (
	_ sdk.Msg = &MsgRegisterProvider{}
	_ sdk.Msg = &MsgUpdateProvider{}
	_ sdk.Msg = &MsgBond{}
	_ sdk.Msg = &MsgUnbond{}
	_ sdk.Msg = &MsgUnjail{}
	_ sdk.Msg = &MsgUpdateParams{}
	_ sdk.Msg = &MsgRegisterVerifier{}
	_ sdk.Msg = &MsgBondVerifier{}
	_ sdk.Msg = &MsgUnbondVerifier{}
	_ sdk.Msg = &MsgActivateVerifier{}
)

// RegisterInterfaces registers the module's messages and its Msg service.
func RegisterInterfaces(registry codectypes.InterfaceRegistry) {
	registry.RegisterImplementations((*sdk.Msg)(nil),
		&MsgRegisterProvider{},
		&MsgUpdateProvider{},
		&MsgBond{},
		&MsgUnbond{},
		&MsgUnjail{},
		&MsgUpdateParams{},
		&MsgRegisterVerifier{},
		&MsgBondVerifier{},
		&MsgUnbondVerifier{},
		&MsgActivateVerifier{},
	)
	msgservice.RegisterMsgServiceDesc(registry, &_Msg_serviceDesc)
}

// RegisterLegacyAminoCodec registers the messages for amino JSON signing
// (Ledger). The names equal the amino.name options in tx.proto and
// stakingext.proto, which the SIGN_MODE_LEGACY_AMINO_JSON encoder reads.
func RegisterLegacyAminoCodec(cdc *codec.LegacyAmino) {
	legacy.RegisterAminoMsg(cdc, &MsgRegisterProvider{}, "depinchain/x/stakingext/MsgRegProvider")
	legacy.RegisterAminoMsg(cdc, &MsgUpdateProvider{}, "depinchain/x/stakingext/MsgUpdProvider")
	legacy.RegisterAminoMsg(cdc, &MsgBond{}, "depinchain/x/stakingext/MsgBond")
	legacy.RegisterAminoMsg(cdc, &MsgUnbond{}, "depinchain/x/stakingext/MsgUnbond")
	legacy.RegisterAminoMsg(cdc, &MsgUnjail{}, "depinchain/x/stakingext/MsgUnjail")
	legacy.RegisterAminoMsg(cdc, &MsgUpdateParams{}, "depinchain/x/stakingext/MsgUpdateParams")
	legacy.RegisterAminoMsg(cdc, &MsgRegisterVerifier{}, "depinchain/x/stakingext/MsgRegVerifier")
	legacy.RegisterAminoMsg(cdc, &MsgBondVerifier{}, "depinchain/x/stakingext/MsgBondVerifier")
	legacy.RegisterAminoMsg(cdc, &MsgUnbondVerifier{}, "depinchain/x/stakingext/MsgUnbVerifier")
	legacy.RegisterAminoMsg(cdc, &MsgActivateVerifier{}, "depinchain/x/stakingext/MsgActVerifier")
	cdc.RegisterConcrete(&Params{}, "depinchain/x/stakingext/Params", nil)
}
