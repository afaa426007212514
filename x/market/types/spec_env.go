package types

import (
	"regexp"
	"slices"
	"strings"

	errorsmod "cosmossdk.io/errors"
)

// The job spec's fields for real GPU hosts (issue 16): where a job may run
// (regions), what environment its container gets (workload.env) and whether
// an operator-installed trainer may serve it (workload.allow_operator_trainer).
// Kept apart from spec.go and specfile.go so the two evolve independently.

// Limits of the host fields.
const (
	MaxRegions        = 16
	MaxRegionLength   = 64 // x/stakingext's provider region bound
	MaxEnvVars        = 64
	MaxEnvNameLength  = 128
	MaxEnvValueLength = 4096
	// MaxEnvBytes bounds all names and values together.
	MaxEnvBytes = 32 * 1024
)

// Runtimes a bid names and a lease records.
const (
	RuntimeReference = "reference"
	RuntimeContainer = "container"
	// RuntimeProcess is an operator-installed trainer run as a local process.
	RuntimeProcess = "process"
	// RuntimeExactTorch is the exact transformer's PyTorch trainer (pkg/exact/torch), bit
	// for bit the Go trainer's twin, for the adjudicable kinds.
	RuntimeExactTorch = "exact-torch"
)

var envNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// ReservedEnvName reports why the trainer contract owns an environment variable
// name (the sidecar sets DEPIN_* and CUDA_VISIBLE_DEVICES), or "" when a job may set it.
func ReservedEnvName(name string) string {
	switch {
	case strings.HasPrefix(name, "DEPIN_"):
		return "names starting with DEPIN_ belong to the trainer contract (the sidecar sets them)"
	case name == "CUDA_VISIBLE_DEVICES":
		return "the sidecar sets CUDA_VISIBLE_DEVICES to the leased GPUs"
	}
	return ""
}

// applyHostFields copies this file's YAML fields (decoded into JobSpecFile and
// WorkloadFile) into spec, with workload.env sorted by name.
func (f JobSpecFile) applyHostFields(spec *JobSpec) {
	spec.Regions = f.Regions
	if f.Workload == nil {
		return
	}
	names := make([]string, 0, len(f.Workload.Env))
	for name := range f.Workload.Env {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		spec.Workload.Env = append(spec.Workload.Env, EnvVar{Name: name, Value: f.Workload.Env[name]})
	}
	spec.Workload.AllowOperatorTrainer = f.Workload.AllowOperatorTrainer
}

// validateHostFields checks regions, workload.env and
// workload.allow_operator_trainer; errors name the field as a job owner writes it.
func (s JobSpec) validateHostFields() error {
	fail := func(format string, args ...any) error {
		return errorsmod.Wrapf(ErrInvalidSpec, format, args...)
	}
	if len(s.Regions) > MaxRegions {
		return fail("regions: at most %d regions, got %d", MaxRegions, len(s.Regions))
	}
	for i, r := range s.Regions {
		if strings.TrimSpace(r) != r || r == "" || len(r) > MaxRegionLength {
			return fail("regions[%d]: must be a region name like us-west of 1 to %d characters without surrounding spaces, got %q", i, MaxRegionLength, r)
		}
		if slices.Contains(s.Regions[:i], r) {
			return fail("regions[%d]: %q is listed twice", i, r)
		}
	}
	w := s.Workload
	if len(w.Env) > 0 && w.Kind != WORKLOAD_KIND_CONTAINER {
		return fail("workload.env: only for kind container")
	}
	if w.AllowOperatorTrainer && w.Kind != WORKLOAD_KIND_CONTAINER {
		return fail("workload.allow_operator_trainer: only for kind container")
	}
	if len(w.Env) > MaxEnvVars {
		return fail("workload.env: at most %d variables, got %d", MaxEnvVars, len(w.Env))
	}
	total := 0
	for i, v := range w.Env {
		field := "workload.env." + v.Name
		switch {
		case v.Name == "" || len(v.Name) > MaxEnvNameLength || !envNamePattern.MatchString(v.Name):
			return fail("workload.env: %q is not a variable name ([A-Z_][A-Z0-9_]*, at most %d characters)", v.Name, MaxEnvNameLength)
		case ReservedEnvName(v.Name) != "":
			return fail("%s: not allowed: %s", field, ReservedEnvName(v.Name))
		case i > 0 && w.Env[i-1].Name >= v.Name:
			return fail("%s: variables must be sorted by name and listed once", field)
		case len(v.Value) > MaxEnvValueLength:
			return fail("%s: value longer than %d bytes (%d)", field, MaxEnvValueLength, len(v.Value))
		case strings.ContainsRune(v.Value, 0):
			return fail("%s: value contains a NUL byte", field)
		}
		total += len(v.Name) + len(v.Value)
	}
	if total > MaxEnvBytes {
		return fail("workload.env: %d bytes of names and values, at most %d", total, MaxEnvBytes)
	}
	return nil
}

// AcceptsRegion reports whether a provider registered in region may serve the job.
func (s JobSpec) AcceptsRegion(region string) bool {
	return len(s.Regions) == 0 || slices.Contains(s.Regions, region)
}

// AcceptsRuntime says why a bid naming runtime may not serve the job, or "" when it may.
// A container job runs the owner's image ("container"); an operator-installed trainer
// ("process") only when the workload allows it. Other kinds accept any known runtime but
// the container one; the exact PyTorch trainer ("exact-torch") serves the adjudicable kinds.
func (s JobSpec) AcceptsRuntime(runtime string) string {
	switch runtime {
	case RuntimeReference, RuntimeContainer, RuntimeProcess, RuntimeExactTorch:
	default:
		return `runtime must be "reference", "exact-torch", "container" or "process", got "` + runtime + `"`
	}
	if runtime == RuntimeExactTorch && !s.Workload.Kind.Adjudicable() {
		return "the exact PyTorch trainer (runtime exact-torch) serves only reference and transformer workloads"
	}
	if s.Workload.Kind != WORKLOAD_KIND_CONTAINER {
		if runtime == RuntimeContainer {
			return "a container runtime cannot serve a " + strings.ToLower(strings.TrimPrefix(s.Workload.Kind.String(), "WORKLOAD_KIND_")) + " workload"
		}
		return ""
	}
	switch {
	case runtime == RuntimeContainer:
		return ""
	case runtime == RuntimeProcess && s.Workload.AllowOperatorTrainer:
		return ""
	case runtime == RuntimeProcess:
		return "the owner chose an image: an operator-installed trainer (runtime process) may serve it only with workload.allow_operator_trainer: true"
	}
	return "a container job runs the owner's image: runtime must be container"
}
