package keeper_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/testutil/keepers"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

const verifierBond = 200_000_000

func rootOf(tr trace.Trace) []byte {
	r := tr.Root()
	return r[:]
}

func (e *env) stakingQuery() stakingexttypes.QueryServer {
	return stakingextkeeper.NewQueryServerImpl(e.StakingExt)
}

// registerVerifier funds an account and registers it as a verifier (auditor).
func (e *env) registerVerifier(label string) sdk.AccAddress {
	e.t.Helper()
	a := addr(label)
	e.Fund(e.t, a, challengerFunds+verifierBond)
	_, err := e.sxMsg.RegisterVerifier(e.Ctx, &stakingexttypes.MsgRegisterVerifier{Operator: a.String(), Bond: coin(verifierBond)})
	require.NoError(e.t, err)
	return a
}

func (e *env) verifierRecord(a sdk.AccAddress) stakingexttypes.Verifier {
	e.t.Helper()
	v, err := e.StakingExt.GetVerifier(e.Ctx, a)
	require.NoError(e.t, err)
	return v
}

// auditScenario is a scenario whose job asks for k auditors, with verifiers registered
// before the job (labels auditor-0...).
func auditScenario(t testing.TB, totalSteps, interval uint64, k uint32, verifiers int) (*scenario, []sdk.AccAddress) {
	t.Helper()
	e := newEnv(t)
	var auditors []sdk.AccAddress
	for i := 0; i < verifiers; i++ {
		auditors = append(auditors, e.registerVerifier(fmt.Sprintf("auditor-%d", i)))
	}
	prov := e.registerProvider("provider", 8)
	spec := referenceSpec(totalSteps, interval)
	spec.Audit = &markettypes.AuditSpec{Auditors: k}
	job, lease := e.leaseJob(prov, spec)
	return &scenario{env: e, prov: prov, job: job, lease: lease, run: computeRun(t, job, totalSteps)}, auditors
}

// drawn runs the chain until the audit draw of cp has run: at the end of the block after
// its submission.
func (e *env) drawn(cp types.Checkpoint) {
	e.t.Helper()
	e.advanceTo(cp.SubmittedHeight + 2)
}

// audits lists a checkpoint's assignments through the query.
func (e *env) audits(leaseID, index uint64) []types.Audit {
	e.t.Helper()
	res, err := e.query.Audits(e.Ctx, &types.QueryAuditsRequest{LeaseId: leaseID, CheckpointIndex: index})
	require.NoError(e.t, err)
	return res.Audits
}

func (e *env) audit(leaseID, index uint64, auditor sdk.AccAddress) types.Audit {
	e.t.Helper()
	a, found, err := e.Verify.AuditOf(e.Ctx, leaseID, index, auditor.String())
	require.NoError(e.t, err)
	require.True(e.t, found, "%s audits checkpoint %d/%d", auditor, leaseID, index)
	return a
}

func (e *env) attest(a sdk.AccAddress, leaseID, index uint64, root []byte) error {
	_, err := e.deliver(func(ctx sdk.Context) error {
		_, err := e.msg.Attest(ctx, &types.MsgAttest{Auditor: a.String(), LeaseId: leaseID, CheckpointIndex: index, TraceRoot: root})
		return err
	})
	return err
}

func (e *env) report(a sdk.AccAddress, leaseID, index uint64) error {
	_, err := e.deliver(func(ctx sdk.Context) error {
		_, err := e.msg.ReportUnavailable(ctx, &types.MsgReportUnavailable{Auditor: a.String(), LeaseId: leaseID, CheckpointIndex: index})
		return err
	})
	return err
}

