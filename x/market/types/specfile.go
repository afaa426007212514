package types

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
)

// JobSpecFile is the YAML a job owner writes (`submit-job --spec job.yaml`).
// Pointer fields are required: a nil pointer after decoding means the field was missing,
// which is reported by name rather than silently defaulting to zero.
type JobSpecFile struct {
	Name      *string             `json:"name"`
	GPU       *GPURequirementFile `json:"gpu"`
	Workers   *uint32             `json:"workers"`
	Resources *ResourcesFile      `json:"resources"`
	Workload  *WorkloadFile       `json:"workload"`
	// Dataset names a dataset registered in x/shardregistry; optional.
	Dataset                  string  `json:"dataset"`
	TotalSteps               *uint64 `json:"total_steps"`
	CheckpointEvery          *uint64 `json:"checkpoint_every"`
	MaxPricePerGPUHour       *string `json:"max_price_per_gpu_hour"`
	MaxDuration              *string `json:"max_duration"`
	BiddingWindowBlocks      *uint64 `json:"bidding_window_blocks"`
	CheckpointDeadlineBlocks uint64  `json:"checkpoint_deadline_blocks"`
	// Audit is the optional `audit:` section; absent, the chain applies the default.
	Audit *AuditFile `json:"audit"`
	// Custody is the optional `custody:` section (checkpoint states held by storage holders).
	Custody *CustodyFile `json:"custody"`
	// Regions limits the job to providers in these regions (spec_env.go).
	Regions []string `json:"regions"`
	// Sync is the optional `sync:` section: the workers train together in rounds
	// (docs/training-together.md).
	Sync *SyncFile `json:"sync"`
}

// SyncFile is the `sync:` section: pkg/diloco's SyncSpec (every, outer_lr,
// outer_momentum, top_k as decimals) plus the chain's commit window.
type SyncFile struct {
	Every         *int     `json:"every"`
	OuterLR       *float64 `json:"outer_lr"`
	OuterMomentum *float64 `json:"outer_momentum"`
	TopK          int      `json:"top_k"`
	// CommitBlocks is the round's commit window; 0 or absent uses the chain's default.
	CommitBlocks uint64 `json:"commit_blocks"`
}

// toSyncSpec checks the section field by field (pkg/diloco's messages name each one)
// and converts its decimals to Q30.
func (f SyncFile) toSyncSpec() (*SyncSpec, error) {
	switch {
	case f.Every == nil:
		return nil, errors.New("sync.every: required field is missing")
	case f.OuterLR == nil:
		return nil, errors.New("sync.outer_lr: required field is missing")
	case f.OuterMomentum == nil:
		return nil, errors.New("sync.outer_momentum: required field is missing")
	}
	s, err := diloco.SyncSpec{Every: *f.Every, OuterLR: *f.OuterLR, OuterMomentum: *f.OuterMomentum, TopK: f.TopK}.Sync()
	if err != nil {
		var se *diloco.SyncError
		if errors.As(err, &se) {
			return nil, errors.New(strings.Join(se.Problems, "; "))
		}
		return nil, err
	}
	return NewSyncSpec(s, f.CommitBlocks), nil
}

// AuditFile is the `audit:` section: how many registered verifiers audit each checkpoint.
type AuditFile struct {
	Auditors *uint32 `json:"auditors"`
}

// CustodyFile is the `custody:` section: every checkpoint's state is erasure-coded into
// data_pieces + parity_pieces pieces held by storage holders for retain_checkpoints.
type CustodyFile struct {
	DataPieces        *uint32 `json:"data_pieces"`
	ParityPieces      *uint32 `json:"parity_pieces"`
	RetainCheckpoints *string `json:"retain_checkpoints"`
}

// GPURequirementFile is the `gpu:` section.
type GPURequirementFile struct {
	Models     []string `json:"models"`
	MinVRAMGiB *uint64  `json:"min_vram_gib"`
	PerWorker  *uint32  `json:"per_worker"`
}

