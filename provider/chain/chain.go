// Package chain is the provider sidecar's connection to depinchain: a
// Follower that replays every block's typed events from a durable cursor, a
// Querier for start-up reconciliation and authz grant checks, and a Submitter
// that signs with the hot key and broadcasts one transaction at a time.
package chain

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	"github.com/cosmos/cosmos-sdk/x/authz"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/pkg/chainparams"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// NewEncodingConfig returns the app's codecs with the interfaces the sidecar
// meets registered: the messages it sends, directly or wrapped in an authz
// MsgExec, and the authorizations inside the grants it checks.
func NewEncodingConfig() chainparams.EncodingConfig {
	enc := chainparams.MakeEncodingConfig()
	for _, register := range []func(codectypes.InterfaceRegistry){
		authz.RegisterInterfaces,
		banktypes.RegisterInterfaces,
		stakingexttypes.RegisterInterfaces,
		markettypes.RegisterInterfaces,
		verifytypes.RegisterInterfaces,
	} {
		register(enc.InterfaceRegistry)
	}
	return enc
}

// DialGRPC opens a client connection to a node's gRPC endpoint (host:port,
// plaintext as nodes serve it). Responses are decoded with the SDK's codec so
// that Any values unpack into registered Go types.
func DialGRPC(target string, registry codectypes.InterfaceRegistry) (*grpc.ClientConn, error) {
	return grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec.NewProtoCodec(registry).GRPCCodec())),
	)
}
