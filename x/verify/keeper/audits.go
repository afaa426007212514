package keeper

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Audits: somebody is always paid to check. For every checkpoint of an adjudicable job
// the chain draws audit.auditors verifiers registered in x/stakingext, at the end of the
// block after the submission, from that block's hash (which neither the provider nor the
// auditors know when the checkpoint is committed). Each auditor answers before the
// challenge window closes: it attests (commits the trace root it computed, which must be
// the provider's), challenges, or reports that the provider does not serve the state
// the checkpoint starts from. Its fee is reserved from the job's escrow at the draw and
// paid when the checkpoint is final; an auditor that attested to a checkpoint later
// proven fraudulent is slashed and tombstoned, one that did not answer is slashed a
// little and leaves the audit set. More than withheld_threshold of the auditors
// reporting make the checkpoint WITHHELD: never final, and its lease is closed for
// non-performance.

// auditSeedDomain separates the draw's seeds from every other use of the block hashes.
const auditSeedDomain = "depinchain/verify/audit-seed/v1"

// AuditSeed is the randomness of a checkpoint's audit draw: SHA-256 over a domain tag,
// the hash of the block after its submission, and its lease id and index. Nothing the
// provider chooses (roots, URI, metrics) enters it.
func AuditSeed(blockHash []byte, leaseID, index uint64) []byte {
	h := sha256.New()
	h.Write([]byte(auditSeedDomain))
	h.Write(blockHash)
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], leaseID)
	binary.BigEndian.PutUint64(n[8:], index)
	h.Write(n[:])
	return h.Sum(nil)
}

// auditKey is the key of an auditor's assignment to a checkpoint.
func auditKey(leaseID, index uint64, auditor string) AuditKey {
	return collections.Join3(leaseID, index, auditor)
}

// auditsOf lists the assignments of one checkpoint, in auditor order.
func (k Keeper) auditsOf(ctx sdk.Context, leaseID, index uint64) ([]types.Audit, error) {
	iter, err := k.Assignments.Iterate(ctx, collections.NewSuperPrefixedTripleRange[uint64, uint64, string](leaseID, index))
	if err != nil {
		return nil, err
	}
	return iter.Values()
}

// drawAudits draws a checkpoint's auditors and reserves their fees (the end blocker, at
// the block after submission). The draw skips the provider; it assigns fewer than
// audit_requested when fewer other verifiers are registered or the escrow cannot pay
// more fees.
func (k Keeper) drawAudits(ctx sdk.Context, leaseID, index uint64) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	cp, err := k.GetCheckpoint(ctx, leaseID, index)
	if err != nil {
		return err
	}
	if cp.Status != types.CHECKPOINT_STATUS_PENDING || cp.AuditDrawn {
		return nil
	}
	cp.AuditDrawn = true
	hash, err := k.marketKeeper.BlockHash(ctx, cp.SubmittedHeight+1)
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return err
		}
		// Out of the beacon's retention: the draw ran far too late to be of use.
		k.Logger(ctx).Error("no block hash for an audit draw; the checkpoint goes unaudited", "lease", leaseID, "index", index, "err", err)
		return k.saveCheckpoint(ctx, cp)
	}
	cp.AuditSeed = AuditSeed(hash, cp.LeaseId, cp.Index)
	cp.AuditFee = params.AuditFee(cp.EndStep - cp.StartStep)
	drawn, err := k.providerKeeper.DrawVerifiers(ctx, cp.AuditSeed, min(cp.AuditRequested, types.MaxAuditors), cp.Provider)
	if err != nil {
		return err
	}
	paid, err := k.marketKeeper.TakeAuditFees(ctx, cp.JobId, cp.LeaseId, cp.Index, cp.AuditFee, uint32(len(drawn)), types.ModuleName)
	if err != nil {
		return err
	}
	cp.Auditors = paid
	for _, auditor := range drawn[:paid] {
		a := types.Audit{
			LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, Auditor: auditor, JobId: cp.JobId, Provider: cp.Provider,
			Status: types.AUDIT_STATUS_ASSIGNED, Fee: cp.AuditFee, AssignedHeight: ctx.BlockHeight(), Deadline: cp.ChallengeDeadline,
			Paid: sdk.NewCoin(cp.AuditFee.Denom, math.ZeroInt()), Slashed: sdk.NewCoin(cp.AuditFee.Denom, math.ZeroInt()),
		}
		if err := k.Assignments.Set(ctx, auditKey(cp.LeaseId, cp.Index, auditor), a); err != nil {
			return err
		}
		if err := k.recordAudit(ctx, auditor, stakingexttypes.AuditAssigned); err != nil {
			return err
		}
		if err := keeperutil.Emit(ctx, &types.EventAuditAssigned{
			LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, JobId: cp.JobId, Provider: cp.Provider, Auditor: auditor,
			Fee: cp.AuditFee, Deadline: cp.ChallengeDeadline, StartStep: cp.StartStep, EndStep: cp.EndStep,
		}); err != nil {
			return err
		}
	}
	return k.saveCheckpoint(ctx, cp)
}

