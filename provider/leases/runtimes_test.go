package leases

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/runtime"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// What runs is what the owner chose: an operator-installed trainer mapped to
// a container job's digest serves it only when the owner allowed it;
// otherwise the job's own image runs (pulled if needed), or no bid.
func TestOperatorTrainerOnlyWhenTheOwnerAllows(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	job := markettypes.Job{Id: 7, Spec: markettypes.JobSpec{Workload: markettypes.Workload{
		Kind: markettypes.WORKLOAD_KIND_CONTAINER, Image: "registry.example/acme/train", Digest: digest}}}
	cfg := config.Default().Runtimes
	cfg.Process = true
	cfg.Trainers = []config.ProcessTrainer{{Digest: digest, Command: []string{"/opt/train"}}}

	rs, err := newRuntimes(cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rs.forJob(context.Background(), job)
	if err == nil || !strings.Contains(err.Error(), "did not allow an operator trainer (workload.allow_operator_trainer)") {
		t.Fatalf("container job, operator trainer not allowed, no container runtime: %v", err)
	}
	job.Spec.Workload.AllowOperatorTrainer = true
	rt, err := rs.forJob(context.Background(), job)
	if err != nil || rt.Name() != markettypes.RuntimeProcess {
		t.Fatalf("allowed: %v, %v", rt, err)
	}

	// With the container runtime on, a job that does not allow the operator's
	// trainer gets its own image: here an engine that is not there, so a clear
	// refusal (the bid's skip reason) rather than the operator's program.
	cfg.Container, cfg.DockerHost = true, "unix:///nonexistent/docker.sock"
	cfg.PullTimeout = config.Duration{Duration: 5 * time.Second}
	rs, err = newRuntimes(cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	job.Spec.Workload.AllowOperatorTrainer = false
	if rt, err := rs.forJob(context.Background(), job); err == nil || rt != nil {
		t.Fatalf("the operator's trainer served a job that did not allow it: %v", rt)
	} else if errors.Is(err, runtime.ErrImageMismatch) {
		t.Logf("refused: %v", err)
	}
}
