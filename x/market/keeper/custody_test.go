package keeper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cosmossdk.io/math"
	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// retentionLog is x/shardregistry as the market sees it, recording which custody objects
// the market schedules for release after their retention (bounds and budgets are the real
// keeper's). x/verify's custody tests run the same paths against the real registry.
type retentionLog struct {
	types.CustodyKeeper
	retained []string
}

func (r *retentionLog) ReleaseCustodyAfterRetention(_ context.Context, id string) error {
	r.retained = append(r.retained, id)
	return nil
}

// custodyEnv is the market fixture with the retention log in place of x/shardregistry's
// retention, and custody objects counted as x/shardregistry counts them.
type custodyEnv struct {
	*env
	log *retentionLog
}

var custodySpec = types.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}

func newCustodyEnv(t *testing.T) *custodyEnv {
	e := newEnv(t)
	log := &retentionLog{CustodyKeeper: e.ShardRegistry}
	e.Market.SetCustodyKeeper(log)
	e.msg = keeper.NewMsgServerImpl(e.Market)
	return &custodyEnv{env: e, log: log}
}

// leaseCustodyJob submits the default spec with a custody section and lets op win it.
func (c *custodyEnv) leaseCustodyJob(op sdk.AccAddress) (uint64, types.Lease) {
	c.t.Helper()
	s := spec()
	cs := custodySpec
	s.Custody = &cs
	jobID := c.submitJobWith(s, jobDeposit)
	c.bid(op, jobID, 1000)
	c.closeAuction(jobID)
	active := c.activeLeasesOfJob(jobID)
	require.Len(c.t, active, 1)
	return jobID, active[0]
}

// checkpoint submits lease's checkpoint ending at step, registering its custody object as
// x/verify and x/shardregistry would, and returns its claim and custody id.
func (c *custodyEnv) checkpoint(l types.Lease, index, step uint64) (sdk.Coin, string) {
	c.t.Helper()
	claim, err := c.Market.OnCheckpointSubmitted(c.Ctx, l.Id, step)
	require.NoError(c.t, err)
	require.NoError(c.t, c.Market.OnCustodyRegistered(c.Ctx, l.JobId))
	return claim, shardtypes.CustodyDatasetID(l.Id, index)
}

// final submits and finalizes lease's checkpoint ending at step; it returns its custody id.
func (c *custodyEnv) final(l types.Lease, index, step uint64) string {
	c.t.Helper()
	claim, id := c.checkpoint(l, index, step)
	c.advance(2)
	require.NoError(c.t, c.Market.OnCheckpointFinal(c.Ctx, l.Id, claim, step, []byte(fmt.Sprintf("h%d", step)), "", id))
	return id
}

// requireRefundOnLastRelease releases the job's held custody objects one by one: the
// storage escrow stays until the last, then exactly what the holders were not paid goes
// to the owner, once.
func (c *custodyEnv) requireRefundOnLastRelease(jobID uint64, paid math.Int) {
	c.t.Helper()
	job := c.job(jobID)
	require.True(c.t, job.State.IsTerminal())
	budget := shardtypes.DefaultParams().CustodyStorageBudget(custodySpec)
	require.Equal(c.t, budget.Sub(paid).String(), job.StorageEscrow.Amount.String(), "kept while a custody object is held")
	owner := c.Balance(c.owner)
	for i := job.CustodyHeld; i > 0; i-- {
		require.Empty(c.t, typedEvents[*types.EventStorageEscrowRefunded](c.env))
		require.NoError(c.t, c.Market.OnCustodyReleased(c.Ctx, jobID))
	}
	job = c.job(jobID)
	require.Zero(c.t, job.CustodyHeld)
	require.True(c.t, job.StorageEscrow.IsZero())
	require.Equal(c.t, paid.String(), job.StorageFees.Amount.String())
	require.Equal(c.t, owner.Add(budget).Sub(paid).String(), c.Balance(c.owner).String(), "the unpaid storage escrow, to the owner")
	refunds := typedEvents[*types.EventStorageEscrowRefunded](c.env)
	require.Len(c.t, refunds, 1)
	require.Equal(c.t, budget.Sub(paid).String(), refunds[0].Amount.Amount.String())
	require.Equal(c.t, paid.String(), refunds[0].StorageFees.Amount.String())
	// A release the count does not know of is refused: nothing is refunded twice.
	require.Error(c.t, c.Market.OnCustodyReleased(c.Ctx, jobID))
	require.Len(c.t, typedEvents[*types.EventStorageEscrowRefunded](c.env), 1)
}

