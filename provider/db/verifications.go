package db

import "fmt"

// VerificationResult is what the verifier concluded about a checkpoint.
type VerificationResult string

// Verification results.
const (
	// VerificationSkipped: not checked (policy, workload kind or data).
	VerificationSkipped VerificationResult = "skipped"
	// VerificationMatched: re-execution reproduced the commitment.
	VerificationMatched VerificationResult = "matched"
	// VerificationMismatched: re-execution disagrees; a challenge was opened.
	VerificationMismatched VerificationResult = "mismatched"
	// VerificationFailed: the check could not be completed (e.g. the
	// provider's server did not serve a verifiable start state).
	VerificationFailed VerificationResult = "failed"
	// VerificationUnavailable: the provider did not serve the state the checkpoint
	// starts from (or served one that does not hash to its start hash).
	VerificationUnavailable VerificationResult = "unavailable"
)

// VerificationRecord is the verifier's record of another provider's checkpoint.
type VerificationRecord struct {
	LeaseID  uint64             `json:"lease_id"`
	Index    uint64             `json:"index"`
	JobID    uint64             `json:"job_id"`
	Provider string             `json:"provider"`
	Result   VerificationResult `json:"result"`
	// Detail says why it was skipped, what differed or what failed.
	Detail string `json:"detail,omitempty"`
	// ChallengeID is the challenge the verifier opened, 0 if none.
	ChallengeID uint64 `json:"challenge_id,omitempty"`
	// Outcome is the challenge's outcome once resolved.
	Outcome string `json:"outcome,omitempty"`
	// DeferredBehind is the verifier's open challenge of an earlier checkpoint of
	// the lease that a mismatch of this one waits behind instead of opening a
	// second game: a conviction there rejects this checkpoint too. 0 when none.
	DeferredBehind uint64 `json:"deferred_behind,omitempty"`
	Height         int64  `json:"height"`
}

// PutVerification stores (or replaces) a verification record.
func (t *Tx) PutVerification(r VerificationRecord) error {
	switch r.Result {
	case VerificationSkipped, VerificationMatched, VerificationMismatched, VerificationFailed, VerificationUnavailable:
	default:
		return fmt.Errorf("verification %d/%d: unknown result %q", r.LeaseID, r.Index, r.Result)
	}
	return t.putJSON(bucketVerifications, checkpointKey(r.LeaseID, r.Index), r)
}

// Verification returns the record of one checkpoint; ok is false when there is none.
func (t *Tx) Verification(leaseID, index uint64) (r VerificationRecord, ok bool, err error) {
	ok, err = t.getJSON(bucketVerifications, checkpointKey(leaseID, index), &r)
	return r, ok, err
}

// Verifications returns every verification record in lease and index order.
func (t *Tx) Verifications() ([]VerificationRecord, error) {
	return listJSON[VerificationRecord](t, bucketVerifications, nil)
}
