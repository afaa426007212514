//go:build long && linux

package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/trainer"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// torchImageConfig is the transformer the image trains in these tests: about
// a tenth of a second a step on CPU.
func torchImageConfig() exact.Config {
	return exact.Config{
		Model: exact.ModelConfig{Layers: 2, DModel: 32, Heads: 2, DFF: 64, Context: 16, Vocab: 256},
		Train: exact.TrainConfig{Batch: 4, LR: 0.01, WarmupSteps: 4, WeightDecay: 0.1},
	}
}

// torchImage builds the exact transformer's PyTorch image with
// scripts/torch-image.sh (`make torch-image`), or finds it built, and returns
// its reference and the image ID a job pins as its digest. A cold build
// (debootstrap and about 270 MB of Debian packages) takes about 6 minutes;
// with the image present, under a second. Without root and without the
// image the test skips, saying to run `sudo make torch-image`.
func torchImage(t *testing.T) (image, digest string) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker Engine answers here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	root, err := localnet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	started := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "torch-image.sh"))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "debootstrap needs root") {
			t.Skipf("the image is not built and building it needs root: run `sudo make torch-image` first (%s)", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("scripts/torch-image.sh: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "image="); ok {
			image = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "digest="); ok {
			digest = v
		}
	}
	if image == "" || !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
		t.Fatalf("scripts/torch-image.sh printed no image and digest:\n%s\n%s", stdout.String(), stderr.String())
	}
	t.Logf("image %s, digest %s (%s)", image, digest, time.Since(started).Round(time.Second))
	return image, digest
}

// goCheckpoints trains cfg with exact.Train, as the chain's referee would, on
// stream from seed, and returns its output folder.
func goCheckpoints(t *testing.T, cfg exact.Config, seed, stream []byte, total, every uint64) string {
	t.Helper()
	out := t.TempDir()
	if err := exact.Train(context.Background(), exact.TrainOptions{Config: cfg, Seed: seed, Stream: stream, OutputDir: out,
		TotalSteps: total, CheckpointInterval: every}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTorchImageMatchesGo runs the image with `docker run` under the trainer
// contract as the container runtime sets it (the output and data folders
// bind-mounted, DEPIN_EXACT_CONFIG empty, the configuration in the command):
// every checkpoint's state is exact.Train's byte for byte, and the trace's
// h_i are SHA-256 of the states, as the contract asks of container jobs.
func TestTorchImageMatchesGo(t *testing.T) {
	image, digest := torchImage(t)
	cfg := torchImageConfig()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seed := []byte("torch image test seed")
	corpus := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog. "), 200)
	data, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "corpus.txt"), corpus, 0o644); err != nil {
		t.Fatal(err)
	}
	const total, every = 10, 4
	args := []string{"run", "--rm", "--network", "none", "--init", "--cap-drop", "ALL",
		"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		"-v", out + ":/depin/output", "-v", data + ":/depin/data:ro"}
	for _, kv := range []string{"DEPIN_JOB_ID=1", "DEPIN_LEASE_ID=1", "DEPIN_OUTPUT_DIR=/depin/output", "DEPIN_RESUME_FROM=",
		"DEPIN_DATA_DIR=/depin/data", "DEPIN_START_STEP=0", fmt.Sprintf("DEPIN_TOTAL_STEPS=%d", total),
		fmt.Sprintf("DEPIN_CHECKPOINT_INTERVAL=%d", every), "DEPIN_JOB_SEED=" + hex.EncodeToString(seed),
		"CUDA_VISIBLE_DEVICES=", "DEPIN_EXACT_CONFIG="} {
		args = append(args, "-e", kv)
	}
	// By ID, as the container runtime starts it.
	args = append(args, digest, "--config", string(cfgJSON))
	started := time.Now()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker run %s: %v\n%s", image, err, out)
	}
	t.Logf("docker run: %d steps in %s", total, time.Since(started).Round(100*time.Millisecond))
	goOut := goCheckpoints(t, cfg, seed, corpus, total, every)
	for _, step := range []uint64{4, 8, 10} {
		goCp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(goOut, step), step)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := trainer.ReadCheckpoint(trainer.CheckpointDir(out, step), step)
		if err != nil {
			t.Fatalf("the image's checkpoint at step %d: %v", step, err)
		}
		goState, _ := os.ReadFile(goCp.StatePath())
		state, _ := os.ReadFile(cp.StatePath())
		if !bytes.Equal(goState, state) {
			t.Fatalf("step %d: the image's state (root %s) is not exact.Train's (root %s)", step, exact.StateRoot(state), goCp.FinalHash())
		}
		if cp.Hash != trainer.StateSHA256 || cp.FinalHash() != sha256.Sum256(state) {
			t.Fatalf("step %d: the image's h_end is the %s of its state, want its SHA-256", step, cp.Hash)
		}
	}
	if _, err := os.Stat(filepath.Join(out, trainer.DoneMarkerName)); err != nil {
		t.Fatal("the image wrote no DONE")
	}
}

