package keeper_test

import (
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cosmos/gogoproto/proto"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// Shared numbers of the scenarios. The default job's spec:
//
//	2 GPUs per worker, 1 worker, max 3600udepin per GPU-hour, max duration 24h
//	collateral = 10% × 3600 × 2 × 24 = 17280udepin
const (
	denom         = keepers.Denom
	blockTime     = 6 * time.Second
	h100Model     = "H100-SXM5-80GB"
	h100VRAMMiB   = 81920
	a100Model     = "A100-SXM4-40GB"
	a100VRAMMiB   = 40960
	providerBond  = 20_000_000 // 2.5× the 8 × 1 DEPIN an 8-GPU provider needs
	providerFunds = 100_000_000
	ownerFunds    = 1_000_000_000
	jobDeposit    = 1_000_000
	maxPrice      = 3600
	bidWindow     = 3
	ckptDeadline  = 50 // blocks a lease may go without a checkpoint in the default spec
	// testRate is the committed throughput of the tests' bids: 1000 steps in 10 h, well
	// within the default spec's 24 h max duration.
	testRate = 100
)

// env is a fixture of real keepers plus the servers and accounts the tests use.
type env struct {
	*keepers.Fixture
	t     *testing.T
	msg   types.MsgServer
	query types.QueryServer
	sxMsg stakingexttypes.MsgServer
	owner sdk.AccAddress
	// events holds every event of finished blocks; the current block's are in Ctx.
	events []abci.Event
}

func newEnv(t *testing.T) *env {
	t.Helper()
	f := keepers.New(t)
	e := &env{
		Fixture: f,
		t:       t,
		msg:     keeper.NewMsgServerImpl(f.Market),
		query:   keeper.NewQueryServerImpl(f.Market),
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

func marketAddr() sdk.AccAddress { return authtypes.NewModuleAddress(types.ModuleName) }

// requireInvariants fails the test when any market or stakingext invariant is broken.
func (e *env) requireInvariants() {
	e.t.Helper()
	e.RequireInvariants(e.t, keeper.AllInvariants(e.Market))
}

// ---- providers ----

func h100s(count uint32) stakingexttypes.GPUInventory {
	return stakingexttypes.GPUInventory{Model: h100Model, VramMib: h100VRAMMiB, Count: count}
}

func a100s(count uint32) stakingexttypes.GPUInventory {
	return stakingexttypes.GPUInventory{Model: a100Model, VramMib: a100VRAMMiB, Count: count}
}

// registerProviderWith funds and registers a provider through the stakingext msg server.
func (e *env) registerProviderWith(label string, bond int64, gpus ...stakingexttypes.GPUInventory) sdk.AccAddress {
	e.t.Helper()
	return e.RegisterProvider(e.t, label, providerFunds, bond, gpus...)
}

// registerProvider registers a provider with 8 H100s and a comfortable bond.
func (e *env) registerProvider(label string) sdk.AccAddress {
	e.t.Helper()
	return e.registerProviderWith(label, providerBond, h100s(8))
}

func (e *env) provider(op sdk.AccAddress) stakingexttypes.Provider { return e.Provider(e.t, op) }

// giveReputation records completed leases for a provider.
func (e *env) giveReputation(op sdk.AccAddress, completed int) {
	e.t.Helper()
	for i := 0; i < completed; i++ {
		require.NoError(e.t, e.StakingExt.RecordLeaseOutcome(e.Ctx, op, true))
	}
}

// ---- jobs ----

// spec is a valid job for 1 worker with 2 H100s (≥ 80 GiB each).
func spec() types.JobSpec {
	return types.JobSpec{
		Name:                     "llama-3-8b-finetune",
		Gpu:                      types.GPURequirement{Models: []string{h100Model}, MinVramGib: 80, PerWorker: 2},
		Workers:                  1,
		Resources:                types.Resources{CpuMillis: 16_000, MemoryMib: 128 * 1024, DiskGib: 500},
		Workload:                 types.Workload{Kind: types.WORKLOAD_KIND_REFERENCE},
		TotalSteps:               1000,
		CheckpointInterval:       100,
		MaxPricePerGpuHour:       coin(maxPrice),
		MaxDuration:              24 * time.Hour,
		BiddingWindowBlocks:      bidWindow,
		CheckpointDeadlineBlocks: ckptDeadline,
	}
}

func (e *env) params() types.Params { return keepers.Value(e.t, e.Fixture, e.Market.Params) }

func (e *env) setParams(change func(*types.Params)) {
	e.t.Helper()
	p := e.params()
	change(&p)
	_, err := e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: p})
	require.NoError(e.t, err)
}

func (e *env) collateral(s types.JobSpec) math.Int {
	return s.RequiredCollateral(e.params())
}

func (e *env) submitJobWith(s types.JobSpec, deposit int64) uint64 {
	e.t.Helper()
	res, err := e.msg.SubmitJob(e.Ctx, &types.MsgSubmitJob{Owner: e.owner.String(), Spec: s, Deposit: coin(deposit)})
	require.NoError(e.t, err)
	return res.JobId
}

func (e *env) submitJob() uint64 {
	e.t.Helper()
	return e.submitJobWith(spec(), jobDeposit)
}

func (e *env) job(id uint64) types.Job { return e.Job(e.t, id) }

func (e *env) lease(id uint64) types.Lease { return e.Lease(e.t, id) }

func (e *env) bid(op sdk.AccAddress, jobID uint64, price int64) {
	e.t.Helper()
	_, err := e.msg.PlaceBid(e.Ctx, &types.MsgPlaceBid{Provider: op.String(), JobId: jobID, PricePerGpuHour: coin(price), StepsPerHour: testRate})
	require.NoError(e.t, err)
}

func (e *env) hasBid(op sdk.AccAddress, jobID uint64) bool {
	e.t.Helper()
	has, err := e.Market.Bids.Has(e.Ctx, collections.Join(jobID, []byte(op)))
	require.NoError(e.t, err)
	return has
}

// leasesOfJob returns every lease of a job, oldest first.
func (e *env) leasesOfJob(jobID uint64) []types.Lease { return e.LeasesOfJob(e.t, jobID) }

func (e *env) activeLeasesOfJob(jobID uint64) []types.Lease { return e.ActiveLeasesOfJob(e.t, jobID) }

// ---- blocks ----

// nextBlock finishes the current block (end blockers run) and starts the next, keeping
// the finished block's events in e.events.
func (e *env) nextBlock(dt time.Duration) {
	e.t.Helper()
	em := e.Ctx.EventManager()
	e.NextBlock(e.t, dt)
	e.events = append(e.events, em.ABCIEvents()...)
}

func (e *env) advance(blocks int) {
	e.t.Helper()
	for i := 0; i < blocks; i++ {
		e.nextBlock(blockTime)
	}
}

// closeAuction runs blocks until the job's current bidding deadline has been processed.
func (e *env) closeAuction(jobID uint64) {
	e.t.Helper()
	deadline := e.job(jobID).BiddingDeadline
	for e.Ctx.BlockHeight() <= deadline {
		e.nextBlock(blockTime)
	}
}

// leaseJob submits the default job, lets op win it at price and returns (job, lease).
func (e *env) leaseJob(op sdk.AccAddress, price int64) (uint64, types.Lease) {
	e.t.Helper()
	jobID := e.submitJob()
	e.bid(op, jobID, price)
	e.closeAuction(jobID)
	active := e.activeLeasesOfJob(jobID)
	require.Len(e.t, active, 1)
	require.Equal(e.t, types.JOB_STATE_LEASED, e.job(jobID).State)
	return jobID, active[0]
}

// ---- events ----

// typedEvents returns the events of type T emitted in finished blocks and the current one.
func typedEvents[T proto.Message](e *env) []T {
	e.t.Helper()
	return keepers.TypedEvents[T](e.t, append(append([]abci.Event{}, e.events...), e.Ctx.EventManager().ABCIEvents()...))
}

// ---- snapshots ----

// snapshot is everything a rejected message must leave alone: the market and stakingext
// genesis exports, the market's derived deadline indexes, every bank balance and the
// supply, and the number of events emitted so far.
func (e *env) snapshot() keepers.Snapshot {
	e.t.Helper()
	return e.Snapshot(e.t, append([]keepers.Part{e.MarketState(), e.StakingExtState(), e.Balances()}, e.MarketDeadlines()...)...)
}

// dumpIndexes renders the deadline indexes, which genesis export leaves out ("" when
// they are all empty).
func (e *env) dumpIndexes() string {
	e.t.Helper()
	var b strings.Builder
	for _, p := range e.MarketDeadlines() {
		b.WriteString(p.Read(e.t))
	}
	return b.String()
}

// requireRejected runs call, requires it to fail with want and to leave every piece of
// state, every balance and the event log exactly as they were.
func (e *env) requireRejected(want *errorsmod.Error, call func() error) {
	e.t.Helper()
	keepers.RequireRejected(e.t, want, e.snapshot, call)
}

func sdkCoin(d string, amount int64) sdk.Coin { return sdk.NewInt64Coin(d, amount) }
