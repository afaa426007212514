package types

import (
	"math/big"
	"time"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// Default parameter values.
const (
	DefaultUnbondingPeriod       = 21 * 24 * time.Hour
	DefaultMaxGPUClasses         = 16
	DefaultMaxUnbondingsPerBlock = 100
	DefaultMaxUnbondingEntries   = 7

	// MaxUnbondingPeriod bounds unbonding_period so that every completion
	// time stays inside the int64-nanosecond range the unbonding queue is
	// keyed by (up to the year 2262).
	MaxUnbondingPeriod = 10 * 365 * 24 * time.Hour
)

var (
	// DefaultMinBondPerGPU is 1 DEPIN (10^6 udepin) per registered GPU.
	DefaultMinBondPerGPU = math.NewInt(1_000_000)

	// maxMinBondPerGPU bounds min_bond_per_gpu so that multiplying it by a
	// provider's GPU count (below 2^64) can never overflow math.Int's 256 bits.
	maxMinBondPerGPU = math.NewIntFromBigInt(new(big.Int).Lsh(big.NewInt(1), 128))
)

// DefaultParams returns the parameters a new chain starts with.
func DefaultParams() Params {
	return Params{
		BondDenom:             DefaultBondDenom,
		MinBondPerGpu:         DefaultMinBondPerGPU,
		UnbondingPeriod:       DefaultUnbondingPeriod,
		MaxGpuClasses:         DefaultMaxGPUClasses,
		MaxUnbondingsPerBlock: DefaultMaxUnbondingsPerBlock,
		MaxUnbondingEntries:   DefaultMaxUnbondingEntries,
	}
}

// Validate checks every parameter and names the first one that is wrong.
func (p Params) Validate() error {
	if err := sdk.ValidateDenom(p.BondDenom); err != nil {
		return errorsmod.Wrapf(ErrInvalidParams, "bond_denom %q: %s", p.BondDenom, err)
	}
	if p.MinBondPerGpu.IsNil() || !p.MinBondPerGpu.IsPositive() {
		return errorsmod.Wrapf(ErrInvalidParams, "min_bond_per_gpu must be positive, got %s", p.MinBondPerGpu)
	}
	if p.MinBondPerGpu.GT(maxMinBondPerGPU) {
		return errorsmod.Wrapf(ErrInvalidParams, "min_bond_per_gpu must be at most 2^128, got %s", p.MinBondPerGpu)
	}
	if p.UnbondingPeriod <= 0 || p.UnbondingPeriod > MaxUnbondingPeriod {
		return errorsmod.Wrapf(ErrInvalidParams, "unbonding_period must be positive and at most %s, got %s", MaxUnbondingPeriod, p.UnbondingPeriod)
	}
	if p.MaxGpuClasses == 0 {
		return errorsmod.Wrap(ErrInvalidParams, "max_gpu_classes must be positive")
	}
	if p.MaxUnbondingsPerBlock == 0 {
		return errorsmod.Wrap(ErrInvalidParams, "max_unbondings_per_block must be positive: unbondings would never mature")
	}
	if p.MaxUnbondingEntries == 0 {
		return errorsmod.Wrap(ErrInvalidParams, "max_unbonding_entries must be positive: nobody could unbond")
	}
	return nil
}

// RequiredBond is the bond a provider with totalGPUs registered GPUs needs
// before it may bid: min_bond_per_gpu × totalGPUs.
func (p Params) RequiredBond(totalGPUs uint64) sdk.Coin {
	return sdk.NewCoin(p.BondDenom, p.MinBondPerGpu.Mul(math.NewIntFromUint64(totalGPUs)))
}
