package keeper_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardkeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// custodyScenario is a reference job whose spec asks for custody of every checkpoint's
// state in 2+1 pieces (its states are a few chunks, so they fill at most 2 data pieces).
type custodyScenario struct {
	*scenario
	layout custody.Layout
	pieces [][]byte
	roots  []merkle.Hash
}

func newCustodyScenario(t *testing.T) *custodyScenario { return newCustodyScenarioOf(t, 8) }

// newCustodyScenarioOf is the scenario with a job of totalSteps (its first checkpoint
// still ends at step 8).
func newCustodyScenarioOf(t *testing.T, totalSteps uint64) *custodyScenario {
	t.Helper()
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	spec := referenceSpec(totalSteps, 8)
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}
	job, lease := e.leaseJob(prov, spec)
	// Storage periods short enough that a claim's seed block (the period's first) is one
	// x/market still holds the hash of.
	sp := e.ShardRegistry.Params
	p, err := sp.Get(e.Ctx)
	require.NoError(t, err)
	p.PeriodBlocks, p.ProofWindowBlocks = 40, 10
	require.NoError(t, sp.Set(e.Ctx, p))
	s := &scenario{env: e, prov: prov, job: job, lease: lease, run: computeRun(t, job, 8)}
	state := s.run.stateAt(t, 8).Encode()
	var l custody.Layout
	l, err = custody.NewLayout(uint64(len(state)), 2, 1)
	require.NoError(t, err)
	bufs := make([]io.Writer, l.Pieces())
	outs := make([]*bytes.Buffer, l.Pieces())
	for i := range outs {
		outs[i] = new(bytes.Buffer)
		bufs[i] = outs[i]
	}
	roots, err := custody.Encode(bytes.NewReader(state), l, bufs, 1)
	require.NoError(t, err)
	c := &custodyScenario{scenario: s, layout: l, roots: roots}
	for _, b := range outs {
		c.pieces = append(c.pieces, b.Bytes())
	}
	return c
}

// msg is the honest checkpoint with its custody fields.
func (c *custodyScenario) custodyMsg() *types.MsgSubmitCheckpoint {
	m := checkpointMsg(c.honest(0, 8), c.lease.Id, 0)
	m.StateSize = c.layout.StateSize
	m.PieceRoots = merkle.HashesToBytes(c.roots)
	return m
}

func (c *custodyScenario) submit() types.Checkpoint {
	c.t.Helper()
	_, err := c.deliver(func(ctx sdk.Context) error {
		_, err := c.env.msg.SubmitCheckpoint(ctx, c.custodyMsg())
		return err
	})
	require.NoError(c.t, err)
	return c.checkpoint(c.lease.Id, 0)
}

// claimMsg is holder's claim of piece i of the checkpoint's custody object, proving the
// current period's challenge from the piece's bytes.
func (c *custodyScenario) claimMsg(holder sdk.AccAddress, piece uint32) *shardtypes.MsgClaimReplica {
	c.t.Helper()
	id := shardtypes.CustodyDatasetID(c.lease.Id, 0)
	res, err := shardkeeper.NewQueryServerImpl(c.ShardRegistry).ClaimChallenge(c.Ctx, &shardtypes.QueryClaimChallengeRequest{
		DatasetId: id, Shard: 0, Piece: piece, Holder: holder.String(),
	})
	require.NoError(c.t, err)
	proofs, err := manifest.Prove(c.pieces[piece], custody.ChunkSize, res.Challenge.ChunkIndices)
	require.NoError(c.t, err)
	return &shardtypes.MsgClaimReplica{Holder: holder.String(), DatasetId: id, Shard: 0, Piece: piece, Period: res.Challenge.Period, Proofs: proofs}
}

func (c *custodyScenario) claim(holder sdk.AccAddress, piece uint32) error {
	_, err := shardkeeper.NewMsgServerImpl(c.ShardRegistry).ClaimReplica(c.Ctx, c.claimMsg(holder, piece))
	return err
}

