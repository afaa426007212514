package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

func TestSubmitCheckpointHappyPath(t *testing.T) {
	s := newScenario(t, 16, 16)
	s.advance(20) // let payment accrue
	before := s.getLease(s.lease.Id)

	p := s.honest(0, 16)
	msg := checkpointMsg(p, s.lease.Id, 0)
	_, err := s.deliver(func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, msg); return err })
	require.NoError(t, err)

	after := s.getLease(s.lease.Id)
	params := s.verifyParams()
	cp := s.checkpoint(s.lease.Id, 0)
	// The claim is what the market settled as pending and committed to this checkpoint.
	require.True(t, cp.Claim.IsPositive())
	require.Equal(t, after.Committed, cp.Claim)
	require.Equal(t, after.Pending, after.Committed)
	require.True(t, after.Pending.IsGTE(before.Pending))
	require.True(t, after.Withdrawable.IsZero())

	h0, err := types.InitialStateHash(s.job)
	require.NoError(t, err)
	require.Equal(t, types.Checkpoint{
		LeaseId: s.lease.Id, Index: 0, JobId: s.job.Id, Worker: 0, Provider: s.prov.String(),
		StartStep: 0, EndStep: 16, StartHash: h0, FinalHash: msg.FinalHash, StateRoot: msg.StateRoot,
		TraceRoot: msg.TraceRoot, Uri: msg.Uri, Metrics: msg.Metrics, Status: types.CHECKPOINT_STATUS_PENDING,
		SubmittedHeight: s.Ctx.BlockHeight(), ChallengeDeadline: s.Ctx.BlockHeight() + int64(params.ChallengeWindow),
		Claim: cp.Claim, WorkloadVersion: types.ExactWorkloadVersion,
		// The job asked for the default audit (one auditor), drawn at the next block.
		AuditRequested: markettypes.DefaultAuditors, AuditFee: coin(0),
	}, cp)
	require.Equal(t, s.run.hashes[0][:], cp.StartHash)

	evs := typedEvents[*types.EventCheckpointSubmitted](s.env)
	require.Len(t, evs, 1)
	require.Equal(t, types.EventCheckpointSubmitted{
		LeaseId: cp.LeaseId, Index: 0, JobId: cp.JobId, Provider: cp.Provider, StartStep: 0, EndStep: 16,
		StartHash: cp.StartHash, FinalHash: cp.FinalHash, StateRoot: cp.StateRoot, TraceRoot: cp.TraceRoot,
		Uri: cp.Uri, ChallengeDeadline: cp.ChallengeDeadline, Claim: cp.Claim,
	}, *evs[0])

	has, err := s.Verify.FinalizationQueue.Has(s.Ctx, collections.Join3(cp.ChallengeDeadline, cp.LeaseId, cp.Index))
	require.NoError(t, err)
	require.True(t, has)

	// The next checkpoint must chain on: index 1, starting at 16 — but the job has no
	// steps left, so any range is rejected.
	next := checkpointMsg(p, s.lease.Id, 1)
	next.StartStep, next.EndStep = 16, 17
	s.requireRejected(types.ErrWrongRange, func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, next); return err })
}

