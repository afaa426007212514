package keeper_test

import (
	"cosmossdk.io/math"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cosmos/gogoproto/proto"
	"github.com/stretchr/testify/require"

	errorsmod "cosmossdk.io/errors"
	storetypes "cosmossdk.io/store/types"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/testutil/keepers"
	marketkeeper "github.com/depinchain/depinchain/x/market/keeper"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Shared numbers of the scenarios. The job asks for 2 H100s for one worker at up to
// 3600udepin per GPU-hour; the provider bids 3000 and bonds 20 DEPIN.
const (
	denom           = keepers.Denom
	blockTime       = 6 * time.Second
	h100Model       = "H100-SXM5-80GB"
	h100VRAMMiB     = 81920
	providerBond    = 20_000_000
	providerFunds   = 100_000_000
	challengerFunds = 100_000_000
	ownerFunds      = 1_000_000_000
	jobDeposit      = 1_000_000
	maxPrice        = 3600
	bidPrice        = 3000
	// testRate is the committed throughput of the tests' bids (steps per hour).
	testRate  = 3600
	bidWindow = 3
	testURI   = "https://provider.example.com/ckpt/0"
)

// env is a fixture of real keepers plus the servers and accounts the tests use.
type env struct {
	*keepers.Fixture
	t      testing.TB
	msg    types.MsgServer
	query  types.QueryServer
	mmsg   markettypes.MsgServer
	sxMsg  stakingexttypes.MsgServer
	owner  sdk.AccAddress
	events []abci.Event
	// gas is the gas the messages sent through deliver used, in all.
	gas uint64
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOn(t, keepers.New(t))
}

// newEnvOn is newEnv on a fixture built with options.
func newEnvOn(t testing.TB, f *keepers.Fixture) *env {
	t.Helper()
	e := &env{
		Fixture: f,
		t:       t,
		msg:     keeper.NewMsgServerImpl(f.Verify),
		query:   keeper.NewQueryServerImpl(f.Verify),
		mmsg:    marketkeeper.NewMsgServerImpl(f.Market),
		sxMsg:   stakingextkeeper.NewMsgServerImpl(f.StakingExt),
		owner:   addr("owner"),
	}
	f.Fund(t, e.owner, ownerFunds)
	keepers.RequireInvariantsAtEnd(t, e.requireInvariants)
	return e
}

var (
	addr = keepers.Addr
	coin = keepers.Coin
)

// requireInvariants fails when any verify, market or stakingext invariant is broken, or
// the audit fees the escrows spent are not what x/verify holds and paid.
func (e *env) requireInvariants() {
	e.t.Helper()
	e.RequireInvariants(e.t, keeper.AllInvariants(e.Verify), marketkeeper.AllInvariants(e.Market))
	spent, accounted := math.ZeroInt(), math.ZeroInt()
	require.NoError(e.t, e.Market.Jobs.Walk(e.Ctx, nil, func(_ uint64, j markettypes.Job) (bool, error) {
		if !j.AuditFees.Amount.IsNil() {
			spent = spent.Add(j.AuditFees.Amount)
		}
		return false, nil
	}))
	require.NoError(e.t, e.Verify.Assignments.Walk(e.Ctx, nil, func(_ keeper.AuditKey, a types.Audit) (bool, error) {
		if a.Settled {
			accounted = accounted.Add(a.Paid.Amount)
		} else {
			accounted = accounted.Add(a.Fee.Amount)
		}
		return false, nil
	}))
	require.True(e.t, spent.Equal(accounted), "audit fees: the escrows spent %s, x/verify holds and paid %s", spent, accounted)
}

// ---- params ----

func (e *env) verifyParams() types.Params { return keepers.Value(e.t, e.Fixture, e.Verify.Params) }

func (e *env) setVerifyParams(change func(*types.Params)) {
	e.t.Helper()
	p := e.verifyParams()
	change(&p)
	_, err := e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: p})
	require.NoError(e.t, err)
}

