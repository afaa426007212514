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

	"github.com/depinchain/depinchain/provider/trainer"
)

func main() {
	mode := flag.String("mode", "train", "train; crash: exit 3 at once; idle: exit 0 without training")
	stepDelay := flag.Duration("step-delay", 0, "pause after every step, so a test can stop the run midway")
	flag.Parse()

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
	data, err := os.ReadFile(filepath.Join(env.DataDir, trainer.CorpusFileName))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := trainer.RunReference(ctx, env, data, func(trainer.StepMetric) { time.Sleep(*stepDelay) }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
