package types

import (
	"fmt"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// DefaultDenom is the denomination of replica collateral (the stakingext bond denom).
const DefaultDenom = "udepin"

// MiB is the unit collateral_per_mib is priced in.
const MiB = 1 << 20

// Hard limits that params may not exceed. They bound what a single message or proof can
// make every node do, whatever governance decides.
const (
	// MaxChallengesLimit bounds challenges_per_period.
	MaxChallengesLimit = 64
	// MaxChunkSizeLimit bounds max_chunk_size (1 MiB): a proof carries whole chunks.
	MaxChunkSizeLimit = 1 << 20
	// MaxPiecesLimit bounds max_pieces_per_shard (Reed-Solomon over GF(2^8)).
	MaxPiecesLimit = 256
	// MaxReplicasLimit bounds max_replicas.
	MaxReplicasLimit = 64
)

// DefaultParams suit a public network with ~6 s blocks: one challenge an hour per
// replica, at least 10 minutes to answer it.
func DefaultParams() Params {
	return Params{
		PeriodBlocks:               600,
		ProofWindowBlocks:          100,
		ChallengesPerPeriod:        4,
		MaxDeadlinesPerBlock:       500,
		MissSlashFraction:          math.LegacyNewDecWithPrec(5, 2), // 5% of the replica's collateral
		DeclaredFaultSlashFraction: math.LegacyNewDecWithPrec(1, 2), // 1%
		MaxConsecutiveMisses:       3,
		MinReplicaCollateral:       sdk.NewInt64Coin(DefaultDenom, 100_000),
		CollateralPerMib:           math.NewInt(10_000),
		GasPerHash:                 50,
		GasPerByte:                 2,
		MinChunkSize:               256,
		MaxChunkSize:               64 << 10,
		MaxShardsPerDataset:        10_000,
		MaxPiecesPerShard:          32,
		MaxReplicas:                16,
		MaxShardSize:               1 << 30,
		CustodyMaxRetentionSeconds: 90 * 24 * 3600,
		CustodyMaxStateSize:        64 << 30,
		// One unit per piece and period: 720h of 4+2 at 600 one-second blocks a period is
		// 6 × 4320 = 25920 units, small beside a job's pay.
		CustodyStorageFeePerPiecePeriod: 1,
	}
}

// Validate checks every param and names the first one that is wrong.
func (p Params) Validate() error {
	frac := func(name string, d math.LegacyDec) error {
		if d.IsNil() || d.IsNegative() || d.GT(math.LegacyOneDec()) {
			return fmt.Errorf("%s must be within [0, 1], got %s", name, d)
		}
		return nil
	}
	switch {
	case p.PeriodBlocks < 2:
		return fmt.Errorf("period_blocks must be at least 2, got %d", p.PeriodBlocks)
	case p.PeriodBlocks > 1<<40:
		return fmt.Errorf("period_blocks must be at most 2^40, got %d", p.PeriodBlocks)
	case p.ProofWindowBlocks == 0 || p.ProofWindowBlocks >= p.PeriodBlocks:
		return fmt.Errorf("proof_window_blocks must satisfy 0 < proof_window_blocks (%d) < period_blocks (%d)", p.ProofWindowBlocks, p.PeriodBlocks)
	case p.ChallengesPerPeriod == 0 || p.ChallengesPerPeriod > MaxChallengesLimit:
		return fmt.Errorf("challenges_per_period must be within [1, %d], got %d", MaxChallengesLimit, p.ChallengesPerPeriod)
	case p.MaxDeadlinesPerBlock == 0:
		return fmt.Errorf("max_deadlines_per_block must be positive")
	case p.MaxConsecutiveMisses == 0:
		return fmt.Errorf("max_consecutive_misses must be positive")
	}
	if err := frac("miss_slash_fraction", p.MissSlashFraction); err != nil {
		return err
	}
	if err := frac("declared_fault_slash_fraction", p.DeclaredFaultSlashFraction); err != nil {
		return err
	}
	if p.DeclaredFaultSlashFraction.GT(p.MissSlashFraction) {
		return fmt.Errorf("declared_fault_slash_fraction (%s) must not exceed miss_slash_fraction (%s): admitting a loss must cost less than hiding it",
			p.DeclaredFaultSlashFraction, p.MissSlashFraction)
	}
	if !p.MinReplicaCollateral.IsValid() || p.MinReplicaCollateral.IsNil() {
		return fmt.Errorf("min_replica_collateral must be a valid coin, got %s", p.MinReplicaCollateral)
	}
	if p.CollateralPerMib.IsNil() || p.CollateralPerMib.IsNegative() {
		return fmt.Errorf("collateral_per_mib must not be negative")
	}
	switch {
	case p.MinChunkSize == 0 || p.MinChunkSize > p.MaxChunkSize:
		return fmt.Errorf("chunk size bounds must satisfy 0 < min_chunk_size (%d) <= max_chunk_size (%d)", p.MinChunkSize, p.MaxChunkSize)
	case p.MaxChunkSize > MaxChunkSizeLimit:
		return fmt.Errorf("max_chunk_size must be at most %d, got %d", MaxChunkSizeLimit, p.MaxChunkSize)
	case p.MaxShardsPerDataset == 0:
		return fmt.Errorf("max_shards_per_dataset must be positive")
	case p.MaxPiecesPerShard < 2 || p.MaxPiecesPerShard > MaxPiecesLimit:
		return fmt.Errorf("max_pieces_per_shard must be within [2, %d], got %d", MaxPiecesLimit, p.MaxPiecesPerShard)
	case p.MaxReplicas == 0 || p.MaxReplicas > MaxReplicasLimit:
		return fmt.Errorf("max_replicas must be within [1, %d], got %d", MaxReplicasLimit, p.MaxReplicas)
	case p.MaxShardSize == 0 || p.MaxShardSize > 1<<40:
		return fmt.Errorf("max_shard_size must be within [1, 2^40], got %d", p.MaxShardSize)
	case p.CustodyMaxRetentionSeconds == 0 || p.CustodyMaxRetentionSeconds > 10*365*24*3600:
		return fmt.Errorf("custody_max_retention_seconds must be within [1, 10 years], got %d", p.CustodyMaxRetentionSeconds)
	case p.CustodyMaxStateSize == 0 || p.CustodyMaxStateSize > 1<<46:
		return fmt.Errorf("custody_max_state_size must be within [1, 2^46], got %d", p.CustodyMaxStateSize)
	}
	return nil
}

// ReplicaCollateral is what a replica of a piece of size bytes locks:
// max(min_replica_collateral, ceil(size / MiB) × collateral_per_mib).
func (p Params) ReplicaCollateral(size uint64) sdk.Coin {
	mib := math.NewIntFromUint64(size/MiB + boolToUint64(size%MiB != 0))
	amount := p.CollateralPerMib.Mul(mib)
	if amount.LT(p.MinReplicaCollateral.Amount) {
		amount = p.MinReplicaCollateral.Amount
	}
	return sdk.NewCoin(p.MinReplicaCollateral.Denom, amount)
}

func boolToUint64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
