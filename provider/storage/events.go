package storage

import (
	"context"

	"github.com/cosmos/gogoproto/proto"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// heightEvent is an event queued for the worker.
type heightEvent struct {
	height int64
	msg    proto.Message
}

// HandleEvent takes one typed event of a block. The daemon calls it for
// each event of every height, in order, inside the height's database
// transaction; a second call for an event (a height retried) is harmless:
// every effect is keyed by replica and period, and what a crash loses the
// worker's reconciliation at start finds again. It only queues what matters
// to the role and wakes the worker: it never blocks, never touches the
// network and never writes tx (the worker records what it queued in its
// own transactions). It returns nothing to do after tx commits.
func (r *Role) HandleEvent(_ context.Context, _ *db.Tx, ev chain.Event) (func(), error) {
	r.note(ev.Height, ev)
	return nil, nil
}

// note queues one event of height for the worker.
func (r *Role) note(height int64, ev chain.Event) {
	relevant := false
	switch e := ev.Message.(type) {
	case *types.EventReplicaClaimed:
		relevant = e.Holder == r.opts.Operator
	case *types.EventStorageProofAccepted:
		relevant = e.Holder == r.opts.Operator
	case *types.EventDeadlineMissed:
		relevant = e.Holder == r.opts.Operator
	case *types.EventFaultDeclared:
		relevant = e.Holder == r.opts.Operator
	case *types.EventReplicaTerminated:
		relevant = e.Holder == r.opts.Operator
	case *types.EventReplicaReleased:
		relevant = e.Holder == r.opts.Operator
	case *types.EventRepairSlotOpened:
		relevant = r.opts.Repair || r.opts.ClaimLocal || r.opts.Custody && types.IsCustodyDatasetID(e.DatasetId)
	case *types.EventCustodyRegistered:
		relevant = r.opts.Custody && e.Trainer != r.opts.Operator
	case *types.EventDatasetRegistered:
		relevant = r.opts.ClaimLocal
	case *types.EventParamsUpdated:
		relevant = true
	}
	r.mu.Lock()
	advanced := height > r.eventHeight
	r.eventHeight = max(r.eventHeight, height)
	if relevant {
		if len(r.notes) >= maxNotes {
			r.resync = true
		} else {
			r.notes = append(r.notes, heightEvent{height: height, msg: ev.Message})
		}
	}
	r.mu.Unlock()
	if relevant || advanced {
		poke(r.wake)
	}
}

// applyNotes records the queued events in one store transaction, then
// updates what the loops work from. Events that fail to record stay queued.
func (r *Role) applyNotes(ctx context.Context) {
	r.mu.Lock()
	notes, resync := r.notes, r.resync
	r.notes, r.resync = nil, false
	r.mu.Unlock()
	if resync {
		r.log.Warn("too many queued chain events; reconciling with the chain instead")
		if err := r.reconcile(ctx); err != nil {
			r.noteError("reconciling with the chain", err)
			r.mu.Lock()
			r.resync = true
			r.mu.Unlock()
		}
	}
	if len(notes) == 0 {
		return
	}
	err := r.withRecords(func(rt *recordTx) error {
		for _, n := range notes {
			if err := recordEvent(rt, n.height, n.msg); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.noteError("recording chain events", err)
		r.mu.Lock()
		r.notes = append(notes, r.notes...)
		r.mu.Unlock()
		return
	}
	wakeSlots := false
	r.mu.Lock()
	for _, n := range notes {
		switch e := n.msg.(type) {
		case *types.EventReplicaClaimed:
			if _, ok := r.held[e.ReplicaId]; !ok {
				r.held[e.ReplicaId] = &heldReplica{stale: true, rep: types.Replica{
					Id: e.ReplicaId, DatasetId: e.DatasetId, Shard: e.Shard, Piece: e.Piece, Holder: e.Holder,
					Status: types.REPLICA_STATUS_ACTIVE, NextPeriod: e.NextPeriod, NextDeadline: e.NextDeadline,
				}}
			}
		case *types.EventStorageProofAccepted:
			r.markStale(e.ReplicaId)
		case *types.EventDeadlineMissed:
			r.markStale(e.ReplicaId)
			r.log.Warn("storage challenge missed", "replica", e.ReplicaId, "period", e.Period, "deadline", e.Deadline,
				"consecutive_misses", e.ConsecutiveMisses, "slashed", e.Slashed.String())
		case *types.EventReplicaTerminated:
			delete(r.held, e.ReplicaId)
		case *types.EventReplicaReleased:
			delete(r.held, e.ReplicaId)
		case *types.EventRepairSlotOpened:
			r.addCandidate(slotKey{e.DatasetId, e.Shard, e.Piece})
			wakeSlots = true
		case *types.EventDatasetRegistered:
			r.scan[e.DatasetId] = true
			wakeSlots = true
		case *types.EventCustodyRegistered:
			for p := range e.DataPieces + e.ParityPieces {
				r.addCandidate(slotKey{e.DatasetId, 0, p})
			}
			wakeSlots = true
		case *types.EventParamsUpdated:
			r.params, r.haveParams = e.Params, true
		}
	}
	r.mu.Unlock()
	if wakeSlots {
		poke(r.repairWake)
	}
}

// markStale asks for a replica's schedule to be read again. r.mu is held.
func (r *Role) markStale(id uint64) {
	if h, ok := r.held[id]; ok {
		h.stale = true
	}
}

// addCandidate queues a slot to fill. r.mu is held.
func (r *Role) addCandidate(k slotKey) {
	if len(r.candidates) < maxCandidates {
		r.candidates[k] = struct{}{}
	}
}

// recordEvent applies one of the operator's replica events to its record.
func recordEvent(rt *recordTx, height int64, msg proto.Message) error {
	switch e := msg.(type) {
	case *types.EventReplicaClaimed:
		return rt.edit(e.ReplicaId, func(rec *db.StorageReplicaRecord) {
			rec.DatasetID, rec.Shard, rec.Piece = e.DatasetId, e.Shard, e.Piece
			if rec.ClaimedHeight == 0 {
				rec.ClaimedHeight = height
			}
			if e.NextPeriod > 0 {
				// The claim proved the period before the one it owes next.
				rec.NoteProof(e.NextPeriod-1, true)
			}
		})
	case *types.EventStorageProofAccepted:
		return rt.edit(e.ReplicaId, func(rec *db.StorageReplicaRecord) {
			rec.NoteProof(e.Period, false)
			rec.UpdatedHeight = max(rec.UpdatedHeight, height)
		})
	case *types.EventDeadlineMissed:
		return rt.edit(e.ReplicaId, func(rec *db.StorageReplicaRecord) {
			if rec.NoteMiss(e.Period) {
				addSlashed(rec, e.Slashed)
			}
			rec.UpdatedHeight = max(rec.UpdatedHeight, height)
		})
	case *types.EventFaultDeclared:
		return rt.edit(e.ReplicaId, func(rec *db.StorageReplicaRecord) {
			if !rec.FaultDeclared {
				rec.FaultDeclared = true
				addSlashed(rec, e.Slashed)
			}
			rec.UpdatedHeight = max(rec.UpdatedHeight, height)
		})
	case *types.EventReplicaTerminated:
		status := db.StorageReplicaTerminated
		if e.Reason == types.TERMINATION_REASON_DECLARED_FAULT {
			status = db.StorageReplicaFaulted
		}
		return rt.end(e.ReplicaId, status, e.Reason.String(), height)
	case *types.EventReplicaReleased:
		return rt.end(e.ReplicaId, db.StorageReplicaReleased, "released", height)
	}
	return nil
}
