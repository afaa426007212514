package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// Errors of the container runtime.
var (
	// ErrNoEngine: no container engine answers at the configured address.
	ErrNoEngine = errors.New("runtime container: no container engine reachable")
	// ErrImageMismatch: no local image has the job's pinned digest.
	ErrImageMismatch = errors.New("runtime container: no local image matches the job's digest")
)

// Where the contract's directories appear inside the container.
const (
	containerOutputDir = "/depin/output"
	containerDataDir   = "/depin/data"
	containerResumeDir = "/depin/resume"
)

// Labels put on every container, so an operator (or a restarted sidecar)
// can tell which lease a container serves.
const (
	LabelLease = "depinchain.lease"
	LabelJob   = "depinchain.job"
)

// defaultStopGrace is how long Stop lets a container shut down when its
// context carries no deadline.
const defaultStopGrace = 10 * time.Second

// ContainerOptions configures the container runtime.
type ContainerOptions struct {
	// Host is the Engine's address (e.g. unix:///var/run/docker.sock);
	// empty means DOCKER_HOST or the platform default.
	Host string
	// Network is the containers' network mode; empty means "none": a
	// trainer gets its data through DataDir and needs no network (GPUs of
	// one worker talk over NVLink/shared memory inside the container).
	Network string
	// Pull fetches workload.image@digest from its registry when no local
	// image matches (EnsureImage).
	Pull bool
	// Credentials are registry logins by registry host ("ghcr.io",
	// "127.0.0.1:5000", "docker.io"); a registry not listed gets the login
	// from Docker's config.json (auths, credential helpers), if any.
	Credentials map[string]RegistryCredential
	// DockerConfig is Docker's config.json; empty: $DOCKER_CONFIG/config.json
	// or ~/.docker/config.json.
	DockerConfig string
	// MaxPulledImages bounds how many pulled images are kept (0:
	// DefaultMaxPulledImages); CacheFile records them across restarts
	// ("" keeps the record in memory).
	MaxPulledImages int
	CacheFile       string
	// DefaultShm is /dev/shm for a job whose spec sets no memory (0:
	// DefaultShmBytes); with resources.memory it is half of the memory.
	DefaultShm int64
	// Ulimits of every container; nil means PyTorchUlimits. A Docker daemon
	// without CAP_SYS_RESOURCE (rootless, or itself in a container) cannot
	// raise memlock above its own hard limit; there StackUlimitOnly works.
	Ulimits []*container.Ulimit
}

// PyTorchUlimits are NVIDIA's settings for PyTorch containers: unlimited
// locked memory (pinned host buffers for CUDA copies and NCCL) and 64 MiB
// stacks.
func PyTorchUlimits() []*container.Ulimit {
	return []*container.Ulimit{
		{Name: "memlock", Soft: -1, Hard: -1},
		{Name: "stack", Soft: stackBytes, Hard: stackBytes},
	}
}

// StackUlimitOnly is PyTorchUlimits without memlock, for daemons that
// cannot raise it (runtimes.memlock_unlimited = false).
func StackUlimitOnly() []*container.Ulimit {
	return []*container.Ulimit{{Name: "stack", Soft: stackBytes, Hard: stackBytes}}
}

// Container setup for PyTorch, as NVIDIA recommends for its PyTorch
// containers (--shm-size, --ulimit memlock=-1 --ulimit stack=67108864).
const (
	DefaultShmBytes = 8 << 30
	stackBytes      = 64 << 20
)

