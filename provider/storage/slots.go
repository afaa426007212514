package storage

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// shardInfo is what the chain registered about a shard; datasets are
// immutable, so it is read once (but for a custody object released and registered again
// under its id, which fillSlot notices).
type shardInfo = pieces.Shard

// shardInfo returns a shard's registration, from the cache when it was read before.
func (r *Role) shardInfo(ctx context.Context, datasetID string, shard uint32) (*shardInfo, error) {
	key := shardKey{datasetID, shard}
	r.mu.Lock()
	info, ok := r.shards[key]
	r.mu.Unlock()
	if ok {
		return info, nil
	}
	ds, err := r.query.Dataset(ctx, &types.QueryDatasetRequest{DatasetId: datasetID})
	if err != nil {
		return nil, err
	}
	sh, err := r.query.Shard(ctx, &types.QueryShardRequest{DatasetId: datasetID, Index: shard})
	if err != nil {
		return nil, err
	}
	info = pieces.ShardOf(ds.Dataset, sh.Shard)
	r.mu.Lock()
	r.shards[key] = info
	r.mu.Unlock()
	return info, nil
}

// rebuild writes piece target of a shard to path (atomically). A checkpoint state's
// piece is streamed (custodyPiece). A dataset piece is rebuilt in memory from enough
// intact pieces of its shard: local files first, then downloads from the active holders
// in replicas (the operator excluded), each checked against its root; a holder that
// fails or sends wrong bytes is skipped. Under replicas, the piece itself is what is
// gathered.
func (r *Role) rebuild(ctx context.Context, info *shardInfo, replicas []types.Replica, target uint32, path string) error {
	if info.Custody != nil {
		return r.custodyPiece(ctx, info, replicas, target, path)
	}
	need := int(info.Encoding.MinLive())
	have := make([][]byte, len(info.Shard.Pieces))
	var sources []uint32
	for i := range info.Shard.Pieces {
		if uint32(i) != target || !info.Encoding.IsReedSolomon() {
			sources = append(sources, uint32(i))
		}
	}
	n := 0
	for _, i := range sources {
		if n >= need {
			break
		}
		p := info.Shard.Pieces[i]
		local := PiecePath(r.opts.PiecesDir, info.DatasetID, info.Shard.Index, i)
		if checkPieceFile(local, p.SizeBytes, info.ChunkSize, p.Root) != nil {
			continue
		}
		data, err := os.ReadFile(local)
		if err != nil {
			continue
		}
		have[i] = data
		n++
	}
	holders := pieces.ActiveHolders(replicas, r.opts.Operator)
	n, failures := r.download.Gather(ctx, info, have, sources, holders, need)
	if n < need {
		err := fmt.Errorf("%w: shard %d of %s: %d of the %d pieces needed are available locally or from their holders",
			manifest.ErrNotEnoughPieces, info.Shard.Index, info.DatasetID, n, need)
		return errors.Join(append([]error{err}, failures...)...)
	}
	data, err := info.RebuildPiece(have, target)
	if err != nil {
		return err
	}
	return pieces.WriteBytesAtomic(path, data)
}

// repairAllowed reports whether the role may get pieces of a dataset it has no local
// copy of: Repair for the datasets it is limited to, Custody for checkpoint states.
func (r *Role) repairAllowed(datasetID string) bool {
	if types.IsCustodyDatasetID(datasetID) {
		return r.opts.Custody
	}
	return r.opts.Repair && (len(r.opts.RepairDatasets) == 0 || slices.Contains(r.opts.RepairDatasets, datasetID))
}

// slotLoop fills queued slots: local pieces to claim and, with Repair on,
// repair slots to rebuild. Every CheckInterval it lists them again in case
// an event was missed.
func (r *Role) slotLoop(ctx context.Context) {
	ticker := time.NewTicker(r.opts.CheckInterval)
	defer ticker.Stop()
	for {
		r.fillQueued(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.repairWake:
		case <-ticker.C:
			if r.opts.ClaimLocal {
				if err := r.queueLocalDatasets(); err != nil {
					r.noteError("listing the pieces folder", err)
				}
			}
			if r.opts.Repair || r.opts.Custody {
				if err := r.queueRepairSlots(ctx); err != nil {
					r.noteError("listing repair slots", err)
				}
			}
		}
	}
}

