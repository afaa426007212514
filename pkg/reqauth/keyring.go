package reqauth

import (
	"fmt"

	"github.com/cosmos/cosmos-sdk/crypto/keyring"
	"github.com/cosmos/cosmos-sdk/types/bech32"
	signingtypes "github.com/cosmos/cosmos-sdk/types/tx/signing"

	"github.com/depinchain/depinchain/pkg/chainparams"
)

// KeyringSigner is key name of kr as a Signer, with the key's bech32 address: what a
// client (the owner's CLI, a test) signs its requests to providers with.
func KeyringSigner(kr keyring.Keyring, name string) (string, Signer, error) {
	rec, err := kr.Key(name)
	if err != nil {
		return "", nil, fmt.Errorf("key %q: %w", name, err)
	}
	acc, err := rec.GetAddress()
	if err != nil {
		return "", nil, err
	}
	// The chain's prefix, whatever the process's SDK config says (a test's is cosmos).
	address, err := bech32.ConvertAndEncode(chainparams.Bech32Prefix, acc)
	if err != nil {
		return "", nil, err
	}
	sign := func(msg []byte) ([]byte, []byte, error) {
		sig, pk, err := kr.Sign(name, msg, signingtypes.SignMode_SIGN_MODE_DIRECT)
		if err != nil {
			return nil, nil, err
		}
		return sig, pk.Bytes(), nil
	}
	return address, sign, nil
}
