// Package jobview assembles what a job owner wants to see of a job from
// the chain's public gRPC queries and the providers' public checkpoint
// ports: the job, its leases across reopenings, progress per worker, its
// checkpoints with their finality, its disputes, its money and its loss
// curve, verified where the workload lets the chain vouch for the loss, and
// a training-together job's rounds.
// `depinchaind dashboard` and `depinchaind job status` both show a View.
package jobview

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sdkmath "cosmossdk.io/math"
	"github.com/cosmos/cosmos-sdk/client/grpc/cmtservice"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"
	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Loss sources: a verified loss was read from chunk 0 of the checkpoint's
// state, proven against its state_root on chain; a self-reported one is the
// checkpoint's "loss" metric, which nothing checks.
const (
	LossVerified     = "verified"
	LossSelfReported = "self-reported"
)

// Source reads the chain and the providers. Its zero value is not usable;
// build one with Dial or New.
type Source struct {
	Market  markettypes.QueryClient
	Verify  verifytypes.QueryClient
	Staking stakingexttypes.QueryClient
	// Shards reads the custody of checkpoint states (x/shardregistry); nil leaves
	// View.Custody empty.
	Shards shardregistrytypes.QueryClient
	// Node answers the node's identity (chain id); nil when unknown.
	Node cmtservice.ServiceClient
	// HTTP fetches chunk 0 of checkpoint states from providers.
	HTTP *http.Client
	// Now is the clock rates and ETAs are computed against (time.Now if nil).
	Now func() time.Time

	mu sync.Mutex
	// verified caches proven headers by state root: a proof never changes
	// its answer, so a polled page asks each provider once per checkpoint.
	verified map[merkle.Hash]exact.Header
}

// New returns a Source over the given query clients.
func New(m markettypes.QueryClient, v verifytypes.QueryClient, s stakingexttypes.QueryClient) *Source {
	return &Source{Market: m, Verify: v, Staking: s, HTTP: &http.Client{Timeout: 5 * time.Second}}
}

// Dial connects to a node's gRPC endpoint (host:port).
func Dial(grpcAddr string) (*Source, *grpc.ClientConn, error) {
	conn, err := chain.DialGRPC(grpcAddr, chain.NewEncodingConfig().InterfaceRegistry)
	if err != nil {
		return nil, nil, fmt.Errorf("gRPC %s: %w", grpcAddr, err)
	}
	src := New(markettypes.NewQueryClient(conn), verifytypes.NewQueryClient(conn), stakingexttypes.NewQueryClient(conn))
	src.Node = cmtservice.NewServiceClient(conn)
	src.Shards = shardregistrytypes.NewQueryClient(conn)
	return src, conn, nil
}

