package runtime_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/testutil/ociregistry"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

const registryUser, registryPassword = ociregistry.Username, ociregistry.Password

// pushImage builds a FROM scratch trainer image, pushes it to reg as
// name:v1, removes every local copy, and returns the reference (without
// tag), the manifest digest the registry holds and the image ID.
func pushImage(t *testing.T, engine *client.Client, reg *ociregistry.Registry, name string, extra ...string) (repo, digest, imageID string) {
	t.Helper()
	tag, id := buildTrainerImage(t, engine, extra...)
	repo, digest = reg.Push(t, engine, tag, name)
	ociregistry.RemoveImage(t, engine, id)
	return repo, digest, id
}

// Images pinned by digest are pulled from a password-protected registry that
// the test runs on 127.0.0.1: wrong credentials, none, a wrong digest and a
// missing image are each refused with a reason an operator can act on; with
// the right credentials (from the operator's config or Docker's config.json)
// the image is pulled, checked, trained with, and kept in a bounded cache.
func TestContainerPullsByDigestFromARegistry(t *testing.T) {
	probe, err := runtime.NewContainer(runtime.ContainerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := probe.Ping(ctx); err != nil {
		t.Skipf("container runtime: no Docker engine reachable: %v", err)
	}
	engine, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	reg := ociregistry.Start(t)
	host := reg.Host
	repo, digest, imageID := pushImage(t, engine, reg, "acme/trainer")
	noDockerConfig := filepath.Join(t.TempDir(), "absent.json")
	newRuntime := func(t *testing.T, opts runtime.ContainerOptions) *runtime.Container {
		t.Helper()
		opts.Pull = true
		opts.Ulimits = buildMachineUlimits
		if opts.DockerConfig == "" {
			opts.DockerConfig = noDockerConfig
		}
		rt, err := runtime.NewContainer(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	ensure := func(rt *runtime.Container, image, digest string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		return rt.EnsureImage(ctx, image, digest)
	}

	for _, tc := range []struct {
		name, image, digest string
		creds               map[string]runtime.RegistryCredential
		want                string
	}{
		{"bad credentials", repo, digest, map[string]runtime.RegistryCredential{host: {Username: registryUser, Password: "wrong"}},
			"the registry " + host + " refused the credentials"},
		{"no credentials", repo, digest, nil, "the registry " + host + " wants credentials and none are configured"},
		{"wrong digest", repo, "sha256:" + strings.Repeat("0", 64), map[string]runtime.RegistryCredential{host: {Username: registryUser, Password: registryPassword}},
			"the registry " + host + " has no image with this digest"},
		{"missing image", host + "/acme/absent", digest, map[string]runtime.RegistryCredential{host: {Username: registryUser, Password: registryPassword}},
			"the registry " + host + " has no image with this digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t, runtime.ContainerOptions{Credentials: tc.creds})
			_, err := ensure(rt, tc.image, tc.digest)
			if !errors.Is(err, runtime.ErrPullFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EnsureImage: %v\nwant ErrPullFailed saying %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
			if _, err := engine.ImageInspect(t.Context(), imageID); err == nil {
				t.Fatal("an image arrived after a refused pull")
			}
		})
	}

	t.Run("operator credentials", func(t *testing.T) {
		rt := newRuntime(t, runtime.ContainerOptions{Credentials: map[string]runtime.RegistryCredential{host: {Username: registryUser, Password: registryPassword}}})
		id, err := ensure(rt, repo+":v1", digest)
		if err != nil {
			t.Fatal(err)
		}
		inspect, err := engine.ImageInspect(t.Context(), id)
		if err != nil || id != imageID || !slices.Contains(inspect.RepoDigests, repo+"@"+digest) {
			t.Fatalf("pulled %s (want %s), repo digests %v, %v", id, imageID, inspect.RepoDigests, err)
		}
		if got := rt.PulledImages(); !slices.Equal(got, []string{id}) {
			t.Fatalf("PulledImages = %v", got)
		}
		ociregistry.RemoveImage(t, engine, id)
	})

	t.Run("docker config.json, then trains", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "config.json")
		auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
		if err := os.WriteFile(cfg, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		rt := newRuntime(t, runtime.ContainerOptions{DockerConfig: cfg, CacheFile: filepath.Join(t.TempDir(), "pulled.json")})
		job := newJob(t, markettypes.WORKLOAD_KIND_CONTAINER, 9, 4)
		job.Market.Spec.Workload = markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER, Image: repo, Digest: digest}
		h, err := rt.Start(t.Context(), job)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
		checkCheckpoints(t, job, directTrace(t, 9))
		ociregistry.RemoveImage(t, engine, imageID)
	})

	t.Run("bounded cache evicts the least recently used", func(t *testing.T) {
		repo2, digest2, id2 := pushImage(t, engine, reg, "acme/trainer2", "LABEL variant=2")
		rt := newRuntime(t, runtime.ContainerOptions{MaxPulledImages: 1,
			Credentials: map[string]runtime.RegistryCredential{host: {Username: registryUser, Password: registryPassword}}})
		if _, err := ensure(rt, repo, digest); err != nil {
			t.Fatal(err)
		}
		if _, err := ensure(rt, repo2, digest2); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.ImageInspect(t.Context(), imageID); err == nil {
			t.Fatal("the least recently used pulled image was kept beyond the bound")
		}
		if got := rt.PulledImages(); !slices.Equal(got, []string{id2}) {
			t.Fatalf("PulledImages = %v, want [%s]", got, id2)
		}
		ociregistry.RemoveImage(t, engine, id2)
	})
}
