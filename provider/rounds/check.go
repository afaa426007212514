package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Before it aggregates a round, every worker checks the other entered workers'
// commitments against their round checkpoints, which x/verify adjudicates one chunk at a
// time (MsgProveRoundFault):
//
//   - START: the committed start root must be G_r's WorkerStart of the worker's carry (its
//     end state of the last round it entered under the same lease; none for round 0 or a
//     joiner);
//   - PSEUDO_GRADIENT: the committed pseudo-gradient must be G_r − the worker's committed
//     end state, chunk by chunk; with top_k, its compression with the error buffer this
//     sidecar rebuilt (compressed.go).
//
// The end states are the workers' round-end checkpoints, rebuilt from their custody
// holders and checked against the commit's end_root; a worker's pseudo-gradient is the one
// Aggregate needs anyway. So the check costs one download of each other worker's end state
// per round (a state is weights plus two Adam moments: about three dense pseudo-gradients),
// and the end state of the last round a worker entered is kept as the next round's carry.
// A wrong commitment is proven with pkg/dispute's builder; the chain excludes the worker
// from the round (x/market re-aggregates without it) and slashes it.

// endStatePath is worker's round-end state of round as this sidecar fetched it from
// custody (checked against the commit's end_root): its pseudo-gradient's other input, and
// its next round's carry.
func (j Job) endStatePath(round uint64, worker uint32) string {
	return filepath.Join(j.Dir, fmt.Sprintf("end-%d-%d", round, worker))
}

// checkRound checks rd's entered workers and, when some were proven wrong, waits for the
// chain to leave them out of the round (x/market then re-aggregates without them); it
// returns the round to aggregate.
func (r *Role) checkRound(ctx context.Context, l Lease, j Job, rd markettypes.Round, wake chan struct{}) (markettypes.Round, error) {
	for {
		commits, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: j.ID, Round: rd.Round})
		if err != nil {
			return rd, err
		}
		excluded, err := r.checkEntered(ctx, l, j, rd, commits.Commits)
		if err != nil {
			return rd, err
		}
		if len(excluded) == 0 {
			// Another's proof or game may have left a worker out while this one checked:
			// the round is aggregated as it stands now.
			res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: j.ID, Round: rd.Round})
			switch {
			case err != nil || slices.Equal(res.Round.Entered, rd.Entered) || res.Round.State == markettypes.ROUND_STATE_FINAL:
				return rd, err
			case res.Round.State == markettypes.ROUND_STATE_OPEN:
				return rd, roundDeleted{rd.Round} // closed before: deleted and opened again
			}
			rd = res.Round
			continue
		}
		r.log.Info("waiting for the round without the workers proven wrong", "job", j.ID, "round", rd.Round, "excluded", excluded)
		rd, err = r.waitRound(ctx, l, rd.Round, wake, func(rd markettypes.Round) bool {
			return rd.State == markettypes.ROUND_STATE_FINAL || !slices.ContainsFunc(excluded, func(w uint32) bool { return slices.Contains(rd.Entered, w) })
		})
		if err != nil || rd.State == markettypes.ROUND_STATE_FINAL {
			return rd, err // final: the chain keeps the round's entered list
		}
	}
}