// However a job ends, the worker's last final checkpoint is kept retain_checkpoints from
// then (so the owner can still fetch it), a superseded one from when it was superseded,
// and once the last custody object is released what no holder was paid of the storage
// escrow goes back to the owner. A holder paid for a proven period keeps its pay.
func TestCustodyRetainedAndStorageRefundedOnEveryJobEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state types.JobState
		end   func(c *custodyEnv, jobID uint64, l types.Lease) (last string)
	}{
		{"cancelled", types.JOB_STATE_CANCELLED, func(c *custodyEnv, jobID uint64, l types.Lease) string {
			_, err := c.msg.CancelJob(c.Ctx, &types.MsgCancelJob{Owner: c.owner.String(), JobId: jobID})
			require.NoError(c.t, err)
			return shardtypes.CustodyDatasetID(l.Id, 1)
		}},
		{"failed at max_duration", types.JOB_STATE_FAILED, func(c *custodyEnv, jobID uint64, l types.Lease) string {
			c.nextBlock(25 * time.Hour)
			c.nextBlock(blockTime)
			return shardtypes.CustodyDatasetID(l.Id, 1)
		}},
		{"expired after its lease was lost", types.JOB_STATE_EXPIRED, func(c *custodyEnv, jobID uint64, l types.Lease) string {
			c.advance(ckptDeadline + 1) // closed for non-performance, the job reopens
			require.Equal(c.t, types.JOB_STATE_OPEN, c.job(jobID).State)
			require.Empty(c.t, c.log.retained[1:], "a lost lease's last final checkpoint is what the replacement resumes from")
			c.closeAuction(jobID) // nobody bids
			return shardtypes.CustodyDatasetID(l.Id, 1)
		}},
		{"completed", types.JOB_STATE_COMPLETED, func(c *custodyEnv, jobID uint64, l types.Lease) string {
			return c.final(l, 2, spec().TotalSteps)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCustodyEnv(t)
			jobID, l := c.leaseCustodyJob(c.registerProvider("alice"))
			first := c.final(l, 0, 100)
			require.Empty(t, c.log.retained, "the worker's last final checkpoint has no release time while the job runs")
			second := c.final(l, 1, 200)
			require.Equal(t, []string{first}, c.log.retained, "superseded by the lease's next final checkpoint")
			// A holder proves a period of the second state and is paid for it.
			holder := addr("holder")
			fee := math.NewInt(7)
			paid, err := c.Market.PayStorage(c.Ctx, jobID, holder, fee)
			require.NoError(t, err)
			require.Equal(t, fee, paid.Amount)

			last := tc.end(c, jobID, l)
			require.Equal(t, tc.state, c.job(jobID).State)
			if tc.state == types.JOB_STATE_COMPLETED {
				require.Equal(t, []string{first, second, last}, c.log.retained, "the completing checkpoint supersedes the second; kept from the job's end")
			} else {
				require.Equal(t, second, last)
				require.Equal(t, []string{first, second}, c.log.retained, "the last final checkpoint is kept from the job's end")
			}
			require.Equal(t, fee, c.Balance(holder), "the proven period stays paid")
			c.requireRefundOnLastRelease(jobID, fee)
		})
	}
}

