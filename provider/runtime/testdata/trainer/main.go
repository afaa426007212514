// Command trainer is the trainer of the runtime tests, run as a process and
// in a container: it honours the trainer contract by training the reference
// workload (trainer.RunReference) on the corpus in its data directory, or
// misbehaves on request.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/provider/trainer"
)

func main() {
	mode := flag.String("mode", "train", "train; crash: exit 3 at once; idle: exit 0 without training")
	stepDelay := flag.Duration("step-delay", 0, "pause after every step, so a test can stop the run midway")
	holdAfter := flag.Uint64("hold-after-step", 0, "after this step (and every later one), wait until --hold-file exists")
	holdFile := flag.String("hold-file", "", "the file --hold-after-step waits for")
	pidFile := flag.String("pid-file", "", "write the trainer's process id here at start")
	requireNVIDIA := flag.Bool("require-nvidia", false, "list the NVIDIA device nodes the container got; exit 4 if there are none")
	report := flag.Bool("report", false, "print a "+reportPrefix+"line: what the trainer saw of its data folder, /dev/shm and its ulimits")
	flag.Parse()
	if *requireNVIDIA {
		nodes, _ := filepath.Glob("/dev/nvidia[0-9]*")
		ctl, err := os.Stat("/dev/nvidiactl")
		fmt.Printf("nvidia devices: %v (nvidiactl present: %v)\n", nodes, err == nil && ctl != nil)
		if len(nodes) == 0 || err != nil {
			fmt.Fprintln(os.Stderr, "no NVIDIA device nodes in the container: the GPU device request was not honoured")
			os.Exit(4)
		}
	}
	if *pidFile != "" {
		if err := os.WriteFile(*pidFile, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}

	env, err := trainer.ParseEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	devices, _ := os.LookupEnv(trainer.EnvVisibleDevices)
	fmt.Printf("job %d lease %d: steps %d to %d, CUDA_VISIBLE_DEVICES=%q, output in %s\n",
		env.JobID, env.LeaseID, env.StartStep, env.TotalSteps, devices, env.OutputDir)
	switch *mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "simulated crash: CUDA error: an illegal memory access was encountered")
		os.Exit(3)
	case "idle":
		return
	}
	data, err := exact.ReadStreamDir(env.DataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *report {
		if err := printReport(env.DataDir, data); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	onStep := func(m trainer.StepMetric) {
		time.Sleep(*stepDelay)
		if *holdAfter > 0 && m.Step >= *holdAfter {
			waitFor(ctx, *holdFile)
		}
	}
	// Container and process jobs in these tests train the reference transformer,
	// as an operator's own trainer of the contract would train whatever it runs.
	if env.Exact == nil {
		cfg := exact.ReferenceConfig()
		env.Exact = &cfg
	}
	if err := trainer.RunExact(ctx, env, data, onStep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// reportPrefix starts the line --report prints.
const reportPrefix = "trainer report: "

// Report is what --report prints (as JSON after reportPrefix): the files of
// the data folder and the hash of the stream trained on, whether the data
// folder could be written to, the size of /dev/shm and the stack and
// memlock limits (-1: unlimited).
type Report struct {
	DataFiles    map[string]string `json:"data_files"` // name → sha256 hex
	StreamSHA256 string            `json:"stream_sha256"`
	DataWriteErr string            `json:"data_write_error"`
	ShmBytes     int64             `json:"shm_bytes"`
	StackSoft    int64             `json:"stack_soft"`
	StackHard    int64             `json:"stack_hard"`
	MemlockSoft  int64             `json:"memlock_soft"`
	MemlockHard  int64             `json:"memlock_hard"`
}

func printReport(dataDir string, stream []byte) error {
	r := Report{DataFiles: map[string]string{}}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dataDir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		r.DataFiles[e.Name()] = hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256(stream)
	r.StreamSHA256 = hex.EncodeToString(sum[:])
	probe := filepath.Join(dataDir, ".write-probe")
	if err := os.WriteFile(probe, []byte("x"), 0o644); err != nil {
		r.DataWriteErr = err.Error()
	} else {
		os.Remove(probe) //nolint:errcheck // the folder was writable: the report says so
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &fs); err != nil {
		return fmt.Errorf("/dev/shm: %w", err)
	}
	r.ShmBytes = int64(fs.Blocks) * fs.Bsize
	limit := func(resource int) (soft, hard int64, err error) {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(resource, &l); err != nil {
			return 0, 0, err
		}
		conv := func(v uint64) int64 {
			if v == ^uint64(0) { // RLIM_INFINITY
				return -1
			}
			return int64(v)
		}
		return conv(l.Cur), conv(l.Max), nil
	}
	if r.StackSoft, r.StackHard, err = limit(syscall.RLIMIT_STACK); err != nil {
		return err
	}
	const rlimitMemlock = 8 // RLIMIT_MEMLOCK on Linux; package syscall does not name it
	if r.MemlockSoft, r.MemlockHard, err = limit(rlimitMemlock); err != nil {
		return err
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Println(reportPrefix + string(line))
	return nil
}

// waitFor blocks until path exists or ctx ends.
func waitFor(ctx context.Context, path string) {
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