// The draw happens at the end of the block after submission, picks k distinct verifiers,
// and reserves their fees from the job's escrow.
func TestAuditDrawAssignsAndReservesFees(t *testing.T) {
	s, _ := auditScenario(t, 16, 16, 2, 5)
	params := s.verifyParams()
	escrowBefore := s.getJob(s.job.Id).Escrow
	cp := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
	s.nextBlock()
	require.Empty(t, s.audits(s.lease.Id, 0), "nobody is drawn before the end of the block after the submission")
	s.drawn(cp)
	audits := s.audits(s.lease.Id, 0)
	require.Len(t, audits, 2)
	require.NotEqual(t, audits[0].Auditor, audits[1].Auditor)
	fee := params.AuditFee(16)
	require.Equal(t, coin(16*params.AuditFeePerStep.Amount.Int64()), fee)
	for _, a := range audits {
		require.Equal(t, types.AUDIT_STATUS_ASSIGNED, a.Status)
		require.Equal(t, fee, a.Fee)
		require.Equal(t, cp.ChallengeDeadline, a.Deadline)
	}
	got := s.checkpoint(s.lease.Id, 0)
	require.True(t, got.AuditDrawn)
	require.Equal(t, uint32(2), got.Auditors)
	job := s.getJob(s.job.Id)
	require.Equal(t, fee.Amount.MulRaw(2), job.AuditFees.Amount)
	// The escrow paid the fees (and the lease's settlement).
	require.True(t, job.Escrow.Amount.LTE(escrowBefore.Amount.Sub(fee.Amount.MulRaw(2))))
	require.Equal(t, fee.Amount.MulRaw(2), s.ModuleBalance(types.ModuleName), "x/verify holds the fees until the checkpoint resolves")
	require.Len(t, typedEvents[*types.EventAuditAssigned](s.env), 2)
	byAuditor, err := s.query.Audits(s.Ctx, &types.QueryAuditsRequest{Auditor: audits[0].Auditor, OpenOnly: true})
	require.NoError(t, err)
	require.Len(t, byAuditor.Audits, 1)
}

// The draw is reproducible by anyone from chain state (the stored block hash and the
// audit set in position order), and nothing the provider commits changes it: two
// chains alike but for the checkpoint's roots, URI and metrics draw the same auditors.
// The provider, when it is a verifier too, is never drawn for its own checkpoint.
func TestAuditDrawIsReproducibleAndNotSteerable(t *testing.T) {
	draw := func(lie bool) ([]string, *scenario) {
		s, _ := auditScenario(t, 16, 16, 3, 7)
		// The provider registers as a verifier as well.
		s.Fund(t, s.prov, verifierBond)
		_, err := s.sxMsg.RegisterVerifier(s.Ctx, &stakingexttypes.MsgRegisterVerifier{Operator: s.prov.String(), Bond: coin(verifierBond)})
		require.NoError(t, err)
		p := s.honest(0, 16)
		if lie {
			p = s.liar(s.prov, 0, 16, 3, false)
		}
		msg := checkpointMsg(p, s.lease.Id, 0)
		if lie {
			msg.Uri = "https://elsewhere.example.com/a-different-uri"
			msg.Metrics = []types.Metric{{Name: "loss", Value: "0.01"}, {Name: "tokens", Value: "42"}}
		}
		_, err = s.msg.SubmitCheckpoint(s.Ctx, msg)
		require.NoError(t, err)
		s.drawn(s.checkpoint(s.lease.Id, 0))
		var drawn []string
		for _, ev := range typedEvents[*types.EventAuditAssigned](s.env) {
			drawn = append(drawn, ev.Auditor)
		}
		return drawn, s
	}
	honest, s := draw(false)
	lying, _ := draw(true)
	require.Len(t, honest, 3)
	require.Equal(t, honest, lying, "the draw does not depend on what the provider committed")
	require.NotContains(t, honest, s.prov.String(), "the provider is never its own auditor")

	// Anyone repeats the draw from the block hash x/market stored and the audit set.
	cp := s.checkpoint(s.lease.Id, 0)
	hash, err := s.Market.BlockHash(s.Ctx, cp.SubmittedHeight+1)
	require.NoError(t, err)
	seed := keeper.AuditSeed(hash, cp.LeaseId, cp.Index)
	require.Equal(t, seed, cp.AuditSeed)
	sx := s.stakingQuery()
	set, err := sx.Verifiers(s.Ctx, &stakingexttypes.QueryVerifiersRequest{ActiveOnly: true})
	require.NoError(t, err)
	require.Equal(t, uint64(8), set.SetSize)
	positions, err := stakingexttypes.DrawPositions(seed, set.SetSize, 3, func(pos uint64) (bool, error) {
		return set.Verifiers[pos].Operator == cp.Provider, nil
	})
	require.NoError(t, err)
	var repeated []string
	for _, pos := range positions {
		repeated = append(repeated, set.Verifiers[pos].Operator)
	}
	require.Equal(t, honest, repeated)
}

