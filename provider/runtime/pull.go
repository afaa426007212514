package runtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
)

// ErrPullFailed: the job's image@digest could not be pulled from its
// registry (no such image or digest, refused credentials, registry down).
var ErrPullFailed = errors.New("runtime container: pulling the job's image failed")

// RegistryCredential is a login for one registry.
type RegistryCredential struct {
	Username string
	Password string
}

// DefaultMaxPulledImages bounds the images the runtime pulled and keeps.
const DefaultMaxPulledImages = 8

// EnsureImage returns the ID of the local image the job pins (see Container),
// pulling workload.image@digest from its registry first when none is local and
// pulling is on. Docker verifies a by-digest pull against the digest; the
// image is then resolved as a local one, so only that exact content runs.
// Images it pulls are kept in a bounded cache: beyond MaxPulledImages, the
// least recently used ones no container uses are removed.
func (c *Container) EnsureImage(ctx context.Context, image, digest string) (string, error) {
	id, err := c.ResolveImage(ctx, image, digest)
	if err == nil {
		c.cache.touch(id)
		return id, nil
	}
	if !errors.Is(err, ErrImageMismatch) || !c.pull {
		return "", err
	}
	// One pull at a time: two bids for the same image pull it once.
	c.pullMu.Lock()
	defer c.pullMu.Unlock()
	if id, err := c.ResolveImage(ctx, image, digest); err == nil {
		c.cache.touch(id)
		return id, nil
	}
	ref := repository(image) + "@" + digest
	if err := c.pullImage(ctx, ref); err != nil {
		return "", err
	}
	id, err = c.ResolveImage(ctx, image, digest)
	if err != nil {
		return "", fmt.Errorf("%w: pulled %s but %w", ErrPullFailed, ref, err)
	}
	c.cache.pulled(id)
	c.evict(ctx)
	return id, nil
}

func (c *Container) pullImage(ctx context.Context, ref string) error {
	host := registryHost(ref)
	auth, err := c.registryAuth(host)
	if err != nil {
		return fmt.Errorf("%w: %s: credentials for %s: %w", ErrPullFailed, ref, host, err)
	}
	resp, err := c.client.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: auth})
	if err == nil {
		err = resp.Wait(ctx)
		resp.Close()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %s: %w", ErrPullFailed, ref, explainPull(err, host, auth != ""), err)
	}
	return nil
}

// explainPull says in an operator's terms why a pull failed.
func explainPull(err error, host string, withCredentials bool) string {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "unauthorized") || strings.Contains(msg, "authentication required") ||
		strings.Contains(msg, "no basic auth credentials") || strings.Contains(msg, "denied"):
		if withCredentials {
			return "the registry " + host + " refused the credentials (runtimes.registries or Docker's config.json)"
		}
		return "the registry " + host + " wants credentials and none are configured (runtimes.registries, or `docker login " + host + "`)"
	case strings.Contains(msg, "manifest unknown") || strings.Contains(msg, "not found") || strings.Contains(msg, "name unknown"):
		return "the registry " + host + " has no image with this digest"
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "timeout"):
		return "the registry " + host + " cannot be reached"
	}
	return "the registry " + host + " did not serve it"
}

// registryHost is the registry a reference names, as Docker reads it: the
// first path component when it looks like a host (has a dot or a port, or is
// localhost), else Docker Hub.
func registryHost(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return first
	}
	return "docker.io"
}

// registryAuth is the X-Registry-Auth value for host: from the operator's
// configured credentials, else Docker's config.json (its "auths" entries and
// credential helpers), else "" (anonymous).
func (c *Container) registryAuth(host string) (string, error) {
	cred, ok := c.credentials[host]
	if !ok {
		var err error
		if cred, ok, err = dockerConfigCredential(c.dockerConfig, host); err != nil {
			return "", err
		}
	}
	if !ok {
		return "", nil
	}
	// X-Registry-Auth is the AuthConfig as base64url JSON.
	raw, err := json.Marshal(registry.AuthConfig{Username: cred.Username, Password: cred.Password, ServerAddress: host})
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(raw), nil
}

