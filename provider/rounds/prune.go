package rounds

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// A job's round files would fill the disk over a long job, so the role deletes what no
// later move can read. Round q's files stop mattering once its global G_{q+1} is final on
// chain: x/market never voids a final global (so round q is never aggregated, proven
// wrong or redone again, and no later round is redone from before G_{q+1}), and this
// role checks and proves a round's commitments only while aggregating it. So once round f
// is the latest final round (its rounds before are final too: x/market finalizes in
// order), the role deletes
//
//   - the globals G_q, q ≤ f (G_{f+1}, the latest final one, is what every later round
//     and any redo starts from),
//   - the pseudo-gradients of rounds q ≤ f — but, for top_k jobs, each other worker's
//     latest one: its header's error_out is the error_in the checker opens when it checks
//     the worker's next entered round (previousPseudoGradient; a missing one is fetched
//     from custody again, which keeps it retain_checkpoints after finality),
//   - its own error buffers of rounds q ≤ f older than every carry it may still train
//     from (the current one, and those of rounds a redo may train again: past f+1),
//   - its round data folders of rounds q ≤ f (a redone round puts its data there again).
//
// The rest is already bounded: the checker keeps at most two end states and two rebuilt
// error buffers per worker (carryOf, keepErrorBuffer), and a carry file per lease. The
// round-end checkpoints, which x/verify's games read, are the leases role's output folder,
// not this role's. When the job has ended and no lease of it is served, its whole folder
// goes (jobEnded), and so at start does the folder of a job that ended while the sidecar
// was stopped, which never sees its EventJobClosed (sweepEndedJobs).

// pruneRounds deletes what no later move of l can read, served being the round l just
// finished with (its global committed). A failure is logged: the files only wait for the
// next round's pruning.
func (r *Role) pruneRounds(ctx context.Context, l Lease, w *Worker, served uint64, carries map[uint64]*uint64) {
	f, ok, err := r.latestFinal(ctx, l.Job.Id, served)
	if err == nil && ok {
		err = w.prune(f, carryFloor(w, f, carries))
	}
	if err != nil && ctx.Err() == nil {
		r.log.Warn("pruning the job's round files failed", "lease", l.ID, "job", l.Job.Id, "round", served, "err", err)
	}
}

// pruneAllData deletes l's round data folders once every round of the job is trained
// and committed: none is read again.
func (r *Role) pruneAllData(l Lease, w Worker) {
	if err := w.pruneData(math.MaxUint64); err != nil {
		r.log.Warn("pruning the lease's round data failed", "lease", l.ID, "job", l.Job.Id, "err", err)
	}
}

// latestFinal is the latest round up to from whose global is final, if any: x/market
// finalizes rounds in order, so the walk back stops at the first final one.
func (r *Role) latestFinal(ctx context.Context, jobID, from uint64) (uint64, bool, error) {
	for q := int64(from); q >= 0; q-- {
		res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: jobID, Round: uint64(q)})
		if err != nil {
			return 0, false, fmt.Errorf("reading round %d: %w", q, err)
		}
		if res.Round.State == markettypes.ROUND_STATE_FINAL {
			return uint64(q), true, nil
		}
	}
	return 0, false, nil
}

// carryFloor is the oldest round whose error buffer the worker may still compress with:
// its carry, and the carries it trained the rounds after f+1 with (a redo trains such a
// round again with its carry; round f+1 and earlier start from final globals and are
// never redone). None: math.MaxUint64.
func carryFloor(w *Worker, f uint64, carries map[uint64]*uint64) uint64 {
	floor := uint64(math.MaxUint64)
	if w.Carry != nil {
		floor = *w.Carry
	}
	for q, c := range carries {
		if q > f+1 && c != nil {
			floor = min(floor, *c)
		}
	}
	return floor
}