// An auditor that attests without computing (it copies the provider's root) to a
// fabricated checkpoint is slashed and tombstoned when another party proves the fraud;
// the unbonding it began after attesting is slashed too. Its slash adds to the pot the
// challenger's reward and the owner's compensation come from.
func TestLazyAuditorIsSlashed(t *testing.T) {
	s, auditors := auditScenario(t, 16, 16, 1, 1)
	params := s.verifyParams()
	lazy := auditors[0]
	cheater := s.liar(s.prov, 0, 16, 7, false)
	cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
	s.drawn(cp)
	require.Equal(t, types.AUDIT_STATUS_ASSIGNED, s.audit(s.lease.Id, 0, lazy).Status)
	require.NoError(t, s.attest(lazy, s.lease.Id, 0, cp.TraceRoot))
	require.Equal(t, types.AUDIT_STATUS_ATTESTED, s.audit(s.lease.Id, 0, lazy).Status)
	s.nextBlock()
	res, err := s.sxMsg.UnbondVerifier(s.Ctx, &stakingexttypes.MsgUnbondVerifier{Operator: lazy.String(), Amount: coin(verifierBond / 2)})
	require.NoError(t, err)
	require.Equal(t, stakingexttypes.VERIFIER_STATUS_ACTIVE, s.verifierRecord(lazy).Status)

	v := s.verifier("whistleblower", 0, 16)
	id := s.openChallenge(v, s.lease.Id, 0)
	providerBond := s.provider(s.prov).Bond.Amount
	vBal := s.Balance(v.addr)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, s.game(id, cheater, v, v).play(s.run).Outcome)

	fromBond := params.AuditFraudSlashFraction.MulInt(math.NewInt(verifierBond / 2)).TruncateInt()
	entry, err := s.StakingExt.Unbondings.Get(s.Ctx, res.UnbondingId)
	require.NoError(t, err)
	fromEntry := math.NewInt(verifierBond / 2).Sub(entry.Amount.Amount)
	require.Equal(t, params.AuditFraudSlashFraction.MulInt(math.NewInt(verifierBond/2)).TruncateInt(), fromEntry,
		"the unbonding begun after the attestation is slashed too")
	rec := s.verifierRecord(lazy)
	require.Equal(t, stakingexttypes.VERIFIER_STATUS_TOMBSTONED, rec.Status)
	require.Equal(t, math.NewInt(verifierBond/2).Sub(fromBond), rec.Bond.Amount)
	require.Equal(t, uint64(1), rec.Record.Slashes)
	a := s.audit(s.lease.Id, 0, lazy)
	require.Equal(t, fromBond.Add(fromEntry), a.Slashed.Amount)
	require.True(t, a.Settled)
	require.True(t, a.Paid.IsZero(), "no fee for attesting to a fraud")

	ev := s.resolvedEvent(id)
	auditorsSlashed := fromBond.Add(fromEntry)
	require.Equal(t, auditorsSlashed, ev.AuditorsSlashed.Amount)
	pot := params.FraudSlashFraction.MulInt(providerBond).TruncateInt().Add(auditorsSlashed)
	require.Equal(t, pot, ev.Slashed.Amount)
	reward := params.WhistleblowerShare.MulInt(pot).TruncateInt()
	require.Equal(t, vBal.Add(params.ChallengerBond.Amount).Add(reward), s.Balance(v.addr))
	set, err := s.StakingExt.AuditSetLen(s.Ctx)
	require.NoError(t, err)
	require.Zero(t, set, "a tombstoned auditor is out of the audit set")
	// The fee came back to the job.
	require.True(t, s.getJob(s.job.Id).AuditFees.IsZero())
	s.requireRejected(stakingexttypes.ErrVerifierTombstoned, func(ctx sdk.Context) error {
		_, err := s.sxMsg.ActivateVerifier(ctx, &stakingexttypes.MsgActivateVerifier{Operator: lazy.String()})
		return err
	})
}

