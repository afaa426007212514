package storage

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	errorsmod "cosmossdk.io/errors"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// recordTx edits the role's records inside one store transaction.
type recordTx struct {
	tx      *db.Tx
	changed map[uint64]db.StorageReplicaRecord
}

// get returns a record, as changed earlier in this transaction if it was.
func (rt *recordTx) get(id uint64) (db.StorageReplicaRecord, bool, error) {
	if rec, ok := rt.changed[id]; ok {
		return rec, true, nil
	}
	return rt.tx.StorageReplica(id)
}

func (rt *recordTx) put(rec db.StorageReplicaRecord) error {
	if err := rt.tx.PutStorageReplica(rec); err != nil {
		return err
	}
	rt.changed[rec.ReplicaID] = rec
	return nil
}

// edit applies fn to replica id's record (a new active one when there is
// none) and stores it.
func (rt *recordTx) edit(id uint64, fn func(*db.StorageReplicaRecord)) error {
	rec, ok, err := rt.get(id)
	if err != nil {
		return err
	}
	if !ok {
		rec = db.StorageReplicaRecord{ReplicaID: id, Status: db.StorageReplicaActive}
	}
	fn(&rec)
	return rt.put(rec)
}

// mergeChain brings a record up to date with the chain's replica. Counters
// take the larger of the two, so a replayed event never counts twice and a
// missed one is still counted.
func (rt *recordTx) mergeChain(rep types.Replica) error {
	return rt.edit(rep.Id, func(rec *db.StorageReplicaRecord) {
		rec.DatasetID, rec.Shard, rec.Piece = rep.DatasetId, rep.Shard, rep.Piece
		if rec.ClaimedHeight == 0 {
			rec.ClaimedHeight = rep.ClaimedHeight
		}
		if rep.ProofsAccepted > 0 {
			rec.NoteProof(rep.LastProvenPeriod, rep.ProofsAccepted == 1)
			rec.Answered = max(rec.Answered, rep.ProofsAccepted-1)
		}
		rec.Missed = max(rec.Missed, rep.TotalMisses)
		switch rep.Status {
		case types.REPLICA_STATUS_ACTIVE:
			rec.Status = db.StorageReplicaActive
		case types.REPLICA_STATUS_TERMINATED:
			rec.Status = db.StorageReplicaTerminated
			if rep.TerminationReason == types.TERMINATION_REASON_DECLARED_FAULT {
				rec.Status = db.StorageReplicaFaulted
				rec.FaultDeclared = true
			}
			rec.EndReason = rep.TerminationReason.String()
			rec.UpdatedHeight = max(rec.UpdatedHeight, rep.TerminatedHeight)
		}
	})
}

// end records that a replica ended.
func (rt *recordTx) end(id uint64, status db.StorageReplicaStatus, reason string, height int64) error {
	return rt.edit(id, func(rec *db.StorageReplicaRecord) {
		rec.Status = status
		if reason != "" {
			rec.EndReason = reason
		}
		if status == db.StorageReplicaFaulted {
			rec.FaultDeclared = true
		}
		rec.UpdatedHeight = max(rec.UpdatedHeight, height)
	})
}

// addSlashed adds coins to a record's slashed total.
func addSlashed(rec *db.StorageReplicaRecord, c sdk.Coin) {
	if !c.IsValid() || c.IsZero() {
		return
	}
	total, err := sdk.ParseCoinsNormalized(rec.Slashed)
	if err != nil {
		total = nil
	}
	rec.Slashed = total.Add(c).String()
}

// withRecords runs fn in one store transaction and, once it committed,
// updates the in-memory copy Status reads.
func (r *Role) withRecords(fn func(*recordTx) error) error {
	var changed map[uint64]db.StorageReplicaRecord
	err := r.opts.DB.Update(func(tx *db.Tx) error {
		rt := &recordTx{tx: tx, changed: map[uint64]db.StorageReplicaRecord{}}
		if err := fn(rt); err != nil {
			return err
		}
		changed = rt.changed
		return nil
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	for id, rec := range changed {
		r.records[id] = rec
	}
	r.mu.Unlock()
	return nil
}

// chainErrIs reports whether err is the chain refusing a message with
// target: a delivered or CheckTx failure carries its code; a failed gas
// simulation only its message.
func chainErrIs(err error, target *errorsmod.Error) bool {
	if err == nil {
		return false
	}
	var txErr *chain.TxError
	if errors.As(err, &txErr) && txErr.Result != nil {
		return txErr.Result.Codespace == target.Codespace() && txErr.Result.Code == target.ABCICode()
	}
	return strings.Contains(err.Error(), target.Error())
}

// isNotFound reports whether a query failed because the thing does not exist.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound || chainErrIs(err, types.ErrReplicaNotFound) ||
		chainErrIs(err, types.ErrDatasetNotFound) || chainErrIs(err, types.ErrShardNotFound)
}

func nextPage(key []byte) *query.PageRequest { return &query.PageRequest{Key: key, Limit: 200} }
