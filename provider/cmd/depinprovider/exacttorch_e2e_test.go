//go:build linux

package main_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// debianPython is the interpreter apt-get installs python3-torch for.
const debianPython = "/usr/bin/python3"

// exactTorchScript is pkg/exact/torch/train.py of this checkout; the test
// fails, saying how to install PyTorch, when it cannot run.
func exactTorchScript(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch and numpy (%v: %s); install Debian's packages: "+
			"apt-get update && apt-get install -y python3-torch python3-numpy (`make deps` does this)", debianPython, err, bytes.TrimSpace(out))
	}
	root, err := localnet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "pkg", "exact", "torch", "train.py")
}

// torchJobYAML is a small transformer: about a tenth of a second a step
// with train.py on one CPU thread, twelve checkpoints.
const torchJobYAML = `name: torch-transformer
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: transformer
  model: {layers: 2, d_model: 32, heads: 2, d_ff: 64, context: 16, vocab: 256}
  train: {batch: 4, optimizer: adamw, lr: 0.01, warmup_steps: 4, weight_decay: 0.1}
total_steps: 96
checkpoint_every: 8
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 4
`

var torchRunStarted = regexp.MustCompile(`msg="training started" lease=(\d+) job=(\d+) runtime=(\S+) from_step=(\d+)`)