// An auditor that answers is paid its fee when the checkpoint is final; one that misses
// its assignment loses audit_miss_slash_fraction of its bond and its place in the audit
// set, and its fee goes back to the job.
func TestAttestationsArePaidAndMissesPenalised(t *testing.T) {
	s, _ := auditScenario(t, 16, 16, 2, 2)
	params := s.verifyParams()
	cp := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
	s.drawn(cp)
	audits := s.audits(s.lease.Id, 0)
	require.Len(t, audits, 2)
	diligent, lazy := sdk.MustAccAddressFromBech32(audits[0].Auditor), sdk.MustAccAddressFromBech32(audits[1].Auditor)
	require.NoError(t, s.attest(diligent, s.lease.Id, 0, rootOf(s.run.trace(0, 16))))
	dBal, lBal := s.Balance(diligent), s.Balance(lazy)
	feesBefore := s.getJob(s.job.Id).AuditFees.Amount

	s.advanceTo(cp.ChallengeDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	fee := params.AuditFee(16).Amount
	require.Equal(t, dBal.Add(fee), s.Balance(diligent), "paid for the attestation")
	require.Equal(t, lBal, s.Balance(lazy), "nothing for a miss")
	missed := s.audit(s.lease.Id, 0, lazy)
	require.Equal(t, types.AUDIT_STATUS_MISSED, missed.Status)
	require.True(t, missed.Settled)
	slash := params.AuditMissSlashFraction.MulInt(math.NewInt(verifierBond)).TruncateInt()
	require.Equal(t, slash, missed.Slashed.Amount)
	rec := s.verifierRecord(lazy)
	require.Equal(t, stakingexttypes.VERIFIER_STATUS_INACTIVE, rec.Status)
	require.Equal(t, math.NewInt(verifierBond).Sub(slash), rec.Bond.Amount)
	require.Equal(t, uint64(1), rec.Record.Missed)
	require.Equal(t, uint64(1), rec.Record.Assigned)
	require.Equal(t, uint64(1), s.verifierRecord(diligent).Record.Attested)
	require.Equal(t, feesBefore.Sub(fee), s.getJob(s.job.Id).AuditFees.Amount, "the missed fee went back to the job")
	require.True(t, s.ModuleBalance(types.ModuleName).IsZero())
	set, err := s.StakingExt.AuditSetLen(s.Ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), set)

	// It may come back once it bonds enough.
	_, err = s.sxMsg.ActivateVerifier(s.Ctx, &stakingexttypes.MsgActivateVerifier{Operator: lazy.String()})
	require.NoError(t, err)
	require.Equal(t, stakingexttypes.VERIFIER_STATUS_ACTIVE, s.verifierRecord(lazy).Status)
}

// An auditor that computed another root challenges; that answers its assignment, and it
// is paid when its challenge proves the fraud.
func TestAuditorChallengeIsPaid(t *testing.T) {
	s, auditors := auditScenario(t, 16, 16, 1, 1)
	params := s.verifyParams()
	cheater := s.liar(s.prov, 0, 16, 11, true)
	s.drawn(s.submitCheckpoint(cheater, s.lease.Id, 0))
	a := newParty(auditors[0], s.run.trace(0, 16), func(step uint64) *exact.State { return s.run.stateAt(s.t, step) })
	err := s.requireRejected(types.ErrAttestationDiffers, func(ctx sdk.Context) error {
		_, err := s.msg.Attest(ctx, &types.MsgAttest{Auditor: a.addr.String(), LeaseId: s.lease.Id, CheckpointIndex: 0, TraceRoot: rootOf(a.trace)})
		return err
	})
	require.Contains(t, err.Error(), "open a challenge instead")
	id := s.openChallenge(a, s.lease.Id, 0)
	au := s.audit(s.lease.Id, 0, a.addr)
	require.Equal(t, types.AUDIT_STATUS_CHALLENGED, au.Status)
	require.Equal(t, id, au.ChallengeId)
	bal := s.Balance(a.addr)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, s.game(id, cheater, a, a).play(s.run).Outcome)
	reward := s.resolvedEvent(id).Reward.Amount
	require.Equal(t, bal.Add(params.ChallengerBond.Amount).Add(reward).Add(params.AuditFee(16).Amount), s.Balance(a.addr),
		"bond back, the reward and the audit fee")
	require.Equal(t, uint64(1), s.verifierRecord(a.addr).Record.Challenged)
}