// openAudit returns auditor's assignment to cp if it is still unanswered.
func (k Keeper) openAudit(ctx sdk.Context, cp types.Checkpoint, auditor string) (types.Audit, bool, error) {
	a, found, err := keeperutil.Optional(k.Assignments.Get(ctx, auditKey(cp.LeaseId, cp.Index, auditor)))
	if err != nil || !found {
		return a, false, err
	}
	return a, a.Status == types.AUDIT_STATUS_ASSIGNED, nil
}

// answerAudit records an auditor's answer and counts it in its x/stakingext record.
func (k Keeper) answerAudit(ctx sdk.Context, a *types.Audit, status types.AuditStatus, traceRoot []byte, challengeID uint64) error {
	a.Status, a.AnsweredHeight, a.TraceRoot, a.ChallengeId = status, ctx.BlockHeight(), traceRoot, challengeID
	if err := k.Assignments.Set(ctx, auditKey(a.LeaseId, a.CheckpointIndex, a.Auditor), *a); err != nil {
		return err
	}
	outcome := map[types.AuditStatus]stakingexttypes.AuditOutcome{
		types.AUDIT_STATUS_ATTESTED: stakingexttypes.AuditAttested, types.AUDIT_STATUS_CHALLENGED: stakingexttypes.AuditChallenged,
		types.AUDIT_STATUS_REPORTED: stakingexttypes.AuditReported, types.AUDIT_STATUS_MISSED: stakingexttypes.AuditMissed,
	}[status]
	return k.recordAudit(ctx, a.Auditor, outcome)
}

func (k Keeper) recordAudit(ctx sdk.Context, auditor string, outcome stakingexttypes.AuditOutcome) error {
	addr, err := k.addressCodec.StringToBytes(auditor)
	if err != nil {
		return err
	}
	return k.providerKeeper.RecordAudit(ctx, addr, outcome)
}

// assignedAudit is the checks MsgAttest and MsgReportUnavailable share: the sender is an
// auditor of a pending checkpoint that has not answered, inside the window.
func (k Keeper) assignedAudit(ctx sdk.Context, auditor string, leaseID, index uint64) (types.Checkpoint, types.Audit, error) {
	cp, err := k.GetCheckpoint(ctx, leaseID, index)
	if err != nil {
		return cp, types.Audit{}, err
	}
	a, found, err := keeperutil.Optional(k.Assignments.Get(ctx, auditKey(leaseID, index, auditor)))
	if err != nil {
		return cp, a, err
	}
	if !found {
		return cp, a, errorsmod.Wrapf(types.ErrNotAssigned, "%s was not drawn to audit checkpoint %d/%d", auditor, leaseID, index)
	}
	if a.Status != types.AUDIT_STATUS_ASSIGNED {
		return cp, a, errorsmod.Wrapf(types.ErrAlreadyAnswered, "%s's audit of checkpoint %d/%d is %s", auditor, leaseID, index, a.Status)
	}
	if cp.Status != types.CHECKPOINT_STATUS_PENDING {
		return cp, a, errorsmod.Wrapf(types.ErrNotChallengeable, "checkpoint %d/%d is %s", leaseID, index, cp.Status)
	}
	if ctx.BlockHeight() > cp.ChallengeDeadline {
		return cp, a, errorsmod.Wrapf(types.ErrMoveTooLate, "the audit of checkpoint %d/%d was due by height %d", leaseID, index, cp.ChallengeDeadline)
	}
	return cp, a, nil
}

