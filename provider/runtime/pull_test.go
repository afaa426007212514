package runtime_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/depinchain/depinchain/provider/runtime"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

const registryUser, registryPassword = "depin", "s3cret-pass"

// startRegistry serves an in-memory OCI registry on 127.0.0.1 that wants
// basic-auth credentials, and returns its host:port. Docker treats registries
// on 127.0.0.0/8 as insecure, so it talks plain HTTP to it.
func startRegistry(t *testing.T) string {
	t.Helper()
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != registryUser || pass != registryPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="depinchain-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func authHeader(t *testing.T, host string) string {
	raw, err := json.Marshal(registry.AuthConfig{Username: registryUser, Password: registryPassword, ServerAddress: host})
	if err != nil {
		t.Fatal(err)
	}
	return base64.URLEncoding.EncodeToString(raw)
}

// pushImage builds a FROM scratch trainer image, pushes it to the registry at
// host as name:v1, removes every local copy, and returns the reference
// (without tag), the manifest digest the registry holds and the image ID.
func pushImage(t *testing.T, engine *client.Client, host, name string, extra ...string) (repo, digest, imageID string) {
	t.Helper()
	tag, id := buildTrainerImage(t, engine, extra...)
	repo = host + "/" + name
	if _, err := engine.ImageTag(t.Context(), client.ImageTagOptions{Source: tag, Target: repo + ":v1"}); err != nil {
		t.Fatal(err)
	}
	push, err := engine.ImagePush(t.Context(), repo+":v1", client.ImagePushOptions{RegistryAuth: authHeader(t, host)})
	if err != nil {
		t.Fatal(err)
	}
	for msg, err := range push.JSONMessages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if msg.Error != nil {
			t.Fatalf("push: %s", msg.Error.Message)
		}
		if msg.Aux != nil {
			var aux struct{ Digest string }
			if json.Unmarshal(*msg.Aux, &aux) == nil && aux.Digest != "" {
				digest = aux.Digest
			}
		}
	}
	if digest == "" {
		t.Fatal("the push reported no digest")
	}
	removeImage(t, engine, id)
	return repo, digest, id
}

func removeImage(t *testing.T, engine *client.Client, id string) {
	t.Helper()
	if _, err := engine.ImageRemove(t.Context(), id, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ImageInspect(t.Context(), id); err == nil {
		t.Fatalf("image %s still present", id)
	}
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
	host := startRegistry(t)
	repo, digest, imageID := pushImage(t, engine, host, "acme/trainer")
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
		removeImage(t, engine, id)
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
		removeImage(t, engine, imageID)
	})

	t.Run("bounded cache evicts the least recently used", func(t *testing.T) {
		repo2, digest2, id2 := pushImage(t, engine, host, "acme/trainer2", "LABEL variant=2")
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
		removeImage(t, engine, id2)
	})
}
