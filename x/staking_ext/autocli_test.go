package stakingext_test

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/client/v2/autocli"
	"cosmossdk.io/core/appmodule"

	"github.com/cosmos/cosmos-sdk/client"
	"github.com/cosmos/cosmos-sdk/codec"
	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	codectestutil "github.com/cosmos/cosmos-sdk/codec/testutil"
	"github.com/cosmos/cosmos-sdk/crypto/keyring"
	"github.com/cosmos/cosmos-sdk/std"
	sdk "github.com/cosmos/cosmos-sdk/types"
	authtx "github.com/cosmos/cosmos-sdk/x/auth/tx"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	govv1 "github.com/cosmos/cosmos-sdk/x/gov/types/v1"

	stakingext "github.com/depinchain/depinchain/x/staking_ext"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

const operator = "depin1qypqxpqpqgpsgqgzqvzqzqsrqsqsyqcy29kvll"

func TestMain(m *testing.M) {
	// --from ADDRESS --generate-only is parsed with the global prefix.
	sdk.GetConfig().SetBech32PrefixForAccount("depin", "depinpub")
	os.Exit(m.Run())
}

// runTx runs `depinchaind tx stakingext <args> --from operator --generate-only`
// through the AutoCLI-generated commands and returns the one message of the
// unsigned transaction it prints.
func runTx(t *testing.T, args ...string) sdk.Msg {
	t.Helper()
	interfaceRegistry := codectestutil.CodecOptions{AccAddressPrefix: "depin", ValAddressPrefix: "depinvaloper"}.NewInterfaceRegistry()
	std.RegisterInterfaces(interfaceRegistry)
	govv1.RegisterInterfaces(interfaceRegistry)
	types.RegisterInterfaces(interfaceRegistry)
	cdc := codec.NewProtoCodec(interfaceRegistry)
	txConfig := authtx.NewTxConfig(cdc, authtx.DefaultSignModes)
	clientCtx := client.Context{}.
		WithCodec(cdc).
		WithInterfaceRegistry(interfaceRegistry).
		WithTxConfig(txConfig).
		WithAccountRetriever(authtypes.AccountRetriever{}).
		WithKeyring(keyring.NewInMemory(cdc)).
		WithChainID("depinchain-test")

	options := autocli.AppOptions{
		Modules:               map[string]appmodule.AppModule{types.ModuleName: stakingext.AppModule{}},
		AddressCodec:          addresscodec.NewBech32Codec("depin"),
		ValidatorAddressCodec: addresscodec.NewBech32Codec("depinvaloper"),
		ConsensusAddressCodec: addresscodec.NewBech32Codec("depinvalcons"),
		ClientCtx:             clientCtx,
	}
	rootCmd := &cobra.Command{
		Use: "depinchaind",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return client.SetCmdClientContextHandler(clientCtx, cmd)
		},
	}
	require.NoError(t, options.EnhanceRootCommand(rootCmd))

	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&out)
	rootCmd.SetArgs(append(append([]string{"tx", "stakingext"}, args...), "--from", operator, "--generate-only"))
	require.NoError(t, rootCmd.Execute(), out.String())

	tx, err := txConfig.TxJSONDecoder()(out.Bytes())
	require.NoError(t, err, out.String())
	msgs := tx.GetMsgs()
	require.Len(t, msgs, 1)
	return msgs[0]
}

// TestRegisterProviderCommand pins the documented CLI syntax: four
// positional arguments and one --gpus JSON object per GPU class.
func TestRegisterProviderCommand(t *testing.T) {
	msg := runTx(t, "register-provider", "gpu-farm-1", "https://gpu1.example.com:8443", "eu-west", "16000000udepin",
		"--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`,
		"--gpus", `{"model":"A100-SXM4-40GB","vramMib":"40960","count":8}`)

	require.Equal(t, &types.MsgRegisterProvider{
		Operator: operator,
		Moniker:  "gpu-farm-1",
		Endpoint: "https://gpu1.example.com:8443",
		Region:   "eu-west",
		Gpus: []types.GPUInventory{
			{Model: "H100-SXM5-80GB", VramMib: 81920, Count: 8},
			{Model: "A100-SXM4-40GB", VramMib: 40960, Count: 8},
		},
		Bond: sdk.NewInt64Coin("udepin", 16_000_000),
	}, msg)
}

func TestProviderCommands(t *testing.T) {
	update := runTx(t, "update-provider", "gpu-farm-2", "http://10.0.0.7:8080", "us-east",
		"--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":16}`)
	require.Equal(t, &types.MsgUpdateProvider{
		Operator: operator, Moniker: "gpu-farm-2", Endpoint: "http://10.0.0.7:8080", Region: "us-east",
		Gpus: []types.GPUInventory{{Model: "H100-SXM5-80GB", VramMib: 81920, Count: 16}},
	}, update)

	require.Equal(t, &types.MsgBond{Operator: operator, Amount: sdk.NewInt64Coin("udepin", 5)}, runTx(t, "bond", "5udepin"))
	require.Equal(t, &types.MsgUnbond{Operator: operator, Amount: sdk.NewInt64Coin("udepin", 7)}, runTx(t, "unbond", "7udepin"))
	require.Equal(t, &types.MsgUnjail{Operator: operator}, runTx(t, "unjail"))
}

func TestVerifierCommands(t *testing.T) {
	require.Equal(t, &types.MsgRegisterVerifier{Operator: operator, Bond: sdk.NewInt64Coin("udepin", 100_000_000)},
		runTx(t, "register-verifier", "100000000udepin"))
	require.Equal(t, &types.MsgBondVerifier{Operator: operator, Amount: sdk.NewInt64Coin("udepin", 3)}, runTx(t, "bond-verifier", "3udepin"))
	require.Equal(t, &types.MsgUnbondVerifier{Operator: operator, Amount: sdk.NewInt64Coin("udepin", 4)}, runTx(t, "unbond-verifier", "4udepin"))
	require.Equal(t, &types.MsgActivateVerifier{Operator: operator}, runTx(t, "activate-verifier"))
}

func TestUpdateParamsProposalCommand(t *testing.T) {
	msg := runTx(t, "update-params-proposal",
		`{"bond_denom":"udepin","min_bond_per_gpu":"2000000","unbonding_period":"604800s","max_gpu_classes":8,"max_unbondings_per_block":50,"max_unbonding_entries":3,"unbonding_blocks":"200000","min_verifier_bond":"100000000"}`,
		"--deposit", "10udepin", "--title", "Raise the bond", "--summary", "2 DEPIN per GPU")
	proposal, ok := msg.(*govv1.MsgSubmitProposal)
	require.True(t, ok, "got %T", msg)
	proposed, err := proposal.GetMsgs()
	require.NoError(t, err)
	require.Len(t, proposed, 1)
	update, ok := proposed[0].(*types.MsgUpdateParams)
	require.True(t, ok, "got %T", proposed[0])

	gov, err := addresscodec.NewBech32Codec("depin").BytesToString(authtypes.NewModuleAddress("gov"))
	require.NoError(t, err)
	require.Equal(t, gov, update.Authority)
	expected := types.DefaultParams()
	expected.MinBondPerGpu = expected.MinBondPerGpu.MulRaw(2)
	expected.UnbondingPeriod = 7 * 24 * time.Hour
	expected.MaxGpuClasses, expected.MaxUnbondingsPerBlock, expected.MaxUnbondingEntries = 8, 50, 3
	expected.UnbondingBlocks = 200_000
	require.Equal(t, expected.String(), update.Params.String())
}