// queueLocalDatasets queues every dataset folder of the pieces folder for a
// look at which of its pieces have open slots.
func (r *Role) queueLocalDatasets() error {
	ids, err := localDatasets(r.opts.PiecesDir)
	if err != nil {
		return err
	}
	r.mu.Lock()
	for _, id := range ids {
		r.scan[id] = true
	}
	r.mu.Unlock()
	return nil
}

// queueRepairSlots queues every open slot of the datasets Repair may rebuild.
func (r *Role) queueRepairSlots(ctx context.Context) error {
	datasets := r.opts.RepairDatasets
	if len(datasets) == 0 || r.opts.Custody {
		datasets = []string{""} // all of them (custody objects are created all the time)
	}
	for _, id := range datasets {
		slots, err := r.openSlots(ctx, id)
		if err != nil {
			return err
		}
		r.mu.Lock()
		for _, k := range slots {
			if r.repairAllowed(k.dataset) {
				r.addCandidate(k)
			}
		}
		r.mu.Unlock()
	}
	return nil
}

// openSlots lists the open slots of a dataset ("" for all datasets).
func (r *Role) openSlots(ctx context.Context, datasetID string) ([]slotKey, error) {
	var out []slotKey
	req := &types.QueryRepairSlotsRequest{DatasetId: datasetID}
	for {
		res, err := r.query.RepairSlots(ctx, req)
		if err != nil {
			if isNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		for _, s := range res.Slots {
			out = append(out, slotKey{s.DatasetId, s.Shard, s.Piece.Piece.Index})
		}
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			return out, nil
		}
		req.Pagination = nextPage(res.Pagination.NextKey)
	}
}

