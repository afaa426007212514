package types_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/market/types"
)

const hostSpecYAML = `
name: llama-finetune
gpu:
  models: [A100-SXM4-80GB]
  min_vram_gib: 80
  per_worker: 1
regions: [us-west, us-east]
workload:
  kind: container
  image: registry.example/acme/train
  digest: sha256:` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `
  env:
    MODEL_PATH: /data/llama
    BATCH_SIZE: "32"
  allow_operator_trainer: true
total_steps: 100
checkpoint_every: 10
max_price_per_gpu_hour: 2000000udepin
max_duration: 2h
bidding_window_blocks: 20
`

func TestSpecRegionsAndEnv(t *testing.T) {
	spec, err := types.ParseJobSpecYAML([]byte(hostSpecYAML))
	require.NoError(t, err)
	require.Equal(t, []string{"us-west", "us-east"}, spec.Regions)
	// Sorted by name, whatever the file's order.
	require.Equal(t, []types.EnvVar{{Name: "BATCH_SIZE", Value: "32"}, {Name: "MODEL_PATH", Value: "/data/llama"}}, spec.Workload.Env)
	require.True(t, spec.Workload.AllowOperatorTrainer)
	require.True(t, spec.AcceptsRegion("us-east"))
	require.False(t, spec.AcceptsRegion("eu-west"))
	require.Empty(t, spec.AcceptsRuntime(types.RuntimeProcess))
	require.Empty(t, spec.AcceptsRuntime(types.RuntimeContainer))
}

func TestSpecRegionsAndEnvFieldErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"    MODEL_PATH: /data/llama", "    DEPIN_DATA_DIR: /x", "workload.env.DEPIN_DATA_DIR: not allowed: names starting with DEPIN_ belong to the trainer contract"},
		{"    MODEL_PATH: /data/llama", "    DEPIN_SEED: x", "workload.env.DEPIN_SEED: not allowed"},
		{"    MODEL_PATH: /data/llama", "    CUDA_VISIBLE_DEVICES: all", "workload.env.CUDA_VISIBLE_DEVICES: not allowed: the sidecar sets CUDA_VISIBLE_DEVICES"},
		{"    MODEL_PATH: /data/llama", "    model-path: x", `workload.env: "model-path" is not a variable name ([A-Z_][A-Z0-9_]*`},
		{"    MODEL_PATH: /data/llama", "    1ST: x", `workload.env: "1ST" is not a variable name`},
		{"    MODEL_PATH: /data/llama", "    MODEL_PATH: " + strings.Repeat("x", types.MaxEnvValueLength+1), "workload.env.MODEL_PATH: value longer than 4096 bytes"},
		{"regions: [us-west, us-east]", "regions: [us-west, '']", "regions[1]: must be a region name like us-west"},
		{"regions: [us-west, us-east]", "regions: [us-west, us-west]", `regions[1]: "us-west" is listed twice`},
		{"regions: [us-west, us-east]", "regions: us-west", "regions"},
	} {
		_, err := types.ParseJobSpecYAML([]byte(strings.Replace(hostSpecYAML, tc.old, tc.new, 1)))
		require.ErrorContains(t, err, tc.want, "%s → %s", tc.old, tc.new)
	}
	// env and allow_operator_trainer are for container workloads only.
	s, err := types.ParseJobSpecYAML([]byte(hostSpecYAML))
	require.NoError(t, err)
	s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE, Env: []types.EnvVar{{Name: "A", Value: "b"}}}
	require.ErrorContains(t, s.ValidateStateless(), "workload.env: only for kind container")
	s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE, AllowOperatorTrainer: true}
	require.ErrorContains(t, s.ValidateStateless(), "workload.allow_operator_trainer: only for kind container")
	// Too many bytes altogether.
	s, _ = types.ParseJobSpecYAML([]byte(hostSpecYAML))
	s.Workload.Env = nil
	for i := 0; i < 10; i++ {
		s.Workload.Env = append(s.Workload.Env, types.EnvVar{Name: "V" + string(rune('A'+i)), Value: strings.Repeat("x", 4000)})
	}
	require.ErrorContains(t, s.ValidateStateless(), "workload.env: 40020 bytes of names and values, at most 32768")
	// Unsorted (a hand-built message) is refused: one canonical form on chain.
	s.Workload.Env = []types.EnvVar{{Name: "B", Value: "1"}, {Name: "A", Value: "2"}}
	require.ErrorContains(t, s.ValidateStateless(), "workload.env.A: variables must be sorted by name and listed once")
}

func TestAcceptsRuntime(t *testing.T) {
	s, err := types.ParseJobSpecYAML([]byte(strings.Replace(hostSpecYAML, "  allow_operator_trainer: true\n", "", 1)))
	require.NoError(t, err)
	require.Empty(t, s.AcceptsRuntime(types.RuntimeContainer))
	require.Contains(t, s.AcceptsRuntime(types.RuntimeProcess), "only with workload.allow_operator_trainer: true")
	require.Contains(t, s.AcceptsRuntime(types.RuntimeReference), "runtime must be container")
	require.Contains(t, s.AcceptsRuntime(types.RuntimeExactTorch), "serves only reference and transformer workloads")
	require.Contains(t, s.AcceptsRuntime("docker"), `runtime must be "reference", "exact-torch", "container" or "process"`)
	s.Workload = types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE}
	require.Empty(t, s.AcceptsRuntime(types.RuntimeReference))
	require.Empty(t, s.AcceptsRuntime(types.RuntimeProcess))
	require.Empty(t, s.AcceptsRuntime(types.RuntimeExactTorch), "the exact PyTorch trainer serves the exact workload")
	require.Contains(t, s.AcceptsRuntime(types.RuntimeContainer), "a container runtime cannot serve a reference workload")
}
