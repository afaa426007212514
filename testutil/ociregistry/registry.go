// Package ociregistry runs a real OCI registry on 127.0.0.1 for tests, with
// basic-auth credentials, and pushes images built on the local Docker Engine
// to it. The registry keeps what is pushed in memory and records every request
// so a test can see what a client fetched (a manifest by digest, say).
package ociregistry

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

// The credentials the registry wants.
const (
	Username = "depin"
	Password = "s3cret-pass"
)

// Registry is an in-memory OCI registry serving on 127.0.0.1.
type Registry struct {
	// Host is its host:port. Docker treats registries on 127.0.0.0/8 as
	// insecure, so it talks plain HTTP to it.
	Host string

	mu       sync.Mutex
	requests []string
}

// Start serves a registry until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{}
	reg := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user, pass, ok := req.BasicAuth(); !ok || user != Username || pass != Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="depinchain-test"`)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return
		}
		r.mu.Lock()
		r.requests = append(r.requests, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		reg.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Requests lists the authenticated requests served so far, as
// "METHOD /path" (e.g. "GET /v2/acme/trainer/manifests/sha256:…").
func (r *Registry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// AuthHeader is the Engine API's X-Registry-Auth value for the registry's credentials.
func (r *Registry) AuthHeader(t testing.TB) string {
	t.Helper()
	raw, err := json.Marshal(registry.AuthConfig{Username: Username, Password: Password, ServerAddress: r.Host})
	if err != nil {
		t.Fatal(err)
	}
	return base64.URLEncoding.EncodeToString(raw)
}

// Push tags the local image source as Host/name:v1, pushes it and returns
// the repository (without tag) and the manifest digest the registry holds.
// The local copies stay; the caller removes them.
func (r *Registry) Push(t testing.TB, engine *client.Client, source, name string) (repo, digest string) {
	t.Helper()
	repo = r.Host + "/" + name
	if _, err := engine.ImageTag(t.Context(), client.ImageTagOptions{Source: source, Target: repo + ":v1"}); err != nil {
		t.Fatal(err)
	}
	push, err := engine.ImagePush(t.Context(), repo+":v1", client.ImagePushOptions{RegistryAuth: r.AuthHeader(t)})
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
	return repo, digest
}

// RemoveImage removes image id (every tag of it) from the engine and fails
// the test if it is still there.
func RemoveImage(t testing.TB, engine *client.Client, id string) {
	t.Helper()
	if _, err := engine.ImageRemove(t.Context(), id, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.ImageInspect(t.Context(), id); err == nil {
		t.Fatalf("image %s still present", id)
	}
}
