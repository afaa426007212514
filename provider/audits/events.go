package audits

import (
	"context"
	"strings"

	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// HandleEvent records the operator's assignments and queues them, records how they
// were settled, and asks to rejoin the audit set when a miss took the verifier out.
func (r *Role) HandleEvent(_ context.Context, tx *db.Tx, ev chain.Event) (func(), error) {
	switch e := ev.Message.(type) {
	case *verifytypes.EventAuditAssigned:
		if e.Auditor != r.opts.Operator {
			return nil, nil
		}
		if err := r.record(tx, verifytypes.Audit{
			LeaseId: e.LeaseId, CheckpointIndex: e.CheckpointIndex, Auditor: e.Auditor, JobId: e.JobId, Provider: e.Provider,
			Fee: e.Fee, Deadline: e.Deadline, AssignedHeight: ev.Height,
		}); err != nil {
			return nil, err
		}
		ref := checkpoint.Ref{LeaseID: e.LeaseId, Index: e.CheckpointIndex}
		return func() {
			r.opts.Metrics.AuditAssigned()
			r.log.Info("audit assigned", "checkpoint", ref.String(), "provider", e.Provider, "steps", e.EndStep-e.StartStep,
				"fee", e.Fee.String(), "deadline", e.Deadline)
			r.enqueue(ref)
		}, nil
	case *verifytypes.EventAuditSettled:
		if e.Auditor != r.opts.Operator {
			return nil, nil
		}
		rec, ok, err := tx.Audit(e.LeaseId, e.CheckpointIndex)
		if err != nil || !ok {
			return nil, err
		}
		rec.Settled, rec.Paid, rec.Slashed = true, e.Paid.String(), e.Slashed.String()
		switch e.Status {
		case verifytypes.AUDIT_STATUS_MISSED:
			rec.Status = db.AuditMissed
		case verifytypes.AUDIT_STATUS_ATTESTED:
			rec.Status = db.AuditAttested
		case verifytypes.AUDIT_STATUS_CHALLENGED:
			rec.Status = db.AuditChallenged
		case verifytypes.AUDIT_STATUS_REPORTED:
			rec.Status = db.AuditReported
		}
		if err := tx.PutAudit(rec); err != nil {
			return nil, err
		}
		status := strings.ToLower(strings.TrimPrefix(e.Status.String(), "AUDIT_STATUS_"))
		return func() {
			r.opts.Metrics.AuditSettled(status, e.Paid, e.Slashed)
			r.log.Info("audit settled", "lease", e.LeaseId, "index", e.CheckpointIndex, "status", status,
				"paid", e.Paid.String(), "slashed", e.Slashed.String())
		}, nil
	case *stakingexttypes.EventVerifierDeactivated:
		if e.Operator != r.opts.Operator || !r.opts.Config.Reactivate {
			return nil, nil
		}
		return func() {
			r.log.Warn("out of the audit set; rejoining", "reason", e.Reason)
			select {
			case r.activate <- struct{}{}:
			default:
			}
		}, nil
	}
	return nil, nil
}

// pageRequest asks for the page after key (the first page for nil).
func pageRequest(key []byte) *query.PageRequest {
	return &query.PageRequest{Key: key, Limit: 100}
}
