package rounds

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
)

// python is Debian's interpreter, for which apt-get installs python3-torch (make test
// does, through scripts/deps.sh).
const python = "/usr/bin/python3"

// torchTrainer is the PyTorch exact trainer (train.py) as an operator configures it in
// runtimes.exact_torch, at threads torch intra-op threads. Without torch the test is
// skipped, saying so.
func torchTrainer(t *testing.T, threads int) *runtime.ExactTorch {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("PyTorch round runs not checked: %s cannot import torch and numpy (%v: %s); "+
			"apt-get install -y python3-torch python3-numpy", python, err, bytes.TrimSpace(out))
	}
	script, err := filepath.Abs("../../pkg/exact/torch/train.py")
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.ExactTorch{Process: runtime.Process{
		Command: []string{python, script, "--threads", fmt.Sprint(threads)}, Env: []string{"DEPIN_TORCH_PROCS=1"},
	}}
}

// The PyTorch trainer's round runs are the Go trainer's bit for bit: 2 workers × 2
// rounds (round 1 from each worker's carry), dense and with top_k, at 1 and 2 torch
// threads, all workers on PyTorch or mixed with Go. Every round-end checkpoint's state
// and trace equal the Go trainer's byte for byte, and every global root Simulate's.
func TestTorchRoundsMatchGo(t *testing.T) {
	dense := diloco.SyncSpec{Every: 3, OuterLR: 0.7, OuterMomentum: 0.9}
	topK := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32}
	for _, c := range []struct {
		name    string
		spec    diloco.SyncSpec
		threads int
		torchOn []bool // per worker: trained by PyTorch
	}{
		{"topk-1-thread", topK, 1, []bool{true, true}},
		{"topk-2-threads", topK, 2, []bool{true, true}},
		{"dense-2-threads-mixed", dense, 2, []bool{false, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			torch := torchTrainer(t, c.threads)
			goRoots, goCons := runRoundsWith(t, c.spec, 2, 2, nil)
			roots, cons := runRoundsWith(t, c.spec, 2, 2, func(i int) Trainer {
				if c.torchOn[i] {
					return torch
				}
				return nil
			})
			want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: c.spec, Seed: testSeed, Workers: 2, Rounds: 2})
			if err != nil {
				t.Fatal(err)
			}
			for r, g := range want {
				if roots[r] != g.Root() || goRoots[r] != g.Root() {
					t.Fatalf("global root of round %d: %x (Go trainer %x), Simulate's %s", r, roots[r], goRoots[r], g.Root())
				}
			}
			for r := range cons {
				for w, con := range cons[r] {
					if con.StartRoot != goCons[r][w].StartRoot || con.EndRoot != goCons[r][w].EndRoot || con.PseudoGradientRoot != goCons[r][w].PseudoGradientRoot {
						t.Fatalf("round %d worker %d: start %s end %s pseudo-gradient %s, the Go trainer's %s %s %s", r, w,
							con.StartRoot, con.EndRoot, con.PseudoGradientRoot, goCons[r][w].StartRoot, goCons[r][w].EndRoot, goCons[r][w].PseudoGradientRoot)
					}
					for _, f := range []string{trainer.StateFileName, trainer.TraceFileName} {
						got, err := os.ReadFile(filepath.Join(con.Checkpoint.Dir, f))
						if err != nil {
							t.Fatal(err)
						}
						if want, err := os.ReadFile(filepath.Join(goCons[r][w].Checkpoint.Dir, f)); err != nil || !bytes.Equal(got, want) {
							t.Fatalf("round %d worker %d: %s differs from the Go trainer's (%v)", r, w, f, err)
						}
					}
				}
			}
		})
	}
}

