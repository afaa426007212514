package cmd

import (
	"context"
	"fmt"
	"os"

	"github.com/cosmos/cosmos-sdk/client/flags"
	"github.com/cosmos/cosmos-sdk/codec"
	"github.com/spf13/pflag"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	"github.com/depinchain/depinchain/pkg/reqauth"
	"github.com/depinchain/depinchain/provider/chain"
)

// requestSigner is the on-chain account key a client command signs its requests to
// providers with (trainer logs, checkpoint pieces): they serve only parties the chain
// names, so the signature is the credential.
type requestSigner struct {
	address string
	sign    func(msg []byte) (sig, pubKey []byte, err error)
}

// keyringSigner opens the keyring the flags name (--keyring-backend, --keyring-dir,
// default --home) and returns a signer for the key named from.
func keyringSigner(f *pflag.FlagSet, from string) (requestSigner, error) {
	backend, _ := f.GetString(flags.FlagKeyringBackend)
	dir, _ := f.GetString(flags.FlagKeyringDir)
	if dir == "" {
		dir, _ = f.GetString(flags.FlagHome)
	}
	kr, err := chain.OpenKeyring(backend, dir, codec.NewProtoCodec(chain.NewEncodingConfig().InterfaceRegistry), os.Stdin)
	if err != nil {
		return requestSigner{}, err
	}
	address, sign, err := reqauth.KeyringSigner(kr, from)
	if err != nil {
		return requestSigner{}, err
	}
	return requestSigner{address: address, sign: sign}, nil
}

// signedChainID is the chain id requests are signed for: --chain-id, or the node's.
func signedChainID(ctx context.Context, f *pflag.FlagSet, src *jobview.Source) (string, error) {
	chainID, _ := f.GetString(flags.FlagChainID)
	if chainID != "" {
		return chainID, nil
	}
	chainID, err := src.NodeInfo(ctx)
	if err != nil {
		return "", fmt.Errorf("the node's chain id: %w", err)
	}
	return chainID, nil
}
