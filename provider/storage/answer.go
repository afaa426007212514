package storage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// answerLoop answers every due challenge as soon as it opens: woken by each
// new height's events, and every PollInterval in case they stop coming.
func (r *Role) answerLoop(ctx context.Context) {
	ticker := time.NewTicker(r.opts.PollInterval)
	defer ticker.Stop()
	for {
		r.applyNotes(ctx)
		r.answerDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-ticker.C:
		}
	}
}

// answerDue answers the open challenges of held replicas, earliest deadline
// first (submissions are serialised, so order matters when several are due).
func (r *Role) answerDue(ctx context.Context) {
	height, err := r.readHeight(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("reading the chain height", "err", err)
		}
		return
	}
	r.refreshStale(ctx)
	var due []types.Replica
	r.mu.Lock()
	for _, h := range r.held {
		rep := h.rep
		switch {
		case h.busy || h.stale:
		case rep.NextSeedHeight > height: // not open yet
		case rep.NextDeadline <= height: // the next block is past the deadline: missed
		case h.proved && h.provedPeriod >= rep.NextPeriod: // answered; the new schedule is being read
		default:
			due = append(due, rep)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(due, func(a, b types.Replica) int {
		return cmp.Or(cmp.Compare(a.NextDeadline, b.NextDeadline), cmp.Compare(a.Id, b.Id))
	})
	for _, rep := range due {
		if ctx.Err() != nil {
			return
		}
		r.answer(ctx, rep.Id)
	}
}

// refreshStale reads the schedule of replicas whose last one was used or
// changed, and drops those no longer active.
func (r *Role) refreshStale(ctx context.Context) {
	r.mu.Lock()
	var stale []uint64
	for id, h := range r.held {
		if h.stale {
			stale = append(stale, id)
		}
	}
	r.mu.Unlock()
	for _, id := range stale {
		res, err := r.query.Replica(ctx, &types.QueryReplicaRequest{ReplicaId: id})
		if err != nil && !isNotFound(err) {
			r.log.Debug("reading a replica", "replica", id, "err", err)
			continue
		}
		if err != nil || res.Replica.Status != types.REPLICA_STATUS_ACTIVE || res.Replica.Holder != r.opts.Operator {
			r.mu.Lock()
			delete(r.held, id)
			r.mu.Unlock()
			if err := r.settle(ctx, id); err != nil {
				r.noteError("recording an ended replica", err)
			}
			continue
		}
		r.mu.Lock()
		if h, ok := r.held[id]; ok {
			h.rep, h.stale = res.Replica, false
		}
		r.mu.Unlock()
	}
}

// answer proves replica id's open challenge from its piece file and submits
// the proof. A piece found missing or corrupt on the way is handled as a
// fault (handleBadPiece) instead.
func (r *Role) answer(ctx context.Context, id uint64) {
	res, err := r.query.ChallengeSchedule(ctx, &types.QueryChallengeScheduleRequest{ReplicaId: id})
	if err != nil {
		if isNotFound(err) || status.Code(err) == codes.FailedPrecondition {
			r.markStaleLocked(id)
			return
		}
		r.noteError(fmt.Sprintf("reading replica %d's challenge", id), err)
		return
	}
	c := res.Challenge
	if !c.Open || c.Deadline <= res.Height {
		r.markStaleLocked(id)
		return
	}
	rep, ok := r.heldReplica(id)
	if !ok {
		return
	}
	path := PiecePath(r.opts.PiecesDir, rep.DatasetId, rep.Shard, rep.Piece)
	proofs, err := provePieceFile(path, c)
	if isPieceProblem(err) {
		r.handleBadPiece(ctx, id, err.Error())
		return
	}
	if err != nil {
		r.noteError(fmt.Sprintf("proving replica %d's challenge", id), err)
		return
	}
	txRes, err := r.submit(ctx, &types.MsgSubmitStorageProof{Holder: r.opts.Operator, ReplicaId: id, Period: c.Period, Proofs: proofs})
	if err != nil {
		if ctx.Err() != nil {
			return // stopping; the next start answers it if the deadline allows
		}
		// Whatever the chain said (wrong period, deadline passed, not active),
		// the schedule is what to read again; a transient failure is retried
		// at the next height while the deadline allows.
		r.markStaleLocked(id)
		r.noteError(fmt.Sprintf("answering replica %d's challenge for period %d", id, c.Period), err)
		return
	}
	if err := r.withRecords(func(rt *recordTx) error {
		return rt.edit(id, func(rec *db.StorageReplicaRecord) {
			rec.NoteProof(c.Period, false)
			rec.UpdatedHeight = max(rec.UpdatedHeight, txRes.Height)
		})
	}); err != nil {
		r.noteError("recording a storage proof", err)
	}
	r.mu.Lock()
	if h, ok := r.held[id]; ok {
		h.proved, h.provedPeriod, h.stale = true, c.Period, true
	}
	r.mu.Unlock()
	r.log.Info("storage challenge answered", "replica", id, "period", c.Period, "height", txRes.Height,
		"deadline", c.Deadline, "chunks", len(proofs), "tx", txRes.Hash)
}

func (r *Role) heldReplica(id uint64) (types.Replica, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.held[id]
	if !ok {
		return types.Replica{}, false
	}
	return h.rep, true
}

func (r *Role) markStaleLocked(id uint64) {
	r.mu.Lock()
	r.markStale(id)
	r.mu.Unlock()
}

// checkLoop hashes every held piece file in full each CheckInterval.
func (r *Role) checkLoop(ctx context.Context) {
	ticker := time.NewTicker(r.opts.CheckInterval)
	defer ticker.Stop()
	for {
		r.checkAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// checkAll checks every held piece file against its registered root.
func (r *Role) checkAll(ctx context.Context) {
	r.mu.Lock()
	var reps []types.Replica
	for _, h := range r.held {
		if !h.busy {
			reps = append(reps, h.rep)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(reps, func(a, b types.Replica) int { return cmp.Compare(a.Id, b.Id) })
	for _, rep := range reps {
		if ctx.Err() != nil {
			return
		}
		info, err := r.shardInfo(ctx, rep.DatasetId, rep.Shard)
		if err != nil {
			r.noteError(fmt.Sprintf("reading shard %d of %s", rep.Shard, rep.DatasetId), err)
			continue
		}
		p := info.Shard.Pieces[rep.Piece]
		path := PiecePath(r.opts.PiecesDir, rep.DatasetId, rep.Shard, rep.Piece)
		err = checkPieceFile(path, p.SizeBytes, info.ChunkSize, p.Root)
		r.mu.Lock()
		if h, ok := r.held[rep.Id]; ok {
			h.checked, h.problem = time.Now(), ""
			if err != nil {
				h.problem = err.Error()
			}
		}
		r.mu.Unlock()
		switch {
		case isPieceProblem(err):
			r.handleBadPiece(ctx, rep.Id, err.Error())
		case err != nil:
			r.noteError(fmt.Sprintf("checking replica %d's piece", rep.Id), err)
		}
	}
	r.mu.Lock()
	r.lastCheck = time.Now()
	r.counters.checks++
	r.mu.Unlock()
}

// handleBadPiece deals with a held piece whose local copy is missing or
// corrupt: with Repair on it first tries to rebuild it in place from other
// pieces; otherwise, or if that fails, it declares the fault, which costs
// less than the misses it would otherwise run into.
func (r *Role) handleBadPiece(ctx context.Context, id uint64, problem string) {
	r.mu.Lock()
	h, ok := r.held[id]
	if !ok || h.busy {
		r.mu.Unlock()
		return
	}
	h.busy, h.problem = true, problem
	rep := h.rep
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if h, ok := r.held[id]; ok {
			h.busy = false
		}
		r.mu.Unlock()
	}()
	r.log.Error("a held piece is bad", "replica", id, "dataset", rep.DatasetId, "shard", rep.Shard, "piece", rep.Piece, "problem", problem)

	if r.opts.Repair && r.repairAllowed(rep.DatasetId) {
		err := r.restore(ctx, rep)
		if err == nil {
			r.mu.Lock()
			r.counters.restores++
			if h, ok := r.held[id]; ok {
				h.problem = ""
			}
			r.mu.Unlock()
			r.log.Info("held piece rebuilt from other pieces", "replica", id, "dataset", rep.DatasetId, "shard", rep.Shard, "piece", rep.Piece)
			return
		}
		r.log.Warn("rebuilding a held piece failed; declaring the fault", "replica", id, "err", err)
	}
	r.declareFault(ctx, id, problem)
}

// restore rebuilds a held piece from other pieces of its shard and writes
// it over the bad copy.
func (r *Role) restore(ctx context.Context, rep types.Replica) error {
	info, err := r.shardInfo(ctx, rep.DatasetId, rep.Shard)
	if err != nil {
		return err
	}
	shardRes, err := r.query.Shard(ctx, &types.QueryShardRequest{DatasetId: rep.DatasetId, Index: rep.Shard})
	if err != nil {
		return err
	}
	return r.rebuild(ctx, info, shardRes.Replicas, rep.Piece, PiecePath(r.opts.PiecesDir, rep.DatasetId, rep.Shard, rep.Piece))
}

// declareFault tells the chain the operator lost a piece.
func (r *Role) declareFault(ctx context.Context, id uint64, problem string) {
	res, err := r.submit(ctx, &types.MsgDeclareFault{Holder: r.opts.Operator, ReplicaId: id})
	if err != nil {
		if chainErrIs(err, types.ErrReplicaNotActive) || chainErrIs(err, types.ErrReplicaNotFound) || chainErrIs(err, types.ErrNotHolder) {
			r.markStaleLocked(id)
		}
		r.noteError(fmt.Sprintf("declaring replica %d's fault", id), err)
		return
	}
	var slashed sdk.Coin
	if ev, ok := chain.FindEvent[*types.EventFaultDeclared](res.Events); ok {
		slashed = ev.Slashed
	}
	if err := r.withRecords(func(rt *recordTx) error {
		return rt.edit(id, func(rec *db.StorageReplicaRecord) {
			if !rec.FaultDeclared {
				rec.FaultDeclared = true
				addSlashed(rec, slashed)
			}
			rec.Status, rec.Problem = db.StorageReplicaFaulted, problem
			rec.UpdatedHeight = max(rec.UpdatedHeight, res.Height)
		})
	}); err != nil {
		r.noteError("recording a declared fault", err)
	}
	r.mu.Lock()
	delete(r.held, id)
	r.mu.Unlock()
	r.log.Warn("fault declared", "replica", id, "problem", problem, "slashed", slashed.String(), "height", res.Height, "tx", res.Hash)
}
