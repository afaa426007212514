// Package chainparams holds what every client of the chain must agree on with it and
// nothing else: the address prefix, the bond denom, and the codecs. The chain (app), the
// CLI, the provider sidecar and the tools import it, so the sidecar need not link the
// chain's keepers to sign a transaction.
package chainparams

import (
	"github.com/cosmos/gogoproto/proto"

	"cosmossdk.io/x/tx/signing"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/cosmos/cosmos-sdk/codec/address"
	"github.com/cosmos/cosmos-sdk/codec/types"
	"github.com/cosmos/cosmos-sdk/std"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authtx "github.com/cosmos/cosmos-sdk/x/auth/tx"
)

const (
	// Bech32Prefix is the account address prefix.
	Bech32Prefix = "depin"
	// BondDenom is the staking and fee denomination.
	BondDenom = "udepin"
)

// EncodingConfig bundles the codecs the app, the CLI and the tests share.
type EncodingConfig struct {
	InterfaceRegistry types.InterfaceRegistry
	Codec             codec.Codec
	TxConfig          client.TxConfig
	Amino             *codec.LegacyAmino
}

// MakeEncodingConfig builds the codecs with depin-prefixed address codecs, so
// that signer extraction for every message (ours included) uses our bech32.
func MakeEncodingConfig() EncodingConfig {
	interfaceRegistry, err := types.NewInterfaceRegistryWithOptions(types.InterfaceRegistryOptions{
		ProtoFiles: proto.HybridResolver,
		SigningOptions: signing.Options{
			AddressCodec:          address.NewBech32Codec(Bech32Prefix),
			ValidatorAddressCodec: address.NewBech32Codec(Bech32Prefix + sdk.PrefixValidator + sdk.PrefixOperator),
		},
	})
	if err != nil {
		panic(err)
	}
	cdc := codec.NewProtoCodec(interfaceRegistry)
	amino := codec.NewLegacyAmino()
	std.RegisterLegacyAminoCodec(amino)
	std.RegisterInterfaces(interfaceRegistry)
	return EncodingConfig{
		InterfaceRegistry: interfaceRegistry,
		Codec:             cdc,
		TxConfig:          authtx.NewTxConfig(cdc, authtx.DefaultSignModes),
		Amino:             amino,
	}
}

// SetAddressPrefixes makes the SDK's global config print depin addresses.
// It is called once by the binary and by tests before any address is formatted.
func SetAddressPrefixes() {
	cfg := sdk.GetConfig()
	cfg.SetBech32PrefixForAccount(Bech32Prefix, Bech32Prefix+sdk.PrefixPublic)
	cfg.SetBech32PrefixForValidator(Bech32Prefix+sdk.PrefixValidator+sdk.PrefixOperator, Bech32Prefix+sdk.PrefixValidator+sdk.PrefixOperator+sdk.PrefixPublic)
	cfg.SetBech32PrefixForConsensusNode(Bech32Prefix+sdk.PrefixValidator+sdk.PrefixConsensus, Bech32Prefix+sdk.PrefixValidator+sdk.PrefixConsensus+sdk.PrefixPublic)
}
