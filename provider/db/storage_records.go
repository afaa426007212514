package db

import "fmt"

// bucketStorageReplicas holds the storage role's replicas (package
// provider/storage), keyed by replica id. It is created on first write, so
// state files written before the storage role existed open unchanged.
var bucketStorageReplicas = []byte("storage_replicas")

// StorageReplicaStatus is where a replica the storage role claimed stands.
type StorageReplicaStatus string

// Storage replica statuses.
const (
	// StorageReplicaActive: the provider holds the piece and owes its proofs.
	StorageReplicaActive StorageReplicaStatus = "active"
	// StorageReplicaFaulted: the provider declared the piece lost; the chain
	// slashed it and terminated the replica.
	StorageReplicaFaulted StorageReplicaStatus = "faulted"
	// StorageReplicaTerminated: the chain terminated the replica after
	// missed deadlines.
	StorageReplicaTerminated StorageReplicaStatus = "terminated"
	// StorageReplicaReleased: the holder released the replica in good standing.
	StorageReplicaReleased StorageReplicaStatus = "released"
)

// StorageReplicaRecord is one replica of a dataset piece the operator
// holds or held, with what the storage role did for it. Counters only grow:
// each proof and miss is counted once per period however often its event is
// replayed (NoteProof, NoteMiss).
type StorageReplicaRecord struct {
	ReplicaID uint64               `json:"replica_id"`
	DatasetID string               `json:"dataset_id"`
	Shard     uint32               `json:"shard"`
	Piece     uint32               `json:"piece"`
	Status    StorageReplicaStatus `json:"status"`
	// ClaimedHeight is the height of the claim; ClaimTx its transaction when
	// this sidecar sent it.
	ClaimedHeight int64  `json:"claimed_height,omitempty"`
	ClaimTx       string `json:"claim_tx,omitempty"`
	// Repaired is true when the piece was rebuilt from other pieces to fill
	// a repair slot, rather than claimed from a local copy.
	Repaired bool `json:"repaired,omitempty"`
	// Proven says LastProvenPeriod is set: the newest period whose challenge
	// the chain accepted an answer for (the claim's period included).
	Proven           bool   `json:"proven,omitempty"`
	LastProvenPeriod uint64 `json:"last_proven_period,omitempty"`
	// Answered counts storage proofs the chain accepted (the claim not included).
	Answered uint64 `json:"answered,omitempty"`
	// HasMissed says LastMissedPeriod is set; Missed counts missed deadlines.
	HasMissed        bool   `json:"has_missed,omitempty"`
	LastMissedPeriod uint64 `json:"last_missed_period,omitempty"`
	Missed           uint64 `json:"missed,omitempty"`
	// FaultDeclared is true once the provider declared the piece lost;
	// Problem says what was wrong with the local copy.
	FaultDeclared bool   `json:"fault_declared,omitempty"`
	Problem       string `json:"problem,omitempty"`
	// Slashed is everything the chain slashed for this replica, as coins
	// (e.g. "1000udepin"); empty when nothing was.
	Slashed string `json:"slashed,omitempty"`
	// EndReason is the chain's termination reason once it ended.
	EndReason     string `json:"end_reason,omitempty"`
	UpdatedHeight int64  `json:"updated_height,omitempty"`
}

// NoteProof records that the chain accepted the answer for period (the
// claim counts as the first, with claim true, and is not counted in
// Answered). It reports false, changing nothing, when that period or a
// later one was already recorded.
func (r *StorageReplicaRecord) NoteProof(period uint64, claim bool) bool {
	if r.Proven && period <= r.LastProvenPeriod {
		return false
	}
	r.Proven, r.LastProvenPeriod = true, period
	if !claim {
		r.Answered++
	}
	return true
}

// NoteMiss records a missed deadline of period; false when already recorded.
func (r *StorageReplicaRecord) NoteMiss(period uint64) bool {
	if r.HasMissed && period <= r.LastMissedPeriod {
		return false
	}
	r.HasMissed, r.LastMissedPeriod = true, period
	r.Missed++
	return true
}

// PutStorageReplica stores (or replaces) a storage replica record.
func (t *Tx) PutStorageReplica(r StorageReplicaRecord) error {
	switch r.Status {
	case StorageReplicaActive, StorageReplicaFaulted, StorageReplicaTerminated, StorageReplicaReleased:
	default:
		return fmt.Errorf("storage replica %d: unknown status %q", r.ReplicaID, r.Status)
	}
	if _, err := t.btx.CreateBucketIfNotExists(bucketStorageReplicas); err != nil {
		return err
	}
	return t.putJSON(bucketStorageReplicas, u64(r.ReplicaID), r)
}

// StorageReplica returns one storage replica record; ok is false when there is none.
func (t *Tx) StorageReplica(replicaID uint64) (r StorageReplicaRecord, ok bool, err error) {
	if t.btx.Bucket(bucketStorageReplicas) == nil {
		return r, false, nil
	}
	ok, err = t.getJSON(bucketStorageReplicas, u64(replicaID), &r)
	return r, ok, err
}

// StorageReplicas returns every storage replica record in id order.
func (t *Tx) StorageReplicas() ([]StorageReplicaRecord, error) {
	if t.btx.Bucket(bucketStorageReplicas) == nil {
		return nil, nil
	}
	return listJSON[StorageReplicaRecord](t, bucketStorageReplicas, nil)
}
