package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	codectestutil "github.com/cosmos/cosmos-sdk/codec/testutil"
	"github.com/cosmos/cosmos-sdk/crypto/keyring"
	"github.com/cosmos/cosmos-sdk/std"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authtx "github.com/cosmos/cosmos-sdk/x/auth/tx"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/x/shardregistry/client/cli"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

const owner = "depin1qypqxpqpqgpsgqgzqvzqzqsrqsqsyqcy29kvll"

// TestRegisterDatasetCmd: `tx shardregistry register-dataset --manifest m.json
// --generate-only` turns the manifest `dataset build` wrote into the message, checked
// first; a tampered manifest is refused before anything is signed.
func TestRegisterDatasetCmd(t *testing.T) {
	sdk.GetConfig().SetBech32PrefixForAccount("depin", "depinpub")
	dir := t.TempDir()
	input := filepath.Join(dir, "tokens.bin")
	require.NoError(t, os.WriteFile(input, bytes.Repeat([]byte("abcdefgh"), 20_000), 0o644))
	out := filepath.Join(dir, "out")
	m, err := manifest.Build(input, out, manifest.Options{ShardSize: 64 << 10, Encoding: types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 3}})
	require.NoError(t, err)
	path := filepath.Join(out, manifest.ManifestFile)

	registry := codectestutil.CodecOptions{AccAddressPrefix: "depin", ValAddressPrefix: "depinvaloper"}.NewInterfaceRegistry()
	std.RegisterInterfaces(registry)
	types.RegisterInterfaces(registry)
	cdc := codec.NewProtoCodec(registry)
	txConfig := authtx.NewTxConfig(cdc, authtx.DefaultSignModes)
	run := func(args ...string) (sdk.Msg, error) {
		var buf bytes.Buffer
		clientCtx := client.Context{}.WithCodec(cdc).WithInterfaceRegistry(registry).WithTxConfig(txConfig).
			WithAccountRetriever(authtypes.AccountRetriever{}).WithKeyring(keyring.NewInMemory(cdc)).
			WithChainID("depinchain-test").WithOutput(&buf)
		cmd := cli.NewRegisterDatasetCmd()
		cmd.SetContext(context.WithValue(context.Background(), client.ClientContextKey, &clientCtx))
		cmd.SetArgs(append(args, "--from", owner, "--generate-only", "--chain-id", "depinchain-test"))
		cmd.SetOut(&buf)
		cmd.SetErr(&buf)
		if err := cmd.Execute(); err != nil {
			return nil, err
		}
		tx, err := txConfig.TxJSONDecoder()(buf.Bytes())
		require.NoError(t, err, buf.String())
		return tx.GetMsgs()[0], nil
	}

	msg, err := run("--manifest", path, "--id", "tokens-v1", "--name", "Tokens")
	require.NoError(t, err)
	reg := msg.(*types.MsgRegisterDataset)
	require.Equal(t, owner, reg.Owner)
	require.Equal(t, "tokens-v1", reg.DatasetId)
	require.Equal(t, "Tokens", reg.Name)
	require.Len(t, reg.Shards, len(m.Shards))
	require.Equal(t, m.TotalSize, reg.TotalSize)

	_, err = run("--manifest", path)
	require.ErrorContains(t, err, "needs an id")

	tampered, err := manifest.Load(path)
	require.NoError(t, err)
	tampered.Shards[0].Size++
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, tampered.Write(bad))
	_, err = run("--manifest", bad, "--id", "tokens-v1")
	require.ErrorContains(t, err, "shard 0")
}
