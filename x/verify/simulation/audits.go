package simulation

import (
	"bytes"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// lazyChance is how often (in percent) an auditor attests without computing anything: to
// whatever the provider committed, a lie included (and is slashed when someone proves it).
const lazyChance = 30

// openAudits lists the assignments still unanswered on pending checkpoints whose
// window is open (a rejected checkpoint's assignments are settled unanswered).
func (d Deps) openAudits(ctx sdk.Context) ([]types.Audit, error) {
	var out []types.Audit
	err := d.Keeper.Assignments.Walk(ctx, nil, func(_ keeper.AuditKey, a types.Audit) (bool, error) {
		if a.Status == types.AUDIT_STATUS_ASSIGNED && !a.Settled && ctx.BlockHeight() <= a.Deadline {
			out = append(out, a)
		}
		return false, nil
	})
	return out, err
}

// SimulateMsgAttest has an auditor answer its assignment with the trace root it
// computed: the honest root when the checkpoint is honest (a lying checkpoint it
// challenges instead, see SimulateMsgChallenge), or, being lazy, the provider's root
// whatever it is. Sometimes it attests to a root that is not the provider's, or an
// account that was not drawn attests; both must be refused.
func SimulateMsgAttest(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgAttest, DefaultWeightMsgAttest, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgAttest{}
		open, err := d.openAudits(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		a, ok := simutil.Pick(r, open)
		if !ok {
			return o.NoOp(msg, "no audit to answer")
		}
		auditor, ok := o.Account(a.Auditor)
		if !ok {
			return o.NoOp(msg, "auditor %s is not a simulated account", a.Auditor)
		}
		cp, err := d.Keeper.GetCheckpoint(ctx, a.LeaseId, a.CheckpointIndex)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		*msg = types.MsgAttest{Auditor: a.Auditor, LeaseId: a.LeaseId, CheckpointIndex: a.CheckpointIndex, TraceRoot: cp.TraceRoot}
		if simutil.Chance(r, 10) {
			if r.Intn(2) == 0 {
				msg.TraceRoot = bytes.Clone(cp.TraceRoot)
				msg.TraceRoot[0] ^= 0x01
				return o.DeliverInvalid(auditor, msg, types.ErrAttestationDiffers, "attested root is not the provider's")
			}
			other, _ := simtypes.RandomAcc(r, accs)
			if other.Address.String() != a.Auditor {
				msg.Auditor = other.Address.String()
				if _, found, err := d.Keeper.AuditOf(ctx, a.LeaseId, a.CheckpointIndex, msg.Auditor); err == nil && !found {
					return o.DeliverInvalid(other, msg, types.ErrNotAssigned, "an account that was not drawn attests")
				}
				return o.NoOp(msg, "drew another auditor of the same checkpoint")
			}
		}
		if !simutil.Chance(r, lazyChance) {
			w, err := d.workFor(ctx, cp.JobId, cp.Worker, cp.EndStep)
			if err != nil {
				return o.NoOp(msg, "%s", err)
			}
			if !adjudicable(w, cp) {
				return o.NoOp(msg, "checkpoint %d/%d cannot be recomputed", cp.LeaseId, cp.Index)
			}
			honest := w.run.honest(cp.StartStep, cp.EndStep).Root()
			if !bytes.Equal(honest[:], cp.TraceRoot) {
				return o.NoOp(msg, "checkpoint %d/%d is a lie: an honest auditor challenges it", cp.LeaseId, cp.Index)
			}
		}
		return o.Deliver(auditor, msg, nil)
	})
}

// SimulateMsgReportUnavailable has an auditor report that the provider did not serve
// the start state of a later checkpoint of its lease (which the simulation's providers
// never do, so these are griefing reports: enough of them withhold the checkpoint).
// Reports on a lease's first checkpoint, whose start state is not the provider's to
// serve, must be refused.
func SimulateMsgReportUnavailable(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgReportUnavail, DefaultWeightMsgReportUnavail, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgReportUnavailable{}
		open, err := d.openAudits(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		a, ok := simutil.Pick(r, open)
		if !ok {
			return o.NoOp(msg, "no audit to answer")
		}
		auditor, ok := o.Account(a.Auditor)
		if !ok {
			return o.NoOp(msg, "auditor %s is not a simulated account", a.Auditor)
		}
		*msg = types.MsgReportUnavailable{Auditor: a.Auditor, LeaseId: a.LeaseId, CheckpointIndex: a.CheckpointIndex}
		if a.CheckpointIndex == 0 {
			return o.DeliverInvalid(auditor, msg, types.ErrNothingToReport, "report on a lease's first checkpoint")
		}
		return o.Deliver(auditor, msg, nil)
	})
}

// SimulateMsgClaimTimeout has any account end a game whose party to move missed its
// deadline, or whose checkpoint was rejected meanwhile, ahead of the end blocker.
// Sometimes it claims a game whose deadline has not passed, which must be refused.
func SimulateMsgClaimTimeout(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgClaimTimeout, DefaultWeightMsgClaimTimeout, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgClaimTimeout{}
		var due, notDue []types.Challenge
		if err := d.Keeper.Challenges.Walk(ctx, nil, func(_ uint64, stored types.Challenge) (bool, error) {
			if stored.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED {
				return false, nil
			}
			ch, err := d.Keeper.Effective(ctx, stored)
			if err != nil {
				return true, err
			}
			cp, err := d.Keeper.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex)
			if err != nil {
				return true, err
			}
			if cp.Status != types.CHECKPOINT_STATUS_PENDING || ctx.BlockHeight() > ch.Deadline {
				due = append(due, ch)
			} else {
				notDue = append(notDue, ch)
			}
			return false, nil
		}); err != nil {
			return o.NoOp(msg, "%s", err)
		}
		sender, _ := simtypes.RandomAcc(r, accs)
		if ch, ok := simutil.Pick(r, notDue); ok && (len(due) == 0 || simutil.Chance(r, 20)) {
			*msg = types.MsgClaimTimeout{Sender: sender.Address.String(), ChallengeId: ch.Id}
			return o.DeliverInvalid(sender, msg, types.ErrNotDue, "the game's deadline has not passed")
		}
		ch, ok := simutil.Pick(r, due)
		if !ok {
			return o.NoOp(msg, "no game past its deadline")
		}
		*msg = types.MsgClaimTimeout{Sender: sender.Address.String(), ChallengeId: ch.Id}
		return o.Deliver(sender, msg, nil)
	})
}
