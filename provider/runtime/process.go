//go:build unix

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/depinchain/depinchain/provider/trainer"
)

// Process runs a trainer the operator installed on the host as a
// subprocess, in its own process group, with the contract's environment
// (CUDA_VISIBLE_DEVICES naming the leased GPUs by UUID) and its stdout and
// stderr appended to Job.LogDir's log files. It never runs a job's image or
// command: what runs is the operator's Command, for jobs the operator has
// mapped to it.
type Process struct {
	// Command is the trainer's argv, e.g. ["/usr/bin/python3", "train.py"].
	Command []string
	// Dir is the working directory; empty means Job.OutputDir.
	Dir string
	// Env is the environment besides the contract's (PATH, PYTHONPATH,
	// ...). The sidecar's own environment is not passed on, so neither
	// its secrets nor a stray CUDA_VISIBLE_DEVICES reach the trainer.
	Env []string
}

// Name implements Runtime.
func (*Process) Name() string { return "process" }

// Start implements Runtime.
func (p *Process) Start(_ context.Context, job Job) (Handle, error) {
	env, err := prepare(job)
	if err != nil {
		return nil, err
	}
	h, err := p.start(env, job.LogDir)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// start runs the trainer with env (validated, its folders made), its logs in logDir.
func (p *Process) start(env trainer.Env, logDir string) (*processHandle, error) {
	if len(p.Command) == 0 {
		return nil, errors.New("runtime process: no trainer command configured")
	}
	stdout, stderr, err := openLogs(logDir)
	if err != nil {
		return nil, err
	}
	// The child has its own copies of the log files once started.
	defer stdout.Close()
	defer stderr.Close()

	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Dir = p.Dir
	if cmd.Dir == "" {
		cmd.Dir = env.OutputDir
	}
	cmd.Env = append(append([]string(nil), p.Env...), env.Environ()...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that Stop reaches the trainer's children
	// (data loader workers, launchers) too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("runtime process: starting %s: %w", p.Command[0], err)
	}
	h := &processHandle{run: newRun(), pgid: cmd.Process.Pid}
	stderrPath := filepath.Join(logDir, StderrLogName)
	go func() {
		waitErr := cmd.Wait()
		// Children that outlive the trainer would keep its GPUs busy. The
		// group's id cannot have been reused while any of them lives, and
		// an empty group is ESRCH, so the error says nothing worth acting on.
		_ = h.signalGroup(syscall.SIGKILL)
		exit := exitOf(cmd, waitErr)
		exit.StderrTail = logTail(stderrPath)
		err := trainer.CheckRun(env, exit)
		if err != nil && h.stopped.Load() {
			err = fmt.Errorf("%w: trainer of lease %d (%s)", ErrStopped, env.LeaseID, exit)
		}
		h.finish(err)
	}()
	return h, nil
}

// exitOf describes how cmd ended.
func exitOf(cmd *exec.Cmd, waitErr error) trainer.Exit {
	state := cmd.ProcessState
	if state == nil { // Wait failed before the process ended
		return trainer.Exit{Code: -1, Signal: waitErr.Error()}
	}
	if status, ok := state.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return trainer.Exit{Code: -1, Signal: status.Signal().String()}
	}
	return trainer.Exit{Code: state.ExitCode()}
}

type processHandle struct {
	*run
	pgid    int
	stopped atomic.Bool
}

// signalGroup sends sig to the trainer's process group. A group that is
// already gone is not an error.
func (h *processHandle) signalGroup(sig syscall.Signal) error {
	if err := syscall.Kill(-h.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("runtime process: sending %s to process group %d: %w", sig, h.pgid, err)
	}
	return nil
}

// Stop implements Handle: SIGTERM to the process group, SIGKILL when ctx
// is done. A run that completes its contract while stopping still counts
// as completed.
func (h *processHandle) Stop(ctx context.Context) error {
	select {
	case <-h.done:
		return nil
	default:
	}
	h.stopped.Store(true)
	if err := h.signalGroup(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
	}
	if err := h.signalGroup(syscall.SIGKILL); err != nil {
		return err
	}
	<-h.done
	return nil
}