// A lease closed for non-performance leaves its last final checkpoint for the replacement
// to resume from; when the replacement's first final checkpoint supersedes it, it is kept
// retain_checkpoints from then, not forever.
func TestCustodyOfAClosedLeaseReleasedWhenTheReplacementSupersedesIt(t *testing.T) {
	c := newCustodyEnv(t)
	alice, bob := c.registerProvider("alice"), c.registerProvider("bob")
	jobID, first := c.leaseCustodyJob(alice)
	resumeFrom := c.final(first, 0, 100)
	c.advance(ckptDeadline + 1)
	require.Equal(t, types.LEASE_CLOSE_REASON_NON_PERFORMANCE, c.lease(first.Id).CloseReason)
	require.Empty(t, c.log.retained)
	c.bid(bob, jobID, 1000)
	c.closeAuction(jobID)
	second := c.activeLeasesOfJob(jobID)[0]
	require.Equal(t, uint64(100), second.ResumeStep)
	require.Empty(t, c.log.retained, "the replacement has not superseded it yet")
	c.final(second, 0, 200)
	require.Equal(t, []string{resumeFrom}, c.log.retained)
	require.Equal(t, uint32(2), c.job(jobID).CustodyHeld)
}

// A checkpoint still pending when its job ends is decided by x/verify as usual: final,
// it supersedes the worker's last final checkpoint and is kept retain_checkpoints from
// then (the job's end has passed); the storage escrow waits for both releases.
func TestCustodyOfACheckpointFinalAfterItsJobEnded(t *testing.T) {
	c := newCustodyEnv(t)
	jobID, l := c.leaseCustodyJob(c.registerProvider("alice"))
	first := c.final(l, 0, 100)
	claim, pending := c.checkpoint(l, 1, 200)
	_, err := c.msg.CancelJob(c.Ctx, &types.MsgCancelJob{Owner: c.owner.String(), JobId: jobID})
	require.NoError(t, err)
	require.Equal(t, []string{first}, c.log.retained)
	require.NoError(t, c.Market.OnCheckpointFinal(c.Ctx, l.Id, claim, 200, []byte("h200"), "", pending))
	require.Equal(t, []string{first, pending}, c.log.retained, "the new last final one kept from now (the superseded one's retention runs from the job's end)")
	require.True(t, c.job(jobID).StorageEscrow.IsPositive())
	c.requireRefundOnLastRelease(jobID, math.ZeroInt())
}

// A job that ends without any custody object held (here: no checkpoint ever) gets its
// whole storage escrow back with the rest of its escrow.
func TestStorageEscrowRefundedAtOnceWithoutCustodyObjects(t *testing.T) {
	c := newCustodyEnv(t)
	jobID, _ := c.leaseCustodyJob(c.registerProvider("alice"))
	before := c.Balance(c.owner)
	deposited := c.job(jobID).Deposited
	_, err := c.msg.CancelJob(c.Ctx, &types.MsgCancelJob{Owner: c.owner.String(), JobId: jobID})
	require.NoError(t, err)
	job := c.job(jobID)
	require.True(t, job.StorageEscrow.IsZero())
	require.Equal(t, before.Add(deposited.Amount).String(), c.Balance(c.owner).String(), "the whole deposit, storage budget included")
	require.Len(t, typedEvents[*types.EventStorageEscrowRefunded](c.env), 1)
}

