package types

import (
	"fmt"
	gomath "math"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// DefaultParams suit a public network with ~6 s blocks: a checkpoint is challengeable for
// about 30 minutes and each dispute move gets about 10 minutes.
func DefaultParams() Params {
	return Params{
		ChallengeWindow:            300,
		MoveTimeout:                100,
		ChallengerBond:             sdk.NewInt64Coin("udepin", 10_000_000),
		FraudSlashFraction:         math.LegacyNewDecWithPrec(50, 2),
		WhistleblowerShare:         math.LegacyNewDecWithPrec(50, 2),
		MaxChallengesPerCheckpoint: 8,
		// 2^26 MACs: the largest reference model × batch a referee step may re-execute.
		MaxStepMacs:          1 << 26,
		GasPerMac:            1,
		GasPerHash:           50,
		GasPerByte:           2,
		MaxDeadlinesPerBlock: 100,
		MaxMetrics:           8,
	}
}

// Validate names the first invalid param.
func (p Params) Validate() error {
	switch {
	case p.ChallengeWindow == 0:
		return fmt.Errorf("challenge_window must be positive")
	case p.MoveTimeout == 0:
		return fmt.Errorf("move_timeout must be positive")
	case !p.ChallengerBond.IsValid() || !p.ChallengerBond.IsPositive():
		return fmt.Errorf("challenger_bond must be a positive coin, got %s", p.ChallengerBond)
	case p.FraudSlashFraction.IsNil() || !p.FraudSlashFraction.IsPositive() || p.FraudSlashFraction.GT(math.LegacyOneDec()):
		return fmt.Errorf("fraud_slash_fraction must be in (0, 1], got %s", p.FraudSlashFraction)
	case p.WhistleblowerShare.IsNil() || p.WhistleblowerShare.IsNegative() || p.WhistleblowerShare.GT(math.LegacyOneDec()):
		return fmt.Errorf("whistleblower_share must be in [0, 1], got %s", p.WhistleblowerShare)
	case p.MaxChallengesPerCheckpoint == 0:
		return fmt.Errorf("max_challenges_per_checkpoint must be positive")
	case p.MaxStepMacs == 0:
		return fmt.Errorf("max_step_macs must be positive")
	case p.GasPerMac == 0 || p.MaxStepMacs > gomath.MaxUint64/p.GasPerMac:
		// A free referee step would let anyone burn validators' CPU; an overflowing one
		// would wrap around and charge almost nothing.
		return fmt.Errorf("gas_per_mac must be positive and max_step_macs × gas_per_mac must fit in 64 bits, got %d × %d", p.MaxStepMacs, p.GasPerMac)
	case p.MaxDeadlinesPerBlock == 0:
		return fmt.Errorf("max_deadlines_per_block must be positive")
	}
	return nil
}
