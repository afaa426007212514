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
	// DefaultUnbondingBlocks is about 7 days of 6-second blocks: far above x/verify's
	// default challenge window plus its longest dispute (4,400 blocks), so an unbonding
	// stays slashable for every dispute over what its operator committed before.
	DefaultUnbondingBlocks = 100_800
	// MaxUnbondingBlocks keeps creation height + unbonding_blocks far inside int64.
	MaxUnbondingBlocks = 1 << 40

	// MaxUnbondingPeriod bounds unbonding_period so that every completion
	// time stays inside the int64-nanosecond range the unbonding queue is
	// keyed by (up to the year 2262).
	MaxUnbondingPeriod = 10 * 365 * 24 * time.Hour
)

var (
	// DefaultMinBondPerGPU is 1 DEPIN (10^6 udepin) per registered GPU.
	DefaultMinBondPerGPU = math.NewInt(1_000_000)
	// DefaultMinVerifierBond is 100 DEPIN: what an auditor puts at stake for its attestations.
	DefaultMinVerifierBond = math.NewInt(100_000_000)

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
		UnbondingBlocks:       DefaultUnbondingBlocks,
		MinVerifierBond:       DefaultMinVerifierBond,
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
	if p.UnbondingBlocks == 0 || p.UnbondingBlocks > MaxUnbondingBlocks {
		return errorsmod.Wrapf(ErrInvalidParams, "unbonding_blocks must be positive and at most 2^40, got %d", p.UnbondingBlocks)
	}
	if p.MinVerifierBond.IsNil() || !p.MinVerifierBond.IsPositive() || p.MinVerifierBond.GT(maxMinBondPerGPU) {
		return errorsmod.Wrapf(ErrInvalidParams, "min_verifier_bond must be positive and at most 2^128, got %s", p.MinVerifierBond)
	}
	return nil
}

// ValidateUnbondingCover checks unbonding_blocks against the blocks x/verify needs an
// unbonding to stay slashable for (its challenge window plus its longest dispute), the
// one rule that spans the two modules' params.
func (p Params) ValidateUnbondingCover(required uint64) error {
	if p.UnbondingBlocks < required {
		return errorsmod.Wrapf(ErrInvalidParams,
			"unbonding_blocks %d is below the %d blocks x/verify's challenge window and longest dispute take: "+
				"an operator could unbond after committing fraud and be paid out before it is proven", p.UnbondingBlocks, required)
	}
	return nil
}

// RequiredBond is the bond a provider with totalGPUs registered GPUs needs
// before it may bid: min_bond_per_gpu × totalGPUs.
func (p Params) RequiredBond(totalGPUs uint64) sdk.Coin {
	return sdk.NewCoin(p.BondDenom, p.MinBondPerGpu.Mul(math.NewIntFromUint64(totalGPUs)))
}
