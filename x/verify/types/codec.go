package types

import (
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/codec/legacy"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/msgservice"
)

// RegisterLegacyAminoCodec registers the messages for amino JSON signing.
func RegisterLegacyAminoCodec(cdc *codec.LegacyAmino) {
	legacy.RegisterAminoMsg(cdc, &MsgSubmitCheckpoint{}, "depinchain/x/verify/MsgSubmitCheckpoint")
	legacy.RegisterAminoMsg(cdc, &MsgChallenge{}, "depinchain/x/verify/MsgChallenge")
	legacy.RegisterAminoMsg(cdc, &MsgRevealHash{}, "depinchain/x/verify/MsgRevealHash")
	legacy.RegisterAminoMsg(cdc, &MsgRespond{}, "depinchain/x/verify/MsgRespond")
	legacy.RegisterAminoMsg(cdc, &MsgStep{}, "depinchain/x/verify/MsgStep")
	legacy.RegisterAminoMsg(cdc, &MsgUpdateParams{}, "depinchain/x/verify/MsgUpdateParams")
	legacy.RegisterAminoMsg(cdc, &MsgClaimTimeout{}, "depinchain/x/verify/MsgClaimTimeout")
	legacy.RegisterAminoMsg(cdc, &MsgAttest{}, "depinchain/x/verify/MsgAttest")
	legacy.RegisterAminoMsg(cdc, &MsgReportUnavailable{}, "depinchain/x/verify/MsgReportUnavail")
	legacy.RegisterAminoMsg(cdc, &MsgCommitRecords{}, "depinchain/x/verify/MsgCommitRecords")
	legacy.RegisterAminoMsg(cdc, &MsgRevealNode{}, "depinchain/x/verify/MsgRevealNode")
	legacy.RegisterAminoMsg(cdc, &MsgOpenRecord{}, "depinchain/x/verify/MsgOpenRecord")
	legacy.RegisterAminoMsg(cdc, &MsgRevealChunk{}, "depinchain/x/verify/MsgRevealChunk")
	legacy.RegisterAminoMsg(cdc, &MsgProveTile{}, "depinchain/x/verify/MsgProveTile")
	legacy.RegisterAminoMsg(cdc, &MsgProveParityFault{}, "depinchain/x/verify/MsgProveParityFault")
	legacy.RegisterAminoMsg(cdc, &MsgProveRoundFault{}, "depinchain/x/verify/MsgProveRoundFault")
	legacy.RegisterAminoMsg(cdc, &MsgOpenFileQuery{}, "depinchain/x/verify/MsgOpenFileQuery")
	legacy.RegisterAminoMsg(cdc, &MsgAnswerFileQuery{}, "depinchain/x/verify/MsgAnswerFileQuery")
	legacy.RegisterAminoMsg(cdc, &MsgDescendFileQuery{}, "depinchain/x/verify/MsgDescendFileQuery")
	cdc.RegisterConcrete(&Params{}, "depinchain/x/verify/Params", nil)
}

// RegisterInterfaces registers the messages with the interface registry.
func RegisterInterfaces(registry codectypes.InterfaceRegistry) {
	registry.RegisterImplementations((*sdk.Msg)(nil),
		&MsgSubmitCheckpoint{}, &MsgChallenge{}, &MsgRevealHash{}, &MsgRespond{}, &MsgStep{}, &MsgUpdateParams{},
		&MsgClaimTimeout{}, &MsgAttest{}, &MsgReportUnavailable{},
		&MsgCommitRecords{}, &MsgRevealNode{}, &MsgOpenRecord{}, &MsgRevealChunk{}, &MsgProveTile{}, &MsgProveParityFault{}, &MsgProveRoundFault{},
		&MsgOpenFileQuery{}, &MsgAnswerFileQuery{}, &MsgDescendFileQuery{},
	)
	msgservice.RegisterMsgServiceDesc(registry, &_Msg_serviceDesc)
}
