package db

import (
	"fmt"
)

// JobRecord is a job the sidecar has seen and what it decided about it.
type JobRecord struct {
	JobID           uint64 `json:"job_id"`
	SeenHeight      int64  `json:"seen_height"`
	BiddingDeadline int64  `json:"bidding_deadline"`
	// Decision says what the provider did, e.g. "bid" or "skip: no H100 free",
	// so the status API can explain itself.
	Decision string `json:"decision,omitempty"`
}

// BidStatus is where a placed bid stands.
type BidStatus string

// Bid statuses.
const (
	BidPlaced    BidStatus = "placed"
	BidWon       BidStatus = "won"
	BidLost      BidStatus = "lost"
	BidWithdrawn BidStatus = "withdrawn"
)

// BidRecord is a bid the sidecar placed on a job (one per job: re-bidding
// replaces the price).
type BidRecord struct {
	JobID uint64 `json:"job_id"`
	// Price per GPU-hour as a coin string, e.g. "1500000udepin".
	Price  string    `json:"price"`
	Height int64     `json:"height"`
	TxHash string    `json:"tx_hash"`
	Status BidStatus `json:"status"`
	// GPUs are the UUIDs the bid reserved: a provider never offers one GPU in
	// two open bids, so whatever it wins it can serve.
	GPUs []string `json:"gpus,omitempty"`
}

// LeaseStatus is where a lease stands from the provider's side.
type LeaseStatus string

// Lease statuses.
const (
	LeaseActive LeaseStatus = "active"
	LeaseClosed LeaseStatus = "closed"
)

// LeaseRecord is a lease the provider won, with its local progress.
type LeaseRecord struct {
	LeaseID uint64      `json:"lease_id"`
	JobID   uint64      `json:"job_id"`
	Worker  uint32      `json:"worker"`
	Status  LeaseStatus `json:"status"`
	// CloseReason is the chain's reason once closed, e.g. "LEASE_CLOSE_REASON_COMPLETED".
	CloseReason string `json:"close_reason,omitempty"`
	// Dir is the lease's working folder.
	Dir string `json:"dir"`
	// LastCheckpointStep is the step of the newest checkpoint written locally.
	LastCheckpointStep uint64 `json:"last_checkpoint_step"`
	// UpdatedHeight is the chain height of the last change.
	UpdatedHeight int64 `json:"updated_height"`
	// GPUs are the UUIDs of the GPUs serving the lease.
	GPUs []string `json:"gpus,omitempty"`
	// Runtime names the runtime that trains the lease.
	Runtime string `json:"runtime,omitempty"`
	// ResumeStep is the step the lease started from (the job's last final checkpoint).
	ResumeStep uint64 `json:"resume_step"`
	// CheckpointDeadline is the height by whose end the chain wants the next checkpoint.
	CheckpointDeadline int64 `json:"checkpoint_deadline"`
	// Problems are reasons the lease cannot be served well, e.g. a GPU that
	// failed or a trainer that broke the contract; empty while all is well.
	Problems []string `json:"problems,omitempty"`
}

// CheckpointStatus is where a submitted checkpoint stands on chain.
type CheckpointStatus string

// Checkpoint statuses.
const (
	CheckpointSubmitted  CheckpointStatus = "submitted"
	CheckpointChallenged CheckpointStatus = "challenged"
	CheckpointFinalized  CheckpointStatus = "finalized"
	CheckpointRejected   CheckpointStatus = "rejected"
)

// CheckpointRecord is a checkpoint commitment the sidecar submitted.
type CheckpointRecord struct {
	LeaseID   uint64           `json:"lease_id"`
	Index     uint64           `json:"index"`
	StartStep uint64           `json:"start_step"`
	EndStep   uint64           `json:"end_step"`
	StateRoot []byte           `json:"state_root"`
	TraceRoot []byte           `json:"trace_root"`
	FinalHash []byte           `json:"final_hash"`
	TxHash    string           `json:"tx_hash"`
	Height    int64            `json:"height"`
	Status    CheckpointStatus `json:"status"`
}

