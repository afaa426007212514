// Command trainer is the trainer of the runtime tests, run as a process and
// in a container: it honours the trainer contract by training the reference
// workload (trainer.RunReference) on the corpus in its data directory, or
// misbehaves on request.
package main

import (
	"context"
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
