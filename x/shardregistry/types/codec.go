package types

import (
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/codec/legacy"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/msgservice"
)

// RegisterLegacyAminoCodec registers the messages for amino JSON signing (Ledger).
func RegisterLegacyAminoCodec(cdc *codec.LegacyAmino) {
	legacy.RegisterAminoMsg(cdc, &MsgRegisterDataset{}, "shardregistry/MsgRegisterDataset")
	legacy.RegisterAminoMsg(cdc, &MsgClaimReplica{}, "shardregistry/MsgClaimReplica")
	legacy.RegisterAminoMsg(cdc, &MsgReleaseReplica{}, "shardregistry/MsgReleaseReplica")
	legacy.RegisterAminoMsg(cdc, &MsgDeclareFault{}, "shardregistry/MsgDeclareFault")
	legacy.RegisterAminoMsg(cdc, &MsgSubmitStorageProof{}, "shardregistry/MsgSubmitStorageProof")
	legacy.RegisterAminoMsg(cdc, &MsgUpdateParams{}, "shardregistry/MsgUpdateParams")
	cdc.RegisterConcrete(&Params{}, "shardregistry/Params", nil)
}

// RegisterInterfaces registers the messages with the interface registry.
func RegisterInterfaces(registry codectypes.InterfaceRegistry) {
	registry.RegisterImplementations((*sdk.Msg)(nil),
		&MsgRegisterDataset{}, &MsgClaimReplica{}, &MsgReleaseReplica{}, &MsgDeclareFault{},
		&MsgSubmitStorageProof{}, &MsgUpdateParams{},
	)
	msgservice.RegisterMsgServiceDesc(registry, &_Msg_serviceDesc)
}
