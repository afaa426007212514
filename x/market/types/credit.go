package types

// What Keeper.CreditJob credits to a job (x/verify sends all three).
const (
	// CreditAuditFee is an audit fee nobody earned (a missed assignment, a checkpoint
	// that never became final): it goes back, and job.audit_fees shrinks by it.
	CreditAuditFee = "audit_fee"
	// CreditLostBond is the job's share of a challenger bond the provider won: the delay
	// the challenge caused the job.
	CreditLostBond = "lost_challenger_bond"
	// CreditCompensation is what a conviction's slash pays the job for the progress it lost.
	CreditCompensation = "compensation"
)
