// Package metrics holds the provider sidecar's Prometheus metrics: per-GPU
// telemetry under the names NVIDIA's dcgm-exporter uses (so existing GPU
// dashboards and alerts work unchanged), and the daemon's own
// depinprovider_* metrics about the chain cursor, jobs, bids, leases,
// checkpoints and transactions.
//
// Metrics registers everything on its own registry, never on Prometheus's
// global one, so several instances (e.g. in tests) do not collide. Serve it
// with Registry(), e.g. through provider/status's Options.Metrics.
package metrics

import (
	"os"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/depinchain/depinchain/provider/gpu"
)

// BidResult is the result label of depinprovider_bids_total.
type BidResult string

// The bid results counted by Bid.
const (
	BidPlaced    BidResult = "placed"
	BidSkipped   BidResult = "skipped"
	BidFailed    BidResult = "failed"
	BidWithdrawn BidResult = "withdrawn"
	BidWon       BidResult = "won"
	BidLost      BidResult = "lost"
)

// CheckpointStatus is the status label of depinprovider_checkpoints_total.
type CheckpointStatus string

// The checkpoint outcomes counted by Checkpoint.
const (
	CheckpointSubmitted CheckpointStatus = "submitted"
	CheckpointFinalized CheckpointStatus = "finalized"
	CheckpointRejected  CheckpointStatus = "rejected"
	CheckpointFailed    CheckpointStatus = "failed"
)

// BidLatencyBuckets are depinprovider_bid_latency_blocks' buckets: 0 to 10 blocks.
var BidLatencyBuckets = prometheus.LinearBuckets(0, 1, 11)

// Metrics is the sidecar's metrics and the registry they live on. Its methods
// are safe for concurrent use.
type Metrics struct {
	reg  *prometheus.Registry
	gpus *gpuCollector

	heightsMu                 sync.Mutex
	cursorHeight, chainHeight int64 // under heightsMu

	cursorHeightG, chainHeightG, cursorLag prometheus.Gauge
	websocketConnected                     prometheus.Gauge

	jobsSeen     prometheus.Counter
	bids         *prometheus.CounterVec
	leases       *prometheus.CounterVec
	leasesActive prometheus.Gauge
	checkpoints  *prometheus.CounterVec
	transactions *prometheus.CounterVec
	trainingStep *prometheus.GaugeVec
	hashBytes    prometheus.Counter
	earnings     prometheus.Counter
	// roundMismatch and roundWait are the rounds role's (training together).
	roundMismatch prometheus.Counter
	roundWait     prometheus.Counter
	disputeMoves  *prometheus.CounterVec
	moveMargin    *prometheus.HistogramVec
	verified      *prometheus.CounterVec
	bidLatency    prometheus.Histogram
	audits        AuditMetrics

	// What an operator is alerted on (docs/monitoring/alerts.yml).
	checkpointDeadline            *prometheus.GaugeVec
	disputesOpen                  *prometheus.GaugeVec
	disputesOpened, disputesEnded *prometheus.CounterVec
	bond, bondLocked, bondFree    prometheus.Gauge
	bondRequired                  prometheus.Gauge
}

// The dispute roles and results labelled by the dispute metrics.
var (
	disputeRoles   = []string{"defender", "challenger"}
	disputeResults = []string{DisputeWon, DisputeLost, DisputeMoot}
)

// The result label of depinprovider_disputes_resolved_total, from the
// operator's side of the game.
const (
	DisputeWon  = "won"
	DisputeLost = "lost"
	// DisputeMoot: the game ended without a winner (e.g. the lease closed).
	DisputeMoot = "moot"
)

// New returns the sidecar's metrics on a fresh registry that also carries the
// Go runtime and process collectors. hostname is the GPU metrics' Hostname
// label; empty means os.Hostname().
func New(hostname string) *Metrics {
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	m := &Metrics{reg: prometheus.NewRegistry(), gpus: newGPUCollector(hostname)}
	m.newChainMetrics()
	m.newMarketMetrics()
	m.newWorkMetrics()
	m.newAlertMetrics()
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.gpus,
		m.cursorHeightG, m.chainHeightG, m.cursorLag, m.websocketConnected,
		m.jobsSeen, m.bids, m.leases, m.leasesActive, m.checkpoints, m.transactions,
		m.trainingStep, m.hashBytes, m.earnings, m.bidLatency, m.roundMismatch, m.roundWait,
		m.disputeMoves, m.moveMargin, m.verified,
		m.checkpointDeadline, m.disputesOpen, m.disputesOpened, m.disputesEnded,
		m.bond, m.bondLocked, m.bondFree, m.bondRequired,
	)
	// Every known label value starts at 0, so rate() and absent() work from
	// the first scrape instead of from the first event.
	for _, r := range []BidResult{BidPlaced, BidSkipped, BidFailed, BidWithdrawn, BidWon, BidLost} {
		m.bids.WithLabelValues(string(r))
	}
	for _, e := range []string{"won", "closed"} {
		m.leases.WithLabelValues(e)
	}
	for _, s := range []CheckpointStatus{CheckpointSubmitted, CheckpointFinalized, CheckpointRejected, CheckpointFailed} {
		m.checkpoints.WithLabelValues(string(s))
	}
	for _, role := range disputeRoles {
		m.disputesOpen.WithLabelValues(role)
		m.disputesOpened.WithLabelValues(role)
		for _, res := range disputeResults {
			m.disputesEnded.WithLabelValues(role, res)
		}
	}
	return m
}