// The submitted data-piece roots are checked against state_root, the state is registered
// as a custody object the trainer may not hold, and the checkpoint stays pending past
// its window until as many holders as it has data pieces proved theirs.
func TestCustodyFinalityWaitsForHolders(t *testing.T) {
	c := newCustodyScenario(t)
	cp := c.submit()
	require.Equal(t, shardtypes.CustodyDatasetID(c.lease.Id, 0), cp.CustodyId)
	require.Equal(t, cp.ChallengeDeadline+int64(c.verifyParams().CustodyGraceBlocks), cp.CustodyDeadline)
	d, err := c.ShardRegistry.GetDataset(c.Ctx, cp.CustodyId)
	require.NoError(t, err)
	require.Equal(t, c.prov.String(), d.Custody.Trainer)
	require.Equal(t, c.job.Owner, d.Owner)
	require.Equal(t, c.layout.DataPieces, d.Encoding.DataPieces)

	c.advanceTo(cp.ChallengeDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, c.checkpoint(c.lease.Id, 0).Status, "no holder yet: not final after the window")

	// The trainer cannot count as its own holder, and its try changes nothing.
	msg := c.claimMsg(c.prov, 0)
	err = c.requireRejected(shardtypes.ErrNotCustodian, func(ctx sdk.Context) error {
		_, err := shardkeeper.NewMsgServerImpl(c.ShardRegistry).ClaimReplica(ctx, msg)
		return err
	})
	require.ErrorContains(t, err, "must be held by other providers")

	holders := []sdk.AccAddress{c.registerProvider("holder-a", 1), c.registerProvider("holder-b", 1)}
	require.NoError(t, c.claim(holders[0], 0))
	c.advance(int(c.verifyParams().CustodyRecheckBlocks) + 1)
	if c.layout.DataPieces > 1 {
		require.Equal(t, types.CHECKPOINT_STATUS_PENDING, c.checkpoint(c.lease.Id, 0).Status, "1 holder of %d needed", c.layout.DataPieces)
		// A parity piece counts as much as a data piece: any k rebuild the state.
		require.NoError(t, c.claim(holders[1], c.layout.Pieces()-1))
		c.advance(int(c.verifyParams().CustodyRecheckBlocks) + 1)
	}
	final := c.checkpoint(c.lease.Id, 0)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, final.Status)
	require.Less(t, c.Ctx.BlockHeight(), final.CustodyDeadline)

	// A custody object survives genesis export: its layout and binding validate.
	gs, err := c.ShardRegistry.ExportGenesis(c.Ctx)
	require.NoError(t, err)
	require.NoError(t, gs.Validate())
	for i := range gs.Datasets {
		if gs.Datasets[i].Custody != nil {
			gs.Datasets[i].Custody.StateRoot = bytes.Repeat([]byte{9}, 32)
		}
	}
	require.ErrorContains(t, gs.Validate(), "data pieces' roots make the root")
}

// A trainer whose state nobody could fetch and prove by the custody deadline never
// finalizes: the checkpoint is withheld and its lease closed for non-performance, its
// provider slashed.
func TestCustodyWithheldStateIsSlashedAtDeadline(t *testing.T) {
	c := newCustodyScenario(t)
	cp := c.submit()
	bond := c.provider(c.prov).Bond
	c.advanceTo(cp.CustodyDeadline - 1)
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, c.checkpoint(c.lease.Id, 0).Status)
	c.advance(2)
	require.Equal(t, types.CHECKPOINT_STATUS_WITHHELD, c.checkpoint(c.lease.Id, 0).Status)
	lease := c.getLease(c.lease.Id)
	require.Equal(t, markettypes.LEASE_STATE_CLOSED, lease.State)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE, lease.CloseReason)
	require.True(t, c.provider(c.prov).Bond.IsLT(bond), "the withholding trainer is slashed: bond %s, was %s", c.provider(c.prov).Bond, bond)
	require.Equal(t, markettypes.JOB_STATE_OPEN, c.getJob(c.job.Id).State, "the job reopens")
}

