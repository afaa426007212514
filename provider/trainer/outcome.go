package trainer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Errors about how a run ended, wrapped in a *RunError.
var (
	// ErrTrainerFailed: the trainer exited unsuccessfully (non-zero status
	// or a signal) without declaring itself done.
	ErrTrainerFailed = errors.New("trainer failed")
	// ErrNoFinalCheckpoint: the trainer declared success (status 0 or DONE)
	// but its final checkpoint is missing or incomplete.
	ErrNoFinalCheckpoint = errors.New("trainer finished without its final checkpoint")
)

// Exit is how a trainer process or container ended.
type Exit struct {
	// Code is the exit status, or -1 when a signal ended the process.
	Code int
	// Signal names the signal that ended the process, if one did.
	Signal string
	// StderrTail is the end of the trainer's error output, for messages.
	StderrTail string
}

func (e Exit) String() string {
	if e.Signal != "" {
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// RunError describes a run that did not fulfil the contract.
type RunError struct {
	Exit Exit
	// LastCheckpoint is the highest step with a complete checkpoint folder,
	// or -1 if there is none.
	LastCheckpoint int64
	// FinalStep is the step the run had to checkpoint last.
	FinalStep uint64
	// Err is ErrTrainerFailed or ErrNoFinalCheckpoint.
	Err error
}

func (e *RunError) Error() string {
	var b strings.Builder
	switch e.Err {
	case ErrTrainerFailed:
		fmt.Fprintf(&b, "%s: %s", e.Err, e.Exit)
	default:
		fmt.Fprintf(&b, "%s (%s): expected %s/%s%d/%s", e.Err, e.Exit, CheckpointsDirName, CheckpointDirPrefix, e.FinalStep, CompleteMarkerName)
	}
	if e.LastCheckpoint < 0 {
		b.WriteString("; it wrote no checkpoint")
	} else {
		fmt.Fprintf(&b, "; its last complete checkpoint is %s%d", CheckpointDirPrefix, e.LastCheckpoint)
	}
	if tail := strings.TrimSpace(e.Exit.StderrTail); tail != "" {
		fmt.Fprintf(&b, "; stderr ends with:\n%s", tail)
	}
	return b.String()
}

func (e *RunError) Unwrap() error { return e.Err }

// CheckRun decides whether a run whose trainer ended with exit fulfilled the
// contract: the final checkpoint (step env.TotalSteps) must be complete, and
// the trainer must have exited with status 0 or written DONE. DONE lets a
// trainer whose teardown crashes after its work is safely on disk (as
// distributed PyTorch jobs sometimes do) still count as finished. It returns
// nil or a *RunError. The checkpoints' contents are the Watcher's business.
func CheckRun(env Env, exit Exit) error {
	done, err := exists(filepath.Join(env.OutputDir, DoneMarkerName))
	if err != nil {
		return err
	}
	finalComplete, err := exists(filepath.Join(CheckpointDir(env.OutputDir, env.TotalSteps), CompleteMarkerName))
	if err != nil {
		return err
	}
	succeeded := exit.Code == 0 && exit.Signal == ""
	if finalComplete && (succeeded || done) {
		return nil
	}
	runErr := &RunError{Exit: exit, FinalStep: env.TotalSteps, LastCheckpoint: -1, Err: ErrNoFinalCheckpoint}
	if !succeeded && !done {
		runErr.Err = ErrTrainerFailed
	}
	steps, err := CompletedSteps(env.OutputDir)
	if err != nil {
		return err
	}
	if len(steps) > 0 {
		runErr.LastCheckpoint = int64(steps[len(steps)-1])
	}
	return runErr
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
