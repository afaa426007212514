package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// TestPyTorchAndGoTrainersTrainInRounds: w2's operator set runtimes.exact_torch, so w2
// trains its slot's rounds with pkg/exact/torch/train.py (the trainer contract's round
// runs, one torch thread) while w1 and w3 train theirs with the Go trainer. The chain
// records each lease's runtime, w2's round runs are train.py processes, and every
// committed global root is diloco.Simulate's bit for bit: the PyTorch trainer's rounds
// are the Go trainer's, its carry (round 1) included, and nobody saw a global it
// disagrees with.
func TestPyTorchAndGoTrainersTrainInRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	if out, err := exec.Command(debianPython, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("the PyTorch trainer cannot run here: %s cannot import torch and numpy (%v: %s); "+
			"apt-get install -y python3-torch python3-numpy (`make deps` does this)", debianPython, err, bytes.TrimSpace(out))
	}
	root, err := localnet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "pkg", "exact", "torch", "train.py")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	r := startRoundsJobWith(ctx, t, roundsJobYAML, nil, nil, map[string]map[string]string{"w2": {
		"runtimes.exact_torch":     fmt.Sprintf("[%q, %q, \"--threads\", \"1\"]", debianPython, script),
		"runtimes.exact_torch_env": `["DEPIN_TORCH_PROCS=1"]`,
	}})
	c := r.c
	leases, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	var torchLease uint64
	for _, l := range leases.Leases {
		name, want := r.slots[l.Worker], "reference"
		if name == "w2" {
			want, torchLease = "exact-torch", l.Id
		}
		if l.Runtime != want {
			t.Fatalf("%s's lease %d (slot %d) runs on %q, want %q", name, l.Id, l.Worker, l.Runtime, want)
		}
	}
	started := time.Now()
	c.waitFor(ctx, t, "round 1's global (G_2) is committed", 6*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	r.checkSimulate(ctx, t, nil, nil)
	// w2's rounds were train.py processes: ExactTorch recorded the process group of its
	// round runs in the lease's log folder, and they wrote both round-end checkpoints.
	leaseDir := filepath.Join(c.sidecars["w2"].Home, "work", fmt.Sprintf("lease-%d", torchLease))
	if _, err := os.Stat(filepath.Join(leaseDir, "logs", runtime.TrainerGroupFileName)); err != nil {
		t.Fatalf("w2 trained without train.py: %v", err)
	}
	if steps, err := trainer.CompletedSteps(filepath.Join(leaseDir, "output")); err != nil || len(steps) != 2 || steps[0] != 8 || steps[1] != 16 {
		t.Fatalf("w2's round-end checkpoints: %v %v, want steps 8 and 16", steps, err)
	}
	train, wait := r.roundTimes(ctx, t, "w1", "w2", "w3")
	t.Logf("2 rounds of 3 workers (one on PyTorch) in %s: training %.1fs, waiting on the round barrier %.1fs",
		time.Since(started).Round(time.Second), train, wait)
}