// Custody fields that do not bind the pieces to the state are refused, naming what is
// wrong, and change nothing.
func TestCustodyRejectsUnboundPieces(t *testing.T) {
	c := newCustodyScenario(t)
	cases := map[string]func(*types.MsgSubmitCheckpoint){
		"no custody fields":   func(m *types.MsgSubmitCheckpoint) { m.StateSize, m.PieceRoots = 0, nil },
		"a data root changed": func(m *types.MsgSubmitCheckpoint) { m.PieceRoots[0] = bytes.Repeat([]byte{7}, 32) },
		"a root missing":      func(m *types.MsgSubmitCheckpoint) { m.PieceRoots = m.PieceRoots[1:] },
		// One byte is one data piece: the layout needs 2 roots, not the 3 sent. (A size
		// with as many data pieces as sent but other piece sizes passes here and is caught
		// by the storage proofs: no holder can prove pieces of sizes they do not have, so
		// such a checkpoint is withheld at its custody deadline.)
		"another state's size": func(m *types.MsgSubmitCheckpoint) { m.StateSize = 1 },
		"a short root":         func(m *types.MsgSubmitCheckpoint) { m.PieceRoots[len(m.PieceRoots)-1] = []byte{1, 2, 3} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			m := c.custodyMsg()
			change(m)
			err := c.requireRejected(types.ErrInvalidCheckpoint, func(ctx sdk.Context) error {
				_, err := c.env.msg.SubmitCheckpoint(ctx, m)
				return err
			})
			require.ErrorContains(t, err, "custody")
		})
	}
}

// A job without a custody section must not send custody fields (they would register
// nothing and mislead).
func TestCustodyFieldsRefusedWithoutCustody(t *testing.T) {
	s := newScenario(t, 8, 8)
	m := checkpointMsg(s.honest(0, 8), s.lease.Id, 0)
	m.StateSize, m.PieceRoots = 4096, [][]byte{bytes.Repeat([]byte{1}, 32)}
	err := s.requireRejected(types.ErrInvalidCheckpoint, func(ctx sdk.Context) error {
		_, err := s.msg.SubmitCheckpoint(ctx, m)
		return err
	})
	require.ErrorContains(t, err, "no custody section")
}

// A job whose retention is above x/shardregistry's bound is refused at submission, and
// nothing changes.
func TestCustodyRetentionAboveParamRefused(t *testing.T) {
	e := newEnv(t)
	spec := referenceSpec(8, 8)
	max := time.Duration(shardtypes.DefaultParams().CustodyMaxRetentionSeconds) * time.Second
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: max + time.Hour}
	err := e.requireRejected(shardtypes.ErrInvalidCustody, func(ctx sdk.Context) error {
		_, err := e.mmsg.SubmitJob(ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
		return err
	})
	require.ErrorContains(t, err, "custody.retain_checkpoints must be positive and at most 2160h0m0s")
}

// claimAs claims a piece and returns the replica's id.
func (c *custodyScenario) claimAs(holder sdk.AccAddress, piece uint32) uint64 {
	c.t.Helper()
	res, err := shardkeeper.NewMsgServerImpl(c.ShardRegistry).ClaimReplica(c.Ctx, c.claimMsg(holder, piece))
	require.NoError(c.t, err)
	return res.ReplicaId
}

// proveCustody submits the proof of a custody replica's due challenge from its piece.
func (c *custodyScenario) proveCustody(id uint64) {
	c.t.Helper()
	r, err := c.ShardRegistry.GetReplica(c.Ctx, id)
	require.NoError(c.t, err)
	res, err := shardkeeper.NewQueryServerImpl(c.ShardRegistry).ChallengeSchedule(c.Ctx, &shardtypes.QueryChallengeScheduleRequest{ReplicaId: id})
	require.NoError(c.t, err)
	require.True(c.t, res.Challenge.Open)
	proofs, err := manifest.Prove(c.pieces[r.Piece], custody.ChunkSize, res.Challenge.ChunkIndices)
	require.NoError(c.t, err)
	_, err = shardkeeper.NewMsgServerImpl(c.ShardRegistry).SubmitStorageProof(c.Ctx, &shardtypes.MsgSubmitStorageProof{
		Holder: r.Holder, ReplicaId: id, Period: res.Challenge.Period, Proofs: proofs,
	})
	require.NoError(c.t, err)
}