// Container runs a job's container image through the Docker Engine API.
//
// # Matching the job's digest to a local image
//
// The job pins its image as workload.digest = "sha256:<64 hex>" and a
// container starts only from an image that digest names exactly, so what
// runs is the code the job owner chose, whatever tag points where. As this
// runtime never pulls, an image is local (built or `docker load`ed by the
// operator), and it matches when either
//
//   - its image ID, the SHA-256 of its configuration, which `docker build`,
//     `docker load` and `docker images --no-trunc` show, equals the digest;
//     or
//   - it was pulled from a registry as workload.image@digest, so its
//     RepoDigests list that manifest digest.
//
// Both are content addresses. The container is created from the matching
// image's ID, never from a tag.
//
// # What the container gets
//
// The contract's environment with the container's paths: OutputDir
// bind-mounted read-write at /depin/output, DataDir read-only at
// /depin/data, a resume checkpoint read-only at /depin/resume/step-<N>.
// The leased GPUs, by UUID, as an nvidia device request (only when GPUs are
// leased) and in CUDA_VISIBLE_DEVICES. Limits from the spec's resources:
// NanoCPUs from cpu_millis and Memory from memory_mib. The spec has no
// shared-memory field, so /dev/shm gets half the memory limit: PyTorch data
// loader workers pass batches through it and Docker's 64 MiB default is too
// small, and tmpfs pages count against the memory limit anyway. The
// container runs as the sidecar's user and group, so its output belongs to
// the sidecar, with every capability dropped, no-new-privileges, an init
// process that forwards signals and reaps zombies, and no network unless
// configured.
type Container struct {
	client       *client.Client
	host         string
	network      string
	pull         bool
	credentials  map[string]RegistryCredential
	dockerConfig string
	maxPulled    int
	defaultShm   int64
	ulimits      []*container.Ulimit
	cache        *imageCache
	pullMu       sync.Mutex
}

// NewContainer returns a container runtime for the Engine opts names. It
// does not contact the Engine; Start does, and fails with ErrNoEngine when
// none answers. The API version is negotiated with the Engine on first use.
func NewContainer(opts ContainerOptions) (*Container, error) {
	clientOpts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		clientOpts = append(clientOpts, client.WithHost(opts.Host))
	}
	c, err := client.New(clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("runtime container: %w", err)
	}
	network := opts.Network
	if network == "" {
		network = "none"
	}
	rt := &Container{client: c, host: c.DaemonHost(), network: network, pull: opts.Pull,
		credentials: opts.Credentials, dockerConfig: opts.DockerConfig, maxPulled: opts.MaxPulledImages,
		defaultShm: opts.DefaultShm, ulimits: opts.Ulimits, cache: loadImageCache(opts.CacheFile)}
	if rt.ulimits == nil {
		rt.ulimits = PyTorchUlimits()
	}
	if rt.maxPulled <= 0 {
		rt.maxPulled = DefaultMaxPulledImages
	}
	if rt.defaultShm <= 0 {
		rt.defaultShm = DefaultShmBytes
	}
	return rt, nil
}

// Close releases the Engine client.
func (c *Container) Close() error { return c.client.Close() }

// Name implements Runtime.
func (*Container) Name() string { return "container" }

// Ping checks that the Engine answers, negotiating the API version.
func (c *Container) Ping(ctx context.Context) error {
	if _, err := c.client.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("%w at %s: %w", ErrNoEngine, c.host, err)
	}
	return nil
}

// ResolveImage returns the ID of the local image matching the job's image
// and digest (see Container), or an error wrapping ErrImageMismatch.
func (c *Container) ResolveImage(ctx context.Context, image, digest string) (string, error) {
	byID, err := c.client.ImageInspect(ctx, digest)
	switch {
	case err == nil && byID.ID == digest:
		return byID.ID, nil
	case err != nil && !cerrdefs.IsNotFound(err):
		return "", fmt.Errorf("runtime container: inspecting image %s: %w", digest, err)
	}
	byRepoDigest, err := c.client.ImageInspect(ctx, image+"@"+digest)
	switch {
	case err == nil && slices.Contains(byRepoDigest.RepoDigests, repository(image)+"@"+digest):
		return byRepoDigest.ID, nil
	case err != nil && !cerrdefs.IsNotFound(err):
		return "", fmt.Errorf("runtime container: inspecting image %s@%s: %w", image, digest, err)
	}
	// Say what is there instead, which is what an operator needs to know.
	byName, err := c.client.ImageInspect(ctx, image)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not present locally; pull %s@%s (runtimes.pull), or build or `docker load` the image whose ID is %s", ErrImageMismatch, image, repository(image), digest, digest)
	}
	return "", fmt.Errorf("%w: local %s is %s (repo digests %v), the job pins %s", ErrImageMismatch, image, byName.ID, byName.RepoDigests, digest)
}

