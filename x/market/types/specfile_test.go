package types_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

// validYAML is the job file a user would write for validSpec.
const validYAML = `
name: llama-3-8b-finetune
gpu:
  models: [H100-SXM5-80GB, H200]
  min_vram_gib: 80
  per_worker: 8
workers: 2
resources:
  cpu: 32
  memory_gib: 256
  disk_gib: 1000
workload:
  kind: container
  image: ghcr.io/acme/trainer:1.4
  digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  command: [python, train.py]
dataset: ds-fineweb-10b
total_steps: 10000
checkpoint_every: 500
max_price_per_gpu_hour: 2000000udepin
max_duration: 48h
bidding_window_blocks: 20
`

// minimalYAML has only the required fields.
const minimalYAML = `
name: tiny
gpu: {min_vram_gib: 16, per_worker: 1}
workload: {kind: reference}
total_steps: 100
checkpoint_every: 10
max_price_per_gpu_hour: 500udepin
max_duration: 90m
bidding_window_blocks: 5
`

func TestParseJobSpecYAML(t *testing.T) {
	spec, err := types.ParseJobSpecYAML([]byte(validYAML))
	require.NoError(t, err)
	require.Equal(t, validSpec(), spec)

	spec, err = types.ParseJobSpecYAML([]byte(minimalYAML))
	require.NoError(t, err)
	require.Equal(t, types.JobSpec{
		Name:                "tiny",
		Gpu:                 types.GPURequirement{MinVramGib: 16, PerWorker: 1},
		Workers:             1, // the default
		Workload:            types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE},
		TotalSteps:          100,
		CheckpointInterval:  10,
		MaxPricePerGpuHour:  sdk.NewInt64Coin("udepin", 500),
		MaxDuration:         90 * time.Minute,
		BiddingWindowBlocks: 5,
	}, spec)

	spec, err = types.ParseJobSpecYAML([]byte(minimalYAML + "resources: {cpu: \"0.5\"}\ncheckpoint_deadline_blocks: 77\n"))
	require.NoError(t, err)
	require.Equal(t, uint64(500), spec.Resources.CpuMillis)
	require.Equal(t, uint64(77), spec.CheckpointDeadlineBlocks)
}

// replaceLine swaps the first line of validYAML that starts with prefix (after indentation).
func replaceLine(prefix, with string) string {
	lines := strings.Split(validYAML, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
			if with == "" {
				return strings.Join(append(lines[:i:i], lines[i+1:]...), "\n")
			}
			lines[i] = indent + with
			return strings.Join(lines, "\n")
		}
	}
	panic("no line " + prefix)
}

func TestParseJobSpecYAMLErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		// want are substrings the error must contain: the field, and what is wrong with it.
		want []string
	}{
		{"empty file", "  \n", []string{"empty"}},
		{"malformed yaml", "name: [unclosed\ngpu: {", []string{"yaml", "line"}},
		{"not a mapping", "- a\n- b\n", []string{"cannot unmarshal"}},
		{"unknown top-level field", validYAML + "gpu_model: H100\n", []string{`unknown field "gpu_model"`}},
		{"unknown nested field", replaceLine("per_worker:", "gpus_per_worker: 8"), []string{`unknown field "gpus_per_worker"`}},
		{"duplicate key", validYAML + "name: again\n", []string{`"name"`, "already"}},
		{"missing name", replaceLine("name:", ""), []string{"name: required field is missing"}},
		{"missing gpu", "name: x\nworkload: {kind: reference}\n", []string{"gpu: required field is missing"}},
		{"missing min_vram_gib", replaceLine("min_vram_gib:", ""), []string{"gpu.min_vram_gib: required field is missing"}},
		{"missing per_worker", replaceLine("per_worker:", ""), []string{"gpu.per_worker: required field is missing"}},
		{"missing workload kind", replaceLine("kind:", ""), []string{"workload.kind: required field is missing"}},
		{"missing total_steps", replaceLine("total_steps:", ""), []string{"total_steps: required field is missing"}},
		{"missing checkpoint_every", replaceLine("checkpoint_every:", ""), []string{"checkpoint_every: required field is missing"}},
		{"missing max price", replaceLine("max_price_per_gpu_hour:", ""), []string{"max_price_per_gpu_hour: required field is missing"}},
		{"missing max_duration", replaceLine("max_duration:", ""), []string{"max_duration: required field is missing"}},
		{"missing bidding window", replaceLine("bidding_window_blocks:", ""), []string{"bidding_window_blocks: required field is missing"}},
		{"bad coin", replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: two million"), []string{"max_price_per_gpu_hour", "two million"}},
		{"coin without denom", replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: \"2000000\""), []string{"max_price_per_gpu_hour"}},
		{"negative coin", replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: -5udepin"), []string{"max_price_per_gpu_hour"}},
		{"zero coin", replaceLine("max_price_per_gpu_hour:", "max_price_per_gpu_hour: 0udepin"), []string{"max_price_per_gpu_hour"}},
		{"bad duration", replaceLine("max_duration:", "max_duration: 2 days"), []string{"max_duration", "2 days"}},
		{"duration without unit", replaceLine("max_duration:", "max_duration: \"48\""), []string{"max_duration"}},
		{"duration too long", replaceLine("max_duration:", "max_duration: 10000h"), []string{"max_duration"}},
		{"workers not a number", replaceLine("workers:", "workers: two"), []string{"workers"}},
		{"negative per_worker", replaceLine("per_worker:", "per_worker: -1"), []string{"per_worker"}},
		{"per_worker overflows uint32", replaceLine("per_worker:", "per_worker: 4294967296"), []string{"per_worker"}},
		{"bad cpu", replaceLine("cpu:", "cpu: -2"), []string{"resources.cpu"}},
		{"bad workload kind", replaceLine("kind:", "kind: docker"), []string{"workload.kind", "docker"}},
		{"container without digest", replaceLine("digest:", ""), []string{"workload.digest"}},
		{"checkpoint_every above total_steps", replaceLine("checkpoint_every:", "checkpoint_every: 20000"), []string{"checkpoint_every"}},
		{"zero workers", replaceLine("workers:", "workers: 0"), []string{"workers"}},
		{"models not a list", replaceLine("models:", "models: H100"), []string{"models"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := types.ParseJobSpecYAML([]byte(tc.yaml))
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "job spec: "), err.Error())
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestParseJobSpecYAMLAudit(t *testing.T) {
	spec, err := types.ParseJobSpecYAML([]byte(minimalYAML + "audit: {auditors: 2}\n"))
	require.NoError(t, err)
	require.Equal(t, &types.AuditSpec{Auditors: 2}, spec.Audit)
	spec, err = types.ParseJobSpecYAML([]byte(minimalYAML))
	require.NoError(t, err)
	require.Nil(t, spec.Audit, "absent: the chain applies the default at submission")
	for yaml, want := range map[string]string{
		"audit: {}\n":               "audit.auditors: required field is missing",
		"audit: {auditors: 9}\n":    "audit.auditors: at most 8",
		"audit: {auditors: -1}\n":   "audit.auditors",
		"audit: {auditor: 1}\n":     `unknown field "auditor"`,
		"audit: {auditors: many}\n": "audit.auditors",
	} {
		_, err := types.ParseJobSpecYAML([]byte(minimalYAML + yaml))
		require.ErrorContains(t, err, want, yaml)
	}
}
