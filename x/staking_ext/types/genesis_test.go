package types_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	addresscodec "github.com/cosmos/cosmos-sdk/codec/address"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

const (
	alice = "depin1qypqxpqpqgpsgqgzqvzqzqsrqsqsyqcy29kvll"
	bob   = "depin1qgzqvzqzqsrqsqsyqcyqypqxpqpqgpsgz96ms3"
)

// validGenesis has two providers, one with two locks, and an unbonding.
func validGenesis() types.GenesisState {
	provider := func(operator string, locked int64) types.Provider {
		return types.Provider{
			Operator: operator, Moniker: "m", Endpoint: "https://h.example", Region: "r",
			Gpus:   []types.GPUInventory{{Model: "H100", VramMib: 81920, Count: 1}},
			Bond:   sdk.NewInt64Coin("udepin", 1_000_000),
			Locked: sdk.NewInt64Coin("udepin", locked),
			Status: types.PROVIDER_STATUS_ACTIVE,
		}
	}
	return types.GenesisState{
		Params:    types.DefaultParams(),
		Providers: []types.Provider{provider(alice, 300), provider(bob, 0)},
		Locks: []types.CollateralLock{
			{Operator: alice, Ref: "market/lease/1", Amount: sdk.NewInt64Coin("udepin", 100)},
			{Operator: alice, Ref: "market/lease/2", Amount: sdk.NewInt64Coin("udepin", 200)},
		},
		Unbondings: []types.Unbonding{
			{Id: 4, Operator: bob, Amount: sdk.NewInt64Coin("udepin", 5), CompletionTime: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		},
		NextUnbondingId: 5,
	}
}

func TestGenesisValidate(t *testing.T) {
	codec := addresscodec.NewBech32Codec("depin")
	require.NoError(t, types.DefaultGenesis().Validate(codec))
	require.Equal(t, uint64(1), types.DefaultGenesis().NextUnbondingId)
	require.NoError(t, validGenesis().Validate(codec))

	tests := []struct {
		name    string
		mutate  func(*types.GenesisState)
		message string
	}{
		{"invalid params", func(gs *types.GenesisState) { gs.Params.MaxGpuClasses = 0 }, "params: max_gpu_classes"},
		{"invalid provider address", func(gs *types.GenesisState) { gs.Providers[0].Operator = "cosmos1xyz" }, "providers[0]: operator"},
		{"provider twice", func(gs *types.GenesisState) { gs.Providers[1] = gs.Providers[0] }, "providers[1]: operator " + alice + " is registered twice"},
		{"invalid endpoint", func(gs *types.GenesisState) { gs.Providers[1].Endpoint = "ftp://h" }, "providers[1]"},
		{"invalid GPU", func(gs *types.GenesisState) { gs.Providers[1].Gpus[0].Count = 0 }, "count must be positive"},
		{"bond in another denom", func(gs *types.GenesisState) { gs.Providers[1].Bond.Denom = "stake" }, "bond must be in udepin"},
		{"negative locked", func(gs *types.GenesisState) { gs.Providers[1].Locked.Amount = math.NewInt(-1) }, "locked must not be negative"},
		{"unspecified status", func(gs *types.GenesisState) { gs.Providers[1].Status = types.PROVIDER_STATUS_UNSPECIFIED }, "is not a provider status"},
		{"lock of a non-provider", func(gs *types.GenesisState) {
			gs.Locks[0].Operator = "depin1qvrqjrqrqcyscqcxpyxqxpsfpspsvzgv377p97"
		}, "locks[0]: operator depin1qvrqjrqrqcyscqcxpyxqxpsfpspsvzgv377p97 is not a provider"},
		{"lock twice", func(gs *types.GenesisState) { gs.Locks[1].Ref = gs.Locks[0].Ref }, `locks[1]: ` + alice + ` already has a lock "market/lease/1"`},
		{"lock without ref", func(gs *types.GenesisState) { gs.Locks[0].Ref = "" }, "ref must not be empty"},
		{"locks do not add up", func(gs *types.GenesisState) { gs.Providers[0].Locked.Amount = math.NewInt(299) }, "locked is 299 but its locks add up to 300"},
		{"unbonding id not below next id", func(gs *types.GenesisState) { gs.NextUnbondingId = 4 }, "id 4 is not below next_unbonding_id 4"},
		{"unbonding id twice", func(gs *types.GenesisState) { gs.Unbondings = append(gs.Unbondings, gs.Unbondings[0]) }, "id 4 is used twice"},
		{"zero unbonding", func(gs *types.GenesisState) { gs.Unbondings[0].Amount.Amount = math.ZeroInt() }, "amount must be positive"},
		{"unbonding completing after 2262", func(gs *types.GenesisState) {
			gs.Unbondings[0].CompletionTime = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
		}, "outside the unbonding queue's range"},
	}
	for _, tc := range tests {
		gs := validGenesis()
		tc.mutate(&gs)
		err := gs.Validate(codec)
		require.ErrorIs(t, err, types.ErrInvalidGenesis, tc.name)
		require.ErrorContains(t, err, tc.message, tc.name)
	}
}

func TestGenesisAllowsProvidersBeyondTodaysGPUClassLimit(t *testing.T) {
	gs := validGenesis()
	gs.Params.MaxGpuClasses = 1
	gs.Providers[0].Gpus = append(gs.Providers[0].Gpus, types.GPUInventory{Model: "A100", VramMib: 40960, Count: 1})
	require.NoError(t, gs.Validate(addresscodec.NewBech32Codec("depin")), "governance may lower the limit after registration")
}