// newAlertMetrics makes the metrics the operator's alerts need: checkpoint
// deadlines, disputes and the bond.
func (m *Metrics) newAlertMetrics() {
	m.checkpointDeadline = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "depinprovider_lease_checkpoint_deadline_height",
		Help: "Height by whose end the chain needs the next checkpoint of each running lease (moved on by each checkpoint submitted); past it the lease is lost and the bond slashed.",
	}, []string{"lease"})
	m.disputesOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "depinprovider_disputes_open",
		Help: "Open verification games the operator plays, by role: defender (its checkpoint is challenged) or challenger.",
	}, []string{"role"})
	m.disputesOpened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_disputes_opened_total",
		Help: "Verification games opened with the operator as a party, by role (defender or challenger).",
	}, []string{"role"})
	m.disputesEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_disputes_resolved_total",
		Help: "Verification games the operator played that ended, by role and result from its side (won, lost, moot).",
	}, []string{"role", "result"})
	bond := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m.bond = bond("depinprovider_bond_udepin", "The provider's bond in x/stakingext, locked collateral included, in udepin.")
	m.bondLocked = bond("depinprovider_bond_locked_udepin", "The part of the bond locked as collateral for leases and disputes, in udepin.")
	m.bondFree = bond("depinprovider_bond_free_udepin", "Bond not locked (bond - locked), in udepin: a new lease needs its collateral from it.")
	m.bondRequired = bond("depinprovider_bond_required_udepin", "Bond the provider needs to bid at all: min_bond_per_gpu × its registered GPUs, in udepin.")
}

// newChainMetrics makes the metrics of the sidecar's view of the chain.
func (m *Metrics) newChainMetrics() {
	m.cursorHeightG = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depinprovider_cursor_height",
		Help: "Last block height whose events the sidecar has processed.",
	})
	m.chainHeightG = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depinprovider_chain_height",
		Help: "Latest block height the node reported.",
	})
	m.cursorLag = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depinprovider_cursor_lag_blocks",
		Help: "Blocks the sidecar's cursor is behind the chain (chain_height - cursor_height, at least 0).",
	})
	m.websocketConnected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depinprovider_websocket_connected",
		Help: "1 while the event subscription to the node's websocket is up, else 0.",
	})
}

// newMarketMetrics makes the metrics of jobs, bids, leases and earnings.
func (m *Metrics) newMarketMetrics() {
	m.jobsSeen = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "depinprovider_jobs_seen_total",
		Help: "Open jobs the sidecar has seen.",
	})
	m.bids = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_bids_total",
		Help: "Bids by result: placed, skipped (decided not to bid), failed (tx failed), withdrawn, won, lost.",
	}, []string{"result"})
	m.leases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_leases_total",
		Help: "Lease events: won, closed.",
	}, []string{"event"})
	m.leasesActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "depinprovider_leases_active",
		Help: "Leases this provider is currently running.",
	})
	m.bidLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "depinprovider_bid_latency_blocks",
		Help:    "Blocks between a job's creation height and the inclusion height of the sidecar's bid on it.",
		Buckets: BidLatencyBuckets,
	})
	m.earnings = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "depinprovider_earnings_withdrawn_udepin_total",
		Help: "Lease earnings withdrawn, in udepin.",
	})
	m.transactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_transactions_total",
		Help: "Transactions the sidecar broadcast, by Msg type URL and result (ok, failed).",
	}, []string{"msg", "result"})
}

