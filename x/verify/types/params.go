package types

import (
	"fmt"
	gomath "math"
	"math/bits"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/tiles"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// MaxBisectionRounds bounds the rounds of a step game: a checkpoint spans at most
// markettypes.MaxCheckpointInterval steps (the job spec's checkpoint_every is held to
// it and x/verify refuses longer checkpoints), and each round halves the range, so a
// game needs at most ceil(log2(MaxCheckpointInterval)) rounds before the one-step phase.
var MaxBisectionRounds = uint64(bits.Len64(markettypes.MaxCheckpointInterval - 1))

// Phases 2–3 bounds. A record tree has one leaf per entry of a step (loads, operators,
// store), far fewer than 2^MaxRecordRounds for any config exact.Config.Validate accepts;
// an output chunk tree has at most 2^MaxChunkRounds chunks (4 TiB tensors). CheckAdjudicable
// refuses a config whose trees are deeper, so these bound every game.
const (
	MaxRecordRounds = 32
	MaxChunkRounds  = 40
	// MaxTileMoves: two record commitments, two reveals per descent round (records, then
	// chunks), two record openings, the provider's chunk and the challenger's proof.
	MaxTileMoves = 2 + 2*MaxRecordRounds + 2 + 2*MaxChunkRounds + 2
)

// BlockGasLimit is the block gas limit x/verify assumes when it bounds a dispute move:
// no single phase 2–3 message of an adjudicable config may need more than
// MaxMoveGasFraction of it (CheckAdjudicable computes the worst case from the graph).
// The chain's consensus params should set block.max_gas to at least this.
const (
	BlockGasLimit            = 100_000_000
	MaxMoveGasPercent        = 10
	MaxMoveGas        uint64 = BlockGasLimit * MaxMoveGasPercent / 100
)

// Gas the SDK's ante handler charges for any transaction, as x/verify assumes it when it
// bounds a move: auth's tx_size_cost_per_byte (default 10) for every byte of the message
// and a flat allowance for the signature and the rest of the ante handler.
const (
	TxSizeGasPerByte = 10
	TxOverheadGas    = 50_000
)

// TileMoveGas is the gas of a phase 2–3 move that reads and computes c: what the keeper
// charges (bytes, hashes, referee elements at gas_per_byte, gas_per_hash, gas_per_mac)
// plus the ante handler's share for the message's bytes.
func TileMoveGas(p Params, c tiles.Cost) uint64 {
	return p.GasPerByte*uint64(c.Bytes) + p.GasPerHash*uint64(c.Hashes) + p.GasPerMac*uint64(c.Elems) +
		TxSizeGasPerByte*uint64(c.Bytes) + TxOverheadGas
}

// MoveStateGas bounds the store access of one phase 2–3 move beyond what it reads and
// computes: the challenge, checkpoint, job, params and tile state it loads and saves,
// its events, and — for the last move — the resolution (a conviction's slashes,
// refunds and transfers, all bounded by the module's other limits). The keeper tests
// measure at most 0.51 M gas for a whole MsgProveTile on the reference config, of
// which the referee's own work is under 0.1 M.
const MoveStateGas = 1_000_000

// MoveGasBound is the most gas a phase 2–3 move that reads and computes c can use.
func MoveGasBound(p Params, c tiles.Cost) uint64 { return TileMoveGas(p, c) + MoveStateGas }

// MaxGameMoves is the most moves a game can take: two per bisection round, then the
// one-step proof, or MsgCommitRecords and the moves of phases 2–3.
var MaxGameMoves = 2*MaxBisectionRounds + 1 + MaxTileMoves

// MaxAuditors bounds how many auditors a checkpoint draws (the job spec's
// audit.auditors is held to markettypes.MaxAuditors).
const MaxAuditors = markettypes.MaxAuditors

// maxBlocksParam bounds challenge_window and move_timeout so that the longest dispute,
// a sum of them, fits far inside int64 heights.
const maxBlocksParam = 1 << 32

// DefaultParams suit a public network with ~6 s blocks: a checkpoint is challengeable for
// about 30 minutes and each dispute move gets about 10 minutes.
func DefaultParams() Params {
	return Params{
		ChallengeWindow:    300,
		MoveTimeout:        100,
		ChallengerBond:     sdk.NewInt64Coin("udepin", 10_000_000),
		FraudSlashFraction: math.LegacyNewDecWithPrec(50, 2),
		WhistleblowerShare: math.LegacyNewDecWithPrec(50, 2),
		// 2^26 MACs: the largest reference model × batch a referee step may re-execute.
		MaxStepMacs:          1 << 26,
		GasPerMac:            1,
		GasPerHash:           50,
		GasPerByte:           2,
		MaxDeadlinesPerBlock: 100,
		MaxMetrics:           8,
		// A lost challenger bond: 10% to the provider, 40% to the job, 50% to the pool.
		LostBondProviderShare:  math.LegacyNewDecWithPrec(10, 2),
		LostBondOwnerShare:     math.LegacyNewDecWithPrec(40, 2),
		OwnerCompensationRatio: math.LegacyOneDec(),
		// 1000 udepin per step and auditor: 16,000 udepin for a 16-step checkpoint.
		AuditFeePerStep:         sdk.NewInt64Coin("udepin", 1000),
		AuditFraudSlashFraction: math.LegacyNewDecWithPrec(50, 2),
		AuditMissSlashFraction:  math.LegacyNewDecWithPrec(1, 2),
		WithheldThreshold:       math.LegacyNewDecWithPrec(50, 2),
		// Holders have about an hour after the window to fetch, claim and prove the
		// pieces; it is looked at every ~minute meanwhile.
		CustodyGraceBlocks:   600,
		CustodyRecheckBlocks: 10,
		// A file query's deposit pays the worker for its answers: one move per level of the
		// file's tree, about 20 for a state file, each a ~200k-gas transaction at the
		// sidecar's default 0.025udepin gas price (5,000 udepin).
		FileQueryDeposit: sdk.NewInt64Coin("udepin", 100_000),
	}
}

// MaxDisputeBlocks is the longest a game can last once opened: every move (MaxGameMoves:
// the bisection rounds' reveal and answer, then the one-step proof or phases 2–3) gets
// move_timeout blocks.
func (p Params) MaxDisputeBlocks() uint64 {
	return MaxGameMoves * p.MoveTimeout
}

// RequiredUnbondingBlocks is how long after committing a checkpoint its provider (and
// after attesting an auditor) can still be convicted: a game opened at the last height of
// the challenge window ends at most MaxDisputeBlocks later. x/stakingext's
// unbonding_blocks must be at least this, so that an unbonding begun after the commit is
// still queued, and slashable, when the conviction comes.
func (p Params) RequiredUnbondingBlocks() uint64 {
	return p.ChallengeWindow + p.MaxDisputeBlocks()
}

// Validate names the first invalid param.
func (p Params) Validate() error {
	one := math.LegacyOneDec()
	inUnit := func(d math.LegacyDec) bool { return !d.IsNil() && !d.IsNegative() && d.LTE(one) }
	switch {
	case p.ChallengeWindow < 2 || p.ChallengeWindow > maxBlocksParam:
		// Auditors are drawn at the block after submission and must answer inside the window.
		return fmt.Errorf("challenge_window must be between 2 and 2^32 blocks, got %d", p.ChallengeWindow)
	case p.MoveTimeout == 0 || p.MoveTimeout > maxBlocksParam:
		return fmt.Errorf("move_timeout must be between 1 and 2^32 blocks, got %d", p.MoveTimeout)
	case !p.ChallengerBond.IsValid() || !p.ChallengerBond.IsPositive():
		return fmt.Errorf("challenger_bond must be a positive coin, got %s", p.ChallengerBond)
	case p.FraudSlashFraction.IsNil() || !p.FraudSlashFraction.IsPositive() || p.FraudSlashFraction.GT(one):
		return fmt.Errorf("fraud_slash_fraction must be in (0, 1], got %s", p.FraudSlashFraction)
	case !inUnit(p.WhistleblowerShare):
		return fmt.Errorf("whistleblower_share must be in [0, 1], got %s", p.WhistleblowerShare)
	case p.MaxStepMacs == 0:
		return fmt.Errorf("max_step_macs must be positive")
	case p.GasPerMac == 0 || p.MaxStepMacs > gomath.MaxUint64/p.GasPerMac:
		// A free referee step would let anyone burn validators' CPU; an overflowing one
		// would wrap around and charge almost nothing.
		return fmt.Errorf("gas_per_mac must be positive and max_step_macs × gas_per_mac must fit in 64 bits, got %d × %d", p.MaxStepMacs, p.GasPerMac)
	case p.MaxDeadlinesPerBlock == 0:
		return fmt.Errorf("max_deadlines_per_block must be positive")
	case !inUnit(p.LostBondProviderShare) || !inUnit(p.LostBondOwnerShare) || p.LostBondProviderShare.Add(p.LostBondOwnerShare).GT(one):
		return fmt.Errorf("lost_bond_provider_share (%s) and lost_bond_owner_share (%s) must be in [0, 1] and add up to at most 1",
			p.LostBondProviderShare, p.LostBondOwnerShare)
	case p.LostBondProviderShare.GTE(math.LegacyNewDecWithPrec(50, 2)):
		// A provider that wins most of the bonds of challenges it opens against itself
		// from other accounts could squat on its own checkpoints nearly for free.
		return fmt.Errorf("lost_bond_provider_share must be below 0.5, got %s", p.LostBondProviderShare)
	case p.OwnerCompensationRatio.IsNil() || p.OwnerCompensationRatio.IsNegative() || p.OwnerCompensationRatio.GT(math.LegacyNewDec(100)):
		return fmt.Errorf("owner_compensation_ratio must be in [0, 100], got %s", p.OwnerCompensationRatio)
	case !p.AuditFeePerStep.IsValid() || p.AuditFeePerStep.Denom != p.ChallengerBond.Denom:
		return fmt.Errorf("audit_fee_per_step must be a coin (zero allowed) in the challenger bond's denomination %s, got %s",
			p.ChallengerBond.Denom, p.AuditFeePerStep)
	case p.AuditFeePerStep.Amount.GT(markettypes.MaxPricePerGPUHour):
		return fmt.Errorf("audit_fee_per_step must be at most %s, got %s", markettypes.MaxPricePerGPUHour, p.AuditFeePerStep)
	case p.AuditFraudSlashFraction.IsNil() || !p.AuditFraudSlashFraction.IsPositive() || p.AuditFraudSlashFraction.GT(one):
		return fmt.Errorf("audit_fraud_slash_fraction must be in (0, 1], got %s", p.AuditFraudSlashFraction)
	case p.AuditMissSlashFraction.IsNil() || !p.AuditMissSlashFraction.IsPositive() || p.AuditMissSlashFraction.GT(one):
		return fmt.Errorf("audit_miss_slash_fraction must be in (0, 1], got %s", p.AuditMissSlashFraction)
	case p.WithheldThreshold.IsNil() || p.WithheldThreshold.IsNegative() || p.WithheldThreshold.GTE(one):
		return fmt.Errorf("withheld_threshold must be in [0, 1), got %s", p.WithheldThreshold)
	case p.CustodyGraceBlocks == 0 || p.CustodyGraceBlocks > maxBlocksParam:
		return fmt.Errorf("custody_grace_blocks must be in [1, %d], got %d", maxBlocksParam, p.CustodyGraceBlocks)
	case p.CustodyRecheckBlocks == 0 || p.CustodyRecheckBlocks > p.CustodyGraceBlocks:
		return fmt.Errorf("custody_recheck_blocks must be in [1, custody_grace_blocks %d], got %d", p.CustodyGraceBlocks, p.CustodyRecheckBlocks)
	case !p.FileQueryDeposit.IsValid() || !p.FileQueryDeposit.IsPositive() || p.FileQueryDeposit.Denom != p.ChallengerBond.Denom:
		// A free query would let anyone make a worker answer for nothing.
		return fmt.Errorf("file_query_deposit must be a positive coin in the challenger bond's denomination %s, got %s",
			p.ChallengerBond.Denom, p.FileQueryDeposit)
	}
	return nil
}

// AuditFee is what one auditor of a checkpoint of steps steps is paid.
func (p Params) AuditFee(steps uint64) sdk.Coin {
	return sdk.NewCoin(p.AuditFeePerStep.Denom, p.AuditFeePerStep.Amount.Mul(math.NewIntFromUint64(steps)))
}

// Withheld says whether reports out of auditors exceed withheld_threshold of them.
func (p Params) Withheld(reports, auditors uint32) bool {
	return auditors > 0 && math.LegacyNewDec(int64(reports)).GT(p.WithheldThreshold.MulInt64(int64(auditors)))
}