// Storage is paid per proven period, from the storage escrow reserved at submit: a holder
// that proves its piece earns the fee for the period, one that misses it earns nothing,
// and the step escrow is never touched.
func TestCustodyHoldersPaidPerProvenPeriod(t *testing.T) {
	c := newCustodyScenario(t)
	sp, err := c.ShardRegistry.Params.Get(c.Ctx)
	require.NoError(t, err)
	fee := sdk.NewCoin(c.job.Escrow.Denom, math.NewIntFromUint64(sp.CustodyStorageFeePerPiecePeriod))
	require.True(t, fee.IsPositive(), "the default fee pays custody")
	job := c.getJob(c.job.Id)
	// The job was submitted under the default period (the scenario shortens it after).
	require.Equal(t, shardtypes.DefaultParams().CustodyStorageBudget(*job.Spec.Custody), job.StorageEscrow.Amount, "the budget is reserved at submit")
	require.True(t, job.StorageFees.IsZero())

	cp := c.submit()
	c.advanceTo(cp.ChallengeDeadline + 1) // seed blocks x/market holds the hash of
	proving, missing := c.registerProvider("holder-a", 1), c.registerProvider("holder-b", 1)
	provingID, missingID := c.claimAs(proving, 0), c.claimAs(missing, 1)
	before := map[string]math.Int{}
	for _, h := range []sdk.AccAddress{proving, missing} {
		before[h.String()] = c.Balance(h)
	}
	stepEscrow := c.getJob(c.job.Id).Escrow

	r, err := c.ShardRegistry.GetReplica(c.Ctx, provingID)
	require.NoError(t, err)
	c.advanceTo(r.NextSeedHeight + 1)
	c.proveCustody(provingID)
	m, err := c.ShardRegistry.GetReplica(c.Ctx, missingID)
	require.NoError(t, err)
	c.advanceTo(max(m.NextDeadline, r.NextDeadline) + 1)

	require.Equal(t, before[proving.String()].Add(fee.Amount).String(), c.Balance(proving).String(), "the holder that proved its period is paid the fee")
	m, err = c.ShardRegistry.GetReplica(c.Ctx, missingID)
	require.NoError(t, err)
	require.Equal(t, uint64(1), m.TotalMisses)
	require.True(t, c.Balance(missing).LTE(before[missing.String()]), "the holder that missed is not paid")
	after := c.getJob(c.job.Id)
	require.Equal(t, fee, after.StorageFees)
	require.Equal(t, job.StorageEscrow.Sub(fee), after.StorageEscrow)
	require.True(t, after.Escrow.Amount.LTE(stepEscrow.Amount), "storage never adds to the step escrow")
	require.Equal(t, after.Deposited.Amount.String(), job.Escrow.Amount.Add(job.StorageEscrow.Amount).String(), "the deposit is the step escrow plus the storage escrow at submit")
	paid := typedEvents[*markettypes.EventStorageFeePaid](c.env)
	require.Len(t, paid, 1)
	require.Equal(t, proving.String(), paid[0].Holder)
	require.Equal(t, fee, paid[0].Amount)
}