// NodeInfo returns the chain id the node serves.
func (s *Source) NodeInfo(ctx context.Context) (string, error) {
	if s.Node == nil {
		return "", fmt.Errorf("no node service")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.Node.GetNodeInfo(ctx, &cmtservice.GetNodeInfoRequest{})
	if err != nil {
		return "", err
	}
	return res.GetDefaultNodeInfo().GetNetwork(), nil
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// View is one job as its owner sees it.
type View struct {
	ID          uint64       `json:"id"`
	Name        string       `json:"name"`
	Owner       string       `json:"owner"`
	State       string       `json:"state"`
	CloseReason string       `json:"close_reason,omitempty"`
	Kind        string       `json:"kind"`
	Verifiable  bool         `json:"verifiable"`
	TotalSteps  uint64       `json:"total_steps"`
	Interval    uint64       `json:"checkpoint_interval"`
	Workers     []Worker     `json:"workers"`
	Money       Money        `json:"money"`
	Leases      []Lease      `json:"leases"`
	Checkpoints []Checkpoint `json:"checkpoints"`
	Disputes    []Dispute    `json:"disputes"`
	Loss        []LossPoint  `json:"loss"`
	// Custody is who holds each checkpoint's state pieces (jobs with a custody section).
	Custody []Custody `json:"custody,omitempty"`
	// Sync and Rounds are a training-together job's sync section and its rounds, oldest
	// first (sync jobs only).
	Sync   *Sync   `json:"sync,omitempty"`
	Rounds []Round `json:"rounds,omitempty"`
	// Bids are the auction's open bids while the job is OPEN (x/market deletes a job's
	// bids when its auction closes), cheapest per step first, then the bids that won,
	// one per lease, read from the leases: a lease keeps its winning bid's terms.
	Bids []Bid `json:"bids"`
	// BiddingDeadline is the height at whose end the open auction closes (0 when none is open).
	BiddingDeadline int64     `json:"bidding_deadline,omitempty"`
	CreatedAt       int64     `json:"created_height"`
	TimeDeadline    time.Time `json:"time_deadline"`
	AsOf            time.Time `json:"as_of"`
}

// Worker is one worker's progress.
type Worker struct {
	Worker   uint32 `json:"worker"`
	Step     uint64 `json:"step"`
	Total    uint64 `json:"total"`
	LeaseID  uint64 `json:"lease_id,omitempty"`
	Provider string `json:"provider,omitempty"`
	// StepsPerHour is the rate since the active lease started (0 without one).
	StepsPerHour float64 `json:"steps_per_hour"`
	// ETASeconds is the time left at that rate (0 when unknown or done).
	ETASeconds float64 `json:"eta_seconds"`
	// CheckpointDeadline is the height by which the active lease's next
	// checkpoint is due (0 without an active lease).
	CheckpointDeadline int64 `json:"checkpoint_deadline,omitempty"`
	// LatestLoss is the loss of the worker's newest checkpoint that has one.
	LatestLoss *LossPoint `json:"latest_loss,omitempty"`
	// CommittedStepsPerHour is the rate the active lease's bid committed to (0 without one).
	CommittedStepsPerHour uint64 `json:"committed_steps_per_hour"`
	// CheckpointedStep is the end of the active lease's last submitted checkpoint, and
	// CheckpointedStepsPerHour its rate since the lease started: what the chain holds
	// against the committed rate (rate_tolerance).
	CheckpointedStep         uint64  `json:"checkpointed_step"`
	CheckpointedStepsPerHour float64 `json:"checkpointed_steps_per_hour"`
	// PricePerStep is the active lease's price per step.
	PricePerStep string `json:"price_per_step,omitempty"`
	// Paid, Pending and Refunded are the worker's money over all its leases: released by
	// final checkpoints, claimed by checkpoints not final yet, and returned to the job
	// (claims of rejected checkpoints).
	Paid     string `json:"paid"`
	Pending  string `json:"pending"`
	Refunded string `json:"refunded"`
}

// Money is the job's escrow account, all in the job's denom.
type Money struct {
	Denom     string `json:"denom"`
	Deposited string `json:"deposited"`
	// Escrowed is what is still held for future work.
	Escrowed string `json:"escrowed"`
	// Pending is accrued for checkpoints not final yet.
	Pending string `json:"pending"`
	// Paid is final: withdrawable plus withdrawn.
	Paid         string `json:"paid"`
	AuditFees    string `json:"audit_fees"`
	Compensation string `json:"compensation"`
	// StorageEscrowed is the custody storage budget not yet paid to holders (kept
	// after the job closes: the final checkpoint is retained); StoragePaid is what
	// custody holders were paid for proven periods.
	StorageEscrowed string `json:"storage_escrowed"`
	StoragePaid     string `json:"storage_paid"`
	// Refunded is what went back to the owner when the job closed: the
	// deposit less everything paid, pending, spent on audits or storage, or still
	// held for storage.
	Refunded string `json:"refunded"`
}

// Lease is one lease of the job; a reopened worker has several.
type Lease struct {
	ID          uint64    `json:"id"`
	Worker      uint32    `json:"worker"`
	Provider    string    `json:"provider"`
	State       string    `json:"state"`
	CloseReason string    `json:"close_reason,omitempty"`
	StartHeight int64     `json:"start_height"`
	StartTime   time.Time `json:"start_time"`
	ResumeStep  uint64    `json:"resume_step"`
	Price       string    `json:"price_per_gpu_hour"`
	GPUs        uint32    `json:"gpus"`
	Collateral  string    `json:"collateral"`
	Paid        string    `json:"paid"`
	Pending     string    `json:"pending"`
	// StepsPerHour is the committed rate and PricePerStep the price per step it implies.
	StepsPerHour uint64 `json:"steps_per_hour"`
	PricePerStep string `json:"price_per_step"`
	// ClaimedStep is the end of the lease's last submitted checkpoint.
	ClaimedStep uint64 `json:"claimed_step"`
	// Refunded is what the lease's claims gave back to the job (rejected checkpoints).
	Refunded string `json:"refunded"`
}

// Bid statuses: an open bid waits for the auction to close; a won bid is a lease's terms.
const (
	BidOpen = "open"
	BidWon  = "won"
)

// Bid is one bid on the job: open, or the winning bid behind a lease.
type Bid struct {
	Provider        string `json:"provider"`
	PricePerGPUHour string `json:"price_per_gpu_hour"`
	GPUs            uint32 `json:"gpus"`
	// StepsPerHour is the throughput the bid commits to (x/market v4), and PricePerStep
	// the price × GPUs ÷ steps_per_hour the auction ranks by.
	StepsPerHour uint64 `json:"steps_per_hour"`
	PricePerStep string `json:"price_per_step"`
	Runtime      string `json:"runtime,omitempty"`
	Status       string `json:"status"`
	// CreatedHeight is the open bid's height; for a won bid, whose own height the
	// chain no longer keeps, the lease's start height (the auction's close).
	CreatedHeight int64 `json:"created_height,omitempty"`
	// LeaseID and Worker are the lease a won bid became.
	LeaseID uint64 `json:"lease_id,omitempty"`
	Worker  uint32 `json:"worker"`
}

// Checkpoint is one checkpoint with its finality and loss.
type Checkpoint struct {
	LeaseID           uint64 `json:"lease_id"`
	Index             uint64 `json:"index"`
	Worker            uint32 `json:"worker"`
	Provider          string `json:"provider"`
	StartStep         uint64 `json:"start_step"`
	EndStep           uint64 `json:"end_step"`
	Status            string `json:"status"`
	Final             bool   `json:"final"`
	SubmittedHeight   int64  `json:"submitted_height"`
	ChallengeDeadline int64  `json:"challenge_deadline"`
	// CustodyDeadline (custody jobs) is the height by which k pieces must be proven,
	// else the checkpoint is withheld.
	CustodyDeadline int64      `json:"custody_deadline,omitempty"`
	Claim           string     `json:"claim"`
	StateRoot       string     `json:"state_root"`
	URI             string     `json:"uri"`
	OpenChallenges  uint32     `json:"open_challenges"`
	Loss            *LossPoint `json:"loss,omitempty"`
	// LossError says why a verifiable checkpoint's loss is not verified.
	LossError string `json:"loss_error,omitempty"`
}

// LossPoint is the loss at a step and where it comes from.
type LossPoint struct {
	Worker uint32  `json:"worker"`
	Step   uint64  `json:"step"`
	Nats   float64 `json:"nats"`
	Source string  `json:"source"`
}

// Dispute is one challenge against a checkpoint of the job.
type Dispute struct {
	ID         uint64 `json:"id"`
	LeaseID    uint64 `json:"lease_id"`
	Checkpoint uint64 `json:"checkpoint"`
	Challenger string `json:"challenger"`
	Provider   string `json:"provider"`
	// Phase is whose move it is (GAME_TURN_*), or the outcome once done.
	Phase string `json:"phase"`
	// ToMove is the party whose move the game waits for: "provider" or
	// "challenger" (the one-step proof is the challenger's burden, though
	// anyone may send it); empty once the game is over.
	ToMove   string `json:"to_move,omitempty"`
	Rounds   uint32 `json:"rounds"`
	Lo       uint64 `json:"lo"`
	Hi       uint64 `json:"hi"`
	Deadline int64  `json:"deadline"`
	Outcome  string `json:"outcome,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Opened   int64  `json:"opened_height"`
}

// Job assembles the view of job id.
func (s *Source) Job(ctx context.Context, id uint64) (*View, error) {
	jr, err := s.Market.Job(ctx, &markettypes.QueryJobRequest{JobId: id})
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", id, err)
	}
	job := jr.Job
	kind := job.Spec.Workload.Kind
	v := &View{
		ID: job.Id, Name: job.Spec.Name, Owner: job.Owner, State: job.State.String(), CloseReason: job.CloseReason,
		Kind:       kind.String(),
		Verifiable: kind == markettypes.WORKLOAD_KIND_REFERENCE || kind == markettypes.WORKLOAD_KIND_TRANSFORMER,
		TotalSteps: job.Spec.TotalSteps, Interval: job.Spec.CheckpointInterval,
		CreatedAt: job.CreatedHeight, TimeDeadline: job.TimeDeadline, AsOf: s.now(),
		Leases: []Lease{}, Checkpoints: []Checkpoint{}, Disputes: []Dispute{}, Loss: []LossPoint{}, Bids: []Bid{},
	}
	if job.State == markettypes.JOB_STATE_OPEN {
		v.BiddingDeadline = job.BiddingDeadline
		bids, err := s.bids(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("bids on job %d: %w", id, err)
		}
		v.Bids = append(v.Bids, openBids(bids, job.Spec.Gpu.PerWorker)...)
	}
	esc, err := s.Market.Escrow(ctx, &markettypes.QueryEscrowRequest{JobId: id})
	if err != nil {
		return nil, fmt.Errorf("escrow of job %d: %w", id, err)
	}
	v.Money = money(job, esc)

	leases, err := s.leases(ctx, &markettypes.QueryLeasesRequest{JobId: id})
	if err != nil {
		return nil, fmt.Errorf("leases of job %d: %w", id, err)
	}
	active := map[uint32]markettypes.Lease{}
	type sums struct{ paid, pending, refunded sdkmath.Int }
	perWorker := map[uint32]*sums{}
	for _, l := range leases {
		sm := perWorker[l.Worker]
		if sm == nil {
			sm = &sums{sdkmath.ZeroInt(), sdkmath.ZeroInt(), sdkmath.ZeroInt()}
			perWorker[l.Worker] = sm
		}
		paid, pending, refunded := leaseMoney(l)
		sm.paid, sm.pending, sm.refunded = sm.paid.Add(paid), sm.pending.Add(pending), sm.refunded.Add(refunded)
		v.Leases = append(v.Leases, leaseOf(l))
		v.Bids = append(v.Bids, wonBid(l))
		if l.State == markettypes.LEASE_STATE_ACTIVE {
			active[l.Worker] = l
		}
		cps, err := s.checkpoints(ctx, l.Id)
		if err != nil {
			return nil, fmt.Errorf("checkpoints of lease %d: %w", l.Id, err)
		}
		for _, cp := range cps {
			v.Checkpoints = append(v.Checkpoints, s.checkpointOf(ctx, v.Verifiable, cp))
		}
		chs, err := s.challenges(ctx, l.Id)
		if err != nil {
			return nil, fmt.Errorf("disputes of lease %d: %w", l.Id, err)
		}
		for _, ch := range chs {
			v.Disputes = append(v.Disputes, disputeOf(ch))
		}
	}
	sort.Slice(v.Checkpoints, func(i, j int) bool {
		a, b := v.Checkpoints[i], v.Checkpoints[j]
		if a.Worker != b.Worker {
			return a.Worker < b.Worker
		}
		return a.EndStep < b.EndStep || (a.EndStep == b.EndStep && a.LeaseID < b.LeaseID)
	})
	latest := map[uint32]LossPoint{}
	for _, cp := range v.Checkpoints {
		if cp.Loss != nil && cp.Status != verifytypes.CHECKPOINT_STATUS_REJECTED.String() {
			v.Loss = append(v.Loss, *cp.Loss)
			latest[cp.Worker] = *cp.Loss
		}
	}

	workers := job.Spec.Workers
	if workers == 0 {
		workers = 1
	}
	for w := uint32(0); w < workers; w++ {
		wk := Worker{Worker: w, Total: job.Spec.TotalSteps, Paid: "0", Pending: "0", Refunded: "0"}
		if sm, ok := perWorker[w]; ok {
			wk.Paid, wk.Pending, wk.Refunded = sm.paid.String(), sm.pending.String(), sm.refunded.String()
		}
		for _, p := range job.Progress {
			if p.Worker == w {
				wk.Step = p.Step
			}
		}
		if l, ok := active[w]; ok {
			wk.LeaseID, wk.Provider, wk.CheckpointDeadline = l.Id, l.Provider, l.CheckpointDeadline
			wk.CommittedStepsPerHour, wk.CheckpointedStep = l.StepsPerHour, l.ClaimedStep
			if !l.PricePerStep.IsNil() {
				wk.PricePerStep = l.PricePerStep.String()
			}
			if el := v.AsOf.Sub(l.StartTime).Hours(); el > 0 && l.ClaimedStep > l.ResumeStep {
				wk.CheckpointedStepsPerHour = float64(l.ClaimedStep-l.ResumeStep) / el
			}
			if el := v.AsOf.Sub(l.StartTime).Hours(); el > 0 && wk.Step > l.ResumeStep {
				wk.StepsPerHour = float64(wk.Step-l.ResumeStep) / el
				if wk.Total > wk.Step {
					wk.ETASeconds = float64(wk.Total-wk.Step) / wk.StepsPerHour * 3600
				}
			}
		}
		if lp, ok := latest[w]; ok {
			wk.LatestLoss = &lp
		}
		v.Workers = append(v.Workers, wk)
	}
	if v.Custody, err = s.custody(ctx, job, v.Checkpoints); err != nil {
		return nil, err
	}
	if v.Sync = syncOf(job); v.Sync != nil {
		if v.Rounds, err = s.rounds(ctx, job, v.Checkpoints); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func money(job markettypes.Job, esc *markettypes.QueryEscrowResponse) Money {
	denom := esc.Deposited.Denom
	if denom == "" {
		denom = job.Deposited.Denom
	}
	dep, unspent, pending := nz(esc.Deposited.Amount), nz(esc.Unspent.Amount), nz(esc.Pending.Amount)
	paid := nz(esc.Withdrawable.Amount).Add(nz(esc.Withdrawn.Amount))
	fees := nz(esc.AuditFees.Amount)
	m := Money{Denom: denom, Deposited: dep.String(), Escrowed: unspent.String(), Pending: pending.String(),
		Paid: paid.String(), AuditFees: fees.String(), Compensation: nz(esc.Compensation.Amount).String(), Refunded: "0"}
	storageEscrow, storagePaid := nz(job.StorageEscrow.Amount), nz(job.StorageFees.Amount)
	m.StorageEscrowed, m.StoragePaid = storageEscrow.String(), storagePaid.String()
	switch job.State {
	case markettypes.JOB_STATE_COMPLETED, markettypes.JOB_STATE_CANCELLED, markettypes.JOB_STATE_EXPIRED, markettypes.JOB_STATE_FAILED:
		if r := dep.Sub(paid).Sub(pending).Sub(fees).Sub(unspent).Sub(storageEscrow).Sub(storagePaid); r.IsPositive() {
			m.Refunded = r.String()
		}
	}
	return m
}

// nz is a, or zero where a coin was never set.
func nz(a sdkmath.Int) sdkmath.Int {
	if a.IsNil() {
		return sdkmath.ZeroInt()
	}
	return a
}

// leaseMoney is what a lease was paid (released by final checkpoints), has pending
// (claimed by checkpoints not final yet) and gave back to the job (accrued less the rest).
func leaseMoney(l markettypes.Lease) (paid, pending, refunded sdkmath.Int) {
	paid = nz(l.Withdrawable.Amount).Add(nz(l.Withdrawn.Amount))
	pending = nz(l.Pending.Amount)
	refunded = nz(l.Accrued.Amount).Sub(paid).Sub(pending)
	if refunded.IsNegative() {
		refunded = sdkmath.ZeroInt()
	}
	return paid, pending, refunded
}

func leaseOf(l markettypes.Lease) Lease {
	paidAmount, _, refunded := leaseMoney(l)
	paid := sdk.Coin{Denom: l.Withdrawable.Denom, Amount: paidAmount}
	out := Lease{ID: l.Id, Worker: l.Worker, Provider: l.Provider, State: l.State.String(),
		StartHeight: l.StartHeight, StartTime: l.StartTime, ResumeStep: l.ResumeStep,
		Price: l.PricePerGpuHour.String(), GPUs: l.Gpus, Collateral: l.Collateral.String(),
		Paid: paid.String(), Pending: l.Pending.String(),
		StepsPerHour: l.StepsPerHour, ClaimedStep: l.ClaimedStep, Refunded: refunded.String()}
	if !l.PricePerStep.IsNil() {
		out.PricePerStep = l.PricePerStep.String()
	}
	if l.CloseReason != markettypes.LEASE_CLOSE_REASON_UNSPECIFIED {
		out.CloseReason = l.CloseReason.String()
	}
	return out
}

// openBids is bids in the auction's order, cheapest per step first, then the earlier
// bid (the chain also weighs reputation between bids of the same price per step).
func openBids(bids []markettypes.Bid, gpus uint32) []Bid {
	sort.SliceStable(bids, func(i, j int) bool {
		a, b := bids[i], bids[j]
		if markettypes.CheaperPerStep(a.PricePerGpuHour.Amount, a.StepsPerHour, b.PricePerGpuHour.Amount, b.StepsPerHour) {
			return true
		}
		if markettypes.CheaperPerStep(b.PricePerGpuHour.Amount, b.StepsPerHour, a.PricePerGpuHour.Amount, a.StepsPerHour) {
			return false
		}
		return a.Sequence < b.Sequence
	})
	out := make([]Bid, 0, len(bids))
	for _, b := range bids {
		out = append(out, Bid{Provider: b.Provider, PricePerGPUHour: b.PricePerGpuHour.String(), GPUs: gpus,
			StepsPerHour: b.StepsPerHour, PricePerStep: pricePerStep(markettypes.PricePerStep(nz(b.PricePerGpuHour.Amount), gpus, b.StepsPerHour), b.PricePerGpuHour.Denom),
			Runtime: b.Runtime, Status: BidOpen, CreatedHeight: b.CreatedHeight})
	}
	return out
}

// wonBid is the bid that became lease l, as the lease keeps it.
func wonBid(l markettypes.Lease) Bid {
	b := Bid{Provider: l.Provider, PricePerGPUHour: l.PricePerGpuHour.String(), GPUs: l.Gpus, StepsPerHour: l.StepsPerHour,
		Runtime: l.Runtime, Status: BidWon, CreatedHeight: l.StartHeight, LeaseID: l.Id, Worker: l.Worker}
	if !l.PricePerStep.IsNil() {
		b.PricePerStep = pricePerStep(l.PricePerStep, l.PricePerGpuHour.Denom)
	}
	return b
}

// pricePerStep writes a per-step price in its denom, trimmed of trailing zeros.
func pricePerStep(d sdkmath.LegacyDec, denom string) string {
	s := strings.TrimRight(strings.TrimRight(d.String(), "0"), ".")
	return s + denom
}

func (s *Source) checkpointOf(ctx context.Context, verifiable bool, cp verifytypes.Checkpoint) Checkpoint {
	out := Checkpoint{LeaseID: cp.LeaseId, Index: cp.Index, Worker: cp.Worker, Provider: cp.Provider,
		StartStep: cp.StartStep, EndStep: cp.EndStep, Status: cp.Status.String(),
		Final:           cp.Status == verifytypes.CHECKPOINT_STATUS_FINAL,
		SubmittedHeight: cp.SubmittedHeight, ChallengeDeadline: cp.ChallengeDeadline, CustodyDeadline: cp.CustodyDeadline,
		Claim: cp.Claim.String(), StateRoot: fmt.Sprintf("%x", cp.StateRoot), URI: cp.Uri, OpenChallenges: cp.OpenChallenges}
	if verifiable {
		h, err := s.verifiedHeader(ctx, cp)
		if err == nil {
			out.Loss = &LossPoint{Worker: cp.Worker, Step: h.Step, Nats: exact.LossNats(h.Loss), Source: LossVerified}
			return out
		}
		out.LossError = err.Error()
	}
	for _, m := range cp.Metrics {
		if m.Name == "loss" {
			if f, err := strconv.ParseFloat(m.Value, 64); err == nil {
				out.Loss = &LossPoint{Worker: cp.Worker, Step: cp.EndStep, Nats: f, Source: LossSelfReported}
			}
		}
	}
	return out
}

// verifiedHeader reads the header of cp's state from the provider that
// serves it, proven against cp's state_root, and checks that it is the
// state of the checkpoint's last step.
func (s *Source) verifiedHeader(ctx context.Context, cp verifytypes.Checkpoint) (exact.Header, error) {
	if len(cp.StateRoot) != len(merkle.Hash{}) {
		return exact.Header{}, fmt.Errorf("state_root has %d bytes", len(cp.StateRoot))
	}
	root := merkle.Hash(cp.StateRoot)
	s.mu.Lock()
	h, ok := s.verified[root]
	s.mu.Unlock()
	if !ok {
		base, ref, err := checkpoint.ParseURI(cp.Uri)
		if err != nil {
			return exact.Header{}, err
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c := checkpoint.Client{BaseURL: base, HTTP: s.HTTP}
		if h, err = c.StateHeader(ctx, ref, root); err != nil {
			return exact.Header{}, err
		}
		s.mu.Lock()
		if s.verified == nil {
			s.verified = map[merkle.Hash]exact.Header{}
		}
		s.verified[root] = h
		s.mu.Unlock()
	}
	if h.Step != cp.EndStep {
		return exact.Header{}, fmt.Errorf("the proven state is of step %d, the checkpoint ends at %d", h.Step, cp.EndStep)
	}
	return h, nil
}

func disputeOf(ch verifytypes.Challenge) Dispute {
	d := Dispute{ID: ch.Id, LeaseID: ch.LeaseId, Checkpoint: ch.CheckpointIndex, Challenger: ch.Challenger,
		Provider: ch.Provider, Phase: ch.Turn.String(), Rounds: ch.Rounds, Lo: ch.Lo, Hi: ch.Hi,
		Deadline: ch.Deadline, Reason: ch.OutcomeReason, Opened: ch.OpenedHeight}
	switch ch.Turn {
	case verifytypes.GAME_TURN_PROVIDER, verifytypes.GAME_TURN_TILE_PROVIDER:
		d.ToMove = "provider"
	case verifytypes.GAME_TURN_CHALLENGER, verifytypes.GAME_TURN_TILE_CHALLENGER, verifytypes.GAME_TURN_ONE_STEP:
		d.ToMove = "challenger"
	}
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
		d.Outcome = ch.Outcome.String()
		d.Phase = d.Outcome
		d.ToMove = ""
	}
	return d
}

// pages calls f with successive page requests until the last page.
func pages(f func(*query.PageRequest) (*query.PageResponse, error)) error {
	var key []byte
	for {
		resp, err := f(&query.PageRequest{Key: key, Limit: 200})
		if err != nil {
			return err
		}
		if resp == nil || len(resp.NextKey) == 0 {
			return nil
		}
		key = resp.NextKey
	}
}

func (s *Source) leases(ctx context.Context, req *markettypes.QueryLeasesRequest) ([]markettypes.Lease, error) {
	var out []markettypes.Lease
	err := pages(func(p *query.PageRequest) (*query.PageResponse, error) {
		r := *req
		r.Pagination = p
		resp, err := s.Market.Leases(ctx, &r)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Leases...)
		return resp.Pagination, nil
	})
	return out, err
}

func (s *Source) bids(ctx context.Context, job uint64) ([]markettypes.Bid, error) {
	var out []markettypes.Bid
	err := pages(func(p *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Market.Bids(ctx, &markettypes.QueryBidsRequest{JobId: job, Pagination: p})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Bids...)
		return resp.Pagination, nil
	})
	return out, err
}

func (s *Source) checkpoints(ctx context.Context, lease uint64) ([]verifytypes.Checkpoint, error) {
	var out []verifytypes.Checkpoint
	err := pages(func(p *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease, Pagination: p})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Checkpoints...)
		return resp.Pagination, nil
	})
	return out, err
}

func (s *Source) challenges(ctx context.Context, lease uint64) ([]verifytypes.Challenge, error) {
	var out []verifytypes.Challenge
	err := pages(func(p *query.PageRequest) (*query.PageResponse, error) {
		resp, err := s.Verify.Challenges(ctx, &verifytypes.QueryChallengesRequest{LeaseId: lease, AllCheckpoints: lease != 0, Pagination: p})
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Challenges...)
		return resp.Pagination, nil
	})
	return out, err
}
