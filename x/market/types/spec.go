package types

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"
)

// Limits that keep a job record small and its validation cheap.
const (
	MaxNameLength       = 128
	MaxGPUModels        = 16
	MaxGPUModelLength   = 64
	MaxCommandArgs      = 64
	MaxCommandArgLength = 1024
	MaxImageLength      = 256
	MaxDatasetIDLength  = 128
	MaxGPUsPerWorker    = 64
	MaxJobDuration      = 90 * 24 * time.Hour
	nanosPerHour        = int64(time.Hour)
	// MaxCheckpointInterval bounds checkpoint_every (2^20 steps). A checkpoint spans at
	// most this many steps, so a dispute over one bisects in at most 20 rounds, which
	// bounds how long a provider stays convictable after committing (x/verify's
	// RequiredUnbondingBlocks).
	MaxCheckpointInterval = 1 << 20
	// MaxCustodyPieces bounds custody.data_pieces + custody.parity_pieces (Reed-Solomon
	// over GF(2^8)); x/shardregistry's max_pieces_per_shard bounds it further.
	MaxCustodyPieces = 256
	// MaxAuditors bounds audit.auditors: each auditor costs a fee and a draw.
	MaxAuditors = 8
	// DefaultAuditors is the audit.auditors of an adjudicable job whose spec has no
	// audit section.
	DefaultAuditors = 1
)

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// MaxPricePerGPUHour bounds a job's max price per GPU-hour (10^30 base units), so that
// price × GPUs × max duration, the collateral derived from it and the burn rate of a job
// stay far inside math.Int's 256 bits: an overflow there would panic in EndBlock.
var MaxPricePerGPUHour = math.NewIntWithDecimal(1, 30)

