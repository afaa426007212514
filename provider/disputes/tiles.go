package disputes

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/pkg/trace"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Phases 2–3 on the sidecar. Phase 1 keeps no state of any step: the
// defender opens its committed trace, the challenger its re-execution's
// hashes. Once the game is at one disputed step lo, each side rebuilds its
// state at lo (the agreed h_lo) by training from the checkpoint's start
// state, executes step lo once more with the exact workload, hashing every
// operator's output for the record tree (tiles.Party), and keeps that one
// Party in memory for the rest of the game: each later move re-executes
// the step at most up to the disputed operator (tiles.Party.load), so the
// work per move is bounded by one step whatever the checkpoint's length.
// After a restart the Party is rebuilt from the chain's game state and the
// local checkpoint folders (or the verifier's re-execution) the same way.

// stepExec is how this operator executes steps: honestly, unless a test
// hook says otherwise.
func (r *Role) stepExec() StepExec {
	if r.opts.Hooks.StepExec != nil {
		return r.opts.Hooks.StepExec
	}
	return Honest
}

// tileParty is the operator's execution of g's disputed step lo, from its
// state at lo (stateAt), which must be the agreed h_lo of its trace tr.
func (r *Role) tileParty(g dispute.Game, tr trace.Trace, stateAt func(uint64) (*exact.State, error)) (*tiles.Party, error) {
	id, lo := g.Challenge.Id, g.Challenge.Lo
	r.mu.Lock()
	p := r.parties[id]
	r.mu.Unlock()
	if p != nil && p.Pre.Step == lo {
		return p, nil
	}
	if lo < tr.Start || lo > tr.End() {
		return nil, fmt.Errorf("disputed step %d is outside the trace %d..%d", lo, tr.Start, tr.End())
	}
	started := time.Now()
	pre, err := stateAt(lo)
	if err != nil {
		return nil, fmt.Errorf("rebuilding the state at step %d: %w", lo, err)
	}
	if root, agreed := pre.Root(), tr.Hashes[lo-tr.Start]; root != agreed {
		return nil, fmt.Errorf("the rebuilt state at step %d has root %s, the trace has %s", lo, root, agreed)
	}
	data, err := g.TrainingData()
	if err != nil {
		return nil, err
	}
	batch, err := exact.StepBatch(pre.Config, g.Job.Seed, lo, data.Bytes)
	if err != nil {
		return nil, err
	}
	ex, batch := r.stepExec()(lo, batch)
	p, err = tiles.NewParty(tiles.NewStep(pre.Config), ex, pre, batch)
	if err != nil {
		return nil, fmt.Errorf("executing step %d for its operator records: %w", lo, err)
	}
	r.log.Info("disputed step re-executed for phases 2–3", "challenge", id, "step", lo, "entries", p.Step.Len(),
		"record_root", p.C.Root.String(), "took", time.Since(started).Round(time.Millisecond))
	r.mu.Lock()
	r.parties[id] = p
	r.mu.Unlock()
	return p, nil
}

// ownStateAt is the operator's own state at step of its challenged
// checkpoint: its start state trained forward as the operator trains.
func (r *Role) ownStateAt(ctx context.Context, g dispute.Game, step uint64) (*exact.State, error) {
	start, err := r.ownStartState(ctx, g)
	if err != nil {
		return nil, err
	}
	data, err := g.TrainingData()
	if err != nil {
		return nil, err
	}
	return runSteps(start, step, data.Bytes, g.Job.Seed, r.stepExec(), nil)
}

// ownStartState is the state the operator's challenged checkpoint starts
// from: the job's initial state, the local state of the lease's previous
// checkpoint, or (a lease resumed elsewhere, a folder gone) the state
// served at the checkpoint's start, checked against the chain's start hash.
func (r *Role) ownStartState(ctx context.Context, g dispute.Game) (*exact.State, error) {
	cp := g.Checkpoint
	if cp.StartStep == 0 {
		return InitialState(g.Job)
	}
	if cp.Index > 0 {
		if dir, err := r.checkpointDir(cp.LeaseId, cp.Index-1, cp.StartStep); err == nil {
			if s, err := exact.LoadCheckpointState(dir); err == nil {
				if h := s.Root(); slices.Equal(h[:], cp.StartHash) {
					return s, nil
				}
			}
		}
	}
	return r.startState(ctx, cp, g.Job)
}

// beyondOneStep reports whether g's step is more than the one-step referee
// takes (max_step_macs), so that the challenger plays phases 2–3 instead.
func (r *Role) beyondOneStep(ctx context.Context, g dispute.Game) (bool, error) {
	if g.Challenge.Turn != verifytypes.GAME_TURN_ONE_STEP {
		return false, nil
	}
	cfg, err := verifytypes.JobConfig(g.Job)
	if err != nil {
		return false, err
	}
	res, err := r.opts.Chain.VerifyParams(ctx, &verifytypes.QueryParamsRequest{})
	if err != nil {
		return false, fmt.Errorf("reading x/verify's params: %w", err)
	}
	return uint64(cfg.MACsPerStep()) > res.Params.MaxStepMacs, nil
}

// forget drops what the role keeps in memory about a decided game.
func (r *Role) forget(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.parties, id)
	delete(r.executions, id)
}