func TestSubmitCheckpointRejections(t *testing.T) {
	s := newScenario(t, 32, 16)
	s.advance(5)
	other := s.registerProvider("other-provider", 8)
	p := s.honest(0, 16)

	outer := s.t
	submit := func(msg *types.MsgSubmitCheckpoint) func(sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, msg); return err }
	}
	tamper := func(change func(m *types.MsgSubmitCheckpoint)) *types.MsgSubmitCheckpoint {
		m := checkpointMsg(p, s.lease.Id, 0)
		change(m)
		return m
	}
	otherHash := s.run.hashes[3]
	longTrace := newParty(s.prov, s.run.trace(0, 17), nil)   // one step past the interval
	wrongStart := newParty(s.prov, s.run.trace(1, 16), nil)  // does not start at 0
	sameStartEnd := newParty(s.prov, s.run.trace(0, 0), nil) // end == start

	cases := []struct {
		name string
		msg  *types.MsgSubmitCheckpoint
		want *errorsmod.Error
	}{
		{"wrong provider", tamper(func(m *types.MsgSubmitCheckpoint) { m.Provider = other.String() }), types.ErrNotLeaseProvider},
		{"unknown lease", tamper(func(m *types.MsgSubmitCheckpoint) { m.LeaseId = 999 }), markettypes.ErrLeaseNotFound},
		{"wrong index", tamper(func(m *types.MsgSubmitCheckpoint) { m.Index = 1 }), types.ErrWrongIndex},
		{"wrong start step", checkpointMsg(wrongStart, s.lease.Id, 0), types.ErrWrongRange},
		{"end beyond interval", checkpointMsg(longTrace, s.lease.Id, 0), types.ErrWrongRange},
		{"end equals start", checkpointMsg(sameStartEnd, s.lease.Id, 0), types.ErrWrongRange},
		{"end before start", tamper(func(m *types.MsgSubmitCheckpoint) { m.EndStep = 0 }), types.ErrWrongRange},
		{"end beyond total steps", tamper(func(m *types.MsgSubmitCheckpoint) { m.EndStep = 33 }), types.ErrWrongRange},
		{"short state root", tamper(func(m *types.MsgSubmitCheckpoint) { m.StateRoot = m.StateRoot[:31] }), types.ErrInvalidHash},
		{"empty state root", tamper(func(m *types.MsgSubmitCheckpoint) { m.StateRoot = nil }), types.ErrInvalidHash},
		// A transformer state's hash h_end is its root: a state_root that is not the trace's
		// last leaf commits to a state nobody could dispute.
		{"state root not the final hash", tamper(func(m *types.MsgSubmitCheckpoint) { m.StateRoot = otherHash[:] }), types.ErrInvalidCheckpoint},
		{"short trace root", tamper(func(m *types.MsgSubmitCheckpoint) { m.TraceRoot = m.TraceRoot[:31] }), types.ErrInvalidHash},
		{"short final hash", tamper(func(m *types.MsgSubmitCheckpoint) { m.FinalHash = m.FinalHash[:31] }), types.ErrInvalidHash},
		{"tampered proof sibling", tamper(func(m *types.MsgSubmitCheckpoint) {
			m.FinalHashProof[0] = append([]byte(nil), m.FinalHashProof[0]...)
			m.FinalHashProof[0][5] ^= 1
		}), types.ErrInvalidProof},
		{"proof too short", tamper(func(m *types.MsgSubmitCheckpoint) { m.FinalHashProof = m.FinalHashProof[1:] }), types.ErrInvalidProof},
		{"proof too long", tamper(func(m *types.MsgSubmitCheckpoint) {
			m.FinalHashProof = append(m.FinalHashProof, m.FinalHashProof[0])
		}), types.ErrInvalidProof},
		{"proof hash of 31 bytes", tamper(func(m *types.MsgSubmitCheckpoint) { m.FinalHashProof[0] = m.FinalHashProof[0][:31] }), types.ErrInvalidHash},
		{"wrong leaf", tamper(func(m *types.MsgSubmitCheckpoint) { m.FinalHash = otherHash[:] }), types.ErrInvalidProof},
		{"proof of another leaf", tamper(func(m *types.MsgSubmitCheckpoint) {
			// h_8 with its genuine proof as leaf 8 is not the last leaf of the trace.
			h, proof, err := p.trace.Open(8)
			require.NoError(t, err)
			m.FinalHash, m.FinalHashProof = h[:], proof
		}), types.ErrInvalidProof},
		{"empty uri", tamper(func(m *types.MsgSubmitCheckpoint) { m.Uri = "" }), types.ErrInvalidCheckpoint},
		{"too many metrics", tamper(func(m *types.MsgSubmitCheckpoint) {
			m.Metrics = make([]types.Metric, s.verifyParams().MaxMetrics+1)
			for i := range m.Metrics {
				m.Metrics[i] = types.Metric{Name: "m", Value: "1"}
			}
		}), types.ErrInvalidCheckpoint},
		{"nameless metric", tamper(func(m *types.MsgSubmitCheckpoint) { m.Metrics = []types.Metric{{Value: "1"}} }), types.ErrInvalidCheckpoint},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			defer func() { s.t = outer }()
			s.requireRejected(tc.want, submit(tc.msg))
		})
	}
	// The untampered message is accepted, and is then out of order.
	_, err := s.deliver(submit(checkpointMsg(p, s.lease.Id, 0)))
	require.NoError(t, err)
	s.requireRejected(types.ErrWrongIndex, submit(checkpointMsg(p, s.lease.Id, 0)))
	// The next one must start where this one ended.
	s.requireRejected(types.ErrWrongRange, submit(checkpointMsg(newParty(s.prov, s.run.trace(0, 16), nil), s.lease.Id, 1)))
}

