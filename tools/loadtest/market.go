package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const (
	gpuModel = "H100-SXM5-80GB"
	// maxPrice is the jobs' max price per GPU-hour; bids are below it.
	maxPrice = 3600
)

// jobSpecYAML is the spec every load-test job submits: one worker on one GPU
// running the reference workload, which the tool's providers train with the
// reference trainer and commit as one checkpoint covering every step.
const jobSpecYAML = `name: loadtest
gpu:
  models: [%s]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: %d
checkpoint_every: %d
max_price_per_gpu_hour: %dudepin
max_duration: 1h
bidding_window_blocks: %d
`

func jobSpec(steps, biddingWindow uint64) (markettypes.JobSpec, error) {
	return markettypes.ParseJobSpecYAML([]byte(fmt.Sprintf(jobSpecYAML, gpuModel, steps, steps, maxPrice, biddingWindow)))
}

// registerProviderMsg registers p with eight H100s and a bond that covers the
// collateral of far more leases than a run creates (each locks 10% of the
// job's maximum value, 360 udepin).
func registerProviderMsg(p *account, bond int64) *stakingexttypes.MsgRegisterProvider {
	return &stakingexttypes.MsgRegisterProvider{
		Operator: p.address, Moniker: p.String(), Endpoint: fmt.Sprintf("https://%s.loadtest.invalid", p), Region: "local",
		Gpus: []stakingexttypes.GPUInventory{{Model: gpuModel, VramMib: 80 * 1024, Count: 8}},
		Bond: sdk.NewInt64Coin(denom, bond),
	}
}

// task is market work waiting for a provider: a bid on a job (until its
// bidding deadline), or the checkpoint of a lease it won.
type task struct {
	kind           msgKind
	jobID, leaseID uint64
	price          int64
	deadline       int64
}

// market drives the market warm-up and phase. Owners submit jobs; each job
// the chain creates (EventJobCreated in the submit-job result) gives
// bidsPerJob of the tool's providers a bid to place; each lease a provider
// wins (EventLeaseCreated in the end-block events) gives it a checkpoint to
// commit. Workers pick the next transaction as next describes; new jobs are
// paced so that the three kinds flow steadily, about one job, bidsPerJob
// bids and one checkpoint at a time.
type market struct {
	t          *tracker
	ph         *phase
	query      markettypes.QueryClient
	spec       markettypes.JobSpec
	deposit    sdk.Coin
	bidsPerJob int
	msgsPerTx  int
	// maxBacklog bounds the bids waiting to be sent, counting those that
	// submitted jobs not yet in a block will create: owners wait while it is
	// reached, so bids go out well inside the bidding window instead of
	// piling up behind a burst of jobs.
	maxBacklog int
	// minJobRate is the job rate however few market transactions recent
	// blocks had, so that the pipeline starts.
	minJobRate float64
	// verbose logs every block's market transactions and queues.
	verbose    bool
	owners     []*account
	providers  []*account
	provByAddr map[string]*account

	mu        sync.Mutex
	cond      *sync.Cond
	stopped   bool
	ownerBusy []bool
	nextOwner int
	// tasks are each provider's bids and checkpoints in the order they
	// arose; bidsOf counts the bids among them.
	tasks  map[*account][]task
	bidsOf map[*account]int
	ready  []*account // providers with work that nobody holds
	queued map[*account]bool
	busy   map[*account]bool
	jobs   map[uint64]bool // jobs the tool created
	jobSeq int
	// jobsInFlight are submitted jobs not yet in a block; queuedBids the bid
	// tasks not yet taken by a worker.
	jobsInFlight, queuedBids int
	// New jobs are paced by a token bucket filled at jobRate jobs per second
	// (see block); wakeup is set while a timer will wake workers waiting for
	// tokens. height is the last block seen.
	jobRate, tokens float64
	refilled        time.Time
	wakeup          bool
	height          int64
	// recent are the market messages of ours in the last blocks.
	recent []blockSample
	// takenJobs and takenCheckpoints count the messages workers took.
	takenJobs, takenCheckpoints int
	stats                       MarketReport
	unsent                      map[string]int
}