// default_custody gives every adjudicable job without a custody section that section (and
// reserves its storage budget); a container job gets none, and a spec's own section is
// kept.
func TestDefaultCustodyAppliedToAdjudicableJobs(t *testing.T) {
	e := newEnv(t)
	e.setParams(func(p *types.Params) { p.DefaultCustody = types.DefaultCustody })
	budget := shardtypes.DefaultParams().CustodyStorageBudget(types.DefaultCustody)

	id := e.submitJob()
	job := e.job(id)
	require.NotNil(t, job.Spec.Custody)
	require.Equal(t, types.DefaultCustody, *job.Spec.Custody)
	require.Equal(t, budget.String(), job.StorageEscrow.Amount.String())
	require.Equal(t, int64(jobDeposit), job.Escrow.Amount.Add(job.StorageEscrow.Amount).Int64())

	own := spec()
	ownCustody := types.CustodySpec{DataPieces: 4, ParityPieces: 2, RetainCheckpoints: time.Hour}
	own.Custody = &ownCustody
	require.Equal(t, ownCustody, *e.job(e.submitJobWith(own, jobDeposit)).Spec.Custody)

	container := containerSpec(false)
	job = e.job(e.submitJobWith(container, jobDeposit))
	require.Nil(t, job.Spec.Custody, "a container's state cannot be bound to pieces")
	require.True(t, job.StorageEscrow.IsZero())

	// Off (the fixture's default): custody is opt-in.
	e.setParams(func(p *types.Params) { p.DefaultCustody = types.CustodySpec{} })
	require.Nil(t, e.job(e.submitJob()).Spec.Custody)
}

// A default_custody that is malformed, or that x/shardregistry's bounds would refuse at
// every submit, is refused by MsgUpdateParams with an error naming it, and nothing changes.
func TestDefaultCustodyParamsRefused(t *testing.T) {
	e := newEnv(t)
	sp, err := e.ShardRegistry.Params.Get(e.Ctx)
	require.NoError(t, err)
	sp.CustodyMaxRetentionSeconds = 30 * 24 * 3600 // a chain that keeps states 30 days at most
	require.NoError(t, e.ShardRegistry.Params.Set(e.Ctx, sp))
	for _, tc := range []struct {
		c    types.CustodySpec
		want string
	}{
		{types.CustodySpec{ParityPieces: 1}, "data_pieces 0 turns the default off"},
		{types.CustodySpec{RetainCheckpoints: time.Hour}, "data_pieces 0 turns the default off"},
		{types.CustodySpec{DataPieces: 2, RetainCheckpoints: time.Hour}, "default_custody: data_pieces (2) and parity_pieces (0)"},
		{types.CustodySpec{DataPieces: 1 << 31, ParityPieces: 1 << 31, RetainCheckpoints: time.Hour}, "at most 256 together"},
		{types.CustodySpec{DataPieces: 2, ParityPieces: 1}, "default_custody.retain_checkpoints must be positive"},
		{types.CustodySpec{DataPieces: 30, ParityPieces: 3, RetainCheckpoints: time.Hour}, "max_pieces_per_shard"},
		{types.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 91 * 24 * time.Hour}, "default_custody.retain_checkpoints must be positive and at most 2160h"},
		{types.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 31 * 24 * time.Hour}, "custody_max_retention_seconds"},
	} {
		p := e.params()
		p.DefaultCustody = tc.c
		var err error
		e.requireRejected(types.ErrInvalidParams, func() error {
			_, err = e.msg.UpdateParams(e.Ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: p})
			return err
		})
		require.ErrorContains(t, err, tc.want, "%+v", tc.c)
	}
}

// heldObjects stands in for x/shardregistry's custody objects in the migration test.
type heldObjects struct {
	*retentionLog
	held []types.HeldCustody
}

func (h *heldObjects) WalkCustody(_ context.Context, visit func(types.HeldCustody) error) error {
	for _, c := range h.held {
		if err := visit(c); err != nil {
			return err
		}
	}
	return nil
}

