package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	sdk "github.com/cosmos/cosmos-sdk/types"
)

// AuditMetrics are the audits role's metrics: assignments, answers by kind, how they
// were settled, the fees earned and the bond slashed. RegisterAudits adds them to the
// registry; they are only exported by a sidecar that audits.
type AuditMetrics struct {
	once     sync.Once
	assigned prometheus.Counter
	answered *prometheus.CounterVec
	settled  *prometheus.CounterVec
	earned   prometheus.Counter
	slashed  prometheus.Counter
}

// AuditAnswerStatuses are the answer label values of depinprovider_audit_answers_total.
var AuditAnswerStatuses = []string{"attested", "challenged", "reported"}

// AuditSettledStatuses are the status label values of depinprovider_audits_settled_total.
var AuditSettledStatuses = []string{"attested", "challenged", "reported", "missed"}

// RegisterAudits exports the audits role's metrics on m's registry.
func (m *Metrics) RegisterAudits() {
	a := &m.audits
	a.once.Do(func() {
		a.assigned = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "depinprovider_audit_assignments_total",
			Help: "Audit assignments x/verify drew for this verifier.",
		})
		a.answered = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depinprovider_audit_answers_total",
			Help: "Audit assignments answered on chain, by answer: attested, challenged, reported (start state unavailable).",
		}, []string{"answer"})
		a.settled = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "depinprovider_audits_settled_total",
			Help: "Audit assignments settled when their checkpoint resolved, by how they ended; missed ones were slashed.",
		}, []string{"status"})
		a.earned = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "depinprovider_audit_fees_earned_total",
			Help: "Audit fees paid to this verifier, in the bond denomination's base unit.",
		})
		a.slashed = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "depinprovider_audit_slashed_total",
			Help: "Verifier bond slashed for audits (misses, attestations of proven fraud), in the bond denomination's base unit.",
		})
		for _, s := range AuditAnswerStatuses {
			a.answered.WithLabelValues(s)
		}
		for _, s := range AuditSettledStatuses {
			a.settled.WithLabelValues(s)
		}
		m.reg.MustRegister(a.assigned, a.answered, a.settled, a.earned, a.slashed)
	})
}

// AuditAssigned counts a new assignment.
func (m *Metrics) AuditAssigned() {
	if m.audits.assigned != nil {
		m.audits.assigned.Inc()
	}
}

// AuditAnswered counts an answer sent (attested, challenged or reported).
func (m *Metrics) AuditAnswered(answer string) {
	if m.audits.answered != nil {
		m.audits.answered.WithLabelValues(answer).Inc()
	}
}

// AuditSettled counts a settled assignment with what it paid and cost.
func (m *Metrics) AuditSettled(status string, paid, slashed sdk.Coin) {
	if m.audits.settled == nil {
		return
	}
	m.audits.settled.WithLabelValues(status).Inc()
	if !paid.Amount.IsNil() && paid.IsPositive() {
		m.audits.earned.Add(float64(paid.Amount.Int64()))
	}
	if !slashed.Amount.IsNil() && slashed.IsPositive() {
		m.audits.slashed.Add(float64(slashed.Amount.Int64()))
	}
}
