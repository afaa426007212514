package leases

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/runtime"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// runtimes are the ways this provider can run a job, as configured.
type runtimes struct {
	reference *runtime.Reference
	// exactTorch, when the operator set runtimes.exact_torch, trains the
	// jobs reference would (see exactTrainer).
	exactTorch *runtime.ExactTorch
	// process maps a container workload's image digest to the trainer the
	// operator installed for it.
	process   map[string]*runtime.Process
	container *runtime.Container
	// pullTimeout bounds fetching a container job's image.
	pullTimeout time.Duration
}

func newRuntimes(cfg config.Runtimes, cacheDir string, progress func(runtime.Progress)) (runtimes, error) {
	var r runtimes
	if cfg.Reference {
		r.reference = &runtime.Reference{Progress: progress}
	}
	var err error
	if r.exactTorch, err = newExactTorch(cfg); err != nil {
		return r, err
	}
	if cfg.Process {
		r.process = map[string]*runtime.Process{}
		for _, t := range cfg.Trainers {
			r.process[t.Digest] = &runtime.Process{Command: t.Command, Env: t.Env}
		}
	}
	if cfg.Container {
		opts := runtime.ContainerOptions{Host: cfg.DockerHost, Pull: cfg.Pull, DockerConfig: cfg.DockerConfig,
			MaxPulledImages: cfg.ImageCacheImages, Credentials: map[string]runtime.RegistryCredential{}}
		for _, reg := range cfg.Registries {
			opts.Credentials[reg.Host] = runtime.RegistryCredential{Username: reg.Username, Password: reg.Password}
		}
		if !cfg.MemlockUnlimited {
			opts.Ulimits = runtime.StackUlimitOnly()
		}
		if cacheDir != "" {
			opts.CacheFile = filepath.Join(cacheDir, "pulled-images.json")
		}
		c, err := runtime.NewContainer(opts)
		if err != nil {
			return r, fmt.Errorf("runtimes.container: %w", err)
		}
		r.container = c
	}
	r.pullTimeout = cfg.PullTimeout.Duration
	if r.pullTimeout <= 0 {
		r.pullTimeout = 10 * time.Minute
	}
	return r, nil
}

func (r runtimes) names() []string {
	var names []string
	// exact-torch takes every job reference would.
	if r.exactTorch != nil {
		names = append(names, r.exactTorch.Name())
	} else if r.reference != nil {
		names = append(names, r.reference.Name())
	}
	if r.process != nil {
		names = append(names, fmt.Sprintf("process (%d trainers)", len(r.process)))
	}
	if r.container != nil {
		names = append(names, r.container.Name())
	}
	return names
}

// forJob picks the runtime that serves job, or says why none can: an exact
// workload (kinds reference and transformer) runs on the Go trainer in process
// or on the PyTorch trainer the operator configured; a container workload runs
// its own image, pulled by digest when the Engine does not hold it, and runs on
// a trainer the operator mapped to its digest only when the owner allowed that
// (workload.allow_operator_trainer). The runtime's name goes into the bid and
// the chain records it on the lease.
func (r runtimes) forJob(ctx context.Context, job markettypes.Job) (runtime.Runtime, error) {
	if job.Spec.Sync != nil {
		return r.roundTrainer(job)
	}
	w := job.Spec.Workload
	switch w.Kind {
	case markettypes.WORKLOAD_KIND_REFERENCE, markettypes.WORKLOAD_KIND_TRANSFORMER:
		return r.exactTrainer(w.Kind)
	case markettypes.WORKLOAD_KIND_CONTAINER:
		if p, ok := r.process[w.Digest]; ok && w.AllowOperatorTrainer {
			return p, nil
		}
		if r.container == nil {
			if _, ok := r.process[w.Digest]; ok {
				return nil, fmt.Errorf("the owner chose image %s@%s and did not allow an operator trainer (workload.allow_operator_trainer), and the container runtime is off", w.Image, w.Digest)
			}
			return nil, fmt.Errorf("no trainer is mapped to image %s@%s and the container runtime is off", w.Image, w.Digest)
		}
		ctx, cancel := context.WithTimeout(ctx, r.pullTimeout)
		defer cancel()
		if _, err := r.container.EnsureImage(ctx, w.Image, w.Digest); err != nil {
			return nil, err
		}
		return r.container, nil
	default:
		return nil, fmt.Errorf("workload kind %s is not supported", w.Kind)
	}
}

func (r runtimes) close() error {
	if r.container != nil {
		return r.container.Close()
	}
	return nil
}