// fillQueued looks at queued datasets for local pieces with open slots, then
// tries to fill every queued slot, in (dataset, shard, piece) order.
func (r *Role) fillQueued(ctx context.Context) {
	r.mu.Lock()
	var scan []string
	for id := range r.scan {
		scan = append(scan, id)
	}
	clear(r.scan)
	r.mu.Unlock()
	slices.Sort(scan)
	for _, id := range scan {
		slots, err := r.localOpenSlots(ctx, id)
		if err != nil {
			r.noteError("listing open slots of "+id, err)
			continue
		}
		r.mu.Lock()
		for _, k := range slots {
			r.addCandidate(k)
		}
		r.mu.Unlock()
	}

	now := time.Now()
	r.mu.Lock()
	var todo []slotKey
	for k := range r.candidates {
		if now.After(r.retryAt[k]) {
			todo = append(todo, k)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(todo, func(a, b slotKey) int {
		return cmp.Or(cmp.Compare(a.dataset, b.dataset), cmp.Compare(a.shard, b.shard), cmp.Compare(a.piece, b.piece))
	})
	for _, k := range todo {
		if ctx.Err() != nil {
			return
		}
		_, err := r.fillSlot(ctx, k, r.repairAllowed(k.dataset))
		r.mu.Lock()
		if err != nil && !errors.Is(err, errNothingToDo) {
			// Try again after a while (a holder may come back, a bond may grow).
			r.retryAt[k] = time.Now().Add(r.opts.CheckInterval)
		} else {
			delete(r.candidates, k)
			delete(r.retryAt, k)
		}
		r.mu.Unlock()
		switch {
		case err == nil, errors.Is(err, errNothingToDo):
		case errors.Is(err, manifest.ErrNotEnoughPieces):
			// Usual for a dataset whose pieces are still being claimed, or
			// one whose holders are away: not a fault of this provider.
			r.log.Debug("cannot rebuild a piece yet", "dataset", k.dataset, "shard", k.shard, "piece", k.piece, "err", err)
		default:
			r.noteError(fmt.Sprintf("filling the slot of %s shard %d piece %d", k.dataset, k.shard, k.piece), err)
		}
	}
}

// localOpenSlots lists the open slots of a dataset whose piece files are in
// the pieces folder.
func (r *Role) localOpenSlots(ctx context.Context, datasetID string) ([]slotKey, error) {
	files, err := localPieces(r.opts.PiecesDir, datasetID)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	open, err := r.openSlots(ctx, datasetID)
	if err != nil {
		return nil, err
	}
	isOpen := map[slotKey]bool{}
	for _, k := range open {
		isOpen[k] = true
	}
	var out []slotKey
	for _, f := range files {
		if k := (slotKey{datasetID, f.shard, f.piece}); isOpen[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// errNothingToDo means a slot needs nothing from this provider: it is
// filled, the operator already holds a piece of the shard, or there is no
// local copy and rebuilding is not allowed.
var errNothingToDo = errors.New("nothing to do for this slot")

// Claim is a replica the role claimed.
type Claim struct {
	ReplicaID uint64 `json:"replica_id"`
	DatasetID string `json:"dataset_id"`
	Shard     uint32 `json:"shard"`
	Piece     uint32 `json:"piece"`
	Height    int64  `json:"height"`
	// Repaired is true when the piece was rebuilt from other pieces.
	Repaired bool `json:"repaired"`
}

// fillSlot claims one open slot: from the local copy when it is intact, or,
// when rebuild is true, after rebuilding the piece from other pieces.
func (r *Role) fillSlot(ctx context.Context, k slotKey, rebuild bool) (*Claim, error) {
	if r.holdsShard(k.dataset, k.shard) {
		return nil, errNothingToDo
	}
	info, err := r.shardInfo(ctx, k.dataset, k.shard)
	if err != nil {
		if isNotFound(err) {
			return nil, errNothingToDo
		}
		return nil, err
	}
	if int(k.piece) >= len(info.Shard.Pieces) {
		return nil, errNothingToDo
	}
	if info.Custody != nil && info.Custody.Trainer == r.opts.Operator {
		return nil, errNothingToDo // the trainer's own state: custody must outlive it
	}
	// Fresh: who holds what now.
	sh, err := r.query.Shard(ctx, &types.QueryShardRequest{DatasetId: k.dataset, Index: k.shard})
	if err != nil {
		return nil, err
	}
	view := sh.Shard.Pieces[k.piece]
	if !bytes.Equal(view.Piece.Root, info.Shard.Pieces[k.piece].Root) {
		// Registered again under the same id since info was read (a round's voided
		// global, aggregated anew): the piece is another one now.
		r.mu.Lock()
		delete(r.shards, shardKey{k.dataset, k.shard})
		r.mu.Unlock()
		if info, err = r.shardInfo(ctx, k.dataset, k.shard); err != nil {
			return nil, err
		}
		if int(k.piece) >= len(info.Shard.Pieces) {
			return nil, errNothingToDo
		}
	}
	if view.LiveHolders >= view.RequiredHolders {
		return nil, errNothingToDo
	}
	for _, rep := range sh.Replicas {
		if rep.Holder == r.opts.Operator && rep.Status == types.REPLICA_STATUS_ACTIVE {
			return nil, errNothingToDo // a holder keeps at most one piece of a shard
		}
	}
	p := info.Shard.Pieces[k.piece]
	path := PiecePath(r.opts.PiecesDir, k.dataset, k.shard, k.piece)
	repaired := false
	if err := checkPieceFile(path, p.SizeBytes, info.ChunkSize, p.Root); err != nil {
		if !isPieceProblem(err) && !errors.Is(err, errNoPiecesFolder) {
			return nil, err
		}
		if !rebuild {
			return nil, errNothingToDo
		}
		if err := r.rebuild(ctx, info, sh.Replicas, k.piece, path); err != nil {
			if !errors.Is(err, manifest.ErrNotEnoughPieces) {
				r.mu.Lock()
				r.counters.repairFailures++
				r.mu.Unlock()
			}
			return nil, fmt.Errorf("rebuilding: %w", err)
		}
		repaired = true
		r.log.Info("piece rebuilt for a repair slot", "dataset", k.dataset, "shard", k.shard, "piece", k.piece, "bytes", p.SizeBytes)
	}
	c, err := r.claim(ctx, info, k.piece, repaired)
	if repaired && errors.Is(err, errNothingToDo) {
		// Someone else filled the slot meanwhile: the rebuilt copy is not
		// needed (a failure for another reason keeps it for the next try).
		os.Remove(path) //nolint:errcheck // best effort; an orphan file costs only disk
	}
	return c, err
}

// holdsShard reports whether the operator holds a piece of the shard.
func (r *Role) holdsShard(datasetID string, shard uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.held {
		if h.rep.DatasetId == datasetID && h.rep.Shard == shard {
			return true
		}
	}
	return false
}

// claimAttempts bounds retries of a claim that landed in the next period.
const claimAttempts = 3

// claim proves the current period's claim challenge from the piece file and
// submits the claim; a claim that lands after the period turned is proved
// again for the new period.
func (r *Role) claim(ctx context.Context, info *shardInfo, piece uint32, repaired bool) (*Claim, error) {
	r.claimMu.Lock()
	defer r.claimMu.Unlock()
	path := PiecePath(r.opts.PiecesDir, info.DatasetID, info.Shard.Index, piece)
	var lastErr error
	for attempt := 0; attempt < claimAttempts; attempt++ {
		res, err := r.query.ClaimChallenge(ctx, &types.QueryClaimChallengeRequest{
			DatasetId: info.DatasetID, Shard: info.Shard.Index, Piece: piece, Holder: r.opts.Operator,
		})
		if err != nil {
			return nil, err
		}
		c := res.Challenge
		if c.Deadline <= res.Height+1 {
			// The period ends with the next block: the claim would land in the
			// next one. Prove that one instead.
			if err := r.waitPast(ctx, c.Deadline); err != nil {
				return nil, err
			}
			continue
		}
		proofs, err := provePieceFile(path, c)
		if err != nil {
			return nil, err
		}
		txRes, err := r.submit(ctx, &types.MsgClaimReplica{
			Holder: r.opts.Operator, DatasetId: info.DatasetID, Shard: info.Shard.Index, Piece: piece, Period: c.Period, Proofs: proofs,
		})
		if chainErrIs(err, types.ErrWrongPeriod) {
			lastErr = err
			continue
		}
		if chainErrIs(err, types.ErrNoOpenSlot) || chainErrIs(err, types.ErrAlreadyHolder) {
			return nil, errNothingToDo
		}
		if err != nil {
			return nil, err
		}
		ev, ok := chain.FindEvent[*types.EventReplicaClaimed](txRes.Events)
		if !ok {
			return nil, fmt.Errorf("claim %s has no EventReplicaClaimed", txRes.Hash)
		}
		if err := r.withRecords(func(rt *recordTx) error {
			return rt.edit(ev.ReplicaId, func(rec *db.StorageReplicaRecord) {
				rec.DatasetID, rec.Shard, rec.Piece = info.DatasetID, info.Shard.Index, piece
				rec.ClaimedHeight, rec.ClaimTx, rec.Repaired = txRes.Height, txRes.Hash, repaired
				rec.NoteProof(c.Period, true)
			})
		}); err != nil {
			r.noteError("recording a claim", err)
		}
		r.mu.Lock()
		if _, ok := r.held[ev.ReplicaId]; !ok {
			r.held[ev.ReplicaId] = &heldReplica{stale: true, rep: types.Replica{
				Id: ev.ReplicaId, DatasetId: info.DatasetID, Shard: info.Shard.Index, Piece: piece, Holder: r.opts.Operator,
				Status: types.REPLICA_STATUS_ACTIVE, NextPeriod: ev.NextPeriod, NextDeadline: ev.NextDeadline,
			}}
		}
		r.mu.Unlock()
		poke(r.wake)
		r.log.Info("replica claimed", "replica", ev.ReplicaId, "dataset", info.DatasetID, "shard", info.Shard.Index, "piece", piece,
			"repaired", repaired, "collateral", ev.Collateral.String(), "next_deadline", ev.NextDeadline, "height", txRes.Height)
		return &Claim{ReplicaID: ev.ReplicaId, DatasetID: info.DatasetID, Shard: info.Shard.Index, Piece: piece, Height: txRes.Height, Repaired: repaired}, nil
	}
	return nil, fmt.Errorf("the claim kept landing in a later period: %w", lastErr)
}

// ClaimLocal claims every open slot of a piece whose intact file is in the
// pieces folder, at most one piece per shard (the chain's rule), in
// (dataset, shard, piece) order, and returns what it claimed. Slots it cannot
// take (filled meanwhile, a shard it already holds) are skipped; other
// failures are returned together after the rest were tried. Run does the
// same by itself when ClaimLocal is set; this is for a one-off claim.
func (r *Role) ClaimLocal(ctx context.Context) ([]Claim, error) {
	if _, err := r.readHeight(ctx); err != nil {
		return nil, err
	}
	ids, err := localDatasets(r.opts.PiecesDir)
	if err != nil {
		return nil, err
	}
	var claims []Claim
	var errs []error
	for _, id := range ids {
		slots, err := r.localOpenSlots(ctx, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		for _, k := range slots {
			c, err := r.fillSlot(ctx, k, false)
			switch {
			case errors.Is(err, errNothingToDo):
			case err != nil:
				errs = append(errs, fmt.Errorf("%s shard %d piece %d: %w", k.dataset, k.shard, k.piece, err))
			default:
				claims = append(claims, *c)
			}
		}
	}
	return claims, errors.Join(errs...)
}