// The storage escrow bounds what holders are paid: once it is spent a proof still counts
// but pays nothing, so the owner never pays more than pieces × retention periods × fee.
func TestCustodyStoragePayStopsAtTheBudget(t *testing.T) {
	c := newCustodyScenario(t)
	cp := c.submit()
	c.advanceTo(cp.ChallengeDeadline + 1)
	holder := c.registerProvider("holder-a", 1)
	id := c.claimAs(holder, 0)
	job := c.getJob(c.job.Id)
	budget := job.StorageEscrow
	// A fee of two thirds of the budget: the first period is paid in full, the second
	// gets what is left, the third nothing.
	sp, err := c.ShardRegistry.Params.Get(c.Ctx)
	require.NoError(t, err)
	sp.CustodyStorageFeePerPiecePeriod = budget.Amount.Uint64() * 2 / 3
	require.NoError(t, c.ShardRegistry.Params.Set(c.Ctx, sp))
	before := c.Balance(holder)
	for range 3 {
		r, err := c.ShardRegistry.GetReplica(c.Ctx, id)
		require.NoError(t, err)
		c.advanceTo(r.NextSeedHeight + 1)
		c.proveCustody(id)
	}
	r, err := c.ShardRegistry.GetReplica(c.Ctx, id)
	require.NoError(t, err)
	require.Equal(t, uint64(3), r.ProofsAccepted-1, "the claim's proof and three periods'")
	require.Equal(t, before.Add(budget.Amount).String(), c.Balance(holder).String(), "the whole budget, never more")
	after := c.getJob(c.job.Id)
	require.True(t, after.StorageEscrow.IsZero())
	require.Equal(t, budget, after.StorageFees)
	require.Len(t, typedEvents[*markettypes.EventStorageFeePaid](c.env), 2)
	require.True(t, after.StorageFees.Amount.LTE(after.Deposited.Amount))
}

// A deposit that cannot cover the storage budget is refused at submission, naming both
// amounts, and nothing changes.
func TestCustodyDepositBelowStorageBudgetRefused(t *testing.T) {
	e := newEnv(t)
	spec := referenceSpec(8, 8)
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}
	sp, err := e.ShardRegistry.Params.Get(e.Ctx)
	require.NoError(t, err)
	sp.CustodyStorageFeePerPiecePeriod = uint64(jobDeposit) // 3 pieces × many periods × the deposit
	require.NoError(t, e.ShardRegistry.Params.Set(e.Ctx, sp))
	err = e.requireRejected(markettypes.ErrInvalidDeposit, func(ctx sdk.Context) error {
		_, err := e.mmsg.SubmitJob(ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
		return err
	})
	require.ErrorContains(t, err, "cannot cover the custody storage budget")
}

// requireShardInvariants checks x/shardregistry's invariants (collateral locks, deadline
// and custody release indexes, durability) on the scenario's chain.
func (c *custodyScenario) requireShardInvariants() {
	c.t.Helper()
	msg, broken := shardkeeper.AllInvariants(c.ShardRegistry, shardkeeper.StakingExtLocks(c.StakingExt.Locks))(c.Ctx)
	require.False(c.t, broken, msg)
}

// requireReleased checks that a custody object is gone: no dataset, no replicas, its
// holders' collateral unlocked, and one EventCustodyReleased naming how many replicas ended.
func (c *custodyScenario) requireReleased(id string, replicas []uint64, holders []sdk.AccAddress) {
	c.t.Helper()
	_, err := c.ShardRegistry.GetDataset(c.Ctx, id)
	require.ErrorIs(c.t, err, shardtypes.ErrDatasetNotFound)
	for _, rid := range replicas {
		_, err := c.ShardRegistry.GetReplica(c.Ctx, rid)
		require.Error(c.t, err, "replica %d of a released object", rid)
	}
	for _, h := range holders {
		require.True(c.t, c.provider(h).Locked.IsZero(), "holder %s still has %s locked", h, c.provider(h).Locked)
	}
	released := typedEvents[*shardtypes.EventCustodyReleased](c.env)
	require.Len(c.t, released, 1)
	require.Equal(c.t, id, released[0].DatasetId)
	require.Equal(c.t, uint32(len(replicas)), released[0].ReplicasReleased)
	c.requireShardInvariants()
}