// A round run the PyTorch trainer cannot carry out as asked fails with the reason, like
// the Go trainer's: a global state of another round than DEPIN_ROUND, or a carry that is
// not a round-end state before the run's start.
func TestTorchRoundRunRefusesAWrongStart(t *testing.T) {
	torch := torchTrainer(t, 1)
	sync, err := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	job := Job{ID: 7, Seed: testSeed, Config: tinyConfig(), Sync: sync, Workers: 2, Dir: filepath.Join(root, "rounds"), DataDir: filepath.Join(root, "data"),
		Data: CorpusData(testSeed, 2)}
	g0, err := diloco.InitGlobal(tinyConfig(), sync, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := job.PutGlobal(g0); err != nil {
		t.Fatal(err)
	}
	// Round 0's end state of worker 0, by the Go trainer: a carry of step 2.
	w := Worker{Job: job, Index: 0, OutputDir: filepath.Join(root, "out"), LogDir: filepath.Join(root, "logs")}
	if _, err := w.Train(context.Background(), 0, nil); err != nil {
		t.Fatal(err)
	}
	env := func(round uint64, global, resume string) trainer.Env {
		// Worker 1's data of the round, as the sidecar puts it in the run's data folder.
		dataDir := filepath.Join(root, fmt.Sprintf("torch-data-%d", round))
		if err := job.Data(context.Background(), round, 1, dataDir); err != nil {
			t.Fatal(err)
		}
		return trainer.Env{JobID: 7, OutputDir: filepath.Join(root, "torch-out"), DataDir: dataDir, ResumeFrom: resume,
			StartStep: sync.RoundStart(round), TotalSteps: sync.RoundStart(round + 1), CheckpointInterval: 2, JobSeed: testSeed,
			Exact: &job.Config, Round: &trainer.RoundEnv{Worker: 1, Workers: 2, Round: round, GlobalState: global, Sync: sync}}
	}
	for name, tc := range map[string]struct {
		env  trainer.Env
		want string
	}{
		"global of another round": {env(1, job.GlobalPath(0), ""), "DEPIN_GLOBAL_STATE is the global state of round 0, the run is round 1"},
		"carry after the start":   {env(0, job.GlobalPath(0), trainer.CheckpointDir(w.OutputDir, 2)), "a carry must be a round-end state of this job before step 0, got step 2"},
	} {
		t.Run(name, func(t *testing.T) {
			err := torch.RunRound(context.Background(), tc.env, filepath.Join(root, "torch-logs", strings.ReplaceAll(name, " ", "-")), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a failure saying %q", err, tc.want)
			}
			if _, serr := os.Stat(trainer.CheckpointDir(tc.env.OutputDir, tc.env.TotalSteps)); !os.IsNotExist(serr) {
				t.Fatalf("a round-end checkpoint was written: %v", serr)
			}
		})
	}
}

// recordingTrainer is the Go trainer, recording every round run's environment.
type recordingTrainer struct{ envs []trainer.Env }

func (r *recordingTrainer) RunRound(ctx context.Context, env trainer.Env, logDir string, onStep func(trainer.StepMetric)) error {
	r.envs = append(r.envs, env)
	return (&runtime.Reference{}).RunRound(ctx, env, logDir, onStep)
}

// A worker trains through its Trainer with the contract's round run: its lease, its
// GPUs, its slot, the round's global state and steps, and its carry as DEPIN_RESUME_FROM
// (none in its first round).
func TestWorkerRunsRoundsThroughItsTrainer(t *testing.T) {
	rec := &recordingTrainer{}
	_, cons := runRoundsWith(t, diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}, 2, 2, func(i int) Trainer {
		if i == 1 {
			return rec
		}
		return nil
	})
	if len(rec.envs) != 2 {
		t.Fatalf("worker 1's trainer ran %d round runs, want 2", len(rec.envs))
	}
	for r, env := range rec.envs {
		rd := env.Round
		wantResume := ""
		if r == 1 {
			wantResume = trainer.CheckpointDir(filepath.Dir(filepath.Dir(cons[0][1].Checkpoint.Dir)), 2)
		}
		if rd == nil || rd.Worker != 1 || rd.Workers != 2 || rd.Round != uint64(r) || filepath.Base(rd.GlobalState) != fmt.Sprintf("global-%d", r) ||
			env.StartStep != uint64(2*r) || env.TotalSteps != uint64(2*r+2) || env.CheckpointInterval != 2 || env.ResumeFrom != wantResume ||
			env.LeaseID != 101 || !slices.Equal(env.VisibleDevices, []string{"GPU-test-1"}) {
			t.Fatalf("round %d's run: %+v (round %+v), want lease 101 on GPU-test-1, worker 1 of 2, steps %d..%d, resume from %q",
				r, env, rd, 2*r, 2*r+2, wantResume)
		}
	}
}
