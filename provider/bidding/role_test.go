package bidding

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"cosmossdk.io/math"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	"github.com/depinchain/depinchain/provider/metrics"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

const operator = "depin1operator"

// fakeHost is an inventory whose GPUs the test breaks.
type fakeHost struct {
	mu   sync.Mutex
	gpus []gpu.GPU
}

func (h *fakeHost) Healthy() []gpu.GPU {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(h.gpus), func(g gpu.GPU) bool { return !g.Healthy() })
}

func (h *fakeHost) UnhealthyLeased(uuids []string) []gpu.Unhealthy {
	h.mu.Lock()
	defer h.mu.Unlock()
	var bad []gpu.Unhealthy
	for _, g := range h.gpus {
		if slices.Contains(uuids, g.UUID) && !g.Healthy() {
			bad = append(bad, gpu.Unhealthy{UUID: g.UUID, Reason: strings.Join(g.Problems, "; ")})
		}
	}
	return bad
}

func (h *fakeHost) breakGPU(uuid, problem string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.gpus {
		if h.gpus[i].UUID == uuid {
			h.gpus[i].Problems = append(h.gpus[i].Problems, problem)
		}
	}
}

// fakeData is the datasets fetcher's chain check: why a dataset cannot be
// fetched, by dataset id (absent: it can).
type fakeData map[string]error

func (d fakeData) Fetchable(_ context.Context, job markettypes.Job) error {
	return d[job.Spec.DatasetId]
}

type harness struct {
	data    fakeData
	role    *Role
	db      *db.DB
	chain   *roletest.Chain
	host    *fakeHost
	metrics *metrics.Metrics
}