// checkEntered checks the commitments of every other worker that entered rd (one
// goroutine each) and proves every wrong one. It returns the workers the chain has
// excluded from the round since: proven by this sidecar, or by another first. A worker
// whose files cannot be had (yet) is logged and aggregated with: the check never stalls
// the round.
func (r *Role) checkEntered(ctx context.Context, l Lease, j Job, rd markettypes.Round, commits []markettypes.RoundCommit) ([]uint32, error) {
	global, err := os.ReadFile(j.GlobalPath(rd.Round))
	if err != nil {
		return nil, err
	}
	g, err := diloco.DecodeGlobal(global)
	if err != nil {
		return nil, err
	}
	faults := make([]*verifytypes.MsgProveRoundFault, len(rd.Entered))
	errs := make([]error, len(rd.Entered))
	var wg sync.WaitGroup
	for i, slot := range rd.Entered {
		c, ok := commitOf(commits, slot)
		if slot == l.Worker || !ok || c.Excluded {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			faults[i], errs[i] = r.checkWorker(ctx, j, g, global, c)
			if need := (*fileQueryNeeded)(nil); errors.As(errs[i], &need) {
				r.log.Warn("a worker's round file is wrong and only it can open it: querying it", "job", j.ID, "round", rd.Round, "worker", c.Worker, "err", errs[i])
				faults[i], errs[i] = r.queryFile(ctx, j, need)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var accused []uint32
	for i, msg := range faults {
		if errs[i] != nil {
			r.log.Warn("cannot check a worker's round commitment: aggregating with it", "job", j.ID, "round", rd.Round, "worker", rd.Entered[i], "err", errs[i])
			continue
		}
		if msg == nil {
			continue
		}
		accused = append(accused, msg.Worker)
		r.proveWorkerFault(ctx, j, msg)
	}
	if len(accused) == 0 {
		return nil, nil
	}
	res, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: j.ID, Round: rd.Round})
	if err != nil {
		return nil, err
	}
	var excluded []uint32
	for _, c := range res.Commits {
		if c.Excluded && slices.Contains(accused, c.Worker) {
			excluded = append(excluded, c.Worker)
		}
	}
	return excluded, nil
}

func commitOf(commits []markettypes.RoundCommit, worker uint32) (markettypes.RoundCommit, bool) {
	i := slices.IndexFunc(commits, func(c markettypes.RoundCommit) bool { return c.Worker == worker })
	if i < 0 {
		return markettypes.RoundCommit{}, false
	}
	return commits[i], true
}

// proveWorkerFault sends a worker fault's proof. A refused one (another worker's proof
// came first, or the round is no longer open to it) is only logged: the caller reads
// from the chain whether the worker is out.
func (r *Role) proveWorkerFault(ctx context.Context, j Job, msg *verifytypes.MsgProveRoundFault) {
	_, err := r.opts.Submit(ctx, msg)
	if err != nil {
		r.log.Warn("the chain refused this sidecar's proof of a worker's round fault", "job", j.ID, "round", msg.Round,
			"worker", msg.Worker, "kind", msg.Kind.String(), "chunk", msg.Chunk, "err", err)
		return
	}
	r.log.Info("a worker's round commitment proven wrong", "job", j.ID, "round", msg.Round, "worker", msg.Worker,
		"kind", msg.Kind.String(), "chunk", msg.Chunk)
}

// checkWorker checks worker c's start state and pseudo-gradient (dense, or compressed:
// compressedFault) of round g.Round and returns the proof of the first wrong chunk, or nil.
func (r *Role) checkWorker(ctx context.Context, j Job, g *diloco.GlobalState, global []byte, c markettypes.RoundCommit) (*verifytypes.MsgProveRoundFault, error) {
	if r.opts.Custody == nil {
		return nil, errors.New("this sidecar cannot fetch from custody")
	}
	prev, err := r.previousEntered(ctx, j, c)
	if err != nil {
		return nil, fmt.Errorf("the worker's previous entered round: %w", err)
	}
	carry, err := r.carryOf(ctx, j, c, prev)
	if err != nil {
		return nil, fmt.Errorf("the carry state: %w", err)
	}
	if msg, err := r.startFault(j, g, global, carry, c); msg != nil || err != nil {
		return msg, err
	}
	pgRoot, err := merkle.HashFromBytes(c.PseudoGradientRoot)
	if err != nil {
		return nil, err
	}
	path := j.PseudoGradientPath(g.Round, c.Worker)
	var pg []byte
	err = r.retry(ctx, c, func() error {
		if _, err := j.readPseudoGradient(path, g.Round, Entered{Worker: c.Worker, Root: pgRoot}, g.Root()); err != nil {
			if ferr := CustodyFetch(r.opts.Custody, j.ID)(ctx, g.Round, c.Worker, path); ferr != nil {
				return ferr
			}
			if _, err := j.readPseudoGradient(path, g.Round, Entered{Worker: c.Worker, Root: pgRoot}, g.Root()); err != nil {
				return err
			}
		}
		pg, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the pseudo-gradient: %w", err)
	}
	end, err := r.endState(ctx, j, c)
	if err != nil {
		return nil, fmt.Errorf("the end state: %w", err)
	}
	if j.Sync.TopK != 0 {
		return r.compressedFault(ctx, j, g, global, end, pg, c, prev)
	}
	return dispute.PseudoGradientFault(r.opts.Operator, j.ID, g.Round, c.Worker, diloco.NewLayout(j.Config), global, end, pg)
}

// startFault proves worker c's start state wrong when its root is not G_r's WorkerStart
// of its carry. The start state is not in custody (anyone can compute it): a wrong start
// this sidecar can rebuild (one from no carry, as a joiner's, when the worker has one) is
// proven at once; any other needs a file query (*fileQueryNeeded).
func (r *Role) startFault(j Job, g *diloco.GlobalState, global, carry []byte, c markettypes.RoundCommit) (*verifytypes.MsgProveRoundFault, error) {
	claimed, err := merkle.HashFromBytes(c.StartRoot)
	if err != nil {
		return nil, err
	}
	var carryState *exact.State
	if carry != nil {
		if carryState, err = exact.Decode(carry); err != nil {
			return nil, err
		}
	}
	if g.WorkerStart(carryState).Root() == claimed {
		return nil, nil
	}
	l := diloco.NewLayout(j.Config)
	if carry != nil {
		if start := g.WorkerStart(nil).Encode(); exact.StateRoot(start) == claimed {
			return dispute.StartFault(r.opts.Operator, j.ID, g.Round, c.Worker, l, j.Sync, global, carry, start)
		}
	}
	return nil, &fileQueryNeeded{commit: c, file: verifytypes.ROUND_FILE_START, correct: g.WorkerStart(carryState).Encode(),
		prove: func(opened verifytypes.FileChunk) (*verifytypes.MsgProveRoundFault, error) {
			return dispute.StartChunkFault(r.opts.Operator, j.ID, g.Round, c.Worker, l, j.Sync, global, carry, opened)
		}}
}

// previousEntered is worker c's commit of the last round before c.Round it entered under
// the same lease (x/verify's previousEntered), or nil (none: round 0, a joiner). The walk
// back stops at the first entered round, so it is bounded by the rounds a lease may miss.
func (r *Role) previousEntered(ctx context.Context, j Job, c markettypes.RoundCommit) (*markettypes.RoundCommit, error) {
	for q := c.Round; q > 0; {
		q--
		rd, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: j.ID, Round: q})
		if err != nil {
			return nil, err
		}
		if !slices.Contains(rd.Round.Entered, c.Worker) {
			continue
		}
		res, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: j.ID, Round: q})
		if err != nil {
			return nil, err
		}
		prev, ok := commitOf(res.Commits, c.Worker)
		if !ok || prev.LeaseId != c.LeaseId {
			return nil, nil
		}
		return &prev, nil
	}
	return nil, nil
}