// ValidateStateless checks a spec for everything that does not depend on params.
// Each error names the field, in the YAML spelling a job owner writes.
func (s JobSpec) ValidateStateless() error {
	fail := func(format string, args ...any) error {
		return errorsmod.Wrapf(ErrInvalidSpec, format, args...)
	}
	if strings.TrimSpace(s.Name) == "" {
		return fail("name: must not be empty")
	}
	if len(s.Name) > MaxNameLength {
		return fail("name: longer than %d characters", MaxNameLength)
	}
	if len(s.Gpu.Models) > MaxGPUModels {
		return fail("gpu.models: at most %d models", MaxGPUModels)
	}
	seen := map[string]bool{}
	for i, m := range s.Gpu.Models {
		if strings.TrimSpace(m) == "" || len(m) > MaxGPUModelLength {
			return fail("gpu.models[%d]: must be a non-empty model name of at most %d characters", i, MaxGPUModelLength)
		}
		if seen[m] {
			return fail("gpu.models[%d]: %q is listed twice", i, m)
		}
		seen[m] = true
	}
	if s.Gpu.PerWorker == 0 || s.Gpu.PerWorker > MaxGPUsPerWorker {
		return fail("gpu.per_worker: must be between 1 and %d, got %d", MaxGPUsPerWorker, s.Gpu.PerWorker)
	}
	if s.Gpu.MinVramGib == 0 {
		return fail("gpu.min_vram_gib: must be positive")
	}
	if s.Workers == 0 {
		return fail("workers: must be at least 1")
	}
	switch s.Workload.Kind {
	case WORKLOAD_KIND_REFERENCE, WORKLOAD_KIND_TRANSFORMER:
		if s.Workload.Image != "" || s.Workload.Digest != "" || len(s.Workload.Command) != 0 {
			return fail("workload: image, digest and command are only for kind container")
		}
		if s.Workload.Kind == WORKLOAD_KIND_REFERENCE && s.Workload.Transformer != nil {
			return fail("workload: model and train are only for kind transformer (reference is a fixed configuration)")
		}
		if _, err := s.ExactConfig(); err != nil {
			return err
		}
		if err := s.Workload.validateInitWeights(); err != nil {
			return err
		}
	case WORKLOAD_KIND_CONTAINER:
		if s.Workload.Transformer != nil || s.Workload.InitWeights != "" || len(s.Workload.InitStateRoot) != 0 {
			return fail("workload: model, train and init weights are only for kind transformer")
		}
		if s.Workload.Image == "" || len(s.Workload.Image) > MaxImageLength {
			return fail("workload.image: required for kind container, at most %d characters", MaxImageLength)
		}
		if !digestPattern.MatchString(s.Workload.Digest) {
			return fail("workload.digest: must be sha256:<64 lowercase hex>, got %q", s.Workload.Digest)
		}
		if len(s.Workload.Command) > MaxCommandArgs {
			return fail("workload.command: at most %d arguments", MaxCommandArgs)
		}
		for i, a := range s.Workload.Command {
			if len(a) > MaxCommandArgLength {
				return fail("workload.command[%d]: longer than %d characters", i, MaxCommandArgLength)
			}
		}
	default:
		return fail("workload.kind: must be reference, transformer or container")
	}
	if len(s.DatasetId) > MaxDatasetIDLength {
		return fail("dataset: longer than %d characters", MaxDatasetIDLength)
	}
	if s.TotalSteps == 0 {
		return fail("total_steps: must be positive")
	}
	if s.CheckpointInterval == 0 || s.CheckpointInterval > s.TotalSteps {
		return fail("checkpoint_every: must be between 1 and total_steps (%d), got %d", s.TotalSteps, s.CheckpointInterval)
	}
	if s.CheckpointInterval > MaxCheckpointInterval {
		return fail("checkpoint_every: at most %d steps (disputes over longer checkpoints could outlast the unbonding period), got %d",
			MaxCheckpointInterval, s.CheckpointInterval)
	}
	if s.Audit != nil {
		if s.Audit.Auditors > MaxAuditors {
			return fail("audit.auditors: at most %d, got %d", MaxAuditors, s.Audit.Auditors)
		}
		if s.Audit.Auditors > 0 && !s.Workload.Kind.Adjudicable() {
			return fail("audit.auditors: %s workloads cannot be re-executed by auditors or adjudicated; use 0 or leave audit out",
				strings.ToLower(strings.TrimPrefix(s.Workload.Kind.String(), "WORKLOAD_KIND_")))
		}
	}
	if c := s.Custody; c != nil {
		if !s.Workload.Kind.Adjudicable() {
			return fail("custody: only the states of adjudicable workloads (whose hash is their Merkle root) can be bound to their pieces; leave custody out")
		}
		if c.DataPieces == 0 || c.ParityPieces == 0 || c.DataPieces+c.ParityPieces > MaxCustodyPieces {
			return fail("custody: data_pieces (%d) and parity_pieces (%d) must be at least 1 each and at most %d together", c.DataPieces, c.ParityPieces, MaxCustodyPieces)
		}
		if c.RetainCheckpoints <= 0 {
			return fail("custody.retain_checkpoints: must be positive, got %s", c.RetainCheckpoints)
		}
	}
	if err := s.validateSync(); err != nil {
		return err
	}
	if !s.MaxPricePerGpuHour.IsValid() || !s.MaxPricePerGpuHour.IsPositive() || s.MaxPricePerGpuHour.Amount.GT(MaxPricePerGPUHour) {
		return fail("max_price_per_gpu_hour: must be a positive coin of at most %s, got %s", MaxPricePerGPUHour, s.MaxPricePerGpuHour)
	}
	if s.MaxDuration <= 0 || s.MaxDuration > MaxJobDuration {
		return fail("max_duration: must be positive and at most %s, got %s", MaxJobDuration, s.MaxDuration)
	}
	if s.BiddingWindowBlocks == 0 {
		return fail("bidding_window_blocks: must be positive")
	}
	return s.validateHostFields()
}

// ValidateWithParams adds the checks that depend on governance params.
func (s JobSpec) ValidateWithParams(p Params) error {
	if err := s.ValidateStateless(); err != nil {
		return err
	}
	if s.Workers > p.MaxWorkers {
		return errorsmod.Wrapf(ErrInvalidSpec, "workers: at most %d, got %d", p.MaxWorkers, s.Workers)
	}
	if s.MaxPricePerGpuHour.Denom != p.Denom {
		return errorsmod.Wrapf(ErrInvalidSpec, "max_price_per_gpu_hour: must be in %s, got %s", p.Denom, s.MaxPricePerGpuHour.Denom)
	}
	if s.BiddingWindowBlocks < p.MinBiddingWindowBlocks || s.BiddingWindowBlocks > p.MaxBiddingWindowBlocks {
		return errorsmod.Wrapf(ErrInvalidSpec, "bidding_window_blocks: must be between %d and %d, got %d",
			p.MinBiddingWindowBlocks, p.MaxBiddingWindowBlocks, s.BiddingWindowBlocks)
	}
	if s.Sync != nil && s.Workers > p.MaxSyncWorkers {
		return errorsmod.Wrapf(ErrInvalidSpec, "workers: a sync job has at most max_sync_workers = %d, got %d", p.MaxSyncWorkers, s.Workers)
	}
	if s.Workload.Kind == WORKLOAD_KIND_TRANSFORMER {
		cfg, err := s.ExactConfig()
		if err != nil {
			return err
		}
		if err := cfg.CheckLimits(p.TransformerLimits()); err != nil {
			return errorsmod.Wrap(ErrInvalidSpec, ConfigProblems(err))
		}
	}
	return nil
}

