package runtime_test

import (
	"os"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/depinchain/depinchain/provider/runtime"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// TestContainerGPURequest runs a container job on real GPUs: the runtime's
// device request for the leased UUIDs must give the container NVIDIA device
// nodes, with the default PyTorch ulimits. It runs only where make gpu-check
// (scripts/gpu-host-check.sh) sets DEPIN_GPU_UUIDS on a host with Docker and
// the NVIDIA container toolkit; everywhere else it skips.
func TestContainerGPURequest(t *testing.T) {
	uuids := os.Getenv("DEPIN_GPU_UUIDS")
	if uuids == "" {
		t.Skip("DEPIN_GPU_UUIDS is not set: not on a GPU host (make gpu-check sets it)")
	}
	rt, err := runtime.NewContainer(runtime.ContainerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if err := rt.Ping(t.Context()); err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	engine, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	tag, id := buildTrainerImage(t, engine)
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	job.Market.Spec.Workload = markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER, Image: tag, Digest: id,
		Command: []string{"-require-nvidia"}}
	job.GPUs = strings.Split(uuids, ",")
	h, err := rt.Start(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	err = h.Wait()
	stdout := readLog(t, job, runtime.StdoutLogName)
	t.Logf("container stdout:\n%s", stdout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "nvidia devices: [/dev/nvidia") || !strings.Contains(stdout, "CUDA_VISIBLE_DEVICES=\""+uuids+"\"") {
		t.Fatalf("the container did not get the leased GPUs")
	}
}