// ---- providers, jobs, leases ----

func (e *env) registerProvider(label string, gpus uint32) sdk.AccAddress {
	e.t.Helper()
	return e.RegisterProvider(e.t, label, providerFunds, providerBond, stakingexttypes.GPUInventory{Model: h100Model, VramMib: h100VRAMMiB, Count: gpus})
}

// account funds a fresh account (a challenger, a verifier).
func (e *env) account(label string) sdk.AccAddress {
	e.t.Helper()
	a := addr(label)
	e.Fund(e.t, a, challengerFunds)
	return a
}

// referenceSpec is a reference-workload job for one worker with 2 H100s. Its
// checkpoint deadline is long so that slow disputes never close the lease.
func referenceSpec(totalSteps, interval uint64) markettypes.JobSpec {
	return markettypes.JobSpec{
		Name:                     "reference-training",
		Gpu:                      markettypes.GPURequirement{Models: []string{h100Model}, MinVramGib: 80, PerWorker: 2},
		Workers:                  1,
		Resources:                markettypes.Resources{CpuMillis: 16_000, MemoryMib: 64 * 1024, DiskGib: 100},
		Workload:                 markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE},
		TotalSteps:               totalSteps,
		CheckpointInterval:       interval,
		MaxPricePerGpuHour:       coin(maxPrice),
		MaxDuration:              24 * time.Hour,
		BiddingWindowBlocks:      bidWindow,
		CheckpointDeadlineBlocks: 5_000,
	}
}

func containerSpec(totalSteps, interval uint64) markettypes.JobSpec {
	s := referenceSpec(totalSteps, interval)
	s.Workload = markettypes.Workload{
		Kind:   markettypes.WORKLOAD_KIND_CONTAINER,
		Image:  "ghcr.io/example/trainer:1.0",
		Digest: "sha256:" + strings.Repeat("ab", 32),
	}
	return s
}

func (e *env) getJob(id uint64) markettypes.Job { return e.Job(e.t, id) }

func (e *env) getLease(id uint64) markettypes.Lease { return e.Lease(e.t, id) }

func (e *env) provider(op sdk.AccAddress) stakingexttypes.Provider { return e.Provider(e.t, op) }