// newWorkMetrics makes the metrics of training, checkpoints, disputes and
// verification.
func (m *Metrics) newWorkMetrics() {
	m.checkpoints = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_checkpoints_total",
		Help: "Checkpoints by status: submitted, finalized, rejected, failed (not submitted).",
	}, []string{"status"})
	m.trainingStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "depinprovider_training_step",
		Help: "Current training step of each running lease.",
	}, []string{"lease"})
	m.hashBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "depinprovider_checkpoint_hash_bytes_total",
		Help: "Bytes of checkpoint files hashed for state roots.",
	})
	m.roundMismatch = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "depinprovider_round_global_mismatches_total",
		Help: "Committed global states of training-together rounds that were not this sidecar's own aggregate.",
	})
	m.roundWait = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "depinprovider_round_barrier_wait_seconds_total",
		Help: "Seconds workers of training-together jobs waited for their round to close and its global to be committed.",
	})
	m.disputeMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_dispute_moves_total",
		Help: "Moves made in x/verify bisection games, by the role played (defender or challenger).",
	}, []string{"role"})
	m.moveMargin = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "depinprovider_dispute_move_margin_blocks",
		Help:    "Blocks left before the move deadline when a dispute move was included.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	}, []string{"role"})
	m.verified = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "depinprovider_verifications_total",
		Help: "Other providers' checkpoints the verifier looked at, by result (matched, mismatched, skipped, failed).",
	}, []string{"result"})
}

// Registry is the registry holding every metric; serve it at /metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetCursorHeight records the last height the sidecar processed, and the lag.
func (m *Metrics) SetCursorHeight(h int64) {
	m.heightsMu.Lock()
	defer m.heightsMu.Unlock()
	m.cursorHeight = h
	m.cursorHeightG.Set(float64(h))
	m.updateLag()
}

// SetChainHeight records the node's latest height, and the lag.
func (m *Metrics) SetChainHeight(h int64) {
	m.heightsMu.Lock()
	defer m.heightsMu.Unlock()
	m.chainHeight = h
	m.chainHeightG.Set(float64(h))
	m.updateLag()
}

func (m *Metrics) updateLag() {
	lag := m.chainHeight - m.cursorHeight
	if lag < 0 {
		lag = 0
	}
	m.cursorLag.Set(float64(lag))
}

// SetWebsocketConnected records whether the node's event subscription is up.
func (m *Metrics) SetWebsocketConnected(up bool) { m.websocketConnected.Set(boolFloat(up)) }

// JobSeen counts an open job the sidecar saw for the first time.
func (m *Metrics) JobSeen() { m.jobsSeen.Inc() }

// Bid counts a bid decision or outcome.
func (m *Metrics) Bid(result BidResult) { m.bids.WithLabelValues(string(result)).Inc() }

// BidLatency observes how many blocks after the job's creation the bid was included.
func (m *Metrics) BidLatency(jobCreatedHeight, bidHeight int64) {
	d := bidHeight - jobCreatedHeight
	if d < 0 {
		d = 0
	}
	m.bidLatency.Observe(float64(d))
}

// LeaseWon counts a lease the provider won.
func (m *Metrics) LeaseWon() { m.leases.WithLabelValues("won").Inc() }

// LeaseClosed counts a lease that closed, and forgets its training step
// and checkpoint deadline.
func (m *Metrics) LeaseClosed(leaseID uint64) {
	m.leases.WithLabelValues("closed").Inc()
	m.trainingStep.DeleteLabelValues(leaseLabel(leaseID))
	m.checkpointDeadline.DeleteLabelValues(leaseLabel(leaseID))
}

// SetLeasesActive records how many leases are running.
func (m *Metrics) SetLeasesActive(n int) { m.leasesActive.Set(float64(n)) }

// SetTrainingStep records a running lease's current step.
func (m *Metrics) SetTrainingStep(leaseID, step uint64) {
	m.trainingStep.WithLabelValues(leaseLabel(leaseID)).Set(float64(step))
}

// Checkpoint counts a checkpoint outcome.
func (m *Metrics) Checkpoint(status CheckpointStatus) {
	m.checkpoints.WithLabelValues(string(status)).Inc()
}

// CheckpointHashed counts bytes hashed while computing a checkpoint's state root.
func (m *Metrics) CheckpointHashed(bytes uint64) { m.hashBytes.Add(float64(bytes)) }

// Transaction counts a broadcast transaction by its Msg type URL
// (e.g. "/depinchain.market.v1.MsgPlaceBid") and whether it succeeded.
func (m *Metrics) Transaction(msgTypeURL string, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.transactions.WithLabelValues(msgTypeURL, result).Inc()
}