func newHarness(t *testing.T, passive bool) *harness {
	t.Helper()
	st := roletest.OpenDB(t)
	h := &harness{db: st, chain: roletest.NewChain(), metrics: metrics.New("test"), data: fakeData{},
		host: &fakeHost{gpus: []gpu.GPU{{UUID: "g0", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920}, {UUID: "g1", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920}}}}
	// The test jobs are of no exact kind: they commit the container rate, 0.8 × 1000.
	rater, err := NewRater(config.Throughput{CommitFraction: 0.8, GoTrainerMACsPerSecond: 1e9, ContainerStepsPerHour: 1000})
	if err != nil {
		t.Fatal(err)
	}
	h.role, err = New(Options{
		Operator: operator, Passive: passive, Submit: h.chain.Submit, Chain: h.chain, DB: st, GPUs: h.host,
		ModelName: func(string) string { return "H100" },
		Pricer:    TablePricer{Denom: "udepin", Table: PriceTable{"H100": math.NewInt(2_000_000)}},
		Runtime:   func(context.Context, markettypes.Job) (string, error) { return "reference", nil },
		Rate:      rater.StepsPerHour,
		Data:      h.data,
		Metrics:   h.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) openJob(id uint64, perWorker uint32) {
	h.chain.Jobs[id] = markettypes.Job{Id: id, State: markettypes.JOB_STATE_OPEN, CreatedHeight: 10, BiddingDeadline: 20,
		Spec: spec([]string{"H100"}, 80, perWorker, 3_000_000)}
}

func (h *harness) bid(t *testing.T, jobID uint64) (db.BidRecord, db.JobRecord, bool) {
	t.Helper()
	var bid db.BidRecord
	var job db.JobRecord
	var ok bool
	if err := h.db.View(func(tx *db.Tx) (err error) {
		if bid, ok, err = tx.Bid(jobID); err != nil {
			return err
		}
		job, _, err = tx.Job(jobID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return bid, job, ok
}

// handle feeds events to the role in one transaction and runs what it
// returns once that committed, as the daemon does.
func (h *harness) handle(t *testing.T, evs ...chain.Event) {
	t.Helper()
	for _, act := range roletest.Deliver(t, h.db, h.role, evs...) {
		act()
	}
}

// A job the host can serve gets a bid at the table price on GPUs it
// reserves; a second job that needs those GPUs is skipped, and says why.
func TestBidReservesItsGPUs(t *testing.T) {
	h := newHarness(t, false)
	h.openJob(1, 1)
	h.openJob(2, 2)
	for _, id := range []uint64{1, 2} {
		if err := h.role.considerJob(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.chain.Sent()) != 1 {
		t.Fatalf("sent %v, want one bid", h.chain.Sent())
	}
	bid := h.chain.Sent()[0].(*markettypes.MsgPlaceBid)
	if bid.JobId != 1 || bid.Provider != operator || bid.PricePerGpuHour.String() != "2000000udepin" || bid.Runtime != "reference" || bid.StepsPerHour != 800 {
		t.Fatalf("bid %+v", bid)
	}
	rec, job, ok := h.bid(t, 1)
	if !ok || rec.Status != db.BidPlaced || rec.Height != 10 || !slices.Equal(rec.GPUs, []string{"g0"}) {
		t.Fatalf("bid record %+v", rec)
	}
	if !strings.HasPrefix(job.Decision, "bid 2000000udepin per GPU-hour at 800 steps per hour on 1×H100 (reference runtime)") {
		t.Fatalf("decision %q", job.Decision)
	}
	if _, job, ok := h.bid(t, 2); ok || !strings.HasPrefix(job.Decision, "skip: no 2 free healthy GPUs") {
		t.Fatalf("second job: bid %v, decision %q", ok, job.Decision)
	}
	// Deciding again on a job with an open bid sends nothing.
	if err := h.role.considerJob(context.Background(), 1); err != nil || len(h.chain.Sent()) != 1 {
		t.Fatalf("second decision on job 1: %v, sent %d", err, len(h.chain.Sent()))
	}
}

// A dataset-backed job gets a bid when its data can be fetched, and a
// decision that says why not when it cannot; a sidecar without a fetcher
// says that instead.
func TestDatasetJobsGetBidsWhenTheirDataIsFetchable(t *testing.T) {
	h := newHarness(t, false)
	h.data["sparse"] = errors.New("the job's training data cannot be fetched: shard 3 of dataset \"sparse\" has 1 live pieces and needs 2: too few holders to read it")
	for id, ds := range map[uint64]string{1: "fortunes", 2: "sparse"} {
		h.openJob(id, 1)
		job := h.chain.Jobs[id]
		job.Spec.DatasetId = ds
		h.chain.Jobs[id] = job
		if err := h.role.considerJob(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if sent := h.chain.Sent(); len(sent) != 1 || sent[0].(*markettypes.MsgPlaceBid).JobId != 1 {
		t.Fatalf("sent %v, want one bid, on job 1", sent)
	}
	if _, job, ok := h.bid(t, 2); ok || !strings.HasPrefix(job.Decision, "skip: the job's training data cannot be fetched: shard 3") {
		t.Fatalf("job 2: bid %v, decision %q", ok, job.Decision)
	}

	h.role.opts.Data = nil
	h.openJob(3, 1)
	job := h.chain.Jobs[3]
	job.Spec.DatasetId = "fortunes"
	h.chain.Jobs[3] = job
	if err := h.role.considerJob(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if _, job, ok := h.bid(t, 3); ok || !strings.Contains(job.Decision, "cannot fetch") {
		t.Fatalf("without a fetcher: bid %v, decision %q", ok, job.Decision)
	}
}

// A bid the chain refuses leaves no reservation behind: the next job may
// use its GPUs.
func TestRefusedBidReleasesItsGPUs(t *testing.T) {
	h := newHarness(t, false)
	h.openJob(1, 2)
	h.chain.Fail = errors.New("insufficient bond")
	if err := h.role.considerJob(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "insufficient bond") {
		t.Fatalf("considerJob: %v", err)
	}
	if _, job, ok := h.bid(t, 1); ok || !strings.HasPrefix(job.Decision, "bid failed: insufficient bond") {
		t.Fatalf("after a refused bid: bid kept %v, decision %q", ok, job.Decision)
	}
	h.chain.Fail = nil
	h.openJob(2, 2)
	if err := h.role.considerJob(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if rec, _, ok := h.bid(t, 2); !ok || len(rec.GPUs) != 2 {
		t.Fatalf("the next job's bid %+v", rec)
	}
}

// Events: jobs are recorded and queued; only the operator's bids change; a
// reopened job forgets its spent bid; a passive role never bids.
func TestHandleEventRecordsTheOperatorsBids(t *testing.T) {
	h := newHarness(t, false)
	h.handle(t, chain.Event{Height: 5, Message: &markettypes.EventJobCreated{JobId: 1, BiddingDeadline: 9}})
	if _, job, _ := h.bid(t, 1); job.SeenHeight != 5 || job.BiddingDeadline != 9 || h.role.Status().Queued != 1 {
		t.Fatalf("job record %+v, queued %d", job, h.role.Status().Queued)
	}
	if err := h.db.Update(func(tx *db.Tx) error {
		return tx.PutBid(db.BidRecord{JobID: 1, Price: "1udepin", Status: db.BidPlaced, GPUs: []string{"g0"}})
	}); err != nil {
		t.Fatal(err)
	}
	h.handle(t,
		chain.Event{Height: 6, Source: "TX", Message: &markettypes.EventBidPlaced{JobId: 1, Provider: "depin1other"}},
		chain.Event{Height: 6, Source: "TX", Message: &markettypes.EventBidLost{JobId: 1, Provider: "depin1other"}})
	if rec, _, _ := h.bid(t, 1); rec.Height != 0 || rec.Status != db.BidPlaced {
		t.Fatalf("another provider's events changed the operator's bid: %+v", rec)
	}
	h.handle(t, chain.Event{Height: 7, Source: "TX", Message: &markettypes.EventBidPlaced{JobId: 1, Provider: operator}},
		chain.Event{Height: 9, Source: chain.FinalizeBlock, Message: &markettypes.EventBidLost{JobId: 1, Provider: operator}})
	if rec, _, _ := h.bid(t, 1); rec.Height != 7 || rec.TxHash != "TX" || rec.Status != db.BidLost {
		t.Fatalf("the operator's bid %+v", rec)
	}
	h.handle(t, chain.Event{Height: 12, Message: &markettypes.EventJobReopened{JobId: 1, BiddingDeadline: 20}})
	if _, job, ok := h.bid(t, 1); ok || job.SeenHeight != 12 || job.Decision != "" {
		t.Fatalf("after the job reopened: bid kept %v, job %+v", ok, job)
	}

	passive := newHarness(t, true)
	passive.openJob(1, 1)
	if err := passive.role.considerJob(context.Background(), 1); err != nil || len(passive.chain.Sent()) != 0 {
		t.Fatalf("a passive role: %v, sent %v", err, passive.chain.Sent())
	}
}

// A training-together job reopened for another slot while the operator serves one of
// its slots gets no bid (the chain would refuse it on every reopening); once that lease
// has closed, the operator bids again.
func TestNoBidOnAJobTheOperatorServes(t *testing.T) {
	h := newHarness(t, false)
	h.openJob(1, 1)
	h.chain.LeaseByID[7] = markettypes.Lease{Id: 7, JobId: 1, Worker: 0, Provider: operator, State: markettypes.LEASE_STATE_ACTIVE}
	h.chain.LeaseByID[8] = markettypes.Lease{Id: 8, JobId: 2, Worker: 0, Provider: "depin1other", State: markettypes.LEASE_STATE_ACTIVE}
	if err := h.role.considerJob(context.Background(), 1); err != nil || len(h.chain.Sent()) != 0 {
		t.Fatalf("serving worker 0 of job 1: %v, sent %v", err, h.chain.Sent())
	}
	l := h.chain.LeaseByID[7]
	l.State = markettypes.LEASE_STATE_CLOSED
	h.chain.LeaseByID[7] = l
	if err := h.role.considerJob(context.Background(), 1); err != nil || len(h.chain.Sent()) != 1 {
		t.Fatalf("after its lease closed: %v, sent %v", err, h.chain.Sent())
	}
}

// A GPU an open bid reserved fails: the bid is withdrawn on chain and the
// job's decision says why.
func TestFailedGPUWithdrawsTheBid(t *testing.T) {
	h := newHarness(t, false)
	h.openJob(1, 1)
	if err := h.role.considerJob(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	h.role.checkBids(context.Background())
	if len(h.chain.Sent()) != 1 {
		t.Fatalf("a healthy bid was withdrawn: %v", h.chain.Sent())
	}
	h.host.breakGPU("g0", "critical XID 79")
	h.role.checkBids(context.Background())
	if len(h.chain.Sent()) != 2 {
		t.Fatalf("sent %v, want the bid and its withdrawal", h.chain.Sent())
	}
	if w, ok := h.chain.Sent()[1].(*markettypes.MsgWithdrawBid); !ok || w.JobId != 1 {
		t.Fatalf("second message %v", h.chain.Sent()[1])
	}
	rec, job, _ := h.bid(t, 1)
	if rec.Status != db.BidWithdrawn || job.Decision != "bid withdrawn: GPU g0: critical XID 79" {
		t.Fatalf("bid %+v, decision %q", rec, job.Decision)
	}
	h.role.checkBids(context.Background())
	if len(h.chain.Sent()) != 2 {
		t.Fatal("a withdrawn bid was withdrawn again")
	}
}

func TestNewNamesWhatIsMissing(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("no operator: %v", err)
	}
	if _, err := New(Options{Operator: operator}); err == nil || !strings.Contains(err.Error(), "submitter") {
		t.Fatalf("no submitter: %v", err)
	}
}

// A job limited to other regions gets no bid, and the decision says why; a
// catalogued GPU is offered with its nominal class, not NVML's reading.
func TestRegionsAndMemoryClass(t *testing.T) {
	h := newHarness(t, false)
	h.role.opts.Region = "eu-west"
	h.host.gpus = []gpu.GPU{{UUID: "g0", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81_559, Model: "H100", MemoryClassGiB: 80}}
	h.openJob(1, 1)
	job := h.chain.Jobs[1]
	job.Spec.Regions = []string{"us-west"}
	h.chain.Jobs[1] = job
	h.openJob(2, 1)
	for _, id := range []uint64{1, 2} {
		if err := h.role.considerJob(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if _, rec, ok := h.bid(t, 1); ok || rec.Decision != `skip: the job accepts regions [us-west] and this provider is registered in "eu-west"` {
		t.Fatalf("job 1: bid %v, decision %q", ok, rec.Decision)
	}
	// 81,559 MiB read, 80 GiB class: the job's min_vram_gib: 80 matches.
	if _, rec, ok := h.bid(t, 2); !ok {
		t.Fatalf("job 2 (min_vram_gib 80 on a real H100 reading): %q", rec.Decision)
	}
}

// A job whose runtime cannot be had (e.g. its image could not be pulled) gets
// no bid; the decision carries the runtime's reason.
func TestNoRuntimeNoBid(t *testing.T) {
	h := newHarness(t, false)
	h.role.opts.Runtime = func(context.Context, markettypes.Job) (string, error) {
		return "", errors.New("runtime container: pulling the job's image failed: 127.0.0.1:5000/acme/train@sha256:abcd: the registry 127.0.0.1:5000 refused the credentials")
	}
	h.openJob(1, 1)
	if err := h.role.considerJob(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if sent := h.chain.Sent(); len(sent) != 0 {
		t.Fatalf("sent %v", sent)
	}
	if _, rec, ok := h.bid(t, 1); ok || !strings.HasPrefix(rec.Decision, "skip: runtime container: pulling the job's image failed") ||
		!strings.Contains(rec.Decision, "refused the credentials") {
		t.Fatalf("bid %v, decision %q", ok, rec.Decision)
	}
}