// attest records an auditor's attestation (MsgAttest): the trace root it computed,
// which must be the provider's (an auditor that computed another opens a challenge).
func (k Keeper) attest(ctx sdk.Context, msg *types.MsgAttest) error {
	if _, err := hashFromBytes("trace_root", msg.TraceRoot); err != nil {
		return err
	}
	cp, a, err := k.assignedAudit(ctx, msg.Auditor, msg.LeaseId, msg.CheckpointIndex)
	if err != nil {
		return err
	}
	if !sameHash(msg.TraceRoot, cp.TraceRoot) {
		return errorsmod.Wrapf(types.ErrAttestationDiffers, "trace_root %X is not checkpoint %d/%d's %X: open a challenge instead of attesting",
			msg.TraceRoot, cp.LeaseId, cp.Index, cp.TraceRoot)
	}
	return k.answerAudit(ctx, &a, types.AUDIT_STATUS_ATTESTED, msg.TraceRoot, 0)
}

// reportUnavailable records that an auditor could not fetch the state a checkpoint
// starts from (MsgReportUnavailable). Checkpoint 0 of a lease starts from a state its
// provider did not produce (the initial model, or the job's last final checkpoint), so
// it cannot be reported.
func (k Keeper) reportUnavailable(ctx sdk.Context, msg *types.MsgReportUnavailable) (types.Checkpoint, error) {
	cp, a, err := k.assignedAudit(ctx, msg.Auditor, msg.LeaseId, msg.CheckpointIndex)
	if err != nil {
		return cp, err
	}
	if cp.Index == 0 {
		return cp, errorsmod.Wrapf(types.ErrNothingToReport,
			"checkpoint %d/0 starts from the lease's resume point, which its provider did not produce; fetch it from the job's last final checkpoint", cp.LeaseId)
	}
	if err := k.answerAudit(ctx, &a, types.AUDIT_STATUS_REPORTED, nil, 0); err != nil {
		return cp, err
	}
	cp.UnavailableReports++
	return cp, k.saveCheckpoint(ctx, cp)
}

// closeAuditWindow runs when a checkpoint's challenge window closes: every auditor that
// has not answered missed its assignment. It loses audit_miss_slash_fraction of its
// verifier bond (to the community pool), leaves the audit set until it activates again,
// and its fee goes back to the job.
func (k Keeper) closeAuditWindow(ctx sdk.Context, params types.Params, cp types.Checkpoint) error {
	audits, err := k.auditsOf(ctx, cp.LeaseId, cp.Index)
	if err != nil {
		return err
	}
	for _, a := range audits {
		if a.Status != types.AUDIT_STATUS_ASSIGNED || a.Settled {
			continue
		}
		auditor, err := k.addressCodec.StringToBytes(a.Auditor)
		if err != nil {
			return err
		}
		reason := fmt.Sprintf("missed the audit of checkpoint %d/%d (due by height %d)", cp.LeaseId, cp.Index, cp.ChallengeDeadline)
		slashed, err := k.providerKeeper.SlashVerifier(ctx, auditor, params.AuditMissSlashFraction, cp.ChallengeDeadline, reason, "")
		if err != nil {
			return err
		}
		if err := k.providerKeeper.DeactivateVerifier(ctx, auditor, reason); err != nil {
			return err
		}
		a.Slashed = slashed
		if err := k.answerAudit(ctx, &a, types.AUDIT_STATUS_MISSED, nil, 0); err != nil {
			return err
		}
		if err := k.settleAudit(ctx, cp, &a, false); err != nil {
			return err
		}
	}
	return nil
}

// slashAttesters slashes and tombstones every auditor that attested to cp, now proven
// fraudulent: audit_fraud_slash_fraction of its verifier bond and of the verifier
// unbondings it began since attesting, into this module's account (the conviction's
// pot). It returns the total.
func (k Keeper) slashAttesters(ctx sdk.Context, params types.Params, cp types.Checkpoint, reason string) (sdk.Coin, error) {
	total := sdk.NewCoin(params.ChallengerBond.Denom, math.ZeroInt())
	audits, err := k.auditsOf(ctx, cp.LeaseId, cp.Index)
	if err != nil {
		return total, err
	}
	for _, a := range audits {
		if a.Status != types.AUDIT_STATUS_ATTESTED {
			continue
		}
		auditor, err := k.addressCodec.StringToBytes(a.Auditor)
		if err != nil {
			return total, err
		}
		why := fmt.Sprintf("attested to checkpoint %d/%d, proven fraudulent: %s", cp.LeaseId, cp.Index, reason)
		slashed, err := k.providerKeeper.SlashVerifier(ctx, auditor, params.AuditFraudSlashFraction, a.AnsweredHeight, why, types.ModuleName)
		if err != nil {
			return total, err
		}
		if err := k.providerKeeper.TombstoneVerifier(ctx, auditor, why); err != nil {
			return total, err
		}
		a.Slashed = slashed
		if err := k.Assignments.Set(ctx, auditKey(a.LeaseId, a.CheckpointIndex, a.Auditor), a); err != nil {
			return total, err
		}
		if slashed.Denom == total.Denom {
			total = total.Add(slashed)
		}
	}
	return total, nil
}

