package db

import "fmt"

// AuditStatus is where one of the operator's audit assignments stands.
type AuditStatus string

// Audit statuses: assigned until answered; then attested, challenged or reported on
// chain, or missed when the window closed first; failed while the auditor could not
// answer (it retries until the deadline).
const (
	AuditAssigned   AuditStatus = "assigned"
	AuditAttested   AuditStatus = "attested"
	AuditChallenged AuditStatus = "challenged"
	AuditReported   AuditStatus = "reported"
	AuditMissed     AuditStatus = "missed"
	AuditFailed     AuditStatus = "failed"
)

// AuditRecord is an audit x/verify assigned the operator, and how it ended.
type AuditRecord struct {
	LeaseID  uint64      `json:"lease_id"`
	Index    uint64      `json:"index"`
	JobID    uint64      `json:"job_id"`
	Provider string      `json:"provider"`
	Status   AuditStatus `json:"status"`
	// Fee is what the assignment pays, a coin string.
	Fee string `json:"fee"`
	// Deadline is the last height the auditor may answer at.
	Deadline       int64 `json:"deadline"`
	AssignedHeight int64 `json:"assigned_height"`
	AnsweredHeight int64 `json:"answered_height,omitempty"`
	// Detail says what the re-execution found or why the audit could not be answered.
	Detail      string `json:"detail,omitempty"`
	ChallengeID uint64 `json:"challenge_id,omitempty"`
	// Settled is set once the checkpoint resolved: Paid is what the auditor earned
	// (a coin string, zero when nothing), Slashed what it lost.
	Settled bool   `json:"settled,omitempty"`
	Paid    string `json:"paid,omitempty"`
	Slashed string `json:"slashed,omitempty"`
}

// PutAudit stores (or replaces) an audit record.
func (t *Tx) PutAudit(r AuditRecord) error {
	switch r.Status {
	case AuditAssigned, AuditAttested, AuditChallenged, AuditReported, AuditMissed, AuditFailed:
	default:
		return fmt.Errorf("audit %d/%d: unknown status %q", r.LeaseID, r.Index, r.Status)
	}
	return t.putJSON(bucketAudits, checkpointKey(r.LeaseID, r.Index), r)
}

// Audit returns the record of one assignment; ok is false when there is none.
func (t *Tx) Audit(leaseID, index uint64) (r AuditRecord, ok bool, err error) {
	ok, err = t.getJSON(bucketAudits, checkpointKey(leaseID, index), &r)
	return r, ok, err
}

// Audits returns every audit record in lease and index order.
func (t *Tx) Audits() ([]AuditRecord, error) { return listJSON[AuditRecord](t, bucketAudits, nil) }
