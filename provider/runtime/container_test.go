package runtime_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

func TestContainerWithoutEngine(t *testing.T) {
	rt, err := runtime.NewContainer(runtime.ContainerOptions{Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	job.Market.Spec.Workload.Image, job.Market.Spec.Workload.Digest = "trainer", "sha256:"+strings.Repeat("0", 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = rt.Start(ctx, job)
	if !errors.Is(err, runtime.ErrNoEngine) || !strings.Contains(err.Error(), "unix:///nonexistent/docker.sock") {
		t.Fatalf("Start without an engine: %v", err)
	}
}

func TestContainerConfig(t *testing.T) {
	rt, err := runtime.NewContainer(runtime.ContainerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
	job.Market.Spec.Resources = markettypes.Resources{CpuMillis: 2500, MemoryMib: 8192}
	job.Market.Spec.Workload.Command = []string{"--epochs", "1"}
	job.GPUs = []string{"GPU-1111", "GPU-2222"}
	job.StartStep, job.ResumeFrom = 4, "/cache/job-3/step-4"
	config, host := runtime.ContainerConfig(rt, job, job.Env(), "sha256:abc")

	if config.Image != "sha256:abc" || !slices.Equal(config.Cmd, []string{"--epochs", "1"}) || config.Labels[runtime.LabelLease] != "12" {
		t.Errorf("config %+v", config)
	}
	for _, want := range []string{
		"DEPIN_OUTPUT_DIR=/depin/output", "DEPIN_DATA_DIR=/depin/data", "DEPIN_RESUME_FROM=/depin/resume/step-4",
		"DEPIN_START_STEP=4", "CUDA_VISIBLE_DEVICES=GPU-1111,GPU-2222",
	} {
		if !slices.Contains(config.Env, want) {
			t.Errorf("env %q lacks %s", config.Env, want)
		}
	}
	if host.NanoCPUs != 2_500_000_000 || host.Memory != 8<<30 || host.ShmSize != 4<<30 {
		t.Errorf("limits: %d nano-CPUs, %d bytes of memory, %d of shm", host.NanoCPUs, host.Memory, host.ShmSize)
	}
	// NVIDIA's PyTorch container settings: unlimited locked memory, 64 MiB stacks.
	if got := fmt.Sprint(host.Ulimits); got != "[memlock=-1:-1 stack=67108864:67108864]" {
		t.Errorf("ulimits %s", got)
	}
	wantDevices := []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"GPU-1111", "GPU-2222"}, Capabilities: [][]string{{"gpu"}}}}
	if fmt.Sprint(host.DeviceRequests) != fmt.Sprint(wantDevices) {
		t.Errorf("device requests %+v, want %+v", host.DeviceRequests, wantDevices)
	}
	wantMounts := []mount.Mount{
		{Type: mount.TypeBind, Source: job.OutputDir, Target: "/depin/output"},
		{Type: mount.TypeBind, Source: job.DataDir, Target: "/depin/data", ReadOnly: true},
		{Type: mount.TypeBind, Source: "/cache/job-3/step-4", Target: "/depin/resume/step-4", ReadOnly: true},
	}
	if fmt.Sprint(host.Mounts) != fmt.Sprint(wantMounts) {
		t.Errorf("mounts %+v\nwant %+v", host.Mounts, wantMounts)
	}
	if host.NetworkMode != "none" || !slices.Equal(host.CapDrop, []string{"ALL"}) || host.Init == nil || !*host.Init {
		t.Errorf("isolation: network %q, cap drop %v, init %v", host.NetworkMode, host.CapDrop, host.Init)
	}

	job.GPUs = nil
	_, host = runtime.ContainerConfig(rt, job, job.Env(), "sha256:abc")
	if host.DeviceRequests != nil {
		t.Errorf("device requests without leased GPUs: %+v", host.DeviceRequests)
	}

	// No memory in the spec: /dev/shm gets the 8 GiB default, not Docker's 64 MiB.
	// The owner's env comes after the contract's; a reserved name in a stored
	// spec (the chain refuses new ones) is dropped.
	job.Market.Spec.Resources.MemoryMib = 0
	job.Market.Spec.Workload.Env = []markettypes.EnvVar{{Name: "DEPIN_OUTPUT_DIR", Value: "/evil"}, {Name: "MODEL_PATH", Value: "/depin/data/llama"}}
	config, host = runtime.ContainerConfig(rt, job, job.Env(), "sha256:abc")
	if host.ShmSize != 8<<30 {
		t.Errorf("default shm %d", host.ShmSize)
	}
	if !slices.Contains(config.Env, "MODEL_PATH=/depin/data/llama") || slices.Contains(config.Env, "DEPIN_OUTPUT_DIR=/evil") {
		t.Errorf("env %q", config.Env)
	}
}

// buildTrainerImage builds a FROM scratch image holding only the static
// test trainer through the Engine API and returns its tag and image ID.
func buildTrainerImage(t *testing.T, engine *client.Client, extraDockerfile ...string) (tag, id string) {
	t.Helper()
	bin, err := os.ReadFile(testTrainer(t))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := []byte("FROM scratch\nCOPY trainer /trainer\nENTRYPOINT [\"/trainer\"]\n" + strings.Join(extraDockerfile, "\n") + "\n")
	var buildContext bytes.Buffer
	tw := tar.NewWriter(&buildContext)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, dockerfile}, {"trainer", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	tag = "depinchain-test-trainer:" + hex.EncodeToString(suffix)
	result, err := engine.ImageBuild(t.Context(), &buildContext, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatal(err)
	}
	defer result.Body.Close()
	// The build streams JSON messages; the image ID comes in an "aux" one.
	dec := json.NewDecoder(result.Body)
	for {
		var msg struct {
			Error string `json:"error"`
			Aux   struct {
				ID string `json:"ID"`
			} `json:"aux"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if msg.Error != "" {
			t.Fatalf("building the image: %s", msg.Error)
		}
		if msg.Aux.ID != "" {
			id = msg.Aux.ID
		}
	}
	if id == "" {
		t.Fatal("the build reported no image ID")
	}
	t.Cleanup(func() {
		engine.ImageRemove(context.Background(), id, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return tag, id
}

// buildMachineUlimits: the build machines' Docker daemon runs without
// CAP_SYS_RESOURCE (its own memlock hard limit is 8 MiB), so containers that
// really run here get the stack ulimit only; TestContainerConfig checks the
// PyTorch defaults a root daemon on a GPU host applies.
var buildMachineUlimits = runtime.StackUlimitOnly()

// The container runtime on the real Docker Engine: a FROM scratch image of
// the static test trainer, built here, pinned by its image ID.
func TestContainerEndToEnd(t *testing.T) {
	rt, err := runtime.NewContainer(runtime.ContainerOptions{Ulimits: buildMachineUlimits})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Ping(ctx); err != nil {
		t.Skipf("container runtime: no Docker engine reachable: %v", err)
	}
	engine, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	tag, imageID := buildTrainerImage(t, engine)

	containerJob := func(t *testing.T, total uint64, command ...string) runtime.Job {
		job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, total, 4)
		job.Market.Spec.Workload = markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER, Image: tag, Digest: imageID, Command: command}
		return job
	}
	start := func(t *testing.T, job runtime.Job) runtime.Handle {
		t.Helper()
		h, err := rt.Start(t.Context(), job)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			h.Stop(ctx)
		})
		return h
	}

	// Made with the parent test's directories, which outlive the subtest:
	// "resumes" continues from its checkpoint.
	trained := containerJob(t, 9)
	trainedOK := t.Run("trains", func(t *testing.T) {
		if err := start(t, trained).Wait(); err != nil {
			t.Fatal(err)
		}
		checkCheckpoints(t, trained, directTrace(t, 9))
		stdout := readLog(t, trained, runtime.StdoutLogName)
		if !strings.Contains(stdout, `CUDA_VISIBLE_DEVICES=""`) || !strings.Contains(stdout, "output in /depin/output") {
			t.Fatalf("stdout log: %q", stdout)
		}
		// The container is gone once the run has ended.
		list, err := engine.ContainerList(t.Context(), client.ContainerListOptions{
			All: true, Filters: make(client.Filters).Add("label", runtime.LabelLease+"=12"),
		})
		if err != nil || len(list.Items) != 0 {
			t.Fatalf("containers left: %v, %v", list.Items, err)
		}
	})

	t.Run("resumes", func(t *testing.T) {
		if !trainedOK {
			t.Skip("needs the checkpoints of the trains subtest, which failed")
		}
		job := containerJob(t, 9)
		job.StartStep, job.ResumeFrom = 4, trainer.CheckpointDir(trained.OutputDir, 4)
		if err := start(t, job).Wait(); err != nil {
			t.Fatal(err)
		}
		if cps := checkCheckpoints(t, job, directTrace(t, 9)); len(cps) != 2 || cps[0].StartStep() != 4 {
			t.Fatalf("resumed checkpoints %v", cps)
		}
	})

	t.Run("refuses another digest", func(t *testing.T) {
		job := containerJob(t, 9)
		job.Market.Spec.Workload.Digest = "sha256:" + strings.Repeat("0", 64)
		_, err := rt.Start(t.Context(), job)
		if !errors.Is(err, runtime.ErrImageMismatch) || !strings.Contains(err.Error(), imageID) {
			t.Fatalf("Start with another digest: %v", err)
		}
		job.Market.Spec.Workload.Image = "depinchain-test-absent:v1"
		if _, err := rt.Start(t.Context(), job); !errors.Is(err, runtime.ErrImageMismatch) || !strings.Contains(err.Error(), "not present locally") {
			t.Fatalf("Start with an absent image: %v", err)
		}
	})

	t.Run("trainer exits non-zero", func(t *testing.T) {
		job := containerJob(t, 9, "-mode=crash")
		err := start(t, job).Wait()
		if !errors.Is(err, trainer.ErrTrainerFailed) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "illegal memory access") {
			t.Fatalf("Wait = %v", err)
		}
	})

	t.Run("stop", func(t *testing.T) {
		job := containerJob(t, 1_000_000, "-step-delay=2ms")
		h := start(t, job)
		first := filepath.Join(trainer.CheckpointDir(job.OutputDir, 4), trainer.CompleteMarkerName)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(first); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no checkpoint within 30 s")
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := h.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(); !errors.Is(err, runtime.ErrStopped) {
			t.Fatalf("Wait after Stop: %v", err)
		}
	})
}