// Adjudicable reports whether x/verify's referee can re-execute a step of this
// workload kind: everything but container workloads.
func (k WorkloadKind) Adjudicable() bool {
	return k != WORKLOAD_KIND_CONTAINER && k != WORKLOAD_KIND_UNSPECIFIED
}

// Auditors is how many auditors x/verify draws for each checkpoint of the job: the spec's
// audit.auditors, or 0 when the stored spec has no audit section (jobs submitted before
// audits existed; MsgSubmitJob writes the default into every new spec, WithAuditDefault).
func (s JobSpec) Auditors() uint32 {
	if s.Audit == nil {
		return 0
	}
	return s.Audit.Auditors
}

// WithAuditDefault fills in a missing audit section: DefaultAuditors for adjudicable
// workloads, none for container workloads.
func (s JobSpec) WithAuditDefault() JobSpec {
	if s.Audit == nil {
		k := uint32(0)
		if s.Workload.Kind.Adjudicable() {
			k = DefaultAuditors
		}
		s.Audit = &AuditSpec{Auditors: k}
	}
	return s
}

// EffectiveCheckpointDeadline is the number of blocks a lease of this job may go without a checkpoint.
func (s JobSpec) EffectiveCheckpointDeadline(p Params) uint64 {
	if s.CheckpointDeadlineBlocks > 0 {
		return s.CheckpointDeadlineBlocks
	}
	return p.DefaultCheckpointDeadlineBlocks
}

// MinVRAMMiB converts the spec's GiB requirement to the MiB providers register.
func (s JobSpec) MinVRAMMiB() uint64 { return s.Gpu.MinVramGib * 1024 }

// AmountOwed is what a lease at pricePerGPUHour for gpus GPUs owes after elapsed time,
// rounded down: price × gpus × elapsed / 1h. Computing the total since the start (rather
// than summing per-settlement pieces) keeps rounding from accumulating.
func AmountOwed(pricePerGPUHour math.Int, gpus uint32, elapsed time.Duration) math.Int {
	if elapsed <= 0 {
		return math.ZeroInt()
	}
	return pricePerGPUHour.MulRaw(int64(gpus)).MulRaw(int64(elapsed)).QuoRaw(nanosPerHour)
}

// MaxLeaseValue is the most one lease of this spec can cost: max price × GPUs × max duration.
func (s JobSpec) MaxLeaseValue() math.Int {
	return AmountOwed(s.MaxPricePerGpuHour.Amount, s.Gpu.PerWorker, s.MaxDuration)
}

// RequiredCollateral is the bond a winning provider must lock for one lease of this spec.
func (s JobSpec) RequiredCollateral(p Params) math.Int {
	return p.CollateralRatio.MulInt(s.MaxLeaseValue()).Ceil().TruncateInt()
}

// IsTerminal reports whether a job state is final.
func (s JobState) IsTerminal() bool {
	switch s {
	case JOB_STATE_COMPLETED, JOB_STATE_CANCELLED, JOB_STATE_EXPIRED, JOB_STATE_FAILED:
		return true
	}
	return false
}

// ParseWorkloadKind reads the YAML spelling of a workload kind.
func ParseWorkloadKind(s string) (WorkloadKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "reference":
		return WORKLOAD_KIND_REFERENCE, nil
	case "transformer":
		return WORKLOAD_KIND_TRANSFORMER, nil
	case "container":
		return WORKLOAD_KIND_CONTAINER, nil
	}
	return WORKLOAD_KIND_UNSPECIFIED, fmt.Errorf("must be reference, transformer or container, got %q", s)
}
