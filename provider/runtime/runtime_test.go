package runtime_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/runtime"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

var jobSeed = func() []byte { h := sha256.Sum256([]byte("runtime test job")); return h[:] }()

// newJob returns a job of kind over steps [0, total) checkpointing every
// interval steps, with fresh directories.
func newJob(t *testing.T, kind markettypes.WorkloadKind, total, interval uint64) runtime.Job {
	t.Helper()
	root := t.TempDir()
	return runtime.Job{
		Market: markettypes.Job{
			Id:   3,
			Seed: jobSeed,
			Spec: markettypes.JobSpec{
				Workload:           markettypes.Workload{Kind: kind},
				TotalSteps:         total,
				CheckpointInterval: interval,
				Resources:          markettypes.Resources{CpuMillis: 1000, MemoryMib: 256},
			},
		},
		LeaseID:   12,
		OutputDir: filepath.Join(root, "output"),
		DataDir:   filepath.Join(root, "data"),
		LogDir:    filepath.Join(root, "logs"),
	}
}

// directTrace is h_0..h_steps of the reference model of jobSeed trained
// directly with pkg/exact on the built-in corpus.
func directTrace(t *testing.T, steps uint64) []merkle.Hash {
	t.Helper()
	state, err := exact.Init(exact.ReferenceConfig(), jobSeed)
	if err != nil {
		t.Fatal(err)
	}
	hashes := []merkle.Hash{state.Root()}
	if _, err := exact.Run(state, traindata.BuiltinCorpus(), jobSeed, steps, func(_ uint64, info exact.StepInfo) error {
		hashes = append(hashes, info.Root)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return hashes
}

// checkCheckpoints validates every checkpoint of job's run with a
// trainer.Watcher and compares their traces with want (h_0...), returning
// them.
func checkCheckpoints(t *testing.T, job runtime.Job, want []merkle.Hash) []trainer.Checkpoint {
	t.Helper()
	w, err := trainer.NewWatcher(job.Env())
	if err != nil {
		t.Fatal(err)
	}
	cps, err := w.Poll()
	if err != nil {
		t.Fatal(err)
	}
	if !w.Finished() {
		t.Fatalf("the run's checkpoints end before step %d: %d found", job.Market.Spec.TotalSteps, len(cps))
	}
	for _, cp := range cps {
		for i, h := range cp.Trace.Hashes {
			if step := cp.StartStep() + uint64(i); h != want[step] {
				t.Fatalf("%s: h_%d = %s, a direct exact run gives %s", cp.Dir, step, h, want[step])
			}
		}
	}
	return cps
}

// testTrainerBinary builds testdata/trainer once per test binary: static
// (CGO_ENABLED=0), so that it runs as a process here and alone in a
// FROM scratch image.
// DEPIN_TEST_TRAINER names a prebuilt one instead, for a compiled test
// binary run where there is no Go toolchain (make gpu-check on a GPU host).
var testTrainerBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("DEPIN_TEST_TRAINER"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "depin-test-trainer-")
	if err != nil {
		return "", err
	}
	testTrainerDir = dir
	bin := filepath.Join(dir, "trainer")
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "./testdata/trainer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building testdata/trainer: %w\n%s", err, out)
	}
	return bin, nil
})

// testTrainerDir holds the built test trainer, if it was built.
var testTrainerDir string

func testTrainer(t *testing.T) string {
	t.Helper()
	bin, err := testTrainerBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testTrainerDir != "" {
		os.RemoveAll(testTrainerDir)
	}
	os.Exit(code)
}