// ResourcesFile is the optional `resources:` section.
type ResourcesFile struct {
	// CPU is in cores and may be fractional ("0.5", 2).
	CPU       json.Number `json:"cpu"`
	MemoryGiB uint64      `json:"memory_gib"`
	DiskGiB   uint64      `json:"disk_gib"`
}

// WorkloadFile is the `workload:` section. Model and Train are the transformer
// workload's (docs/workloads.md); their fields are pkg/exact's.
type WorkloadFile struct {
	Kind    *string            `json:"kind"`
	Image   string             `json:"image"`
	Digest  string             `json:"digest"`
	Command []string           `json:"command"`
	Model   *exact.ModelConfig `json:"model"`
	Train   *exact.TrainConfig `json:"train"`
	// InitWeights and InitStateRoot (hex) start a transformer job from given weights.
	InitWeights   string `json:"init_weights"`
	InitStateRoot string `json:"init_state_root"`
	// Env and AllowOperatorTrainer: see spec_env.go.
	Env                  map[string]string `json:"env"`
	AllowOperatorTrainer bool              `json:"allow_operator_trainer"`
}

// transformer returns the on-chain config of a transformer workload section, or nil for
// other kinds; the model and train sections belong to kind transformer alone.
func (w WorkloadFile) transformer(kind WorkloadKind) (*TransformerConfig, error) {
	if kind != WORKLOAD_KIND_TRANSFORMER {
		if w.Model != nil || w.Train != nil {
			return nil, errors.New("workload: model and train are only for kind transformer")
		}
		return nil, nil
	}
	if w.Model == nil {
		return nil, errors.New("workload.model: required field is missing")
	}
	if w.Train == nil {
		return nil, errors.New("workload.train: required field is missing")
	}
	cfg := exact.Config{Model: *w.Model, Train: *w.Train}
	if err := cfg.Validate(); err != nil {
		return nil, errors.New(ConfigProblems(err))
	}
	return NewTransformerConfig(cfg), nil
}

// ParseJobSpecYAML decodes a job spec file strictly (unknown or duplicate fields are
// errors), checks that every required field is present, and validates the result.
// Errors name the offending field in the file's own spelling.
func ParseJobSpecYAML(data []byte) (JobSpec, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return JobSpec{}, errors.New("job spec: the file is empty")
	}
	var f JobSpecFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return JobSpec{}, fmt.Errorf("job spec: %s", cleanYAMLError(err))
	}
	spec, err := f.ToJobSpec()
	if err != nil {
		return JobSpec{}, fmt.Errorf("job spec: %w", err)
	}
	if err := spec.ValidateStateless(); err != nil {
		return JobSpec{}, fmt.Errorf("job spec: %w", err)
	}
	return spec, nil
}