// A provider that withholds the state its checkpoint starts from is reported by its
// auditors; more than withheld_threshold of them make the checkpoint WITHHELD at the end
// of its window: never final, its pay refunded, the lease closed for non-performance
// (the provider slashed and jailed as for a missed deadline) and the job back on the
// market. A single griefing report among three auditors is not enough.
func TestWithholdingProviderIsReported(t *testing.T) {
	run := func(t *testing.T, reports int) (*scenario, types.Checkpoint, []types.Audit) {
		s, _ := auditScenario(t, 32, 16, 3, 3)
		cp0 := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
		s.drawn(cp0)
		for _, a := range s.audits(s.lease.Id, 0) {
			require.NoError(t, s.attest(sdk.MustAccAddressFromBech32(a.Auditor), s.lease.Id, 0, cp0.TraceRoot))
		}
		s.advanceTo(cp0.ChallengeDeadline + 1)
		require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
		cp1 := s.submitCheckpoint(s.honest(16, 32), s.lease.Id, 1)
		s.drawn(cp1)
		audits := s.audits(s.lease.Id, 1)
		require.Len(t, audits, 3)
		for i, a := range audits {
			addr := sdk.MustAccAddressFromBech32(a.Auditor)
			if i < reports {
				require.NoError(t, s.report(addr, s.lease.Id, 1))
			} else {
				require.NoError(t, s.attest(addr, s.lease.Id, 1, cp1.TraceRoot))
			}
		}
		require.Equal(t, uint32(reports), s.checkpoint(s.lease.Id, 1).UnavailableReports)
		return s, cp1, audits
	}

	t.Run("a majority reports", func(t *testing.T) {
		s, cp1, audits := run(t, 2)
		withheld := typedEvents[*types.EventUnavailabilityReported](s.env)
		require.True(t, withheld[len(withheld)-1].Withheld, "the second report makes it withheld")
		bond := s.provider(s.prov).Bond.Amount
		pending := s.getLease(s.lease.Id).Pending
		attester := sdk.MustAccAddressFromBech32(audits[2].Auditor)
		aBal := s.Balance(attester)
		s.advanceTo(cp1.ChallengeDeadline + 1)

		require.Equal(t, types.CHECKPOINT_STATUS_WITHHELD, s.checkpoint(s.lease.Id, 1).Status)
		lease := s.getLease(s.lease.Id)
		require.Equal(t, markettypes.LEASE_STATE_CLOSED, lease.State)
		require.Equal(t, markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE, lease.CloseReason)
		require.True(t, lease.Pending.IsZero())
		require.True(t, pending.IsPositive())
		p := s.provider(s.prov)
		mp := keepers.Value(t, s.Fixture, s.Market.Params)
		require.Equal(t, bond.Sub(mp.NonPerformanceSlashFraction.MulInt(bond).TruncateInt()), p.Bond.Amount)
		require.Equal(t, stakingexttypes.PROVIDER_STATUS_JAILED, p.Status)
		require.Equal(t, markettypes.JOB_STATE_OPEN, s.getJob(s.job.Id).State, "the job is back on the market")
		require.Equal(t, uint64(16), s.getJob(s.job.Id).Progress[0].Step, "it resumes from the last final checkpoint")
		require.Equal(t, aBal.Add(s.verifyParams().AuditFee(16).Amount), s.Balance(attester), "the auditor who got the state is paid")
		for _, a := range audits[:2] {
			au := s.audit(s.lease.Id, 1, sdk.MustAccAddressFromBech32(a.Auditor))
			require.Equal(t, types.AUDIT_STATUS_REPORTED, au.Status)
			require.True(t, au.Settled && au.Paid.IsZero(), "a report earns nothing")
		}
		require.Len(t, typedEvents[*types.EventCheckpointWithheld](s.env), 1)
	})
	t.Run("one griefing report", func(t *testing.T) {
		s, cp1, _ := run(t, 1)
		s.advanceTo(cp1.ChallengeDeadline + 1)
		require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 1).Status)
		require.Equal(t, markettypes.JOB_STATE_COMPLETED, s.getJob(s.job.Id).State)
	})
}