// PutJob stores (or replaces) a job record.
func (t *Tx) PutJob(r JobRecord) error { return t.putJSON(bucketJobs, u64(r.JobID), r) }

// Job returns the record of a job; ok is false when there is none.
func (t *Tx) Job(jobID uint64) (r JobRecord, ok bool, err error) {
	ok, err = t.getJSON(bucketJobs, u64(jobID), &r)
	return r, ok, err
}

// Jobs returns every job record in id order.
func (t *Tx) Jobs() ([]JobRecord, error) { return listJSON[JobRecord](t, bucketJobs, nil) }

// DeleteJob forgets a job, e.g. once it is closed and nothing refers to it.
func (t *Tx) DeleteJob(jobID uint64) error { return t.btx.Bucket(bucketJobs).Delete(u64(jobID)) }

// DeleteBid forgets the bid on a job, e.g. one whose transaction failed.
func (t *Tx) DeleteBid(jobID uint64) error { return t.btx.Bucket(bucketBids).Delete(u64(jobID)) }

// PutBid stores (or replaces) the bid on a job.
func (t *Tx) PutBid(r BidRecord) error {
	switch r.Status {
	case BidPlaced, BidWon, BidLost, BidWithdrawn:
	default:
		return fmt.Errorf("bid on job %d: unknown status %q", r.JobID, r.Status)
	}
	return t.putJSON(bucketBids, u64(r.JobID), r)
}

// Bid returns the bid on a job; ok is false when there is none.
func (t *Tx) Bid(jobID uint64) (r BidRecord, ok bool, err error) {
	ok, err = t.getJSON(bucketBids, u64(jobID), &r)
	return r, ok, err
}

// Bids returns every bid in job order.
func (t *Tx) Bids() ([]BidRecord, error) { return listJSON[BidRecord](t, bucketBids, nil) }

// PutLease stores (or replaces) a lease record.
func (t *Tx) PutLease(r LeaseRecord) error {
	switch r.Status {
	case LeaseActive, LeaseClosed:
	default:
		return fmt.Errorf("lease %d: unknown status %q", r.LeaseID, r.Status)
	}
	return t.putJSON(bucketLeases, u64(r.LeaseID), r)
}

// Lease returns a lease record; ok is false when there is none.
func (t *Tx) Lease(leaseID uint64) (r LeaseRecord, ok bool, err error) {
	ok, err = t.getJSON(bucketLeases, u64(leaseID), &r)
	return r, ok, err
}

// Leases returns every lease record in id order.
func (t *Tx) Leases() ([]LeaseRecord, error) { return listJSON[LeaseRecord](t, bucketLeases, nil) }

func checkpointKey(leaseID, index uint64) []byte {
	return append(u64(leaseID), u64(index)...)
}

// PutCheckpoint stores (or replaces) a checkpoint record.
func (t *Tx) PutCheckpoint(r CheckpointRecord) error {
	switch r.Status {
	case CheckpointSubmitted, CheckpointChallenged, CheckpointFinalized, CheckpointRejected:
	default:
		return fmt.Errorf("checkpoint %d/%d: unknown status %q", r.LeaseID, r.Index, r.Status)
	}
	return t.putJSON(bucketCheckpoints, checkpointKey(r.LeaseID, r.Index), r)
}

// Checkpoint returns one checkpoint record; ok is false when there is none.
func (t *Tx) Checkpoint(leaseID, index uint64) (r CheckpointRecord, ok bool, err error) {
	ok, err = t.getJSON(bucketCheckpoints, checkpointKey(leaseID, index), &r)
	return r, ok, err
}

// Checkpoints returns a lease's checkpoint records in index order.
func (t *Tx) Checkpoints(leaseID uint64) ([]CheckpointRecord, error) {
	return listJSON[CheckpointRecord](t, bucketCheckpoints, u64(leaseID))
}