// TestSidecarTrainsTheTorchImage: a kind: container job whose image is the
// exact transformer's PyTorch trainer (scripts/torch-image.sh), pinned by
// digest, its configuration in the job's command, is served by a real
// sidecar's container runtime against a real node: its checkpoints pass the
// sidecar's checks, are committed, become final and are paid, and each
// commits exactly the state root exact.Train computes for the same
// configuration, job seed and data (and h_end the SHA-256 of that state).
func TestSidecarTrainsTheTorchImage(t *testing.T) {
	image, digest := torchImage(t)
	cfg := torchImageConfig()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfgJSON), "'") {
		t.Fatalf("config JSON %s cannot be single-quoted in YAML", cfgJSON)
	}
	yaml := fmt.Sprintf(`name: torch-image
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: container
  image: %s
  digest: %s
  command: ["--config", '%s']
total_steps: 24
checkpoint_every: 8
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 4
`, image, digest, cfgJSON)

	w := newWorld(t, 6*time.Minute, sidecar.Options{Set: map[string]string{"runtimes.container": "true", "throughput.container_steps_per_hour": "3600"}})
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	jobID := w.submitJob(yaml, "500000000udepin")
	leases := w.waitPaid(jobID)
	if len(leases) != 1 || leases[0].CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("leases %+v", leases)
	}
	var ls leasesJSON
	if err := w.provider.REST(w.ctx, "/v1/leases", &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Leases) != 1 || ls.Leases[0].Runtime != "container" {
		t.Fatalf("leases %+v: want one served by the container runtime", ls)
	}
	cps, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases[0].Id})
	if err != nil || len(cps.Checkpoints) != 3 {
		t.Fatalf("checkpoints %v %v, want 3 (24 steps every 8)", cps, err)
	}

	// exact.Train on the job's configuration, seed and data (the built-in
	// corpus the sidecar wrote to the container's /depin/data).
	job := w.job(jobID)
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		t.Fatal(err)
	}
	goOut := goCheckpoints(t, cfg, job.Seed, data.Bytes, job.Spec.TotalSteps, job.Spec.CheckpointInterval)
	for _, cp := range cps.Checkpoints {
		goState, err := os.ReadFile(filepath.Join(trainer.CheckpointDir(goOut, cp.EndStep), trainer.StateFileName))
		if err != nil {
			t.Fatal(err)
		}
		root, sum := exact.StateRoot(goState), sha256.Sum256(goState)
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL || !bytes.Equal(cp.StateRoot, root[:]) || !bytes.Equal(cp.FinalHash, sum[:]) {
			t.Fatalf("checkpoint %d (steps %d..%d) is %s with state root %x, final hash %x; exact.Train's state root is %s, its SHA-256 %x",
				cp.Index, cp.StartStep, cp.EndStep, cp.Status, cp.StateRoot, cp.FinalHash, root, sum)
		}
	}
	last := cps.Checkpoints[len(cps.Checkpoints)-1]
	t.Logf("final state root after %d steps: %x (the image's train.py and exact.Train agree)", last.EndStep, last.StateRoot)
}
