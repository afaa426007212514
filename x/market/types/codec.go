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
	legacy.RegisterAminoMsg(cdc, &MsgSubmitJob{}, "depinchain/x/market/MsgSubmitJob")
	legacy.RegisterAminoMsg(cdc, &MsgPlaceBid{}, "depinchain/x/market/MsgPlaceBid")
	legacy.RegisterAminoMsg(cdc, &MsgWithdrawBid{}, "depinchain/x/market/MsgWithdrawBid")
	legacy.RegisterAminoMsg(cdc, &MsgCancelJob{}, "depinchain/x/market/MsgCancelJob")
	legacy.RegisterAminoMsg(cdc, &MsgTopUpDeposit{}, "depinchain/x/market/MsgTopUpDeposit")
	legacy.RegisterAminoMsg(cdc, &MsgWithdrawEarnings{}, "depinchain/x/market/MsgWithdrawEarnings")
	legacy.RegisterAminoMsg(cdc, &MsgUpdateParams{}, "depinchain/x/market/MsgUpdateParams")
	legacy.RegisterAminoMsg(cdc, &MsgCommitRound{}, "depinchain/x/market/MsgCommitRound")
	legacy.RegisterAminoMsg(cdc, &MsgCommitGlobal{}, "depinchain/x/market/MsgCommitGlobal")
	cdc.RegisterConcrete(&Params{}, "depinchain/x/market/Params", nil)
}

// RegisterInterfaces registers the messages with the interface registry.
func RegisterInterfaces(registry codectypes.InterfaceRegistry) {
	registry.RegisterImplementations((*sdk.Msg)(nil),
		&MsgSubmitJob{}, &MsgPlaceBid{}, &MsgWithdrawBid{}, &MsgCancelJob{},
		&MsgTopUpDeposit{}, &MsgWithdrawEarnings{}, &MsgUpdateParams{},
		&MsgCommitRound{}, &MsgCommitGlobal{},
	)
	msgservice.RegisterMsgServiceDesc(registry, &_Msg_serviceDesc)
}