// The checkpoint that completes the job is kept retain_checkpoints after it, then
// released: its holders' collateral is unlocked, their challenges stop, and the object's
// records leave state.
func TestCustodyOfTheLastCheckpointReleasedAfterRetention(t *testing.T) {
	c := newCustodyScenario(t)
	cp := c.submit()
	c.advanceTo(cp.ChallengeDeadline + 1)
	holders := []sdk.AccAddress{c.registerProvider("holder-a", 1), c.registerProvider("holder-b", 1)}
	ids := []uint64{c.claimAs(holders[0], 0), c.claimAs(holders[1], c.layout.Pieces()-1)}
	c.advance(int(c.verifyParams().CustodyRecheckBlocks) + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, c.checkpoint(c.lease.Id, 0).Status)
	require.Equal(t, markettypes.JOB_STATE_COMPLETED, c.getJob(c.job.Id).State)
	d, err := c.ShardRegistry.GetDataset(c.Ctx, cp.CustodyId)
	require.NoError(t, err)
	releaseAt := time.Unix(0, d.Custody.ReleaseAtUnixNanos)
	require.WithinDuration(t, c.Ctx.BlockTime().Add(720*time.Hour), releaseAt, time.Minute, "kept retain_checkpoints after the job's last checkpoint")
	for _, h := range holders {
		require.True(t, c.provider(h).Locked.IsPositive())
	}
	c.requireShardInvariants()

	// An hour before the end of the retention it is still held.
	c.NextBlock(t, releaseAt.Sub(c.Ctx.BlockTime())-time.Hour)
	c.nextBlock()
	_, err = c.ShardRegistry.GetDataset(c.Ctx, cp.CustodyId)
	require.NoError(t, err, "held until its retention ends")
	var walked []markettypes.HeldCustody
	require.NoError(t, c.ShardRegistry.WalkCustody(c.Ctx, func(h markettypes.HeldCustody) error { walked = append(walked, h); return nil }))
	require.Equal(t, []markettypes.HeldCustody{{ID: cp.CustodyId, JobID: c.job.Id, LeaseID: c.lease.Id, StateRoot: cp.StateRoot, ReleaseScheduled: true}}, walked)
	job := c.getJob(c.job.Id)
	require.Equal(t, uint32(1), job.CustodyHeld)
	left, owner := job.StorageEscrow, c.Balance(c.owner)
	require.True(t, left.IsPositive(), "the storage escrow waits for the release")
	c.NextBlock(t, 2*time.Hour)
	c.nextBlock()
	c.requireReleased(cp.CustodyId, ids, holders)
	// The job's last object is gone: what the holders were not paid goes to the owner.
	job = c.getJob(c.job.Id)
	require.Zero(t, job.CustodyHeld)
	require.True(t, job.StorageEscrow.IsZero())
	require.Equal(t, owner.Add(left.Amount).String(), c.Balance(c.owner).String())
	require.Equal(t, shardtypes.DefaultParams().CustodyStorageBudget(*job.Spec.Custody).String(), job.StorageFees.Amount.Add(left.Amount).String(),
		"paid to holders + refunded = the budget reserved at submit")
	refunds := typedEvents[*markettypes.EventStorageEscrowRefunded](c.env)
	require.Len(t, refunds, 1)
	require.Equal(t, left, refunds[0].Amount)
}

// The object of a withheld checkpoint is released at once: nobody resumes from it, so its
// holders stop being challenged (and paid) and get their collateral back.
func TestCustodyOfAWithheldCheckpointReleasedAtOnce(t *testing.T) {
	c := newCustodyScenario(t)
	// A grace shorter than a storage period, so the holder is still active (has missed
	// nothing) when the checkpoint is withheld.
	c.setVerifyParams(func(p *types.Params) { p.CustodyGraceBlocks, p.CustodyRecheckBlocks = 20, 5 })
	cp := c.submit()
	c.advanceTo(cp.ChallengeDeadline + 1)
	holder := c.registerProvider("holder-a", 1)
	id := c.claimAs(holder, 0)
	require.True(t, c.provider(holder).Locked.IsPositive())
	c.advanceTo(cp.CustodyDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_WITHHELD, c.checkpoint(c.lease.Id, 0).Status, "1 holder of %d needed", c.layout.DataPieces)
	c.advance(2)
	c.requireReleased(cp.CustodyId, []uint64{id}, []sdk.AccAddress{holder})
}