func TestSubmitCheckpointClosedLease(t *testing.T) {
	s := newScenario(t, 16, 16)
	s.advance(3)
	_, err := s.mmsg.CancelJob(s.Ctx, &markettypes.MsgCancelJob{Owner: s.owner.String(), JobId: s.job.Id})
	require.NoError(t, err)
	require.Equal(t, markettypes.LEASE_STATE_CLOSED, s.getLease(s.lease.Id).State)
	msg := checkpointMsg(s.honest(0, 16), s.lease.Id, 0)
	s.requireRejected(types.ErrLeaseNotActive, func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, msg); return err })
}

func TestOptimisticFinality(t *testing.T) {
	s := newScenario(t, 64, 32)
	window := int64(s.verifyParams().ChallengeWindow)
	s.advance(10)

	cp0 := s.submitCheckpoint(s.honest(0, 32), s.lease.Id, 0)
	require.Equal(t, s.Ctx.BlockHeight()+window, cp0.ChallengeDeadline)
	require.True(t, cp0.Claim.IsPositive())

	// Challengeable up to and including the deadline height; final at its end.
	s.advanceTo(cp0.ChallengeDeadline)
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)
	require.True(t, s.getLease(s.lease.Id).Withdrawable.IsZero())
	s.nextBlock()
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	lease := s.getLease(s.lease.Id)
	require.Equal(t, cp0.Claim, lease.Withdrawable)
	evs := typedEvents[*types.EventCheckpointFinalized](s.env)
	require.Len(t, evs, 1)
	require.Equal(t, types.EventCheckpointFinalized{LeaseId: s.lease.Id, Index: 0, EndStep: 32, FinalHash: cp0.FinalHash, Released: cp0.Claim}, *evs[0])
	// The job records the worker's progress: a replacement lease would resume here.
	job := s.getJob(s.job.Id)
	require.Len(t, job.Progress, 1)
	require.Equal(t, uint64(32), job.Progress[0].Step)
	require.Equal(t, cp0.FinalHash, job.Progress[0].StateHash)

	// The provider withdraws exactly the released claim.
	bal := s.Balance(s.prov)
	res, err := s.mmsg.WithdrawEarnings(s.Ctx, &markettypes.MsgWithdrawEarnings{Provider: s.prov.String()})
	require.NoError(t, err)
	require.Equal(t, cp0.Claim, res.Amount)
	require.Equal(t, bal.Add(cp0.Claim.Amount), s.Balance(s.prov))

	// The second checkpoint chains on the first: it starts at 32 from the first's final hash.
	s.advance(10)
	wrong := checkpointMsg(newParty(s.prov, s.run.trace(0, 32), nil), s.lease.Id, 1)
	s.requireRejected(types.ErrWrongRange, func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, wrong); return err })
	cp1 := s.submitCheckpoint(s.honest(32, 64), s.lease.Id, 1)
	require.Equal(t, cp0.FinalHash, cp1.StartHash)
	require.Equal(t, uint64(32), cp1.StartStep)
	require.True(t, cp1.Claim.IsPositive())

	// The last checkpoint, at total_steps, completes the lease and the job.
	s.advanceTo(cp1.ChallengeDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 1).Status)
	lease = s.getLease(s.lease.Id)
	require.Equal(t, markettypes.LEASE_STATE_CLOSED, lease.State)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_COMPLETED, lease.CloseReason)
	require.Equal(t, markettypes.JOB_STATE_COMPLETED, s.getJob(s.job.Id).State)
	require.True(t, lease.Pending.IsZero(), "everything pending was claimed and released: %s", lease.Pending)
	bal = s.Balance(s.prov)
	res, err = s.mmsg.WithdrawEarnings(s.Ctx, &markettypes.MsgWithdrawEarnings{Provider: s.prov.String()})
	require.NoError(t, err)
	require.Equal(t, cp1.Claim, res.Amount)
	require.Equal(t, bal.Add(cp1.Claim.Amount), s.Balance(s.prov))
	// A completed job takes no more checkpoints.
	more := checkpointMsg(s.honest(32, 64), s.lease.Id, 2)
	s.requireRejected(types.ErrLeaseNotActive, func(ctx sdk.Context) error { _, err := s.msg.SubmitCheckpoint(ctx, more); return err })
}