// settleAudits pays or refunds the fees of a resolved checkpoint's auditors. Work is
// paid when it helped: an attestation of a final or withheld checkpoint (the state was
// served), the challenge that proved cp fraudulent (proven), any attestation or
// challenge of a checkpoint rejected because an earlier one was fraudulent. An
// attestation of a fraudulent checkpoint, a lost challenge, a report and an unanswered
// assignment earn nothing: the fee goes back to the job.
func (k Keeper) settleAudits(ctx sdk.Context, cp types.Checkpoint, proven bool) error {
	audits, err := k.auditsOf(ctx, cp.LeaseId, cp.Index)
	if err != nil {
		return err
	}
	for i := range audits {
		if audits[i].Settled {
			continue
		}
		a := &audits[i]
		var pay bool
		switch cp.Status {
		case types.CHECKPOINT_STATUS_FINAL, types.CHECKPOINT_STATUS_WITHHELD:
			pay = a.Status == types.AUDIT_STATUS_ATTESTED
		case types.CHECKPOINT_STATUS_REJECTED:
			if proven {
				pay = a.Status == types.AUDIT_STATUS_CHALLENGED
			} else {
				pay = a.Status == types.AUDIT_STATUS_ATTESTED || a.Status == types.AUDIT_STATUS_CHALLENGED
			}
		default:
			return fmt.Errorf("settling the audits of checkpoint %d/%d, which is still %s", cp.LeaseId, cp.Index, cp.Status)
		}
		if err := k.settleAudit(ctx, cp, a, pay); err != nil {
			return err
		}
	}
	return nil
}

// settleAudit pays an auditor its fee, or gives the fee back to the job, and marks the
// assignment settled.
func (k Keeper) settleAudit(ctx sdk.Context, cp types.Checkpoint, a *types.Audit, pay bool) error {
	zero := sdk.NewCoin(a.Fee.Denom, math.ZeroInt())
	paid, refunded := zero, zero
	if pay {
		paid = a.Fee
		auditor, err := k.addressCodec.StringToBytes(a.Auditor)
		if err != nil {
			return err
		}
		if paid.IsPositive() {
			if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, auditor, sdk.NewCoins(paid)); err != nil {
				return err
			}
		}
	} else {
		refunded = a.Fee
		if err := k.creditJob(ctx, cp.JobId, refunded, markettypes.CreditAuditFee); err != nil {
			return err
		}
	}
	a.Settled, a.Paid = true, paid
	if a.Slashed.Denom == "" {
		a.Slashed = zero
	}
	if err := k.Assignments.Set(ctx, auditKey(a.LeaseId, a.CheckpointIndex, a.Auditor), *a); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventAuditSettled{
		LeaseId: a.LeaseId, CheckpointIndex: a.CheckpointIndex, Auditor: a.Auditor, Status: a.Status,
		Paid: paid, Refunded: refunded, Slashed: a.Slashed,
	})
}

// creditJob sends coins held by this module to a job (its escrow, or its owner once the
// job is over).
func (k Keeper) creditJob(ctx sdk.Context, jobID uint64, amount sdk.Coin, kind string) error {
	if amount.Amount.IsNil() || !amount.IsPositive() {
		return nil
	}
	return k.marketKeeper.CreditJob(ctx, types.ModuleName, jobID, amount, kind)
}

// fundCommunityPool sends coins held by this module to the community pool.
func (k Keeper) fundCommunityPool(ctx sdk.Context, amount sdk.Coin) error {
	if amount.Amount.IsNil() || !amount.IsPositive() {
		return nil
	}
	return k.distrKeeper.FundCommunityPool(ctx, sdk.NewCoins(amount), k.moduleAddress())
}

// AuditOf returns auditor's assignment to checkpoint (lease, index), if it was drawn.
func (k Keeper) AuditOf(ctx sdk.Context, leaseID, index uint64, auditor string) (types.Audit, bool, error) {
	return keeperutil.Optional(k.Assignments.Get(ctx, auditKey(leaseID, index, auditor)))
}
