package types

import (
	"fmt"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/diloco"
)

// NewSyncSpec is the stored form of a job spec file's `sync:` section: its decimals in
// Q30 by pkg/diloco's rounding (SyncSpec.Sync), so the CLI and every node agree on them.
func NewSyncSpec(s diloco.Sync, commitBlocks uint64) *SyncSpec {
	return &SyncSpec{
		Every: uint32(s.Every), OuterLrQ30: uint64(s.OuterLR), OuterMomentumQ30: uint64(s.OuterMomentum),
		TopK: uint32(s.TopK), CommitBlocks: commitBlocks,
	}
}

// Diloco is the integer sync spec pkg/diloco computes with.
func (s SyncSpec) Diloco() diloco.Sync {
	return diloco.Sync{Every: int64(s.Every), OuterLR: int64(s.OuterLrQ30), OuterMomentum: int64(s.OuterMomentumQ30), TopK: int64(s.TopK)}
}

// validateSync checks a spec's sync section (docs/training-together.md): pkg/diloco's
// ranges, an adjudicable workload trained from the seed (round 0's global is computed on
// chain from it), custody (pseudo-gradients and globals are custody objects), one
// checkpoint per round and a whole number of rounds.
func (s JobSpec) validateSync() error {
	y := s.Sync
	if y == nil {
		return nil
	}
	fail := func(format string, args ...any) error { return errorsmod.Wrapf(ErrInvalidSpec, format, args...) }
	if y.OuterLrQ30 > 1<<62 || y.OuterMomentumQ30 > 1<<62 {
		return fail("sync.outer_lr, sync.outer_momentum: out of range")
	}
	if err := y.Diloco().Check(); err != nil {
		return fail("%s", err)
	}
	if !s.Workload.Kind.Adjudicable() {
		return fail("sync: only adjudicable workloads (reference, transformer) can train in rounds: their pseudo-gradients and aggregations are checked on chain")
	}
	if s.Workload.InitWeights != "" {
		return fail("sync: a sync job starts from the seed's initial weights (round 0's global is computed on chain); leave workload.init_weights out")
	}
	if s.Custody == nil {
		return fail("sync: needs a custody section: every pseudo-gradient and global state is held in custody")
	}
	if s.CheckpointInterval != uint64(y.Every) {
		return fail("checkpoint_every: a sync job checkpoints once per round, so it must equal sync.every (%d), got %d", y.Every, s.CheckpointInterval)
	}
	if s.TotalSteps%uint64(y.Every) != 0 {
		return fail("total_steps: a sync job trains whole rounds, so it must be a multiple of sync.every (%d), got %d", y.Every, s.TotalSteps)
	}
	if y.CommitBlocks > MaxRoundCommitBlocks {
		return fail("sync.commit_blocks: at most %d, got %d", MaxRoundCommitBlocks, y.CommitBlocks)
	}
	return nil
}

// MaxRoundCommitBlocks bounds a sync spec's commit window (about a week of 5 s blocks).
const MaxRoundCommitBlocks = 120_000

// Rounds is how many rounds a sync job trains.
func (s JobSpec) Rounds() uint64 {
	if s.Sync == nil || s.Sync.Every == 0 {
		return 0
	}
	return s.TotalSteps / uint64(s.Sync.Every)
}

// RoundCommitBlocks is a sync job's commit window.
func (s JobSpec) RoundCommitBlocks(p Params) uint64 {
	if s.Sync != nil && s.Sync.CommitBlocks > 0 {
		return s.Sync.CommitBlocks
	}
	return p.DefaultRoundCommitBlocks
}

// PseudoGradientCustodyID is the custody object of worker's pseudo-gradient in a round.
func PseudoGradientCustodyID(jobID, round uint64, worker uint32) string {
	return fmt.Sprintf("%s%d-%d-%d", PseudoGradientCustodyPrefix, jobID, round, worker)
}

// GlobalCustodyID is the custody object of a sync job's global state G_round.
func GlobalCustodyID(jobID, round uint64) string {
	return fmt.Sprintf("%s%d-%d", GlobalCustodyPrefix, jobID, round)
}

// Prefixes of the rounds' custody objects (x/shardregistry reserves them).
const (
	PseudoGradientCustodyPrefix = "pg-"
	GlobalCustodyPrefix         = "global-"
)
