package types_test

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// validSpec is a container job for 2 workers of 8 H100s.
func validSpec() types.JobSpec {
	return types.JobSpec{
		Name:                "llama-3-8b-finetune",
		Gpu:                 types.GPURequirement{Models: []string{"H100-SXM5-80GB", "H200"}, MinVramGib: 80, PerWorker: 8},
		Workers:             2,
		Resources:           types.Resources{CpuMillis: 32_000, MemoryMib: 256 * 1024, DiskGib: 1000},
		Workload:            types.Workload{Kind: types.WORKLOAD_KIND_CONTAINER, Image: "ghcr.io/acme/trainer:1.4", Digest: testDigest, Command: []string{"python", "train.py"}},
		DatasetId:           "ds-fineweb-10b",
		TotalSteps:          10_000,
		CheckpointInterval:  500,
		MaxPricePerGpuHour:  sdk.NewInt64Coin("udepin", 2_000_000),
		MaxDuration:         48 * time.Hour,
		BiddingWindowBlocks: 20,
	}
}

func TestValidateStatelessAcceptsValidSpecs(t *testing.T) {
	require.NoError(t, validSpec().ValidateStateless())
	ref := validSpec()
	ref.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE}
	ref.Gpu.Models = nil // any model
	require.NoError(t, ref.ValidateStateless())
	edge := validSpec()
	edge.CheckpointInterval = edge.TotalSteps
	edge.MaxDuration = types.MaxJobDuration
	edge.Gpu.PerWorker = types.MaxGPUsPerWorker
	require.NoError(t, edge.ValidateStateless())
}