// EarningsWithdrawn counts udepin withdrawn from leases.
func (m *Metrics) EarningsWithdrawn(udepin uint64) { m.earnings.Add(float64(udepin)) }

// RoundGlobalMismatch counts a committed global state that is not this sidecar's aggregate.
func (m *Metrics) RoundGlobalMismatch() { m.roundMismatch.Inc() }

// RoundBarrierWait adds the seconds a worker waited on a round barrier.
func (m *Metrics) RoundBarrierWait(seconds float64) { m.roundWait.Add(seconds) }

// DisputeMove counts a move included in a bisection game, with the blocks
// that were left before its deadline.
func (m *Metrics) DisputeMove(role string, blocksToSpare int64) {
	m.disputeMoves.WithLabelValues(role).Inc()
	m.moveMargin.WithLabelValues(role).Observe(float64(blocksToSpare))
}

// SetCheckpointDeadline records the height by which a running lease must
// submit its next checkpoint.
func (m *Metrics) SetCheckpointDeadline(leaseID uint64, height int64) {
	m.checkpointDeadline.WithLabelValues(leaseLabel(leaseID)).Set(float64(height))
}

// SetDisputesOpen records how many open games the operator plays in role
// ("defender" or "challenger").
func (m *Metrics) SetDisputesOpen(role string, n int) {
	m.disputesOpen.WithLabelValues(role).Set(float64(n))
}

// DisputeOpened counts a game opened with the operator in role.
func (m *Metrics) DisputeOpened(role string) { m.disputesOpened.WithLabelValues(role).Inc() }

// DisputeResolved counts a game the operator played in role that ended with
// result (DisputeWon, DisputeLost or DisputeMoot).
func (m *Metrics) DisputeResolved(role, result string) {
	m.disputesEnded.WithLabelValues(role, result).Inc()
}

// SetBond records the provider's bond, its locked part and the bond it
// needs to bid, in udepin, as read from the chain.
func (m *Metrics) SetBond(bonded, locked, required float64) {
	m.bond.Set(bonded)
	m.bondLocked.Set(locked)
	m.bondFree.Set(max(bonded-locked, 0)) // a slash can leave less bond than is locked
	m.bondRequired.Set(required)
}

// Verification counts a checkpoint the verifier looked at, by result.
func (m *Metrics) Verification(result string) { m.verified.WithLabelValues(result).Inc() }

// ObserveGPUs replaces the GPU metrics with gpus: GPUs no longer listed stop
// being exported. model maps NVML's product name to the chain's model name
// (nil means gpu.ModelName); leaseOf returns the lease using a GPU by UUID, 0
// when free (nil means every GPU is free).
func (m *Metrics) ObserveGPUs(gpus []gpu.GPU, model func(nvmlName string) string, leaseOf func(uuid string) uint64) {
	if model == nil {
		model = gpu.ModelName
	}
	snap := make([]gpuSample, 0, len(gpus))
	for _, g := range gpus {
		s := gpuSample{GPU: g, model: model(g.Name)}
		if leaseOf != nil {
			s.lease = leaseOf(g.UUID)
		}
		snap = append(snap, s)
	}
	m.gpus.set(snap)
}

func leaseLabel(id uint64) string { return strconv.FormatUint(id, 10) }

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// StorageTotals are the storage role's running totals.
type StorageTotals struct {
	PiecesHeld                                       int
	ChallengesAnswered, ChallengesMissed, FaultsDecl uint64
	Repairs                                          uint64
}

// RegisterStorage exports the storage role's totals, read from totals at
// each scrape: pieces held, storage proofs answered and missed, faults
// declared and repairs made.
func (m *Metrics) RegisterStorage(totals func() StorageTotals) {
	counter := func(name, help string, v func(StorageTotals) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(totals())) })
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "depinprovider_storage_pieces_held", Help: "Dataset pieces the storage role holds."},
			func() float64 { return float64(totals().PiecesHeld) }),
		counter("depinprovider_storage_proofs_answered_total", "Storage challenges answered with accepted proofs.",
			func(t StorageTotals) uint64 { return t.ChallengesAnswered }),
		counter("depinprovider_storage_proofs_missed_total", "Storage challenges whose deadline passed unanswered.",
			func(t StorageTotals) uint64 { return t.ChallengesMissed }),
		counter("depinprovider_storage_faults_declared_total", "Faults declared for pieces found lost or corrupt.",
			func(t StorageTotals) uint64 { return t.FaultsDecl }),
		counter("depinprovider_storage_repairs_total", "Repair slots claimed by rebuilding a piece.",
			func(t StorageTotals) uint64 { return t.Repairs }),
	)
}
