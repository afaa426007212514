package localnet

import (
	"net/http"
	"time"

	"github.com/cosmos/cosmos-sdk/codec"
	codectypes "github.com/cosmos/cosmos-sdk/codec/types"
	cryptocodec "github.com/cosmos/cosmos-sdk/crypto/codec"
	"github.com/cosmos/cosmos-sdk/crypto/keyring"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/reqauth"
)

// RequestSigner signs HTTP requests to providers (pkg/reqauth) with key of the node's
// test keyring, as the owner's CLI signs them: providers serve checkpoint states and
// their pieces only to signed requests of the parties the chain names.
func (n *Node) RequestSigner(key string) (func(*http.Request) error, error) {
	reg := codectypes.NewInterfaceRegistry()
	cryptocodec.RegisterInterfaces(reg)
	kr, err := keyring.New(sdk.KeyringServiceName(), keyring.BackendTest, n.Home, nil, codec.NewProtoCodec(reg))
	if err != nil {
		return nil, err
	}
	addr, sign, err := reqauth.KeyringSigner(kr, key)
	if err != nil {
		return nil, err
	}
	return func(req *http.Request) error {
		return reqauth.Sign(req, n.ChainID, addr, sign, time.Now())
	}, nil
}