func TestValidateStatelessNamesTheField(t *testing.T) {
	cases := []struct {
		name   string
		change func(*types.JobSpec)
		field  string
	}{
		{"empty name", func(s *types.JobSpec) { s.Name = "" }, "name:"},
		{"blank name", func(s *types.JobSpec) { s.Name = " \t" }, "name:"},
		{"long name", func(s *types.JobSpec) { s.Name = strings.Repeat("n", types.MaxNameLength+1) }, "name:"},
		{"too many models", func(s *types.JobSpec) {
			s.Gpu.Models = nil
			for i := 0; i <= types.MaxGPUModels; i++ {
				s.Gpu.Models = append(s.Gpu.Models, strings.Repeat("m", i+1))
			}
		}, "gpu.models:"},
		{"empty model", func(s *types.JobSpec) { s.Gpu.Models = []string{"H100", " "} }, "gpu.models[1]"},
		{"duplicate model", func(s *types.JobSpec) { s.Gpu.Models = []string{"H100", "H100"} }, "gpu.models[1]"},
		{"zero per_worker", func(s *types.JobSpec) { s.Gpu.PerWorker = 0 }, "gpu.per_worker"},
		{"per_worker above max", func(s *types.JobSpec) { s.Gpu.PerWorker = types.MaxGPUsPerWorker + 1 }, "gpu.per_worker"},
		{"zero min_vram", func(s *types.JobSpec) { s.Gpu.MinVramGib = 0 }, "gpu.min_vram_gib"},
		{"zero workers", func(s *types.JobSpec) { s.Workers = 0 }, "workers:"},
		{"no workload kind", func(s *types.JobSpec) { s.Workload.Kind = types.WORKLOAD_KIND_UNSPECIFIED }, "workload.kind"},
		{"container without image", func(s *types.JobSpec) { s.Workload.Image = "" }, "workload.image"},
		{"container without digest", func(s *types.JobSpec) { s.Workload.Digest = "" }, "workload.digest"},
		{"digest with upper case", func(s *types.JobSpec) { s.Workload.Digest = strings.ToUpper(testDigest) }, "workload.digest"},
		{"too many args", func(s *types.JobSpec) { s.Workload.Command = make([]string, types.MaxCommandArgs+1) }, "workload.command"},
		{"long arg", func(s *types.JobSpec) {
			s.Workload.Command = []string{strings.Repeat("a", types.MaxCommandArgLength+1)}
		}, "workload.command[0]"},
		{"reference with image", func(s *types.JobSpec) {
			s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE, Image: "x"}
		}, "workload:"},
		{"reference with command", func(s *types.JobSpec) {
			s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE, Command: []string{"x"}}
		}, "workload:"},
		{"long dataset", func(s *types.JobSpec) { s.DatasetId = strings.Repeat("d", types.MaxDatasetIDLength+1) }, "dataset:"},
		{"zero total_steps", func(s *types.JobSpec) { s.TotalSteps = 0 }, "total_steps"},
		{"zero checkpoint interval", func(s *types.JobSpec) { s.CheckpointInterval = 0 }, "checkpoint_every"},
		{"checkpoint interval above total", func(s *types.JobSpec) { s.CheckpointInterval = s.TotalSteps + 1 }, "checkpoint_every"},
		{"zero price", func(s *types.JobSpec) { s.MaxPricePerGpuHour = sdk.NewInt64Coin("udepin", 0) }, "max_price_per_gpu_hour"},
		{"empty price", func(s *types.JobSpec) { s.MaxPricePerGpuHour = sdk.Coin{} }, "max_price_per_gpu_hour"},
		{"negative price", func(s *types.JobSpec) { s.MaxPricePerGpuHour = sdk.Coin{Denom: "udepin", Amount: math.NewInt(-1)} }, "max_price_per_gpu_hour"},
		{"price with bad denom", func(s *types.JobSpec) { s.MaxPricePerGpuHour = sdk.Coin{Denom: "1x", Amount: math.NewInt(1)} }, "max_price_per_gpu_hour"},
		{"astronomical price", func(s *types.JobSpec) {
			s.MaxPricePerGpuHour = sdk.Coin{Denom: "udepin", Amount: math.NewIntFromBigInt(new(big.Int).Lsh(big.NewInt(1), 250))}
		}, "max_price_per_gpu_hour"},
		{"zero duration", func(s *types.JobSpec) { s.MaxDuration = 0 }, "max_duration"},
		{"negative duration", func(s *types.JobSpec) { s.MaxDuration = -time.Hour }, "max_duration"},
		{"duration above max", func(s *types.JobSpec) { s.MaxDuration = types.MaxJobDuration + 1 }, "max_duration"},
		{"zero bidding window", func(s *types.JobSpec) { s.BiddingWindowBlocks = 0 }, "bidding_window_blocks"},
		{"checkpoint interval above the dispute bound", func(s *types.JobSpec) {
			s.TotalSteps, s.CheckpointInterval = 2*types.MaxCheckpointInterval, types.MaxCheckpointInterval+1
		}, "checkpoint_every: at most 1048576"},
		{"too many auditors", func(s *types.JobSpec) {
			s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE}
			s.Audit = &types.AuditSpec{Auditors: types.MaxAuditors + 1}
		}, "audit.auditors: at most 8"},
		{"auditors of a container job", func(s *types.JobSpec) { s.Audit = &types.AuditSpec{Auditors: 1} }, "audit.auditors: container workloads"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.change(&s)
			err := s.ValidateStateless()
			require.ErrorIs(t, err, types.ErrInvalidSpec)
			require.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestValidateWithParams(t *testing.T) {
	p := types.DefaultParams()
	require.NoError(t, validSpec().ValidateWithParams(p))
	cases := []struct {
		name   string
		change func(*types.JobSpec)
		field  string
	}{
		{"stateless problem first", func(s *types.JobSpec) { s.Name = "" }, "name:"},
		{"workers above max_workers", func(s *types.JobSpec) { s.Workers = p.MaxWorkers + 1 }, "workers:"},
		{"price in another denom", func(s *types.JobSpec) { s.MaxPricePerGpuHour = sdk.NewInt64Coin("uatom", 1) }, "max_price_per_gpu_hour"},
		{"bidding window below min", func(s *types.JobSpec) { s.BiddingWindowBlocks = p.MinBiddingWindowBlocks - 1 }, "bidding_window_blocks"},
		{"bidding window above max", func(s *types.JobSpec) { s.BiddingWindowBlocks = p.MaxBiddingWindowBlocks + 1 }, "bidding_window_blocks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.change(&s)
			err := s.ValidateWithParams(p)
			require.ErrorIs(t, err, types.ErrInvalidSpec)
			require.Contains(t, err.Error(), tc.field)
		})
	}
	edges := validSpec()
	edges.Workers = p.MaxWorkers
	edges.BiddingWindowBlocks = p.MaxBiddingWindowBlocks
	require.NoError(t, edges.ValidateWithParams(p))
	edges.BiddingWindowBlocks = p.MinBiddingWindowBlocks
	require.NoError(t, edges.ValidateWithParams(p))
}

