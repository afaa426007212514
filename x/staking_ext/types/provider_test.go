package types_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	sdkmath "cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

func TestReputationScore(t *testing.T) {
	require.Equal(t, int64(0), types.Reputation{}.Score())
	require.Equal(t, int64(10-2*3-5*1), types.Reputation{LeasesCompleted: 10, LeasesFailed: 3, Slashes: 1}.Score())
	// Counters saturate instead of overflowing int64.
	require.Equal(t, int64(1<<59), types.Reputation{LeasesCompleted: math.MaxUint64}.Score())
	require.Equal(t, int64(-5*(1<<59)), types.Reputation{Slashes: math.MaxUint64}.Score())
	require.Equal(t, int64((1<<59)-2*(1<<59)-5*(1<<59)),
		types.Reputation{LeasesCompleted: math.MaxUint64, LeasesFailed: math.MaxUint64, Slashes: math.MaxUint64}.Score())
}

func TestProviderTotalsAndFreeBond(t *testing.T) {
	provider := types.Provider{
		Gpus: []types.GPUInventory{
			{Model: "H100", VramMib: 81920, Count: 8},
			{Model: "A100", VramMib: 40960, Count: math.MaxUint32},
		},
		Bond:   sdk.NewInt64Coin("udepin", 10),
		Locked: sdk.NewInt64Coin("udepin", 4),
	}
	require.Equal(t, uint64(8+math.MaxUint32), provider.TotalGPUs())
	require.Equal(t, "6udepin", provider.FreeBond().String())

	provider.Locked = sdk.NewInt64Coin("udepin", 12)
	require.Equal(t, "0udepin", provider.FreeBond().String(), "free bond floors at zero after a slash")
}

func TestProviderSatisfies(t *testing.T) {
	provider := types.Provider{Gpus: []types.GPUInventory{
		{Model: "H100", VramMib: 81920, Count: 8},
		{Model: "A100", VramMib: 40960, Count: 4},
	}}
	tests := []struct {
		name       string
		models     []string
		minVRAMMiB uint64
		count      uint32
		want       bool
	}{
		{"any model", nil, 0, 8, true},
		{"listed model with enough VRAM and GPUs", []string{"A100", "L40S"}, 40960, 4, true},
		{"listed model with too few GPUs", []string{"A100"}, 0, 5, false},
		{"listed model with too little VRAM", []string{"A100"}, 40961, 1, false},
		{"classes are not added up", nil, 0, 12, false},
		{"VRAM filter picks the bigger class", nil, 80000, 8, true},
		{"unlisted model", []string{"B200"}, 0, 1, false},
		{"model match is exact", []string{"h100"}, 0, 1, false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, provider.Satisfies(tc.models, tc.minVRAMMiB, tc.count), tc.name)
	}
	require.False(t, types.Provider{}.Satisfies(nil, 0, 0), "a provider without GPUs satisfies nothing")
}

func TestValidateGPUs(t *testing.T) {
	require.NoError(t, types.ValidateGPUs(nil, 1))
	require.NoError(t, types.ValidateGPUs([]types.GPUInventory{
		{Model: "H100", VramMib: 81920, Count: 1},
		{Model: "H100", VramMib: 94208, Count: 1}, // same model, other VRAM: another class
	}, 2))
	err := types.ValidateGPUs([]types.GPUInventory{{Model: "H100", VramMib: 1, Count: 1}, {Model: "B200", VramMib: 1, Count: 1}}, 1)
	require.ErrorIs(t, err, types.ErrInvalidGPU)
	require.ErrorContains(t, err, "2 classes, at most 1")
	err = types.ValidateGPUs([]types.GPUInventory{{Model: "H100 ", VramMib: 1, Count: 1}}, 1)
	require.ErrorContains(t, err, "gpus[0]: model \"H100 \" must not start or end with whitespace")
}

func TestValidateAmounts(t *testing.T) {
	require.NoError(t, types.ValidatePositiveAmount("amount", sdk.NewInt64Coin("udepin", 1), "udepin"))
	require.NoError(t, types.ValidateNonNegativeAmount("amount", sdk.NewInt64Coin("udepin", 0), "udepin"))
	require.ErrorIs(t, types.ValidatePositiveAmount("amount", sdk.NewInt64Coin("udepin", 0), "udepin"), types.ErrInvalidAmount)
	require.ErrorIs(t, types.ValidateNonNegativeAmount("amount", sdk.Coin{Denom: "udepin", Amount: sdkmath.NewInt(-1)}, "udepin"), types.ErrInvalidAmount)
	require.ErrorIs(t, types.ValidateNonNegativeAmount("amount", sdk.Coin{Denom: "udepin"}, "udepin"), types.ErrInvalidAmount)
	require.ErrorIs(t, types.ValidateNonNegativeAmount("amount", sdk.NewInt64Coin("uatom", 1), "udepin"), types.ErrInvalidDenom)
}

func TestParams(t *testing.T) {
	params := types.DefaultParams()
	require.NoError(t, params.Validate())
	require.Equal(t, "udepin", params.BondDenom)
	require.Equal(t, "1000000", params.MinBondPerGpu.String())
	require.Equal(t, 21*24*60*60.0, params.UnbondingPeriod.Seconds())
	require.Equal(t, uint32(16), params.MaxGpuClasses)
	require.Equal(t, uint32(100), params.MaxUnbondingsPerBlock)
	require.Equal(t, uint32(7), params.MaxUnbondingEntries)
	require.Equal(t, "24000000udepin", params.RequiredBond(24).String())
	require.Equal(t, "0udepin", params.RequiredBond(0).String())
}