func newMarket(t *tracker, query markettypes.QueryClient, spec markettypes.JobSpec, deposit sdk.Coin,
	bidsPerJob, msgsPerTx, maxBacklog int, minJobRate float64, owners, providers []*account,
) *market {
	m := &market{
		t: t, query: query, spec: spec, deposit: deposit, bidsPerJob: bidsPerJob, msgsPerTx: msgsPerTx, maxBacklog: maxBacklog,
		minJobRate: minJobRate, jobRate: minJobRate, refilled: time.Now(),
		owners: owners, providers: providers, provByAddr: byAddress(providers),
		ownerBusy: make([]bool, len(owners)), tasks: map[*account][]task{}, bidsOf: map[*account]int{},
		queued: map[*account]bool{}, busy: map[*account]bool{}, jobs: map[uint64]bool{}, unsent: map[string]int{},
	}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// work sends one transaction of market work. It returns errStopped once the
// phase is over.
func (m *market) work(stop, ctx context.Context) error {
	a, kind, tasks, err := m.next(stop)
	if err != nil {
		return err
	}
	defer m.release(a, kind)
	var msgs []sdk.Msg
	var done func(int64, *abci.ExecTxResult)
	switch kind {
	case kindSubmitJob:
		for range m.msgsPerTx {
			msgs = append(msgs, &markettypes.MsgSubmitJob{Owner: a.address, Spec: m.spec, Deposit: m.deposit})
		}
		done = m.jobsSubmitted(len(msgs))
	case kindPlaceBid:
		for _, tk := range tasks {
			msgs = append(msgs, &markettypes.MsgPlaceBid{Provider: a.address, JobId: tk.jobID, PricePerGpuHour: sdk.NewInt64Coin(denom, tk.price),
				StepsPerHour: markettypes.ConservativeRate(m.spec.TotalSteps, m.spec.MaxDuration)})
		}
		done = m.count(&m.stats.Bids, len(msgs))
	case kindCheckpoint:
		for _, tk := range tasks {
			msg, err := m.checkpoint(ctx, a, tk)
			if err != nil {
				return err
			}
			msgs = append(msgs, msg)
		}
		done = m.count(&m.stats.Checkpoints, len(msgs))
	}
	accepted, err := m.t.send(stop, ctx, m.ph, a, kind, msgs, done)
	m.mu.Lock()
	defer m.mu.Unlock()
	if errors.Is(err, errStopped) && kind != kindSubmitJob {
		m.unsent[string(kind)] += len(tasks)
	}
	if !accepted && kind == kindSubmitJob {
		m.jobsInFlight -= len(msgs) // counted in next
	}
	return err
}

// next waits for an account with work. A provider's bids and checkpoints
// go out in the order they arose, a few of one kind per transaction.
// Providers with bids queued come first: bids have a deadline. Then
// checkpoints and new jobs take turns (checkpoints while fewer have been
// taken than jobs), so that the burst of leases an auction block brings
// does not hold up new jobs, which would make the mix come in waves; either
// takes the other's turn when it has nothing to send. New jobs also need
// tokens (see block) and room in the bid backlog.
func (m *market) next(stop context.Context) (*account, msgKind, []task, error) {
	wake := context.AfterFunc(stop, func() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer wake()
	m.mu.Lock()
	defer m.mu.Unlock()
	hasBids := func(p *account) bool { return m.bidsOf[p] > 0 }
	anyWork := func(p *account) bool { return len(m.tasks[p]) > 0 }
	for {
		if m.stopped || stop.Err() != nil {
			return nil, "", nil, errStopped
		}
		p := m.pop(hasBids)
		if p == nil && m.takenCheckpoints <= m.takenJobs {
			p = m.pop(anyWork)
		}
		if p == nil {
			if owner := m.freeOwner(); owner != nil {
				return owner, kindSubmitJob, nil, nil
			}
			p = m.pop(anyWork)
		}
		if p != nil {
			if tasks := m.take(p); len(tasks) > 0 {
				return p, tasks[0].kind, tasks, nil
			}
			m.busy[p] = false // all it had were bids too late to send
			continue
		}
		waited := time.Now()
		m.cond.Wait()
		m.ph.idle.Add(int64(time.Since(waited)))
	}
}

// pop takes the first ready provider for which has is true, marking it
// busy, or returns nil. m.mu is held.
func (m *market) pop(has func(*account) bool) *account {
	for i, p := range m.ready {
		if has(p) {
			m.ready = append(m.ready[:i], m.ready[i+1:]...)
			m.queued[p] = false
			m.busy[p] = true
			return p
		}
	}
	return nil
}

// take takes the first of p's tasks and up to msgsPerTx-1 more of the same
// kind that follow it. Bids that could no longer land by their job's
// bidding deadline (the next block may be past it) are dropped as unsent.
// m.mu is held.
func (m *market) take(p *account) []task {
	var out []task
	for len(out) < m.msgsPerTx && len(m.tasks[p]) > 0 {
		tk := m.tasks[p][0]
		if len(out) > 0 && tk.kind != out[0].kind {
			break
		}
		m.tasks[p] = m.tasks[p][1:]
		if tk.kind == kindPlaceBid {
			m.bidsOf[p]--
			m.queuedBids--
			if tk.deadline <= m.height+1 {
				m.unsent[string(kindPlaceBid)+" (bidding closed before it was sent)"]++
				continue
			}
		} else {
			m.takenCheckpoints++
		}
		out = append(out, tk)
	}
	return out
}

// add queues a task for p. m.mu is held.
func (m *market) add(p *account, tk task) {
	m.tasks[p] = append(m.tasks[p], tk)
	if tk.kind == kindPlaceBid {
		m.bidsOf[p]++
		m.queuedBids++
	}
	m.enqueue(p)
}

// freeOwner takes a free owner if the job pacing and the bid backlog allow
// another submit-job transaction, or returns nil. m.mu is held.
func (m *market) freeOwner() *account {
	now := time.Now()
	burst := max(float64(m.msgsPerTx), m.jobRate/2) // at most half a second of jobs at once
	m.tokens = min(burst, m.tokens+m.jobRate*now.Sub(m.refilled).Seconds())
	m.refilled = now
	need := float64(m.msgsPerTx)
	if m.tokens < need {
		if !m.wakeup {
			m.wakeup = true
			time.AfterFunc(time.Duration((need-m.tokens)/m.jobRate*float64(time.Second)), func() {
				m.mu.Lock()
				m.wakeup = false
				m.cond.Broadcast()
				m.mu.Unlock()
			})
		}
		return nil
	}
	if (m.jobsInFlight+m.msgsPerTx)*m.bidsPerJob+m.queuedBids > m.maxBacklog {
		return nil
	}
	for i := range m.owners {
		idx := (m.nextOwner + i) % len(m.owners)
		if !m.ownerBusy[idx] {
			m.ownerBusy[idx] = true
			m.nextOwner = idx + 1
			m.jobsInFlight += m.msgsPerTx
			m.tokens -= need
			m.takenJobs += m.msgsPerTx
			return m.owners[idx]
		}
	}
	return nil
}

func (m *market) release(a *account, kind msgKind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kind == kindSubmitJob {
		m.ownerBusy[a.index] = false
	} else {
		m.busy[a] = false
		m.enqueue(a)
	}
	m.cond.Broadcast()
}

// enqueue marks p ready if it has work and nobody holds it. m.mu is held.
func (m *market) enqueue(p *account) {
	if m.busy[p] || m.queued[p] || len(m.tasks[p]) == 0 {
		return
	}
	m.ready = append(m.ready, p)
	m.queued[p] = true
	m.cond.Broadcast()
}

// stop ends the phase: nothing more is sent, and the work still queued is
// counted as unsent.
func (m *market) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	for _, q := range m.tasks {
		for _, tk := range q {
			m.unsent[string(tk.kind)]++
		}
	}
	clear(m.tasks)
	clear(m.bidsOf)
	m.queuedBids = 0
	m.ready = nil
	m.cond.Broadcast()
}

func (m *market) count(counter *int, n int) func(int64, *abci.ExecTxResult) {
	return func(_ int64, r *abci.ExecTxResult) {
		if r != nil && r.Code == 0 {
			m.mu.Lock()
			*counter += n
			m.mu.Unlock()
		}
	}
}

// jobsSubmitted returns the callback of a submit-job transaction of n jobs,
// which turns the jobs it created into bids.
func (m *market) jobsSubmitted(n int) func(int64, *abci.ExecTxResult) {
	return func(h int64, r *abci.ExecTxResult) {
		m.mu.Lock()
		m.jobsInFlight -= n
		m.cond.Broadcast()
		m.mu.Unlock()
		if r != nil && r.Code == 0 {
			m.jobsCreated(r.Events)
		}
	}
}

func (m *market) jobsCreated(events []abci.Event) {
	for _, ev := range events {
		msg, ok := typedEvent(ev, "depinchain.market.v1.EventJobCreated")
		if !ok {
			continue
		}
		created := msg.(*markettypes.EventJobCreated)
		m.mu.Lock()
		m.stats.Jobs++
		m.jobs[created.JobId] = true
		if m.stopped {
			m.unsent[string(kindPlaceBid)] += m.bidsPerJob
			m.mu.Unlock()
			continue
		}
		// Spread the bids over the providers, at prices that differ per bid so
		// that auctions have a clear winner.
		for j := range m.bidsPerJob {
			p := m.providers[(m.jobSeq*m.bidsPerJob+j)%len(m.providers)]
			price := 1000 + int64((created.JobId*7919+uint64(j)*104729)%(maxPrice-1000))
			m.add(p, task{kind: kindPlaceBid, jobID: created.JobId, price: price, deadline: created.BiddingDeadline})
		}
		m.jobSeq++
		m.mu.Unlock()
	}
}

// jobGrowth is how much faster than their recent share new jobs may come;
// rateBlocks is how many recent blocks that share is measured over (one
// block is too noisy: a block cut just after a big one holds little).
const (
	jobGrowth  = 2
	rateBlocks = 4
)

// blockSample is how many market messages of ours a block included, and
// when the tool saw it.
type blockSample struct {
	msgs int
	at   time.Time
}

// block takes in a new block. The leases the auctions gave the tool's
// providers become checkpoints to commit. The job rate is set from the
// market messages recent blocks included per second: in a steady pipeline
// each job brings bidsPerJob bids and one checkpoint, so jobs are
// 1/(bidsPerJob+2) of them. The rate allows twice that (and at least
// minJobRate), so the load grows until the node or the workers are
// saturated (jobs are the workers' last choice, so a saturated pipeline
// does not take them), while jobs still come spread over the block
// interval: a burst of jobs would bring a burst of bids, all due at once,
// and the mix would come in waves.
func (m *market) block(h int64, events []abci.Event, ours map[msgKind]counts) {
	m.mu.Lock()
	m.height = h
	m.recent = append(m.recent, blockSample{ours[kindSubmitJob].msgs + ours[kindPlaceBid].msgs + ours[kindCheckpoint].msgs, time.Now()})
	if len(m.recent) > rateBlocks+1 {
		m.recent = m.recent[1:]
	}
	if n := len(m.recent); n > 1 {
		msgs := 0
		for _, b := range m.recent[1:] {
			msgs += b.msgs
		}
		if span := m.recent[n-1].at.Sub(m.recent[0].at).Seconds(); span > 0 {
			m.jobRate = max(m.minJobRate, jobGrowth*float64(msgs)/span/float64(m.bidsPerJob+2))
		}
	}
	if m.verbose {
		m.t.logf("block %d: %d jobs, %d bids, %d checkpoints of ours; job rate now %.0f/s, %d bids queued, %d jobs in flight",
			h, ours[kindSubmitJob].msgs, ours[kindPlaceBid].msgs, ours[kindCheckpoint].msgs, m.jobRate, m.queuedBids, m.jobsInFlight)
	}
	m.cond.Broadcast()
	m.mu.Unlock()
	for _, ev := range events {
		msg, ok := typedEvent(ev, "depinchain.market.v1.EventLeaseCreated")
		if !ok {
			continue
		}
		lease := msg.(*markettypes.EventLeaseCreated)
		m.mu.Lock()
		if m.jobs[lease.JobId] {
			m.stats.Leases++
			if p, ours := m.provByAddr[lease.Provider]; ours {
				m.stats.OurLeases++
				if m.stopped {
					m.unsent[string(kindCheckpoint)]++
				} else {
					m.add(p, task{kind: kindCheckpoint, jobID: lease.JobId, leaseID: lease.LeaseId})
				}
			}
		}
		m.mu.Unlock()
	}
}

func (m *market) report() (MarketReport, map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats, m.unsent
}

// checkpoint is the honest commitment of a lease's work: the provider runs
// the reference trainer over the job's steps from the job's seed, as the
// sidecar would, and commits the trace root, the final hash with its proof,
// and the state root of the final checkpoint.
func (m *market) checkpoint(ctx context.Context, p *account, tk task) (*verifytypes.MsgSubmitCheckpoint, error) {
	res, err := m.query.Job(ctx, &markettypes.QueryJobRequest{JobId: tk.jobID})
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", tk.jobID, err)
	}
	job := res.Job
	data, err := verifytypes.JobTrainingData(job)
	if err != nil {
		return nil, err
	}
	state, err := verifytypes.InitialState(job)
	if err != nil {
		return nil, err
	}
	hashes := []merkle.Hash{state.Root()}
	var loss int64
	steps := min(job.Spec.CheckpointInterval, job.Spec.TotalSteps)
	if _, err := exact.Run(state, data.Bytes, job.Seed, steps, func(_ uint64, info exact.StepInfo) error {
		hashes = append(hashes, info.Root)
		loss = info.Loss
		return nil
	}); err != nil {
		return nil, err
	}
	tr := trace.New(0, hashes)
	finalHash, proof, err := tr.Open(tr.End())
	if err != nil {
		return nil, err
	}
	root := tr.Root()
	return &verifytypes.MsgSubmitCheckpoint{
		Provider: p.address, LeaseId: tk.leaseID, Index: 0, StartStep: 0, EndStep: tr.End(),
		StateRoot: finalHash[:], TraceRoot: root[:], FinalHash: finalHash[:], FinalHashProof: proof,
		Uri:     fmt.Sprintf("https://%s.loadtest.invalid/ckpt/%d/0", p, tk.leaseID),
		Metrics: []verifytypes.Metric{{Name: "loss", Value: strconv.FormatFloat(exact.LossNats(loss), 'f', 4, 64)}},
	}, nil
}