// A final checkpoint superseded by the next final checkpoint of its lease is kept
// retain_checkpoints from then; the job's last one likewise once it completes the job.
func TestCustodyOfASupersededCheckpointKeptForTheRetention(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	spec := referenceSpec(16, 8)
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}
	job, lease := e.leaseJob(prov, spec)
	sp, err := e.ShardRegistry.Params.Get(e.Ctx)
	require.NoError(t, err)
	sp.PeriodBlocks, sp.ProofWindowBlocks = 40, 10
	require.NoError(t, e.ShardRegistry.Params.Set(e.Ctx, sp))
	s := &scenario{env: e, prov: prov, job: job, lease: lease, run: computeRun(t, job, 16)}
	holders := []sdk.AccAddress{e.registerProvider("holder-a", 1), e.registerProvider("holder-b", 1)}
	finalize := func(index, from, to uint64) types.Checkpoint {
		state := s.run.stateAt(t, to).Encode()
		l, err := custody.NewLayout(uint64(len(state)), 2, 1)
		require.NoError(t, err)
		outs := make([]*bytes.Buffer, l.Pieces())
		ws := make([]io.Writer, l.Pieces())
		for i := range outs {
			outs[i] = new(bytes.Buffer)
			ws[i] = outs[i]
		}
		roots, err := custody.Encode(bytes.NewReader(state), l, ws, 1)
		require.NoError(t, err)
		var pieces [][]byte
		for _, b := range outs {
			pieces = append(pieces, b.Bytes())
		}
		m := checkpointMsg(s.honest(from, to), lease.Id, index)
		m.StateSize, m.PieceRoots = l.StateSize, merkle.HashesToBytes(roots)
		_, err = s.deliver(func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, m); return err })
		require.NoError(t, err)
		cp := s.checkpoint(lease.Id, index)
		s.advanceTo(cp.ChallengeDeadline + 1)
		for i, h := range holders {
			piece := uint32(0)
			if i == 1 {
				piece = l.Pieces() - 1
			}
			res, err := shardkeeper.NewQueryServerImpl(s.ShardRegistry).ClaimChallenge(s.Ctx, &shardtypes.QueryClaimChallengeRequest{
				DatasetId: cp.CustodyId, Shard: 0, Piece: piece, Holder: h.String(),
			})
			require.NoError(t, err)
			proofs, err := manifest.Prove(pieces[piece], custody.ChunkSize, res.Challenge.ChunkIndices)
			require.NoError(t, err)
			_, err = shardkeeper.NewMsgServerImpl(s.ShardRegistry).ClaimReplica(s.Ctx, &shardtypes.MsgClaimReplica{
				Holder: h.String(), DatasetId: cp.CustodyId, Shard: 0, Piece: piece, Period: res.Challenge.Period, Proofs: proofs,
			})
			require.NoError(t, err)
		}
		s.advance(int(s.verifyParams().CustodyRecheckBlocks) + 1)
		cp = s.checkpoint(lease.Id, index)
		require.Equal(t, types.CHECKPOINT_STATUS_FINAL, cp.Status)
		return cp
	}
	releaseAt := func(id string) int64 {
		d, err := s.ShardRegistry.GetDataset(s.Ctx, id)
		require.NoError(t, err)
		return d.Custody.ReleaseAtUnixNanos
	}
	first := finalize(0, 0, 8)
	require.Zero(t, releaseAt(first.CustodyId), "the lease's latest final checkpoint is kept: a replacement may resume from it")
	second := finalize(1, 8, 16)
	require.WithinDuration(t, s.Ctx.BlockTime().Add(720*time.Hour), time.Unix(0, releaseAt(first.CustodyId)), time.Minute, "superseded: kept for the retention")
	require.WithinDuration(t, s.Ctx.BlockTime().Add(720*time.Hour), time.Unix(0, releaseAt(second.CustodyId)), time.Minute, "completed the job: kept for the retention")
	msg, broken := shardkeeper.AllInvariants(s.ShardRegistry, shardkeeper.StakingExtLocks(s.StakingExt.Locks))(s.Ctx)
	require.False(t, broken, msg)
}