// The v5 migration counts each job's custody objects, names each worker's last final
// one, gives a release time to those v4 never would have released (a closed lease's
// superseded checkpoint, an ended job's last one) and refunds the storage escrow of an
// ended job that holds none; default_custody becomes the v5 default.
func TestMigrate4to5CustodyBookkeeping(t *testing.T) {
	c := newCustodyEnv(t)
	alice, bob := c.registerProvider("alice"), c.registerProvider("bob")
	// Job a: alice's lease lost after a final checkpoint, bob's replacement final at 200
	// with one more pending.
	a, la := c.leaseCustodyJob(alice)
	aliceFinal := c.final(la, 0, 100)
	c.advance(ckptDeadline + 1)
	c.bid(bob, a, 1000)
	c.closeAuction(a)
	lb := c.activeLeasesOfJob(a)[0]
	bobFinal := c.final(lb, 0, 200)
	_, bobPending := c.checkpoint(lb, 1, 300)
	// Job b: cancelled after a final checkpoint. Job d: cancelled with none.
	b, lc := c.leaseCustodyJob(c.registerProvider("carol"))
	carolFinal := c.final(lc, 0, 100)
	_, err := c.msg.CancelJob(c.Ctx, &types.MsgCancelJob{Owner: c.owner.String(), JobId: b})
	require.NoError(t, err)
	d := c.submitJobWith(func() types.JobSpec { s := spec(); cs := custodySpec; s.Custody = &cs; return s }(), jobDeposit)
	_, err = c.msg.CancelJob(c.Ctx, &types.MsgCancelJob{Owner: c.owner.String(), JobId: d})
	require.NoError(t, err)

	// Back to what v4 stored: no counts, no custody ids, nothing retained on job ends, no
	// storage refund, default_custody absent.
	budget := shardtypes.DefaultParams().CustodyStorageBudget(custodySpec)
	for _, id := range []uint64{a, b, d} {
		job := c.job(id)
		job.CustodyHeld = 0
		for i := range job.Progress {
			job.Progress[i].CustodyId = ""
		}
		if id == d {
			job.StorageEscrow = sdk.NewCoin(denom, budget)
			require.NoError(t, c.BankKeeper.SendCoinsFromAccountToModule(c.Ctx, c.owner, types.ModuleName, sdk.NewCoins(job.StorageEscrow)))
		}
		require.NoError(t, c.Market.Jobs.Set(c.Ctx, id, job))
	}
	p := c.params()
	p.DefaultCustody = types.CustodySpec{}
	require.NoError(t, c.Market.Params.Set(c.Ctx, p))
	objects := &heldObjects{retentionLog: &retentionLog{CustodyKeeper: c.ShardRegistry}, held: []types.HeldCustody{
		{ID: aliceFinal, JobID: a, LeaseID: la.Id, StateRoot: []byte("h100"), ReleaseScheduled: false},
		{ID: bobFinal, JobID: a, LeaseID: lb.Id, CheckpointIndex: 0, StateRoot: []byte("h200")},
		{ID: bobPending, JobID: a, LeaseID: lb.Id, CheckpointIndex: 1, StateRoot: []byte("h300")},
		{ID: carolFinal, JobID: b, LeaseID: lc.Id, StateRoot: []byte("h100")},
	}}
	c.Market.SetCustodyKeeper(objects)
	owner := c.Balance(c.owner)

	require.NoError(t, keeper.NewMigrator(c.Market).Migrate4to5(c.Ctx))
	require.Equal(t, types.CustodySpec{}, c.params().DefaultCustody, "an upgraded chain keeps default custody off until governance turns it on")
	require.Equal(t, []string{aliceFinal, carolFinal}, objects.retained,
		"the closed lease's superseded checkpoint and the ended job's last one; not bob's last final nor his pending one")
	ja, jb, jd := c.job(a), c.job(b), c.job(d)
	require.Equal(t, uint32(3), ja.CustodyHeld)
	require.Equal(t, bobFinal, ja.Progress[0].CustodyId)
	require.Equal(t, uint32(1), jb.CustodyHeld)
	require.Equal(t, carolFinal, jb.Progress[0].CustodyId)
	require.Equal(t, budget.String(), jb.StorageEscrow.Amount.String(), "kept while its last checkpoint is held")
	require.True(t, jd.StorageEscrow.IsZero())
	require.Equal(t, owner.Add(budget).String(), c.Balance(c.owner).String(), "the ended job without custody objects gets its storage escrow back")
}
