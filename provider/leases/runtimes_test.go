package leases

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

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

// A container job whose image cannot be pulled gets no runtime, so no bid, and
// the reason names the cause: the registry (a real one on 127.0.0.1, behind
// basic auth) refused the login, or has no image with the job's digest.
func TestPullFailureRefusesTheJob(t *testing.T) {
	cfg := config.Default().Runtimes
	cfg.Container, cfg.PullTimeout = true, config.Duration{Duration: time.Minute}
	rs, err := newRuntimes(cfg, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.container.Ping(t.Context()); err != nil {
		rs.close()
		t.Skipf("no Docker engine: %v", err)
	}
	rs.close()
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "bot" || p != "right" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	job := markettypes.Job{Id: 7, Spec: markettypes.JobSpec{Workload: markettypes.Workload{
		Kind: markettypes.WORKLOAD_KIND_CONTAINER, Image: host + "/acme/train", Digest: "sha256:" + strings.Repeat("cd", 32)}}}
	for password, want := range map[string]string{
		"wrong": "the registry " + host + " refused the credentials",
		"right": "the registry " + host + " has no image with this digest",
	} {
		cfg.Registries = []config.RegistryLogin{{Host: host, Username: "bot", Password: password}}
		cfg.DockerConfig = t.TempDir() + "/none.json"
		rs, err := newRuntimes(cfg, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		rt, err := rs.forJob(t.Context(), job)
		rs.close()
		if rt != nil || !errors.Is(err, runtime.ErrPullFailed) || !strings.Contains(err.Error(), want) {
			t.Fatalf("password %s: runtime %v, %v; want ErrPullFailed saying %q", password, rt, err, want)
		}
	}
}