// repository strips the tag from an image reference: the repository part
// of "registry:5000/team/trainer:v1" is "registry:5000/team/trainer".
func repository(image string) string {
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		return image[:i]
	}
	return image
}

// Start implements Runtime.
func (c *Container) Start(ctx context.Context, job Job) (Handle, error) {
	workload := job.Market.Spec.Workload
	if workload.Kind != markettypes.WORKLOAD_KIND_CONTAINER {
		return nil, fmt.Errorf("runtime container: job %d is a %s workload", job.Market.Id, workload.Kind)
	}
	if err := c.Ping(ctx); err != nil {
		return nil, err
	}
	env, err := prepare(job)
	if err != nil {
		return nil, err
	}
	imageID, err := c.EnsureImage(ctx, workload.Image, workload.Digest)
	if err != nil {
		return nil, err
	}
	config, hostConfig := c.containerConfig(job, env, imageID)
	c.cache.use(imageID, 1)
	started := false
	defer func() {
		if !started {
			c.cache.use(imageID, -1)
		}
	}()
	created, err := c.client.ContainerCreate(ctx, client.ContainerCreateOptions{Config: config, HostConfig: hostConfig})
	if err != nil {
		return nil, fmt.Errorf("runtime container: creating the container of lease %d: %w", job.LeaseID, err)
	}
	id := created.ID
	if _, err := c.client.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		c.remove(id)
		if strings.Contains(err.Error(), "setting rlimit") {
			return nil, fmt.Errorf("runtime container: starting the container of lease %d: the Docker daemon cannot set the containers' ulimits %v "+
				"(a daemon without CAP_SYS_RESOURCE cannot raise memlock; run it as root, or set runtimes.memlock_unlimited = false): %w", job.LeaseID, c.ulimits, err)
		}
		return nil, fmt.Errorf("runtime container: starting the container of lease %d: %w", job.LeaseID, err)
	}
	started = true
	h := &containerHandle{run: newRun(), runtime: c, id: id, imageID: imageID, stopped: make(chan struct{})}
	go h.supervise(job, env)
	return h, nil
}

// containerConfig builds the container of job from image imageID; see
// Container for what it gets.
func (c *Container) containerConfig(job Job, env trainer.Env, imageID string) (*container.Config, *container.HostConfig) {
	inside := env
	inside.OutputDir, inside.DataDir = containerOutputDir, containerDataDir
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: env.OutputDir, Target: containerOutputDir},
		{Type: mount.TypeBind, Source: env.DataDir, Target: containerDataDir, ReadOnly: true},
	}
	if env.ResumeFrom != "" {
		inside.ResumeFrom = path.Join(containerResumeDir, trainer.CheckpointDirPrefix+strconv.FormatUint(env.StartStep, 10))
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: env.ResumeFrom, Target: inside.ResumeFrom, ReadOnly: true})
	}
	environ := inside.Environ()
	for _, v := range job.Market.Spec.Workload.Env {
		// The chain refuses reserved names; a stored spec from before is checked again.
		if markettypes.ReservedEnvName(v.Name) == "" {
			environ = append(environ, v.Name+"="+v.Value)
		}
	}
	config := &container.Config{
		Image: imageID,
		Cmd:   job.Market.Spec.Workload.Command, // empty keeps the image's own
		Env:   environ,
		User:  fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		Labels: map[string]string{
			LabelLease: strconv.FormatUint(job.LeaseID, 10),
			LabelJob:   strconv.FormatUint(job.Market.Id, 10),
		},
	}
	resources := job.Market.Spec.Resources
	memory := int64(resources.MemoryMib) << 20
	shm := c.defaultShm
	if memory > 0 {
		shm = memory / 2
	}
	initProcess := true
	hostConfig := &container.HostConfig{
		Mounts:      mounts,
		NetworkMode: container.NetworkMode(c.network),
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		Init:        &initProcess,
		ShmSize:     shm,
		Resources: container.Resources{
			NanoCPUs: int64(resources.CpuMillis) * 1_000_000,
			Memory:   memory,
			Ulimits:  c.ulimits,
		},
	}
	if len(job.GPUs) > 0 {
		hostConfig.DeviceRequests = []container.DeviceRequest{{
			Driver:       "nvidia",
			DeviceIDs:    job.GPUs,
			Capabilities: [][]string{{"gpu"}},
		}}
	}
	return config, hostConfig
}