// A job cancelled after a final checkpoint keeps that checkpoint retain_checkpoints from
// the cancellation (the owner can still fetch it); its holders are paid for the periods
// they prove until then; at the release the storage escrow they were not paid goes back
// to the owner: fees + refund = the budget reserved at submit.
func TestCustodyOfACancelledJobKeptForTheRetentionThenRefunded(t *testing.T) {
	c := newCustodyScenarioOf(t, 16)
	cp := c.submit()
	c.advanceTo(cp.ChallengeDeadline + 1)
	holders := []sdk.AccAddress{c.registerProvider("holder-a", 1), c.registerProvider("holder-b", 1)}
	ids := []uint64{c.claimAs(holders[0], 0), c.claimAs(holders[1], c.layout.Pieces()-1)}
	c.advance(int(c.verifyParams().CustodyRecheckBlocks) + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, c.checkpoint(c.lease.Id, 0).Status)
	require.Equal(t, markettypes.JOB_STATE_LEASED, c.getJob(c.job.Id).State)
	d, err := c.ShardRegistry.GetDataset(c.Ctx, cp.CustodyId)
	require.NoError(t, err)
	require.Zero(t, d.Custody.ReleaseAtUnixNanos, "the job runs: a replacement would resume from it")

	// A proven period is paid.
	r, err := c.ShardRegistry.GetReplica(c.Ctx, ids[0])
	require.NoError(t, err)
	c.advanceTo(r.NextSeedHeight + 1)
	before := c.Balance(holders[0])
	c.proveCustody(ids[0])
	fees := c.getJob(c.job.Id).StorageFees
	require.True(t, fees.IsPositive())
	require.Equal(t, before.Add(fees.Amount).String(), c.Balance(holders[0]).String())

	_, err = c.mmsg.CancelJob(c.Ctx, &markettypes.MsgCancelJob{Owner: c.owner.String(), JobId: c.job.Id})
	require.NoError(t, err)
	d, err = c.ShardRegistry.GetDataset(c.Ctx, cp.CustodyId)
	require.NoError(t, err)
	require.Equal(t, c.Ctx.BlockTime().Add(720*time.Hour).UnixNano(), d.Custody.ReleaseAtUnixNanos, "kept retain_checkpoints from the cancellation")
	job := c.getJob(c.job.Id)
	require.Equal(t, markettypes.JOB_STATE_CANCELLED, job.State)
	left, owner := job.StorageEscrow, c.Balance(c.owner)
	require.True(t, left.IsPositive(), "held, so not refunded yet")
	require.Empty(t, typedEvents[*markettypes.EventStorageEscrowRefunded](c.env))

	c.NextBlock(t, 721*time.Hour)
	c.nextBlock()
	c.requireReleased(cp.CustodyId, ids, holders)
	job = c.getJob(c.job.Id)
	require.True(t, job.StorageEscrow.IsZero())
	require.Equal(t, owner.Add(left.Amount).String(), c.Balance(c.owner).String())
	budget := shardtypes.DefaultParams().CustodyStorageBudget(*job.Spec.Custody)
	require.Equal(t, budget.String(), job.StorageFees.Amount.Add(left.Amount).String(), "paid to holders + refunded = the budget")
	require.Len(t, typedEvents[*markettypes.EventStorageEscrowRefunded](c.env), 1)
}