// carryOf is worker c's carry into its round: its end state of carry, the previous round
// it entered (previousEntered), or nil. End states of the worker's older rounds are
// removed here: a worker keeps at most its carry and its current round's end state on
// this sidecar's disk.
func (r *Role) carryOf(ctx context.Context, j Job, c markettypes.RoundCommit, carry *markettypes.RoundCommit) ([]byte, error) {
	keep := []string{j.endStatePath(c.Round, c.Worker)}
	if carry != nil {
		keep = append(keep, j.endStatePath(carry.Round, c.Worker))
	}
	old, _ := filepath.Glob(filepath.Join(j.Dir, fmt.Sprintf("end-*-%d", c.Worker)))
	for _, p := range old {
		if !slices.Contains(keep, p) {
			os.Remove(p)
		}
	}
	if carry == nil {
		return nil, nil
	}
	return r.endState(ctx, j, *carry)
}

// endState is worker c's round-end state: the file kept here, or its round-end
// checkpoint rebuilt from the custody holders; either way checked against the commit's
// end_root.
func (r *Role) endState(ctx context.Context, j Job, c markettypes.RoundCommit) ([]byte, error) {
	want, err := merkle.HashFromBytes(c.EndRoot)
	if err != nil {
		return nil, err
	}
	path := j.endStatePath(c.Round, c.Worker)
	if b, err := os.ReadFile(path); err == nil && exact.StateRoot(b) == want {
		return b, nil
	}
	var state []byte
	err = r.retry(ctx, c, func() error {
		index, err := r.roundCheckpoint(ctx, j, c)
		if err != nil {
			return err
		}
		if err := pieces.WriteFileAtomic(path, func(f *os.File) error {
			_, err := r.opts.Custody.Rebuild(ctx, c.LeaseId, index, f)
			return err
		}); err != nil {
			return err
		}
		if state, err = os.ReadFile(path); err != nil {
			return err
		}
		if got := exact.StateRoot(state); got != want {
			os.Remove(path)
			return fmt.Errorf("checkpoint %d of lease %d in custody has root %s, worker %d committed end root %s", index, c.LeaseId, got, c.Worker, want)
		}
		return nil
	})
	return state, err
}