// remove deletes container id, which has ended or must be abandoned. A
// failure leaves a stopped container an operator can find by its labels.
func (c *Container) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = c.client.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
}

type containerHandle struct {
	*run
	runtime *Container
	id      string
	imageID string
	// stopped is closed by the first Stop.
	stopped  chan struct{}
	stopOnce sync.Once
}

// supervise copies the container's output to the log files while it runs,
// then removes the container and ends the run with its outcome.
func (h *containerHandle) supervise(job Job, env trainer.Env) {
	err := h.outcome(job, env)
	h.runtime.remove(h.id)
	h.runtime.cache.use(h.imageID, -1)
	h.runtime.cache.touch(h.imageID)
	h.finish(err)
}

// outcome waits for the container to end and judges the run.
func (h *containerHandle) outcome(job Job, env trainer.Env) error {
	ctx := context.Background()
	logsCopied := make(chan error, 1)
	go func() { logsCopied <- h.copyLogs(ctx, job.LogDir) }()

	wait := h.runtime.client.ContainerWait(ctx, h.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var exit trainer.Exit
	select {
	case result := <-wait.Result:
		exit.Code = int(result.StatusCode)
		if result.Error != nil && result.Error.Message != "" {
			exit.Signal = result.Error.Message
		}
	case err := <-wait.Error:
		return fmt.Errorf("runtime container: waiting for the container of lease %d: %w", job.LeaseID, err)
	}
	// The log stream ends with the container; its error only means the
	// log files miss some output, which the outcome does not depend on.
	<-logsCopied
	if inspect, err := h.runtime.client.ContainerInspect(ctx, h.id, client.ContainerInspectOptions{}); err == nil &&
		inspect.Container.State != nil && inspect.Container.State.OOMKilled {
		exit.Code, exit.Signal = -1, "KILL (out of memory: the spec's memory limit was reached)"
	}
	exit.StderrTail = logTail(filepath.Join(job.LogDir, StderrLogName))
	err := trainer.CheckRun(env, exit)
	select {
	case <-h.stopped:
		if err != nil {
			err = fmt.Errorf("%w: container of lease %d (%s)", ErrStopped, job.LeaseID, exit)
		}
	default:
	}
	return err
}

// copyLogs appends the container's stdout and stderr to the log files
// until the container ends.
func (h *containerHandle) copyLogs(ctx context.Context, logDir string) error {
	stdout, stderr, err := openLogs(logDir)
	if err != nil {
		return err
	}
	defer stdout.Close()
	defer stderr.Close()
	logs, err := h.runtime.client.ContainerLogs(ctx, h.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return err
	}
	defer logs.Close()
	_, err = stdcopy.StdCopy(stdout, stderr, logs)
	return err
}

// Stop implements Handle: the Engine sends SIGTERM and, after the grace
// period ctx's deadline leaves (10 s without one), SIGKILL.
func (h *containerHandle) Stop(ctx context.Context) error {
	select {
	case <-h.done:
		return nil
	default:
	}
	h.stopOnce.Do(func() { close(h.stopped) })
	grace := defaultStopGrace
	if deadline, ok := ctx.Deadline(); ok {
		grace = time.Until(deadline)
	}
	// A second less, so the Engine's SIGKILL comes before ctx cancels
	// the request.
	seconds := max(0, int(grace/time.Second)-1)
	if _, err := h.runtime.client.ContainerStop(ctx, h.id, client.ContainerStopOptions{Timeout: &seconds}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("runtime container: stopping container %s: %w", h.id, err)
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
