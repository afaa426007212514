package main_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	"github.com/depinchain/depinchain/testutil/ociregistry"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// trainerReport is what the test trainer's --report prints (see
// provider/runtime/testdata/trainer): what it saw inside the container.
type trainerReport struct {
	DataFiles    map[string]string `json:"data_files"`
	StreamSHA256 string            `json:"stream_sha256"`
	DataWriteErr string            `json:"data_write_error"`
	ShmBytes     int64             `json:"shm_bytes"`
	StackSoft    int64             `json:"stack_soft"`
	StackHard    int64             `json:"stack_hard"`
}

const trainerReportPrefix = "trainer report: "

// TestContainerJobPullsImageFromRegistryAndTrainsOnDataset is a container
// job as a GPU host would serve it, on real binaries. The owner's training
// image (FROM scratch, the static test trainer) is built here, pushed to a
// password-protected OCI registry on 127.0.0.1 and removed from the Docker
// Engine. The job names it as image@digest and trains on a registered
// dataset held by three storage sidecars (a datasetWorld). The training
// sidecar, configured with the registry's login, pulls the image by digest
// when it bids, fetches the worker's verified shard pieces, and runs the
// container with them mounted read-only under DEPIN_DATA_DIR. The trainer
// inside reports the hash of every data file and of the stream it trained
// on, whether it could write to its data folder, its /dev/shm size and its
// stack ulimit; the test checks them against the pieces as built, the
// runtime's documented defaults (8 GiB /dev/shm when the job sets no
// memory, 64 MiB stacks), and checks that the chain's checkpoints became
// final with the state pkg/exact computes from that stream.
func TestContainerJobPullsImageFromRegistryAndTrainsOnDataset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node, four real sidecars, a registry and a container")
	}
	engine, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	pingCtx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if _, err := engine.Ping(pingCtx, client.PingOptions{}); err != nil {
		t.Skipf("no Docker Engine answers here: %v", err)
	}

	// The owner's image, in the registry and nowhere else.
	reg := ociregistry.Start(t)
	tag, imageID := buildTrainerImage(t, "--report", "--step-delay", "5ms")
	repo, digest := reg.Push(t, engine, tag, "acme/depin-trainer")
	ociregistry.RemoveImage(t, engine, imageID)
	t.Cleanup(func() {
		engine.ImageRemove(context.Background(), imageID, client.ImageRemoveOptions{Force: true, PruneChildren: true}) //nolint:errcheck // best effort
	})
	if _, err := engine.ImageInspect(t.Context(), repo+"@"+digest); err == nil {
		t.Fatalf("the engine still has %s@%s before the job", repo, digest)
	}

	// The build machines' Docker daemon cannot raise memlock (no
	// CAP_SYS_RESOURCE): the sidecar's PyTorch default of memlock=-1 is
	// turned off here, the 64 MiB stack stays.
	d := newDatasetWorld(t, 5*time.Minute, sidecar.Options{Set: map[string]string{
		"runtimes.container":         "true",
		"runtimes.pull":              "true",
		"runtimes.memlock_unlimited": "false",
		"runtimes.docker_config":     fmt.Sprintf("%q", filepath.Join(t.TempDir(), "absent-config.json")),
		"runtimes.registries":        fmt.Sprintf("[{host = %q, username = %q, password = %q}]", reg.Host, ociregistry.Username, ociregistry.Password),
		// A container job's bid commits the operator's stated rate (x/market v4).
		"throughput.container_steps_per_hour": "3600",
	}})
	if _, err := engine.ImageInspect(t.Context(), imageID); err == nil {
		t.Fatal("the engine has the image before the sidecar starts")
	}
	d.startAll("operator")

	jobYAML := fmt.Sprintf(`name: fortunes-in-a-container
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: container
  image: %s
  digest: %s
dataset: %s
total_steps: 48
checkpoint_every: 16
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 6
`, repo, digest, fortunesDatasetID)
	jobID := d.submitJob(jobYAML, "500000000udepin")
	leases := d.waitPaid(jobID)
	t.Logf("job completed and paid at %s", d.since())
	if len(leases) != 1 || leases[0].CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED || leases[0].Runtime != "container" {
		t.Fatalf("leases %+v: want one completed by the container runtime", leases)
	}

	// The sidecar pulled the image by its digest, with the operator's login.
	if want := "GET /v2/acme/depin-trainer/manifests/" + digest; !slices.Contains(reg.Requests(), want) {
		t.Fatalf("the registry served %q, not %q", reg.Requests(), want)
	}
	inspect, err := engine.ImageInspect(t.Context(), repo+"@"+digest)
	if err != nil || inspect.ID != imageID || !slices.Contains(inspect.RepoDigests, repo+"@"+digest) {
		t.Fatalf("after the job the engine has %s (want %s), repo digests %v: %v", inspect.ID, imageID, inspect.RepoDigests, err)
	}

	// The trainer in the container saw the worker's verified pieces,
	// read-only, and trained on exactly them.
	report := readTrainerReport(t, d.provider.Home)
	dataDir := findDataDir(t, d.provider.Home)
	stream, err := exact.ReadStreamDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traindata.NewStream(chainLayout(t, d.ctx, d.registry, jobID, leases[0].Worker), stream); err != nil {
		t.Fatalf("the data folder is not the worker's committed stream: %v", err)
	}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(report.DataFiles) || len(entries) < len(d.manifest.Shards) {
		t.Fatalf("the container saw %d data files, the data folder has %d, the dataset %d shards", len(report.DataFiles), len(entries), len(d.manifest.Shards))
	}
	for _, e := range entries {
		var seq, shard, piece uint32
		if _, err := fmt.Sscanf(e.Name(), "%06d-shard%d-piece%d", &seq, &shard, &piece); err != nil {
			t.Fatalf("data file %s: %v", e.Name(), err)
		}
		sum := sha256.Sum256(d.builtPiece(shard, piece))
		if got := report.DataFiles[e.Name()]; got != hex.EncodeToString(sum[:]) {
			t.Fatalf("the container read %s as sha256 %q; shard %d's piece %d as built is %x", e.Name(), got, shard, piece, sum)
		}
	}
	if sum := sha256.Sum256(stream); report.StreamSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("the container trained on a stream of sha256 %s, the worker's is %x", report.StreamSHA256, sum)
	}
	if !strings.Contains(report.DataWriteErr, "read-only file system") {
		t.Fatalf("writing into DEPIN_DATA_DIR inside the container: %q, want a read-only file system", report.DataWriteErr)
	}
	if report.ShmBytes != runtime.DefaultShmBytes {
		t.Fatalf("/dev/shm is %d bytes in the container, want the documented %d", report.ShmBytes, runtime.DefaultShmBytes)
	}
	if report.StackSoft != 64<<20 || report.StackHard != 64<<20 {
		t.Fatalf("stack ulimit %d:%d in the container, want 64 MiB", report.StackSoft, report.StackHard)
	}

	t.Logf("pulled %s@%s (registry requests: %d); the container read %d data files (stream sha256 %.16s…) read-only, /dev/shm %d MiB, stack %d MiB",
		repo, digest, len(reg.Requests()), len(report.DataFiles), report.StreamSHA256, report.ShmBytes>>20, report.StackSoft>>20)

	// Its checkpoints are on chain, final, and the last one is the reference
	// transformer (what the test trainer runs) trained on that stream.
	cps, err := d.verify.Checkpoints(d.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases[0].Id})
	if err != nil || len(cps.Checkpoints) != 3 {
		t.Fatalf("checkpoints %v %v, want 3", cps, err)
	}
	for _, cp := range cps.Checkpoints {
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL {
			t.Fatalf("checkpoint %d is %s", cp.Index, cp.Status)
		}
	}
	job := d.job(jobID)
	initial, err := exact.Init(exact.ReferenceConfig(), job.Seed)
	if err != nil {
		t.Fatal(err)
	}
	final, err := exact.Run(initial, stream, job.Seed, job.Spec.TotalSteps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, got := final.Root(), cps.Checkpoints[len(cps.Checkpoints)-1].StateRoot; string(want[:]) != string(got) {
		t.Fatalf("final state_root %x, pkg/exact computes %x from the worker's stream", got, want)
	}
	t.Logf("done at %s", d.since())
}

// readTrainerReport finds the report line in the one trainer stdout log
// under a sidecar's home. Every run of the trainer prints one; they must agree.
func readTrainerReport(t *testing.T, home string) trainerReport {
	t.Helper()
	var logs []string
	err := filepath.WalkDir(home, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && e.Name() == runtime.StdoutLogName {
			logs = append(logs, path)
		}
		return nil
	})
	if err != nil || len(logs) != 1 {
		t.Fatalf("trainer stdout logs under %s: %v %v", home, logs, err)
	}
	f, err := os.Open(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), trainerReportPrefix); ok {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 || slices.ContainsFunc(lines, func(l string) bool { return l != lines[0] }) {
		t.Fatalf("%s: report lines %q, want one or more equal ones", logs[0], lines)
	}
	var r trainerReport
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	return r
}
