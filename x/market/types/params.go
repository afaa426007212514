package types

import (
	"fmt"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
)

// DefaultDenom is the denomination jobs are priced and paid in.
const DefaultDenom = "udepin"

// Defaults of the transformer bounds: 2 Gi parameters and 64 Ki tokens per step. A
// 1.2 B-parameter model (24 layers, d_model 2048, d_ff 8192, context 2048, batch 8) fits:
// x/verify adjudicates any model through phases 2–3 at bounded gas per message
// (x/verify's TestTileMovesFitTheBlockGasBound checks that config), so the bound on
// parameters is what providers can train, not what the referee can re-execute.
const (
	DefaultMaxTransformerParams = 2 << 30
	DefaultMaxTokensPerStep     = 64 << 10
)

// DefaultParams are conservative defaults for a public network.
func DefaultParams() Params {
	return Params{
		Denom:                           DefaultDenom,
		CollateralRatio:                 math.LegacyNewDecWithPrec(10, 2), // 10% of a lease's maximum value
		NonPerformanceSlashFraction:     math.LegacyNewDecWithPrec(1, 2),  // 1% of the bond
		DefaultCheckpointDeadlineBlocks: 600,
		MinBiddingWindowBlocks:          2,
		MaxBiddingWindowBlocks:          14_400,
		MaxWorkers:                      64,
		MaxBidsPerJob:                   100,
		MaxDeadlinesPerBlock:            200,
		MinDeposit:                      sdk.NewInt64Coin(DefaultDenom, 1_000),
		BlockHashRetention:              1_000,
		NonPerformanceJailDuration:      time.Hour,
		MaxTransformerParams:            DefaultMaxTransformerParams,
		MaxTokensPerStep:                DefaultMaxTokensPerStep,
		RateTolerance:                   DefaultRateTolerance,
		RateCheckInterval:               DefaultRateCheckInterval,
		RoundQuorum:                     DefaultRoundQuorum,
		MaxMissedRounds:                 DefaultMaxMissedRounds,
		DefaultRoundCommitBlocks:        DefaultRoundCommitBlocks,
		RoundAggregateBlocks:            DefaultRoundAggregateBlocks,
		RoundChallengeBlocks:            DefaultRoundChallengeBlocks,
		MaxSyncWorkers:                  DefaultMaxSyncWorkers,
	}
}

// Defaults of the rounds of sync jobs (consensus version 5): a round closes at its
// commit deadline once half its workers committed; two rounds in a row without a commit
// lose a lease; 32 workers at most.
var DefaultRoundQuorum = math.LegacyNewDecWithPrec(5, 1)

// Round defaults in blocks and workers.
const (
	DefaultMaxMissedRounds      = 2
	DefaultRoundCommitBlocks    = 600
	DefaultRoundAggregateBlocks = 300
	DefaultRoundChallengeBlocks = 100
	DefaultMaxSyncWorkers       = 32
)

// Defaults of the rate check (consensus version 4): a lease must have checkpointed at
// least half the steps its committed rate promises, checked an hour after it starts and
// every hour after.
var DefaultRateTolerance = math.LegacyNewDecWithPrec(5, 1)

// DefaultRateCheckInterval is the default rate_check_interval.
const DefaultRateCheckInterval = time.Hour

// Validate checks every param and names the first one that is wrong.
func (p Params) Validate() error {
	if err := sdk.ValidateDenom(p.Denom); err != nil {
		return fmt.Errorf("denom: %w", err)
	}
	if p.CollateralRatio.IsNil() || p.CollateralRatio.IsNegative() || p.CollateralRatio.GT(math.LegacyNewDec(10)) {
		return fmt.Errorf("collateral_ratio must be within [0, 10], got %s", p.CollateralRatio)
	}
	if p.NonPerformanceSlashFraction.IsNil() || p.NonPerformanceSlashFraction.IsNegative() || p.NonPerformanceSlashFraction.GT(math.LegacyOneDec()) {
		return fmt.Errorf("non_performance_slash_fraction must be within [0, 1], got %s", p.NonPerformanceSlashFraction)
	}
	if p.DefaultCheckpointDeadlineBlocks == 0 {
		return fmt.Errorf("default_checkpoint_deadline_blocks must be positive")
	}
	if p.MinBiddingWindowBlocks == 0 || p.MinBiddingWindowBlocks > p.MaxBiddingWindowBlocks {
		return fmt.Errorf("bidding window bounds must satisfy 0 < min (%d) <= max (%d)", p.MinBiddingWindowBlocks, p.MaxBiddingWindowBlocks)
	}
	if p.MaxWorkers == 0 {
		return fmt.Errorf("max_workers must be positive")
	}
	if p.MaxBidsPerJob == 0 {
		return fmt.Errorf("max_bids_per_job must be positive")
	}
	if p.MaxDeadlinesPerBlock == 0 {
		return fmt.Errorf("max_deadlines_per_block must be positive")
	}
	if !p.MinDeposit.IsValid() || p.MinDeposit.Denom != p.Denom {
		return fmt.Errorf("min_deposit must be a valid coin of denom %q, got %s", p.Denom, p.MinDeposit)
	}
	if p.BlockHashRetention < 2 {
		return fmt.Errorf("block_hash_retention must be at least 2")
	}
	if p.NonPerformanceJailDuration < 0 {
		return fmt.Errorf("non_performance_jail_duration must not be negative")
	}
	if p.MaxTransformerParams == 0 {
		return fmt.Errorf("max_transformer_params must be positive")
	}
	if p.MaxTokensPerStep == 0 || p.MaxTokensPerStep > exact.HardMaxTokensPerStep {
		return fmt.Errorf("max_tokens_per_step must be in [1, %d] (the exact arithmetic's bound), got %d", exact.HardMaxTokensPerStep, p.MaxTokensPerStep)
	}
	if p.RateTolerance.IsNil() || p.RateTolerance.IsNegative() || p.RateTolerance.GT(math.LegacyOneDec()) {
		return fmt.Errorf("rate_tolerance must be within [0, 1], got %s", p.RateTolerance)
	}
	if p.RateCheckInterval <= 0 {
		return fmt.Errorf("rate_check_interval must be positive, got %s", p.RateCheckInterval)
	}
	if p.RoundQuorum.IsNil() || !p.RoundQuorum.IsPositive() || p.RoundQuorum.GT(math.LegacyOneDec()) {
		return fmt.Errorf("round_quorum must be within (0, 1], got %s", p.RoundQuorum)
	}
	if p.MaxMissedRounds == 0 {
		return fmt.Errorf("max_missed_rounds must be positive")
	}
	if p.DefaultRoundCommitBlocks == 0 || p.RoundAggregateBlocks == 0 || p.RoundChallengeBlocks == 0 {
		return fmt.Errorf("default_round_commit_blocks (%d), round_aggregate_blocks (%d) and round_challenge_blocks (%d) must be positive",
			p.DefaultRoundCommitBlocks, p.RoundAggregateBlocks, p.RoundChallengeBlocks)
	}
	if p.MaxSyncWorkers == 0 || p.MaxSyncWorkers > diloco.MaxWorkers {
		return fmt.Errorf("max_sync_workers must be in [1, %d], got %d", diloco.MaxWorkers, p.MaxSyncWorkers)
	}
	return nil
}