// TestSidecarTrainsTheTransformerWithPyTorch: a sidecar whose operator set
// runtimes.exact_torch trains a kind: transformer job through
// pkg/exact/torch/train.py on the process runtime; its checkpoints pass the
// sidecar's checks, are accepted, become final and are paid, and every one
// of them commits exactly the state root the Go trainer (exact.Train)
// computes for the same job seed.
//
// Midway the sidecar is killed with SIGKILL at a named point (a test hook
// stops it right before it submits its second checkpoint) while its trainer
// is frozen (SIGSTOP), as a stalled host would leave it. The trainer runs in
// its own process group and outlives the sidecar; the restarted sidecar kills
// it, then resumes through train.py from its newest local checkpoint, with
// the same roots.
func TestSidecarTrainsTheTransformerWithPyTorch(t *testing.T) {
	script := exactTorchScript(t)
	w := newWorld(t, 8*time.Minute, sidecar.Options{Set: map[string]string{
		"runtimes.exact_torch":     fmt.Sprintf("[%q, %q]", debianPython, script),
		"runtimes.exact_torch_env": `["DEPIN_TORCH_PROCS=1", "OMP_NUM_THREADS=1"]`,
	}})
	if err := w.provider.StartWith(w.ctx, "--pause-before-checkpoint", "2"); err != nil {
		t.Fatal(err)
	}
	jobID := w.submitJob(torchJobYAML, "500000000udepin")
	if err := w.provider.WaitLog(w.ctx, daemon.PausedLogMsg); err != nil {
		t.Fatalf("waiting for the sidecar to pause before its second checkpoint: %v", err)
	}
	leases := w.leasesOf(jobID)
	if len(leases) != 1 {
		t.Fatalf("leases %+v", leases)
	}
	lease := leases[0]
	leaseDir := filepath.Join(w.provider.Home, "work", fmt.Sprintf("lease-%d", lease.Id))

	// Freeze the trainer the sidecar started, then kill the sidecar.
	pgid := trainerGroup(t, filepath.Join(leaseDir, "logs"))
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) }) //nolint:errcheck // gone already when the test passes
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing the trainer: %v", err)
	}
	if _, err := os.Stat(filepath.Join(leaseDir, "output", trainer.DoneMarkerName)); err == nil {
		t.Fatal("train.py finished the job before the sidecar paused: lengthen torchJobYAML")
	}
	w.provider.Kill()
	if !groupRuns(pgid) {
		t.Fatal("the trainer died with the sidecar: nothing left for the restart to stop")
	}
	before, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil || len(before.Checkpoints) != 1 {
		t.Fatalf("checkpoints on chain when the sidecar paused before its second: %v %v, want 1", before, err)
	}
	local, err := trainer.CompletedSteps(filepath.Join(leaseDir, "output"))
	if err != nil || len(local) < 2 {
		t.Fatalf("local checkpoints at the kill: %v %v, want at least steps 8 and 16", local, err)
	}

	// The restart stops the leftover trainer and resumes through train.py.
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.eventually("the restarted sidecar starting train.py again", time.Minute, func() bool {
		return w.provider.LogCount("training started") == 2
	})
	if groupRuns(pgid) {
		t.Fatal("the trainer the killed sidecar left is still there after the restart")
	}

	leases = w.waitPaid(jobID)
	if len(leases) != 1 || leases[0].CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("leases %+v", leases)
	}
	cps, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil {
		t.Fatal(err)
	}
	if len(cps.Checkpoints) != 12 {
		t.Fatalf("%d checkpoints on chain, want 12 (96 steps every 8)", len(cps.Checkpoints))
	}

	// The Go trainer, on the same job, seed and data, commits the same roots.
	job := w.job(jobID)
	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		t.Fatal(err)
	}
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		t.Fatal(err)
	}
	goOut := t.TempDir()
	if err := exact.Train(w.ctx, exact.TrainOptions{Config: cfg, Seed: job.Seed, Stream: data.Bytes, OutputDir: goOut,
		TotalSteps: job.Spec.TotalSteps, CheckpointInterval: job.Spec.CheckpointInterval}); err != nil {
		t.Fatal(err)
	}
	claimed := sdkInt(0)
	for _, cp := range cps.Checkpoints {
		goCp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(goOut, cp.EndStep), cp.EndStep)
		if err != nil {
			t.Fatal(err)
		}
		root, traceRoot := goCp.FinalHash(), goCp.Trace.Root()
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL || !bytes.Equal(cp.StateRoot, root[:]) ||
			!bytes.Equal(cp.FinalHash, root[:]) || !bytes.Equal(cp.TraceRoot, traceRoot[:]) {
			t.Fatalf("checkpoint %d (steps %d..%d) is %s with state root %x, trace root %x; Go's are %s, %s",
				cp.Index, cp.StartStep, cp.EndStep, cp.Status, cp.StateRoot, cp.TraceRoot, root, traceRoot)
		}
		claimed = claimed.Add(cp.Claim.Amount)
	}
	if !leases[0].Withdrawn.Amount.Equal(claimed) || !claimed.IsPositive() {
		t.Fatalf("withdrawn %s, final checkpoints claimed %s", leases[0].Withdrawn, claimed)
	}
	last := cps.Checkpoints[len(cps.Checkpoints)-1]
	t.Logf("final state root after %d steps: %x (train.py and exact.Train agree)", last.EndStep, last.StateRoot)

	// Both runs were train.py's: from step 0, then from the newest local
	// checkpoint the frozen trainer had completed.
	log, _ := os.ReadFile(w.provider.LogPath())
	starts := torchRunStarted.FindAllStringSubmatch(string(log), -1)
	if len(starts) != 2 || starts[0][3] != "exact-torch" || starts[1][3] != "exact-torch" || starts[0][4] != "0" ||
		starts[1][4] != strconv.FormatUint(local[len(local)-1], 10) {
		t.Fatalf("want train.py from step 0, then from step %d:\n%s", local[len(local)-1], grepLines(string(log), "training started"))
	}
	var ls leasesJSON
	if err := w.provider.REST(w.ctx, "/v1/leases", &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Leases) != 1 || ls.Leases[0].Runtime != "exact-torch" {
		t.Fatalf("leases over REST: %+v", ls)
	}
}

// trainerGroup reads the process group ExactTorch recorded in the lease's
// logs.
func trainerGroup(t *testing.T, logDir string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(logDir, runtime.TrainerGroupFileName))
	if err != nil {
		t.Fatalf("the exact-torch runtime recorded no trainer group: %v", err)
	}
	pgidText, _, _ := strings.Cut(strings.TrimSpace(string(raw)), " ")
	pgid, err := strconv.Atoi(pgidText)
	if err != nil || pgid <= 1 {
		t.Fatalf("trainer group record %q", raw)
	}
	return pgid
}

// groupRuns reports whether a process of group pgid is alive (a zombie
// nobody reaped does not count).
func groupRuns(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
