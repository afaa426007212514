package disputes

import (
	"context"
	"fmt"
	"strings"

	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// AuditOutcome is what an audit of one checkpoint found, and so how the auditor answers.
type AuditOutcome string

// Audit outcomes.
const (
	// AuditMatched: the re-execution reproduced the provider's trace; attest to it.
	AuditMatched AuditOutcome = "matched"
	// AuditChallenged: it did not, and a challenge was opened (which answers the
	// assignment); the disputes role plays the game.
	AuditChallenged AuditOutcome = "challenged"
	// AuditMismatchedLate: it did not, but the window closed before the challenge.
	AuditMismatchedLate AuditOutcome = "mismatched-late"
	// AuditUnavailable: the provider did not serve the state the checkpoint starts from;
	// report it.
	AuditUnavailable AuditOutcome = "unavailable"
	// AuditUnverifiable: this auditor cannot re-execute the job (not a reference
	// workload, or a dataset and no dataset fetcher).
	AuditUnverifiable AuditOutcome = "unverifiable"
)

// AuditResult is the outcome of an audit and what the auditor answers with.
type AuditResult struct {
	Outcome AuditOutcome
	// TraceRoot is the root of the auditor's own trace, for AuditMatched.
	TraceRoot []byte
	// ChallengeID is the challenge opened, for AuditChallenged.
	ChallengeID uint64
	Detail      string
}

// Audit checks checkpoint ref for an audit assignment: the same re-execution as verifier
// mode, whatever the sample. A checkpoint already checked is not re-executed again: a
// match or a challenge stands (a failed or unavailable check is tried again). An error
// means the audit could not be done now and may be retried.
func (r *Role) Audit(ctx context.Context, ref checkpoint.Ref) (AuditResult, error) {
	var rec db.VerificationRecord
	var found bool
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		rec, found, err = tx.Verification(ref.LeaseID, ref.Index)
		return err
	}); err != nil {
		return AuditResult{}, err
	}
	if !found || rec.Result == db.VerificationFailed || rec.Result == db.VerificationUnavailable ||
		(rec.Result == db.VerificationSkipped && strings.HasPrefix(rec.Detail, notSampled)) {
		checked, err := r.check(ctx, ref, false)
		if err != nil {
			return AuditResult{}, err
		}
		if checked == nil {
			return AuditResult{}, fmt.Errorf("checkpoint %s is the operator's own", ref)
		}
		rec = *checked
	}
	switch rec.Result {
	case db.VerificationMatched:
		cp, err := r.opts.Chain.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: ref.LeaseID, Index: ref.Index})
		if err != nil {
			return AuditResult{}, err
		}
		// A match means the re-executed trace has the committed root.
		return AuditResult{Outcome: AuditMatched, TraceRoot: cp.Checkpoint.TraceRoot, Detail: rec.Detail}, nil
	case db.VerificationMismatched:
		if rec.ChallengeID == 0 {
			return AuditResult{Outcome: AuditMismatchedLate, Detail: rec.Detail}, nil
		}
		return AuditResult{Outcome: AuditChallenged, ChallengeID: rec.ChallengeID, Detail: rec.Detail}, nil
	case db.VerificationUnavailable:
		return AuditResult{Outcome: AuditUnavailable, Detail: rec.Detail}, nil
	case db.VerificationSkipped:
		return AuditResult{Outcome: AuditUnverifiable, Detail: rec.Detail}, nil
	}
	return AuditResult{}, fmt.Errorf("auditing checkpoint %s: %s", ref, rec.Detail)
}