// ToJobSpec converts the file form into the on-chain form.
func (f JobSpecFile) ToJobSpec() (JobSpec, error) {
	missing := func(field string) error { return fmt.Errorf("%s: required field is missing", field) }
	var spec JobSpec
	if f.Name == nil {
		return spec, missing("name")
	}
	spec.Name = *f.Name
	if f.GPU == nil {
		return spec, missing("gpu")
	}
	if f.GPU.MinVRAMGiB == nil {
		return spec, missing("gpu.min_vram_gib")
	}
	if f.GPU.PerWorker == nil {
		return spec, missing("gpu.per_worker")
	}
	spec.Gpu = GPURequirement{Models: f.GPU.Models, MinVramGib: *f.GPU.MinVRAMGiB, PerWorker: *f.GPU.PerWorker}
	spec.Workers = 1
	if f.Workers != nil {
		spec.Workers = *f.Workers
	}
	if f.Resources != nil {
		millis, err := cpuMillis(f.Resources.CPU)
		if err != nil {
			return spec, fmt.Errorf("resources.cpu: %w", err)
		}
		spec.Resources = Resources{CpuMillis: millis, MemoryMib: f.Resources.MemoryGiB * 1024, DiskGib: f.Resources.DiskGiB}
	}
	if f.Workload == nil {
		return spec, missing("workload")
	}
	if f.Workload.Kind == nil {
		return spec, missing("workload.kind")
	}
	kind, err := ParseWorkloadKind(*f.Workload.Kind)
	if err != nil {
		return spec, fmt.Errorf("workload.kind: %w", err)
	}
	spec.Workload = Workload{Kind: kind, Image: f.Workload.Image, Digest: f.Workload.Digest, Command: f.Workload.Command}
	if spec.Workload.Transformer, err = f.Workload.transformer(kind); err != nil {
		return spec, err
	}
	spec.Workload.InitWeights = f.Workload.InitWeights
	if f.Workload.InitStateRoot != "" {
		if spec.Workload.InitStateRoot, err = hex.DecodeString(strings.TrimPrefix(f.Workload.InitStateRoot, "0x")); err != nil {
			return spec, fmt.Errorf("workload.init_state_root: must be 64 hex digits: %w", err)
		}
	}
	spec.DatasetId = f.Dataset
	if f.TotalSteps == nil {
		return spec, missing("total_steps")
	}
	spec.TotalSteps = *f.TotalSteps
	if f.CheckpointEvery == nil {
		return spec, missing("checkpoint_every")
	}
	spec.CheckpointInterval = *f.CheckpointEvery
	if f.MaxPricePerGPUHour == nil {
		return spec, missing("max_price_per_gpu_hour")
	}
	price, err := sdk.ParseCoinNormalized(*f.MaxPricePerGPUHour)
	if err != nil {
		return spec, fmt.Errorf("max_price_per_gpu_hour: %q is not a coin like 2000000udepin", *f.MaxPricePerGPUHour)
	}
	spec.MaxPricePerGpuHour = price
	if f.MaxDuration == nil {
		return spec, missing("max_duration")
	}
	d, err := time.ParseDuration(*f.MaxDuration)
	if err != nil {
		return spec, fmt.Errorf("max_duration: %q is not a duration like 24h or 90m", *f.MaxDuration)
	}
	spec.MaxDuration = d
	if f.BiddingWindowBlocks == nil {
		return spec, missing("bidding_window_blocks")
	}
	spec.BiddingWindowBlocks = *f.BiddingWindowBlocks
	spec.CheckpointDeadlineBlocks = f.CheckpointDeadlineBlocks
	if f.Audit != nil {
		if f.Audit.Auditors == nil {
			return spec, missing("audit.auditors")
		}
		spec.Audit = &AuditSpec{Auditors: *f.Audit.Auditors}
	}
	if c := f.Custody; c != nil {
		switch {
		case c.DataPieces == nil:
			return spec, missing("custody.data_pieces")
		case c.ParityPieces == nil:
			return spec, missing("custody.parity_pieces")
		case c.RetainCheckpoints == nil:
			return spec, missing("custody.retain_checkpoints")
		}
		retain, err := time.ParseDuration(*c.RetainCheckpoints)
		if err != nil {
			return spec, fmt.Errorf("custody.retain_checkpoints: %q is not a duration like 720h", *c.RetainCheckpoints)
		}
		spec.Custody = &CustodySpec{DataPieces: *c.DataPieces, ParityPieces: *c.ParityPieces, RetainCheckpoints: retain}
	}
	if f.Sync != nil {
		if spec.Sync, err = f.Sync.toSyncSpec(); err != nil {
			return spec, err
		}
	}
	f.applyHostFields(&spec)
	return spec, nil
}

func cpuMillis(n json.Number) (uint64, error) {
	if n == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || v < 0 || v > 1_000_000 {
		return 0, fmt.Errorf("must be a number of cores between 0 and 1000000, got %q", n)
	}
	return uint64(v*1000 + 0.5), nil
}

// cleanYAMLError strips the JSON-conversion layers sigs.k8s.io/yaml adds, so the
// user sees "unknown field \"gpu_model\"" rather than decoder internals.
func cleanYAMLError(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.ReplaceAll(msg, prefix, "")
	}
	msg = strings.ReplaceAll(msg, "Go struct field ", "")
	msg = strings.ReplaceAll(msg, "of type ", "expected ")
	return msg
}