// dockerConfigCredential reads host's login from Docker's config.json at path
// (empty: $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
func dockerConfigCredential(path, host string) (RegistryCredential, bool, error) {
	if path == "" {
		dir := os.Getenv("DOCKER_CONFIG")
		if dir == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return RegistryCredential{}, false, nil
			}
			dir = filepath.Join(home, ".docker")
		}
		path = filepath.Join(dir, "config.json")
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return RegistryCredential{}, false, nil
	} else if err != nil {
		return RegistryCredential{}, false, err
	}
	var cfg struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auths"`
		CredsStore  string            `json:"credsStore"`
		CredHelpers map[string]string `json:"credHelpers"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return RegistryCredential{}, false, fmt.Errorf("%s: %w", path, err)
	}
	keys := []string{host, "https://" + host, "http://" + host}
	if host == "docker.io" {
		keys = append(keys, "https://index.docker.io/v1/", "index.docker.io")
	}
	if helper := cmpOr(cfg.CredHelpers[host], cfg.CredsStore); helper != "" {
		if cred, ok, err := credentialHelper(helper, host); err != nil || ok {
			return cred, ok, err
		}
	}
	for _, k := range keys {
		a, ok := cfg.Auths[k]
		if !ok {
			continue
		}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return RegistryCredential{}, false, fmt.Errorf("%s: auths[%q].auth is not base64", path, k)
			}
			user, pass, _ := strings.Cut(string(dec), ":")
			return RegistryCredential{Username: user, Password: pass}, true, nil
		}
		if a.Username != "" {
			return RegistryCredential{Username: a.Username, Password: a.Password}, true, nil
		}
	}
	return RegistryCredential{}, false, nil
}

// credentialHelper asks docker-credential-<helper> for host's login, as the
// Docker CLI does.
func credentialHelper(helper, host string) (RegistryCredential, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker-credential-"+helper, "get")
	cmd.Stdin = strings.NewReader(host)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return RegistryCredential{}, false, fmt.Errorf("Docker's config.json names credential helper %q but docker-credential-%s is not installed", helper, helper)
		}
		return RegistryCredential{}, false, nil // "credentials not found in native keychain"
	}
	var out struct{ Username, Secret string }
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return RegistryCredential{}, false, fmt.Errorf("docker-credential-%s: %w", helper, err)
	}
	return RegistryCredential{Username: out.Username, Password: out.Secret}, true, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// imageCache remembers the images the runtime pulled, when each was last
// used and which running containers use them, in a JSON file so a restarted
// sidecar still evicts what it pulled (and never an operator's own image).
type imageCache struct {
	mu   sync.Mutex
	path string // "" keeps it in memory only
	// LastUsed maps the ID of every image the runtime pulled to its last use.
	LastUsed map[string]time.Time `json:"last_used"`
	inUse    map[string]int
}

func loadImageCache(path string) *imageCache {
	c := &imageCache{path: path, LastUsed: map[string]time.Time{}, inUse: map[string]int{}}
	if path != "" {
		if raw, err := os.ReadFile(path); err == nil {
			_ = json.Unmarshal(raw, c)
		}
		if c.LastUsed == nil {
			c.LastUsed = map[string]time.Time{}
		}
	}
	return c
}

func (c *imageCache) saveLocked() {
	if c.path == "" {
		return
	}
	raw, err := json.Marshal(c)
	if err == nil {
		_ = os.MkdirAll(filepath.Dir(c.path), 0o755)
		_ = os.WriteFile(c.path, raw, 0o644)
	}
}

// touch records a use of image id if the runtime pulled it.
func (c *imageCache) touch(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.LastUsed[id]; ok {
		c.LastUsed[id] = time.Now()
		c.saveLocked()
	}
}

func (c *imageCache) pulled(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.LastUsed[id] = time.Now()
	c.saveLocked()
}

func (c *imageCache) use(id string, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inUse[id] += delta
	if c.inUse[id] <= 0 {
		delete(c.inUse, id)
	}
}

// victims are the pulled images beyond max, least recently used first,
// leaving out images a running container uses.
func (c *imageCache) victims(max int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.LastUsed))
	for id := range c.LastUsed {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return c.LastUsed[a].Compare(c.LastUsed[b]) })
	var out []string
	for i := 0; len(ids)-i > max && i < len(ids); i++ {
		if c.inUse[ids[i]] == 0 {
			out = append(out, ids[i])
		}
	}
	return out
}

func (c *imageCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.LastUsed, id)
	c.saveLocked()
}

// PulledImages lists the IDs of the images the runtime pulled and keeps.
func (c *Container) PulledImages() []string {
	c.cache.mu.Lock()
	defer c.cache.mu.Unlock()
	ids := make([]string, 0, len(c.cache.LastUsed))
	for id := range c.cache.LastUsed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// evict removes the least recently used pulled images beyond the bound.
func (c *Container) evict(ctx context.Context) {
	for _, id := range c.cache.victims(c.maxPulled) {
		_, err := c.client.ImageRemove(ctx, id, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			c.cache.forget(id)
		}
	}
}
