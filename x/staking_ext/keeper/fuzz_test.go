package keeper_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// FuzzValidateRegisterProvider sends arbitrary registrations (one or two
// GPU classes) through the msg server. A rejected one must change nothing;
// an accepted one must meet the documented rules, checked here
// independently, must be stored as sent, and must export as a valid
// genesis. Without -fuzz only the seeds run, as a plain test.
func FuzzValidateRegisterProvider(f *testing.F) {
	f.Add("gpu-farm-1", "https://gpu1.example.com:8443", "eu-west", "H100-SXM5-80GB", uint64(81920), uint32(8), "", uint64(0), uint32(0), int64(8_000_000))
	f.Add("gpu-farm-1", "http://10.0.0.7:8080/sidecar", "us", "A100", uint64(40960), uint32(2), "H100", uint64(81920), uint32(1), int64(3_000_000))
	f.Add("gpu-farm-1", "http://10.0.0.7:8080/sidecar", "us", "A100", uint64(40960), uint32(2), "A100", uint64(40960), uint32(1), int64(3_000_000))
	f.Add("gpu-farm-1", "https://gpu1.example.com", "eu", "H100", uint64(81920), uint32(8), "", uint64(0), uint32(0), int64(7_999_999))
	f.Add("", "https://gpu1.example.com", "eu", "H100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://user:pw@gpu1.example.com", "eu", "H100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https:opaque", "eu", "H100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://[::1]:9/x?y#z", "eu", "H100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://h", " eu", "H100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://h", "eu", "H\x7f100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://h", "eu", "H100", uint64(0), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://h", "eu", "H100", uint64(1), uint32(0), "", uint64(0), uint32(0), int64(1_000_000))
	f.Add("m", "https://h", "eu", "H100", uint64(1), uint32(4294967295), "B200", uint64(1), uint32(4294967295), int64(-1))
	f.Add("m\xff", "https://h", "eu", "H100", uint64(1), uint32(1), "", uint64(0), uint32(0), int64(1_000_000))

	f.Fuzz(func(t *testing.T, moniker, endpoint, region, model string, vramMiB uint64, count uint32,
		secondModel string, secondVRAMMiB uint64, secondCount uint32, bond int64,
	) {
		fx := newFixture(t)
		operator := account("fuzzed-operator")
		const funds = 1 << 50
		fx.fund(operator, funds)
		gpus := []types.GPUInventory{{Model: model, VramMib: vramMiB, Count: count}}
		if secondModel != "" {
			gpus = append(gpus, types.GPUInventory{Model: secondModel, VramMib: secondVRAMMiB, Count: secondCount})
		}
		msg := &types.MsgRegisterProvider{
			Operator: fx.addressText(operator), Moniker: moniker, Endpoint: endpoint, Region: region,
			Gpus: gpus, Bond: sdk.Coin{Denom: bondDenom, Amount: math.NewInt(bond)},
		}

		before := fx.snapshot()
		if _, err := fx.msgServer.RegisterProvider(fx.ctx, msg); err != nil {
			before.RequireUnchanged(t, "rejected with %v", err)
			return
		}

		for _, text := range []string{moniker, region, model} {
			require.NotEmpty(t, text)
		}
		parsed, err := url.Parse(endpoint)
		require.NoError(t, err)
		require.Contains(t, []string{"http", "https"}, parsed.Scheme)
		require.NotEmpty(t, parsed.Hostname())
		require.Nil(t, parsed.User)
		totalGPUs := uint64(0)
		for _, gpu := range gpus {
			require.NotZero(t, gpu.VramMib)
			require.NotZero(t, gpu.Count)
			totalGPUs += uint64(gpu.Count)
		}
		if len(gpus) == 2 {
			require.False(t, gpus[0].Model == gpus[1].Model && gpus[0].VramMib == gpus[1].VramMib, "duplicate class accepted")
		}
		require.True(t, math.NewInt(bond).GTE(types.DefaultMinBondPerGPU.Mul(math.NewIntFromUint64(totalGPUs))))

		provider := fx.provider(operator)
		require.Equal(t, msg.Operator, provider.Operator)
		require.Equal(t, moniker, provider.Moniker)
		require.Equal(t, endpoint, provider.Endpoint)
		require.Equal(t, region, provider.Region)
		require.Equal(t, gpus, provider.Gpus)
		require.Equal(t, math.NewInt(bond).String(), provider.Bond.Amount.String())
		require.Equal(t, math.NewInt(funds-bond).String(), fx.balance(operator).String())

		exported, err := fx.keeper.ExportGenesis(fx.ctx)
		require.NoError(t, err)
		require.NoError(t, exported.Validate(fx.addressCodec), "an accepted registration must export as valid genesis")
	})
}