func TestAmountOwedIsExactAndRoundsDown(t *testing.T) {
	cases := []struct {
		price   int64
		gpus    uint32
		elapsed time.Duration
		want    int64
	}{
		{3600, 1, time.Second, 1},
		{3600, 2, time.Hour, 7200},
		{1, 1, time.Hour - 1, 0},
		{1, 1, time.Hour, 1},
		{1237, 2, 66*time.Second + 300*time.Millisecond, 45}, // 1237 × 2 × 66.3 / 3600 = 45.56
		{2_000_000, 8, 90 * 24 * time.Hour, 2_000_000 * 8 * 24 * 90},
		{1000, 3, 0, 0},
		{1000, 3, -time.Hour, 0},
	}
	for _, tc := range cases {
		got := types.AmountOwed(math.NewInt(tc.price), tc.gpus, tc.elapsed)
		require.Equal(t, tc.want, got.Int64(), "%d × %d × %s", tc.price, tc.gpus, tc.elapsed)
	}
}

func TestCollateralIsRatioOfMaxLeaseValueRoundedUp(t *testing.T) {
	s := validSpec() // 2,000,000 × 8 GPUs × 48h = 768,000,000
	require.Equal(t, int64(768_000_000), s.MaxLeaseValue().Int64())
	p := types.DefaultParams()
	require.Equal(t, int64(76_800_000), s.RequiredCollateral(p).Int64())
	s.MaxPricePerGpuHour = sdk.NewInt64Coin("udepin", 7)
	s.Gpu.PerWorker = 1
	s.MaxDuration = time.Hour // value 7, 10% = 0.7 → 1
	require.Equal(t, int64(1), s.RequiredCollateral(p).Int64())
	p.CollateralRatio = math.LegacyZeroDec()
	require.True(t, s.RequiredCollateral(p).IsZero())
}

func TestEffectiveCheckpointDeadline(t *testing.T) {
	p := types.DefaultParams()
	s := validSpec()
	require.Equal(t, p.DefaultCheckpointDeadlineBlocks, s.EffectiveCheckpointDeadline(p))
	s.CheckpointDeadlineBlocks = 42
	require.Equal(t, uint64(42), s.EffectiveCheckpointDeadline(p))
	require.Equal(t, uint64(80*1024), s.MinVRAMMiB())
}

func TestJobStateIsTerminal(t *testing.T) {
	terminal := map[types.JobState]bool{
		types.JOB_STATE_COMPLETED: true, types.JOB_STATE_CANCELLED: true,
		types.JOB_STATE_EXPIRED: true, types.JOB_STATE_FAILED: true,
	}
	for v := range types.JobState_name {
		s := types.JobState(v)
		require.Equal(t, terminal[s], s.IsTerminal(), s.String())
	}
}

func TestParseWorkloadKind(t *testing.T) {
	for in, want := range map[string]types.WorkloadKind{
		"reference": types.WORKLOAD_KIND_REFERENCE, " Container ": types.WORKLOAD_KIND_CONTAINER, "CONTAINER": types.WORKLOAD_KIND_CONTAINER,
	} {
		got, err := types.ParseWorkloadKind(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, in := range []string{"", "docker", "unspecified"} {
		_, err := types.ParseWorkloadKind(in)
		require.Error(t, err, in)
	}
}

func TestAuditDefault(t *testing.T) {
	container := validSpec()
	require.Zero(t, container.Auditors(), "a stored spec without audit is not audited")
	require.Equal(t, &types.AuditSpec{Auditors: 0}, container.WithAuditDefault().Audit, "container jobs cannot be audited")
	reference := validSpec()
	reference.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE}
	require.Equal(t, uint32(types.DefaultAuditors), reference.WithAuditDefault().Auditors())
	reference.Audit = &types.AuditSpec{Auditors: 0}
	require.Zero(t, reference.WithAuditDefault().Auditors(), "an explicit audit: {auditors: 0} stays")
	reference.Audit = &types.AuditSpec{Auditors: 3}
	require.NoError(t, reference.ValidateStateless())
	require.Equal(t, uint32(3), reference.WithAuditDefault().Auditors())
}