// Checkpoints submitted back to back finalize in order, each at its own deadline.
func TestCheckpointsChainWhilePending(t *testing.T) {
	s := newScenario(t, 64, 16)
	var cps []types.Checkpoint
	for i := uint64(0); i < 4; i++ {
		s.advance(2)
		cps = append(cps, s.submitCheckpoint(s.honest(16*i, 16*(i+1)), s.lease.Id, i))
		if i > 0 {
			require.Equal(t, cps[i-1].FinalHash, cps[i].StartHash)
		}
	}
	for i, cp := range cps {
		s.advanceTo(cp.ChallengeDeadline)
		require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, uint64(i)).Status)
		s.nextBlock()
		require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, uint64(i)).Status)
	}
	require.Equal(t, markettypes.JOB_STATE_COMPLETED, s.getJob(s.job.Id).State)
}

// Container checkpoints finalize optimistically too; they start from no known hash.
func TestContainerCheckpointFinalizes(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	job, lease := e.leaseJob(prov, containerSpec(16, 16))
	// Any trace will do: nothing on-chain can check a container's steps.
	p := newParty(prov, computeRun(t, job, 16).garbageFrom(0, 16, 0), nil)
	cp := e.submitCheckpoint(p, lease.Id, 0)
	require.Empty(t, cp.StartHash)
	require.Equal(t, uint32(0), cp.WorkloadVersion)
	e.advanceTo(cp.ChallengeDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, e.checkpoint(lease.Id, 0).Status)
	require.Equal(t, markettypes.JOB_STATE_COMPLETED, e.getJob(job.Id).State)
}

// Finalization walks a lease's checkpoints until one is missing. A checkpoint the store
// cannot read is not the end of that chain: finalizing over it fails and keeps nothing,
// instead of finalizing what came before as if the chain ended there.
func TestFinalizationDoesNotTakeAStoreFailureForTheEndOfTheChain(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	job, lease := e.leaseJob(prov, containerSpec(32, 16))
	cp0 := e.submitCheckpoint(newParty(prov, computeRun(t, job, 16).garbageFrom(0, 16, 0), nil), lease.Id, 0)

	// Checkpoint 1's entry holds bytes that do not decode.
	key, err := collections.EncodeKeyWithPrefix(types.CheckpointsKey.Bytes(), e.Verify.Checkpoints.KeyCodec(), collections.Join(lease.Id, uint64(1)))
	require.NoError(t, err)
	e.Ctx.KVStore(e.Keys[types.StoreKey]).Set(key, []byte{0xff, 0xff, 0xff})
	e.advanceTo(cp0.ChallengeDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, e.checkpoint(lease.Id, 0).Status, "finalized over an unreadable checkpoint")
	require.Empty(t, typedEvents[*types.EventCheckpointFinalized](e))
	require.True(t, e.getLease(lease.Id).Withdrawable.IsZero(), "no payment released")

	e.Ctx.KVStore(e.Keys[types.StoreKey]).Delete(key) // for the invariants at the end
}
