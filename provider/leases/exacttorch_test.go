package leases

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/rounds"
	"github.com/depinchain/depinchain/provider/runtime"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

func jobOfKind(t *testing.T, kind markettypes.WorkloadKind) markettypes.Job {
	t.Helper()
	w := markettypes.Workload{Kind: kind}
	if kind == markettypes.WORKLOAD_KIND_TRANSFORMER {
		w.Transformer = markettypes.NewTransformerConfig(exact.Config{
			Model: exact.ModelConfig{Layers: 1, DModel: 16, Heads: 1, DFF: 32, Context: 8, Vocab: 256},
			Train: exact.TrainConfig{Batch: 2, LR: 1e-2},
		}.WithDefaults())
	}
	if kind == markettypes.WORKLOAD_KIND_CONTAINER {
		w.Image, w.Digest = "trainer:1", "sha256:"+strings.Repeat("ab", 32)
	}
	return markettypes.Job{Id: 9, Spec: markettypes.JobSpec{Workload: w, TotalSteps: 8, CheckpointInterval: 4}}
}

// runtimes.exact_torch decides which trainer takes the exact workload's
// kinds (reference and transformer): the Go trainer in process by default,
// the configured PyTorch command on the process runtime when set. Container
// jobs are not its business.
func TestExactWorkloadsRunOnTheConfiguredTrainer(t *testing.T) {
	exactKinds := []markettypes.WorkloadKind{markettypes.WORKLOAD_KIND_REFERENCE, markettypes.WORKLOAD_KIND_TRANSFORMER}
	torch := []string{"/bin/sh", "/opt/depinchain/pkg/exact/torch/train.py"}
	for name, tc := range map[string]struct {
		cfg   config.Runtimes
		want  string // the runtime's name, or an error's text
		names []string
	}{
		"go":           {config.Runtimes{Reference: true}, "reference", []string{"reference"}},
		"torch":        {config.Runtimes{Reference: true, ExactTorch: torch, ExactTorchEnv: []string{"DEPIN_TORCH_PROCS=2"}}, "exact-torch", []string{"exact-torch"}},
		"no reference": {config.Runtimes{Process: true, ExactTorch: torch}, "workloads are not enabled (runtimes.reference)", []string{"process (0 trainers)"}},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := newRuntimes(tc.cfg, t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.names(), tc.names) {
				t.Errorf("names %q, want %q", r.names(), tc.names)
			}
			for _, kind := range exactKinds {
				rt, err := r.forJob(context.Background(), jobOfKind(t, kind))
				switch {
				case err != nil && !strings.Contains(err.Error(), tc.want):
					t.Fatalf("%s: %v, want %q", kind, err, tc.want)
				case err == nil && rt.Name() != tc.want:
					t.Fatalf("%s runs on %s, want %s", kind, rt.Name(), tc.want)
				}
				if et, ok := rt.(*runtime.ExactTorch); ok && (!slices.Equal(et.Command, torch) || !slices.Equal(et.Env, tc.cfg.ExactTorchEnv)) {
					t.Fatalf("%s: the PyTorch trainer runs %q with %q", kind, et.Command, et.Env)
				}
			}
			// A container job never runs on the exact trainer.
			if rt, err := r.forJob(context.Background(), jobOfKind(t, markettypes.WORKLOAD_KIND_CONTAINER)); err == nil {
				t.Fatalf("a container job runs on %s with no trainer mapped and no container runtime", rt.Name())
			}
		})
	}
}

// A PyTorch command that is not there stops the sidecar at start, naming
// the field, rather than failing every lease it wins.
func TestExactTorchProgramMustExist(t *testing.T) {
	_, err := newRuntimes(config.Runtimes{Reference: true, ExactTorch: []string{"/nonexistent/python3", "train.py"}}, t.TempDir(), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "runtimes.exact_torch: ") {
		t.Fatalf("got %v, want an error naming runtimes.exact_torch", err)
	}
}

// A training-together (sync) job runs on the exact trainer, which implements round runs
// (on the built-in corpus or on a dataset): the Go trainer, or the PyTorch trainer when
// exact_torch is set. Without custody or without the reference runtime no runtime takes it
// and the reason says why (the bidder's decision in /v1/jobs).
func TestSyncJobsRunOnTheExactTrainers(t *testing.T) {
	torch := []string{"/bin/sh", "/opt/depinchain/pkg/exact/torch/train.py"}
	sync := func(edit func(*markettypes.Job)) markettypes.Job {
		j := jobOfKind(t, markettypes.WORKLOAD_KIND_TRANSFORMER)
		j.Spec.Workers = 3
		j.Spec.Sync = &markettypes.SyncSpec{Every: 4, OuterLrQ30: 1 << 29, OuterMomentumQ30: 0}
		j.Spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1}
		if edit != nil {
			edit(&j)
		}
		return j
	}
	for name, tc := range map[string]struct {
		cfg  config.Runtimes
		job  markettypes.Job
		want string
	}{
		"go":         {config.Runtimes{Reference: true}, sync(nil), "reference"},
		"torch":      {config.Runtimes{Reference: true, ExactTorch: torch}, sync(nil), "exact-torch"},
		"no exact":   {config.Runtimes{Process: true}, sync(nil), "workloads are not enabled (runtimes.reference)"},
		"dataset":    {config.Runtimes{Reference: true}, sync(func(j *markettypes.Job) { j.Spec.DatasetId = "fortunes" }), "reference"},
		"no custody": {config.Runtimes{Reference: true}, sync(func(j *markettypes.Job) { j.Spec.Custody = nil }), "keeps no custody"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := newRuntimes(tc.cfg, t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := r.forJob(context.Background(), tc.job)
			if _, ok := rt.(rounds.Trainer); err == nil && !ok {
				t.Fatalf("runtime %s takes the sync job but does not run rounds", rt.Name())
			}
			switch {
			case err != nil && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("%v, want %q", err, tc.want)
			case err == nil && rt.Name() != tc.want:
				t.Fatalf("runs on %s, want %s", rt.Name(), tc.want)
			}
		})
	}
}
