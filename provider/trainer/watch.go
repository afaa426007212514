package trainer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// Watcher reports the checkpoints of one run as the trainer completes them:
// each once, in step order, validated against the contract and chained (each
// checkpoint's h_start is the previous one's h_end, the first one's is the
// resume checkpoint's h_end).
type Watcher struct {
	env Env
	// next is the start step of the next checkpoint to report.
	next uint64
	// prevHash is h_next, which the next checkpoint's trace must start
	// with; unknown (nil) for a run starting at step 0, whose h_0 is the
	// trainer's own initial state.
	prevHash *merkle.Hash
}

// NewWatcher returns a Watcher for the run env describes. For a resumed run
// it validates the resume checkpoint, which must end at env.StartStep.
func NewWatcher(env Env) (*Watcher, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	w := &Watcher{env: env, next: env.StartStep}
	if env.ResumeFrom != "" {
		resume, err := ReadCheckpoint(env.ResumeFrom, env.StartStep)
		if err == nil {
			err = env.checkStateHash(resume)
		}
		if err != nil {
			return nil, fmt.Errorf("resume checkpoint: %w", err)
		}
		h := resume.FinalHash()
		w.prevHash = &h
	}
	return w, nil
}

// Finished reports whether every checkpoint of the run has been reported.
func (w *Watcher) Finished() bool { return w.next >= w.env.TotalSteps }

// Poll returns the checkpoints completed since the last call, in step order.
// It stops at the first expected checkpoint that is not complete yet. A
// complete checkpoint that breaks the contract is an error (wrapping
// ErrInvalidCheckpoint), and Poll keeps returning it.
func (w *Watcher) Poll() ([]Checkpoint, error) {
	var found []Checkpoint
	for !w.Finished() {
		end := w.env.NextCheckpointStep(w.next)
		cp, err := ReadCheckpoint(CheckpointDir(w.env.OutputDir, end), end)
		if errors.Is(err, ErrCheckpointIncomplete) {
			break
		}
		if err == nil {
			err = w.env.checkStateHash(cp)
		}
		if err != nil {
			return found, err
		}
		if cp.StartStep() != w.next {
			return found, fmt.Errorf("%w %s: its trace covers steps %d..%d, want %d..%d (checkpoint interval %d)",
				ErrInvalidCheckpoint, cp.Dir, cp.StartStep(), end, w.next, end, w.env.CheckpointInterval)
		}
		if w.prevHash != nil && cp.StartHash() != *w.prevHash {
			return found, fmt.Errorf("%w %s: h_%d is %s, but the previous checkpoint ended with %s",
				ErrInvalidCheckpoint, cp.Dir, w.next, cp.StartHash(), *w.prevHash)
		}
		h := cp.FinalHash()
		w.prevHash = &h
		w.next = end
		found = append(found, cp)
	}
	return found, nil
}

// Watch polls every interval (and once more when ctx ends, so nothing
// completed before then is missed) and hands each new checkpoint to found,
// until the run's last checkpoint has been reported, found or Poll fails, or
// ctx is done.
func (w *Watcher) Watch(ctx context.Context, interval time.Duration, found func(Checkpoint) error) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		done := ctx.Err()
		cps, err := w.Poll()
		for _, cp := range cps {
			if err := found(cp); err != nil {
				return err
			}
		}
		switch {
		case err != nil:
			return err
		case w.Finished():
			return nil
		case done != nil:
			return done
		}
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
}

// checkStateHash refuses a checkpoint whose h_end is not the hash of its
// state that e's workload commits: the chain would refuse a transformer
// checkpoint whose final hash is not its state root. A container job's
// trainer may commit either (an image running the exact PyTorch trainer
// writes state roots); ReadCheckpoint has already bound h_end to the state.
func (e Env) checkStateHash(cp Checkpoint) error {
	if e.Exact == nil {
		return nil
	}
	if want := e.StateHash(); cp.Hash != want {
		return fmt.Errorf("%w %s: h_%d is the %s of its state, but this workload's h_i is the state's %s",
			ErrInvalidCheckpoint, cp.Dir, cp.EndStep(), cp.Hash, want)
	}
	return nil
}