// Rejected audit messages name what is wrong and change nothing.
func TestAuditRejections(t *testing.T) {
	s, auditors := auditScenario(t, 32, 16, 1, 2)
	cp := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
	s.drawn(cp)
	audits := s.audits(s.lease.Id, 0)
	require.Len(t, audits, 1)
	drawn := sdk.MustAccAddressFromBech32(audits[0].Auditor)
	other := auditors[0]
	if other.Equals(drawn) {
		other = auditors[1]
	}
	attest := func(a sdk.AccAddress, index uint64, root []byte) func(sdk.Context) error {
		return func(ctx sdk.Context) error {
			_, err := s.msg.Attest(ctx, &types.MsgAttest{Auditor: a.String(), LeaseId: s.lease.Id, CheckpointIndex: index, TraceRoot: root})
			return err
		}
	}
	report := func(a sdk.AccAddress, index uint64) func(sdk.Context) error {
		return func(ctx sdk.Context) error {
			_, err := s.msg.ReportUnavailable(ctx, &types.MsgReportUnavailable{Auditor: a.String(), LeaseId: s.lease.Id, CheckpointIndex: index})
			return err
		}
	}
	s.requireRejected(types.ErrNotAssigned, attest(other, 0, cp.TraceRoot))
	s.requireRejected(types.ErrInvalidHash, attest(drawn, 0, cp.TraceRoot[:31]))
	s.requireRejected(types.ErrAttestationDiffers, attest(drawn, 0, bytes.Repeat([]byte{1}, 32)))
	s.requireRejected(types.ErrCheckpointNotFound, attest(drawn, 5, cp.TraceRoot))
	s.requireRejected(sdkerrors.ErrInvalidAddress, func(ctx sdk.Context) error {
		_, err := s.msg.Attest(ctx, &types.MsgAttest{Auditor: "nobody", LeaseId: s.lease.Id, TraceRoot: cp.TraceRoot})
		return err
	})
	err := s.requireRejected(types.ErrNothingToReport, report(drawn, 0))
	require.Contains(t, err.Error(), "resume point")
	require.NoError(t, s.attest(drawn, s.lease.Id, 0, cp.TraceRoot))
	s.requireRejected(types.ErrAlreadyAnswered, attest(drawn, 0, cp.TraceRoot))
	s.requireRejected(types.ErrAlreadyAnswered, report(drawn, 0))

	// After the window: too late.
	s.advanceTo(cp.ChallengeDeadline + 1)
	cp1 := s.submitCheckpoint(s.honest(16, 32), s.lease.Id, 1)
	s.drawn(cp1)
	a1 := sdk.MustAccAddressFromBech32(s.audits(s.lease.Id, 1)[0].Auditor)
	s.advanceTo(cp1.ChallengeDeadline)
	s.nextBlock() // the window's last block ends: the assignment is missed
	s.requireRejected(types.ErrAlreadyAnswered, attest(a1, 1, cp1.TraceRoot))
	require.Equal(t, types.AUDIT_STATUS_MISSED, s.audit(s.lease.Id, 1, a1).Status)
}

// With fewer eligible verifiers than asked (or an escrow that cannot pay all the fees),
// the draw assigns as many as it can; with none registered nobody is charged.
func TestAuditDrawWithFewVerifiers(t *testing.T) {
	s, _ := auditScenario(t, 16, 16, 3, 2)
	s.drawn(s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0))
	require.Len(t, s.audits(s.lease.Id, 0), 2)
	require.Equal(t, uint32(2), s.checkpoint(s.lease.Id, 0).Auditors)

	none := newScenario(t, 16, 16)
	none.drawn(none.submitCheckpoint(none.honest(0, 16), none.lease.Id, 0))
	require.Empty(t, none.audits(none.lease.Id, 0))
	require.True(t, none.getJob(none.job.Id).AuditFees.IsZero())
	require.True(t, none.checkpoint(none.lease.Id, 0).AuditDrawn)
}

// The audit set stays a dense, position-indexed set as verifiers join and leave, and the
// draw never reads more than MaxDrawAttempts positions.
func TestAuditSetPositions(t *testing.T) {
	e := newEnv(t)
	var vs []sdk.AccAddress
	for i := 0; i < 6; i++ {
		vs = append(vs, e.registerVerifier(fmt.Sprintf("v-%d", i)))
	}
	_, err := e.sxMsg.UnbondVerifier(e.Ctx, &stakingexttypes.MsgUnbondVerifier{Operator: vs[1].String(), Amount: coin(verifierBond)})
	require.NoError(t, err)
	require.NoError(t, e.StakingExt.DeactivateVerifier(e.Ctx, vs[4], "test"))
	set, err := e.stakingQuery().Verifiers(e.Ctx, &stakingexttypes.QueryVerifiersRequest{ActiveOnly: true})
	require.NoError(t, err)
	var members []string
	for _, v := range set.Verifiers {
		members = append(members, v.Operator)
	}
	require.Len(t, members, 4)
	require.Equal(t, uint64(4), set.SetSize)
	for _, gone := range []sdk.AccAddress{vs[1], vs[4]} {
		require.False(t, slices.Contains(members, gone.String()))
	}
	drawn, err := e.StakingExt.DrawVerifiers(e.Ctx, []byte("seed"), 8, "")
	require.NoError(t, err)
	require.Len(t, drawn, 4, "asking for more than the set holds draws all of it")
	e.requireInvariants()
}