// prune deletes the worker's round files that round f's final global leaves unread
// (see the top of prune.go); its own error buffers from carryFloor on are kept.
func (w Worker) prune(f, carryFloor uint64) error {
	entries, err := os.ReadDir(w.Dir)
	if err != nil {
		return err
	}
	var remove []string
	// others are, in top_k jobs, the other workers' pseudo-gradients of rounds up to f by
	// worker and round: all but each worker's latest go.
	others := map[uint32]map[uint64]string{}
	for _, e := range entries {
		name := e.Name()
		var q uint64
		var k uint32
		switch {
		case scanned(name, "pg-%d-%d", &q, &k) && name == filepath.Base(w.PseudoGradientPath(q, k)) && q <= f:
			if w.Sync.TopK == 0 || k == w.Index {
				remove = append(remove, name)
				break
			}
			if others[k] == nil {
				others[k] = map[uint64]string{}
			}
			others[k][q] = name
		case scanned(name, "errbuf-%d-%d", &q, &k) && name == filepath.Base(w.errBufPath(q, k)) && q <= f:
			if k != w.Index || q < carryFloor {
				remove = append(remove, name)
			}
		case scanned(name, "global-%d", &q) && q <= f &&
			(name == filepath.Base(w.GlobalPath(q)) || name == filepath.Base(w.committedGlobalPath(q))):
			remove = append(remove, name)
		}
	}
	for _, byRound := range others {
		latest := slices.Max(slices.Collect(maps.Keys(byRound)))
		for q, name := range byRound {
			if q != latest {
				remove = append(remove, name)
			}
		}
	}
	for _, name := range remove {
		if err := os.Remove(filepath.Join(w.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return w.pruneData(f)
}

// pruneData deletes the worker's round data folders of rounds up to f.
func (w Worker) pruneData(f uint64) error {
	entries, err := os.ReadDir(w.DataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		var q uint64
		if scanned(e.Name(), "round-%d", &q) && e.Name() == filepath.Base(w.RoundDataDir(q)) && q <= f {
			if err := os.RemoveAll(filepath.Join(w.DataDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanned reports whether name starts with format's fields; the caller checks that the
// name is exactly the file's (a temporary file or another kind shares the prefix).
func scanned(name, format string, args ...any) bool {
	n, err := fmt.Sscanf(name, format, args...)
	return err == nil && n == len(args)
}

// jobEnded deletes an ended job's round folder unless a lease of it is still served;
// that run deletes it when it returns (Serve).
func (r *Role) jobEnded(jobID uint64) {
	r.mu.Lock()
	r.ended[jobID] = true
	serving := r.servingLocked(jobID)
	r.mu.Unlock()
	if !serving {
		r.removeJobDir(jobID)
	}
}

// sweepEndedJobs treats every job with a round folder that is closed on chain as one
// that just ended (jobEnded). A job whose state cannot be read keeps its folder until the
// next start.
func (r *Role) sweepEndedJobs(ctx context.Context) {
	entries, err := os.ReadDir(filepath.Join(r.opts.WorkDir, "rounds"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("listing the jobs' round folders failed", "err", err)
		}
		return
	}
	for _, e := range entries {
		var jobID uint64
		if !e.IsDir() || !scanned(e.Name(), "job-%d", &jobID) || e.Name() != filepath.Base(r.jobDir(jobID)) {
			continue
		}
		res, err := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("reading a job with a round folder failed; the folder stays until the next start", "job", jobID, "err", err)
			continue
		}
		if res.Job.State.IsTerminal() {
			r.jobEnded(jobID)
		}
	}
}

// servingLocked reports whether a lease of job is being served. The caller holds r.mu.
func (r *Role) servingLocked(jobID uint64) bool {
	for lease := range r.wake {
		if r.status[lease].JobID == jobID {
			return true
		}
	}
	return false
}

func (r *Role) removeJobDir(jobID uint64) {
	dir := r.jobDir(jobID)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return // not a job that trains in rounds here
	}
	if err := os.RemoveAll(dir); err != nil {
		r.log.Warn("removing an ended job's round files failed", "job", jobID, "err", err)
		return
	}
	r.log.Info("the job ended: its round files are removed", "job", jobID)
}