// leaseJob submits a job with spec, lets op win it and returns the job and its lease.
func (e *env) leaseJob(op sdk.AccAddress, spec markettypes.JobSpec) (markettypes.Job, markettypes.Lease) {
	e.t.Helper()
	res, err := e.mmsg.SubmitJob(e.Ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
	require.NoError(e.t, err)
	_, err = e.mmsg.PlaceBid(e.Ctx, &markettypes.MsgPlaceBid{Provider: op.String(), JobId: res.JobId, PricePerGpuHour: coin(bidPrice), StepsPerHour: testRate})
	require.NoError(e.t, err)
	for deadline := e.getJob(res.JobId).BiddingDeadline; e.Ctx.BlockHeight() <= deadline; {
		e.nextBlock()
	}
	active := e.ActiveLeasesOfJob(e.t, res.JobId)
	require.Len(e.t, active, 1)
	job := e.getJob(res.JobId)
	require.Equal(e.t, markettypes.JOB_STATE_LEASED, job.State)
	return job, active[0]
}

// ---- blocks and events ----

// nextBlock finishes the current block (end blockers run) and starts the next, keeping
// the finished block's events in e.events.
func (e *env) nextBlock() {
	e.t.Helper()
	em := e.Ctx.EventManager()
	e.NextBlock(e.t, blockTime)
	e.events = append(e.events, em.ABCIEvents()...)
}

func (e *env) advance(blocks int) {
	e.t.Helper()
	for i := 0; i < blocks; i++ {
		e.nextBlock()
	}
}

// advanceTo runs blocks until the current height is h (its end blocker not yet run).
func (e *env) advanceTo(h int64) {
	e.t.Helper()
	require.LessOrEqual(e.t, e.Ctx.BlockHeight(), h)
	for e.Ctx.BlockHeight() < h {
		e.nextBlock()
	}
}

// typedEvents returns the events of type T of finished blocks and the current one.
func typedEvents[T proto.Message](e *env) []T {
	e.t.Helper()
	return keepers.TypedEvents[T](e.t, append(append([]abci.Event{}, e.events...), e.Ctx.EventManager().ABCIEvents()...))
}

// deliver runs one message handler on a fresh gas meter, as a transaction would, and
// returns the gas it used. Failed handlers are not rolled back: every handler checks
// everything before its first write, which requireRejected verifies.
func (e *env) deliver(call func(ctx sdk.Context) error) (uint64, error) {
	ctx := e.Ctx.WithGasMeter(storetypes.NewInfiniteGasMeter())
	err := call(ctx)
	used := ctx.GasMeter().GasConsumed()
	if err == nil {
		e.gas += used
	}
	return used, err
}

// ---- verify state ----

func (e *env) checkpoint(leaseID, index uint64) types.Checkpoint {
	e.t.Helper()
	cp, err := e.Verify.GetCheckpoint(e.Ctx, leaseID, index)
	require.NoError(e.t, err)
	return cp
}

// challenge is a game as it stands now, as the Challenge query shows it: a reveal has
// moved the games waiting on it to their challengers (Keeper.Effective).
func (e *env) challenge(id uint64) types.Challenge {
	e.t.Helper()
	ch, err := e.Verify.GetChallenge(e.Ctx, id)
	require.NoError(e.t, err)
	ch, err = e.Verify.Effective(e.Ctx, ch)
	require.NoError(e.t, err)
	return ch
}

// ---- snapshots ----

// snapshot is everything a rejected message must leave alone: the verify, market and
// stakingext genesis exports, the derived deadline indexes, every bank balance and the
// number of events emitted so far.
func (e *env) snapshot() keepers.Snapshot {
	e.t.Helper()
	parts := []keepers.Part{e.VerifyState(), e.MarketState(), e.StakingExtState(), e.Balances()}
	return e.Snapshot(e.t, append(parts, e.indexParts()...)...)
}

// indexParts are the verify and market deadline indexes, which genesis leaves out.
func (e *env) indexParts() []keepers.Part { return append(e.VerifyDeadlines(), e.MarketDeadlines()...) }

// dumpIndexes renders the verify and market deadline indexes.
func (e *env) dumpIndexes() string {
	e.t.Helper()
	return e.Snapshot(e.t, e.indexParts()...).String()
}

func (e *env) requireUnchanged(before keepers.Snapshot) {
	e.t.Helper()
	before.RequireUnchanged(e.t)
}

// requireRejected runs call on a fresh gas meter, requires it to fail with want and to
// leave every piece of state, every balance and the event log exactly as they were.
func (e *env) requireRejected(want *errorsmod.Error, call func(ctx sdk.Context) error) error {
	e.t.Helper()
	return keepers.RequireRejected(e.t, want, e.snapshot, func() error {
		_, err := e.deliver(call)
		return err
	})
}

// ---- the honest computation ----

// honestRun is the reference computation of a job: h_0..h_n and the states, kept every
// `every` steps (others are recomputed from the nearest kept one).
type honestRun struct {
	cfg    exact.Config
	seed   []byte
	data   traindata.Stream
	hashes []merkle.Hash
	every  uint64
	snaps  map[uint64]*exact.State
}

var (
	runCacheMu sync.Mutex
	runCache   = map[string]*honestRun{}
)

// computeRun trains the job's reference workload on the built-in corpus for n steps.
func computeRun(t testing.TB, job markettypes.Job, n uint64) *honestRun {
	t.Helper()
	data, err := types.JobTrainingData(job)
	require.NoError(t, err)
	return computeRunOn(t, job, data, n)
}

// computeRunOn trains the job's reference workload on data for n steps (cached by seed,
// data and n).
func computeRunOn(t testing.TB, job markettypes.Job, data traindata.Stream, n uint64) *honestRun {
	t.Helper()
	key := fmt.Sprintf("%x/%x/%d", job.Seed, data.Segments[0].Root, n)
	runCacheMu.Lock()
	defer runCacheMu.Unlock()
	if r, ok := runCache[key]; ok {
		return r
	}
	var err error
	cfg := exact.ReferenceConfig()
	s0, err := exact.Init(cfg, job.Seed)
	require.NoError(t, err)
	every := uint64(1)
	if n > 1024 {
		every = 128
	}
	r := &honestRun{cfg: cfg, seed: job.Seed, data: data, hashes: []merkle.Hash{s0.Root()}, every: every,
		snaps: map[uint64]*exact.State{0: s0}}
	cur := s0
	for cur.Step < n {
		cur, err = exact.Run(cur, data.Bytes, job.Seed, min(every, n-cur.Step), func(step uint64, info exact.StepInfo) error {
			h := info.Root
			if step != uint64(len(r.hashes)) {
				return fmt.Errorf("step %d out of order", step)
			}
			r.hashes = append(r.hashes, h)
			return nil
		})
		require.NoError(t, err)
		r.snaps[cur.Step] = cur
	}
	runCache[key] = r
	return r
}

// stateAt returns (a copy of) the honest state after `step` steps.
func (r *honestRun) stateAt(t testing.TB, step uint64) *exact.State {
	base := r.snaps[step/r.every*r.every]
	s, err := exact.Run(base, r.data.Bytes, r.seed, step-base.Step, nil)
	require.NoError(t, err)
	if s == base {
		// Run returned the cached state itself; callers may change what they get.
		s, err = exact.Decode(base.Encode())
		require.NoError(t, err)
	}
	return s
}

// trace is the honest trace h_a..h_b.
func (r *honestRun) trace(a, b uint64) trace.Trace {
	return trace.New(a, append([]merkle.Hash(nil), r.hashes[a:b+1]...))
}

// garbageFrom is a liar's trace over [a, b]: honest before step k, made-up hashes from k on.
func (r *honestRun) garbageFrom(a, b, k uint64) trace.Trace {
	hs := append([]merkle.Hash(nil), r.hashes[a:b+1]...)
	for i := k; i <= b; i++ {
		hs[i-a] = sha256.Sum256(append([]byte("lie"), hs[i-a][:]...))
	}
	return trace.New(a, hs)
}

// corruptState returns a copy of s with one weight changed: a provider that computed
// step s.Step wrongly.
func corruptState(s *exact.State) *exact.State {
	c, err := exact.Decode(s.Encode())
	if err != nil {
		panic(err)
	}
	c.Tensors[0].Data[0] += 7
	return c
}

// corruptedAt is a liar whose step k went wrong (one weight off) and who kept training
// from the corrupted state: its trace over [a, b] and its states.
func (r *honestRun) corruptedAt(t testing.TB, a, b, k uint64) (trace.Trace, func(uint64) *exact.State) {
	hs := append([]merkle.Hash(nil), r.hashes[a:k]...)
	states := map[uint64]*exact.State{}
	cur := corruptState(r.stateAt(t, k))
	states[k] = cur
	hs = append(hs, cur.Root())
	for cur.Step < b {
		next, err := exact.Run(cur, r.data.Bytes, r.seed, 1, nil)
		require.NoError(t, err)
		cur = next
		states[cur.Step] = cur
		hs = append(hs, cur.Root())
	}
	return trace.New(a, hs), func(step uint64) *exact.State {
		if step < k {
			return r.stateAt(t, step)
		}
		return states[step]
	}
}

// ---- players ----

// party is one side of a dispute: an account, the trace it committed to, and (to send
// MsgStep) the states behind it.
type party struct {
	addr    sdk.AccAddress
	trace   trace.Trace
	stateAt func(step uint64) *exact.State
	// reveals counts the provider's MsgRevealHash per step, across all its games.
	reveals map[uint64]int
}

func newParty(a sdk.AccAddress, tr trace.Trace, stateAt func(uint64) *exact.State) *party {
	return &party{addr: a, trace: tr, stateAt: stateAt, reveals: map[uint64]int{}}
}

// submitCheckpoint commits p's trace as the lease's checkpoint `index`.
func (e *env) submitCheckpoint(p *party, leaseID, index uint64) types.Checkpoint {
	e.t.Helper()
	_, err := e.deliver(func(ctx sdk.Context) error {
		_, err := e.msg.SubmitCheckpoint(ctx, checkpointMsg(p, leaseID, index))
		return err
	})
	require.NoError(e.t, err)
	return e.checkpoint(leaseID, index)
}

func checkpointMsg(p *party, leaseID, index uint64) *types.MsgSubmitCheckpoint {
	final, proof, err := p.trace.Open(p.trace.End())
	if err != nil {
		panic(err)
	}
	root := p.trace.Root()
	return &types.MsgSubmitCheckpoint{
		Provider: p.addr.String(), LeaseId: leaseID, Index: index,
		StartStep: p.trace.Start, EndStep: p.trace.End(),
		// An exact state's hash is its root: the trace's last leaf.
		StateRoot: final[:], TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
		Uri:     fmt.Sprintf("https://provider.example.com/lease/%d/ckpt/%d", leaseID, index),
		Metrics: []types.Metric{{Name: "loss", Value: "2.31"}},
	}
}

func challengeMsg(c *party, leaseID, index uint64) *types.MsgChallenge {
	final, proof, err := c.trace.Open(c.trace.End())
	if err != nil {
		panic(err)
	}
	root := c.trace.Root()
	return &types.MsgChallenge{
		Challenger: c.addr.String(), LeaseId: leaseID, CheckpointIndex: index,
		TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
	}
}

// openChallenge has c challenge checkpoint (lease, index) with its trace.
func (e *env) openChallenge(c *party, leaseID, index uint64) uint64 {
	e.t.Helper()
	var id uint64
	_, err := e.deliver(func(ctx sdk.Context) error {
		res, err := e.msg.Challenge(ctx, challengeMsg(c, leaseID, index))
		if err == nil {
			id = res.ChallengeId
		}
		return err
	})
	require.NoError(e.t, err)
	return id
}

// game drives one challenge: the provider reveals, the challenger responds, and at the
// one-step phase `stepper` (if any) sends MsgStep.
type game struct {
	e       *env
	id      uint64
	prov    *party
	chal    *party
	stepper *party
	// blocks: a new block after every move, as real transactions would land.
	blocks bool
	moves  int
}

func (e *env) game(id uint64, prov, chal, stepper *party) *game {
	return &game{e: e, id: id, prov: prov, chal: chal, stepper: stepper}
}

func (g *game) reveal(ctx sdk.Context, step uint64) error {
	h, proof, err := g.prov.trace.Open(step)
	if err != nil {
		return err
	}
	_, err = g.e.msg.RevealHash(ctx, &types.MsgRevealHash{
		Provider: g.prov.addr.String(), LeaseId: g.e.challenge(g.id).LeaseId, CheckpointIndex: g.e.challenge(g.id).CheckpointIndex,
		Step: step, Hash: h[:], Proof: proof,
	})
	return err
}

func (g *game) respondMsg(step uint64) *types.MsgRespond {
	h, proof, err := g.chal.trace.Open(step)
	if err != nil {
		panic(err)
	}
	return &types.MsgRespond{Challenger: g.chal.addr.String(), ChallengeId: g.id, Hash: h[:], Proof: proof}
}

func stepMsg(r *honestRun, sender sdk.AccAddress, id uint64, pre *exact.State, lo uint64) *types.MsgStep {
	data, err := types.StepData(r.data, r.cfg, r.seed, lo)
	if err != nil {
		panic(err)
	}
	return &types.MsgStep{Sender: sender.String(), ChallengeId: id, PreState: pre.Encode(), Data: data}
}

// move makes the next move of the game; false when it is over or waits on nobody.
func (g *game) move(r *honestRun) bool {
	e := g.e
	e.t.Helper()
	ch := e.challenge(g.id)
	var err error
	switch ch.Turn {
	case types.GAME_TURN_PROVIDER:
		_, err = e.deliver(func(ctx sdk.Context) error { return g.reveal(ctx, ch.Mid) })
		g.prov.reveals[ch.Mid]++
	case types.GAME_TURN_CHALLENGER:
		_, err = e.deliver(func(ctx sdk.Context) error {
			_, err := e.msg.Respond(ctx, g.respondMsg(ch.Mid))
			return err
		})
	case types.GAME_TURN_ONE_STEP:
		if g.stepper == nil {
			return false
		}
		_, err = e.deliver(func(ctx sdk.Context) error {
			_, err := e.msg.Step(ctx, stepMsg(r, g.stepper.addr, g.id, g.stepper.stateAt(ch.Lo), ch.Lo))
			return err
		})
	default:
		return false
	}
	require.NoError(e.t, err, "move %d of challenge %d (%s)", g.moves, g.id, ch.Turn)
	g.moves++
	if g.blocks {
		e.nextBlock()
	}
	return true
}

// play moves until the game is over or waits on nobody, and returns the challenge.
func (g *game) play(r *honestRun) types.Challenge {
	for g.move(r) {
	}
	return g.e.challenge(g.id)
}

// ceilLog2 is the number of bisection rounds over a range of n steps.
func ceilLog2(n uint64) uint32 { return uint32(bits.Len64(n - 1)) }

func hexOf(b []byte) string { return hex.EncodeToString(b) }

// ---- scenarios ----

// scenario is a provider holding the active lease of a reference job, and the job's
// honest computation.
type scenario struct {
	*env
	prov  sdk.AccAddress
	job   markettypes.Job
	lease markettypes.Lease
	run   *honestRun
}

// newScenario leases a reference job of totalSteps (checkpoint every interval steps).
func newScenario(t testing.TB, totalSteps, interval uint64) *scenario {
	t.Helper()
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	job, lease := e.leaseJob(prov, referenceSpec(totalSteps, interval))
	return &scenario{env: e, prov: prov, job: job, lease: lease, run: computeRun(t, job, totalSteps)}
}

// honest is the provider committing the honest trace over [a, b].
func (s *scenario) honest(a, b uint64) *party {
	return newParty(s.prov, s.run.trace(a, b), func(step uint64) *exact.State { return s.run.stateAt(s.t, step) })
}

// verifier is an honest challenger account with the honest trace over [a, b].
func (s *scenario) verifier(label string, a, b uint64) *party {
	return newParty(s.account(label), s.run.trace(a, b), func(step uint64) *exact.State { return s.run.stateAt(s.t, step) })
}

// liar is an account whose trace over [a, b] is honest before step k and wrong from k on:
// made-up hashes, or (corrupt) the honest hashes of a computation whose step k went wrong.
func (s *scenario) liar(a sdk.AccAddress, from, to, k uint64, corrupt bool) *party {
	if corrupt {
		tr, states := s.run.corruptedAt(s.t, from, to, k)
		return newParty(a, tr, states)
	}
	return newParty(a, s.run.garbageFrom(from, to, k), func(step uint64) *exact.State { return s.run.stateAt(s.t, step) })
}

// resolvedEvent returns the EventChallengeResolved of challenge id.
func (e *env) resolvedEvent(id uint64) *types.EventChallengeResolved {
	e.t.Helper()
	for _, ev := range typedEvents[*types.EventChallengeResolved](e) {
		if ev.ChallengeId == id {
			return ev
		}
	}
	e.t.Fatalf("challenge %d has no EventChallengeResolved", id)
	return nil
}