// roundCheckpoint is the index of c's round-end checkpoint among its lease's: the one
// ending at the round's last step with the commit's end root.
func (r *Role) roundCheckpoint(ctx context.Context, j Job, c markettypes.RoundCommit) (uint64, error) {
	res, err := r.opts.Chain.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: c.LeaseId})
	if err != nil {
		return 0, err
	}
	end := j.Sync.RoundStart(c.Round + 1)
	for _, cp := range res.Checkpoints {
		if cp.EndStep == end && bytes.Equal(cp.FinalHash, c.EndRoot) {
			return cp.Index, nil
		}
	}
	return 0, fmt.Errorf("lease %d has no checkpoint ending round %d at step %d", c.LeaseId, c.Round, end)
}

// retry runs try, which reads worker c's round files, until it succeeds, ctx ends,
// CheckWait passes (a file not yet held by its custody holders) or the chain no longer
// counts c in its round (excluded by another's proof or game, whose conviction also
// releases the worker's checkpoints' custody: waiting on them would only delay the
// round), and returns its last error.
func (r *Role) retry(ctx context.Context, c markettypes.RoundCommit, try func() error) error {
	deadline := time.Now().Add(r.opts.CheckWait)
	for {
		err := try()
		if err == nil || ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
		if r.leftOut(ctx, c) {
			return fmt.Errorf("%w (worker %d's commit of round %d is excluded or gone since)", err, c.Worker, c.Round)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.PollInterval):
		}
	}
}

// leftOut reports whether the chain has excluded or dropped commit c since (with its
// round, deleted: the job's round went back before it).
func (r *Role) leftOut(ctx context.Context, c markettypes.RoundCommit) bool {
	res, err := r.opts.Chain.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: c.JobId, Round: c.Round})
	if err != nil {
		job, jerr := r.opts.Chain.Job(ctx, &markettypes.QueryJobRequest{JobId: c.JobId})
		return jerr == nil && job.Job.Round < c.Round
	}
	now, ok := commitOf(res.Commits, c.Worker)
	return !ok || now.Excluded || now.LeaseId != c.LeaseId
}

// fabricatePseudoGradient (tests only: CheatPseudoGradient) rewrites a contribution's
// pseudo-gradient with one element off by one, and its root: a dense one's first, a
// compressed one's first sent element (moved away from zero, so the record stays one
// CompressChunk can write), its header's error buffer roots untouched.
func fabricatePseudoGradient(c *Contribution) error {
	b, err := os.ReadFile(c.PseudoGradientPath)
	if err != nil {
		return err
	}
	var file []byte
	if pg, err := diloco.DecodePseudoGradient(b); err == nil {
		pg.Delta[0]++
		file = pg.EncodeDense()
	} else {
		pg, err := diloco.DecodeCompressed(b)
		if err != nil {
			return fmt.Errorf("neither a dense nor a compressed pseudo-gradient: %w", err)
		}
		i := slices.IndexFunc(pg.Delta, func(v int64) bool { return v != 0 })
		if i < 0 {
			return errors.New("a compressed pseudo-gradient with nothing sent")
		}
		switch v := pg.Delta[i]; {
		case v == exact.Max32 || v == -exact.Max32:
			pg.Delta[i] -= v / max(v, -v)
		default:
			pg.Delta[i] += v / max(v, -v)
		}
		comp, err := pg.Compressed()
		if err != nil {
			return err
		}
		file = comp.Encode()
	}
	c.PseudoGradientRoot = merkle.RootOfBytes(file, diloco.ChunkSize)
	c.PseudoGradientSize = uint64(len(file))
	return pieces.WriteBytesAtomic(c.PseudoGradientPath, file)
}
