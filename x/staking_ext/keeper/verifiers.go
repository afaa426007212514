package keeper

import (
	"context"
	"errors"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// Verifiers are bonded auditors. x/verify draws k of the active ones for every
// checkpoint, pays them from the job's escrow, and punishes them here: a small slash and
// removal from the audit set for a missed assignment, a large slash and a tombstone for
// attesting to a checkpoint later proven fraudulent. A verifier record is separate from
// a provider record: one operator may be both, with two bonds.

// GetVerifier returns the verifier registered by operator, or ErrVerifierNotFound.
func (k Keeper) GetVerifier(ctx context.Context, operator sdk.AccAddress) (types.Verifier, error) {
	v, err := k.Verifiers.Get(ctx, operator)
	if err != nil {
		return types.Verifier{}, keeperutil.NotFound(err, types.ErrVerifierNotFound, "no verifier is registered by %s", k.formatAddress(operator))
	}
	return v, nil
}

// registerVerifier creates a verifier record, moves its bond into the module account and
// puts it into the audit set (MsgRegisterVerifier).
func (k Keeper) registerVerifier(ctx context.Context, operator sdk.AccAddress, operatorText string, bond sdk.Coin) (types.Verifier, uint64, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Verifier{}, 0, err
	}
	if err := types.ValidatePositiveAmount("bond", bond, params.BondDenom); err != nil {
		return types.Verifier{}, 0, err
	}
	if bond.Amount.LT(params.MinVerifierBond) {
		return types.Verifier{}, 0, errorsmod.Wrapf(types.ErrVerifierBondTooLow, "bond %s is below min_verifier_bond %s%s", bond, params.MinVerifierBond, params.BondDenom)
	}
	exists, err := k.Verifiers.Has(ctx, operator)
	if err != nil {
		return types.Verifier{}, 0, err
	}
	if exists {
		return types.Verifier{}, 0, errorsmod.Wrapf(types.ErrVerifierExists, "%s is already a verifier; use bond-verifier and activate-verifier instead", operatorText)
	}

	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, operator, types.ModuleName, sdk.NewCoins(bond)); err != nil {
		return types.Verifier{}, 0, err
	}
	v := types.Verifier{
		Operator: operatorText, Bond: bond, Status: types.VERIFIER_STATUS_ACTIVE,
		RegisteredHeight: sdk.UnwrapSDKContext(ctx).BlockHeight(),
	}
	if err := k.Verifiers.Set(ctx, operator, v); err != nil {
		return types.Verifier{}, 0, err
	}
	pos, err := k.joinAuditSet(ctx, operator)
	return v, pos, err
}

// bondVerifier adds to a verifier's bond (MsgBondVerifier). It does not put an inactive
// verifier back into the set: MsgActivateVerifier does, so that an operator whose
// auditor missed an assignment confirms it is back.
func (k Keeper) bondVerifier(ctx context.Context, operator sdk.AccAddress, operatorText string, amount sdk.Coin) (types.Verifier, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Verifier{}, err
	}
	if err := types.ValidatePositiveAmount("amount", amount, params.BondDenom); err != nil {
		return types.Verifier{}, err
	}
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return types.Verifier{}, err
	}
	if v.Status == types.VERIFIER_STATUS_TOMBSTONED {
		return types.Verifier{}, errorsmod.Wrapf(types.ErrVerifierTombstoned, "%s attested to a fraudulent checkpoint and can never audit again", operatorText)
	}
	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, operator, types.ModuleName, sdk.NewCoins(amount)); err != nil {
		return types.Verifier{}, err
	}
	v.Bond = v.Bond.Add(amount)
	return v, k.Verifiers.Set(ctx, operator, v)
}

// unbondVerifier queues part of a verifier's bond for return (MsgUnbondVerifier). The
// entry stays slashable for attestations made up to its creation height
// (SlashVerifier). A verifier left below min_verifier_bond leaves the audit set; its
// open assignments still have to be answered. Tombstoned verifiers may unbond what the
// slash left.
func (k Keeper) unbondVerifier(ctx context.Context, operator sdk.AccAddress, operatorText string, amount sdk.Coin) (types.Unbonding, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Unbonding{}, err
	}
	if err := types.ValidatePositiveAmount("amount", amount, params.BondDenom); err != nil {
		return types.Unbonding{}, err
	}
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return types.Unbonding{}, err
	}
	if v.Bond.IsLT(amount) {
		return types.Unbonding{}, errorsmod.Wrapf(types.ErrInsufficientFreeBond, "cannot unbond %s: the verifier bond is %s", amount, v.Bond)
	}
	unbonding, err := k.queueUnbonding(ctx, params, operator, operatorText, amount, types.UNBONDING_ROLE_VERIFIER)
	if err != nil {
		return types.Unbonding{}, err
	}
	v.Bond = v.Bond.Sub(amount)
	if v.Status == types.VERIFIER_STATUS_ACTIVE && v.Bond.Amount.LT(params.MinVerifierBond) {
		if err := k.leaveAuditSet(ctx, operator, &v, "bond below min_verifier_bond after unbonding"); err != nil {
			return types.Unbonding{}, err
		}
	}
	return unbonding, k.Verifiers.Set(ctx, operator, v)
}

// activateVerifier puts an inactive verifier back into the audit set (MsgActivateVerifier).
func (k Keeper) activateVerifier(ctx context.Context, operator sdk.AccAddress, operatorText string) (uint64, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return 0, err
	}
	switch v.Status {
	case types.VERIFIER_STATUS_TOMBSTONED:
		return 0, errorsmod.Wrapf(types.ErrVerifierTombstoned, "%s attested to a fraudulent checkpoint and can never audit again", operatorText)
	case types.VERIFIER_STATUS_ACTIVE:
		return 0, errorsmod.Wrapf(types.ErrVerifierActive, "%s is already in the audit set", operatorText)
	}
	if v.Bond.Amount.LT(params.MinVerifierBond) {
		return 0, errorsmod.Wrapf(types.ErrVerifierBondTooLow, "the verifier bond %s is below min_verifier_bond %s%s; bond %s%s more",
			v.Bond, params.MinVerifierBond, params.BondDenom, params.MinVerifierBond.Sub(v.Bond.Amount), params.BondDenom)
	}
	v.Status, v.StatusReason = types.VERIFIER_STATUS_ACTIVE, ""
	if err := k.Verifiers.Set(ctx, operator, v); err != nil {
		return 0, err
	}
	return k.joinAuditSet(ctx, operator)
}

// joinAuditSet puts operator at the end of the audit set and returns its position.
func (k Keeper) joinAuditSet(ctx context.Context, operator sdk.AccAddress) (uint64, error) {
	size, err := k.auditSetSize(ctx)
	if err != nil {
		return 0, err
	}
	if err := k.AuditSet.Set(ctx, size, operator); err != nil {
		return 0, err
	}
	if err := k.AuditSetPositions.Set(ctx, operator, size); err != nil {
		return 0, err
	}
	return size, k.AuditSetSize.Set(ctx, size+1)
}

// leaveAuditSet takes operator out of the audit set: the last member moves into its
// position, so positions stay 0..size−1 and removal costs O(1). It marks v inactive (or
// leaves a tombstone as it is) and emits EventVerifierDeactivated; the caller saves v.
func (k Keeper) leaveAuditSet(ctx context.Context, operator sdk.AccAddress, v *types.Verifier, reason string) error {
	pos, err := k.AuditSetPositions.Get(ctx, operator)
	switch {
	case errors.Is(err, collections.ErrNotFound):
		// not a member (already out): nothing to move
	case err != nil:
		return err
	default:
		size, err := k.auditSetSize(ctx)
		if err != nil {
			return err
		}
		last := size - 1
		if pos != last {
			moved, err := k.AuditSet.Get(ctx, last)
			if err != nil {
				return err
			}
			if err := k.AuditSet.Set(ctx, pos, moved); err != nil {
				return err
			}
			if err := k.AuditSetPositions.Set(ctx, moved, pos); err != nil {
				return err
			}
		}
		if err := k.AuditSet.Remove(ctx, last); err != nil {
			return err
		}
		if err := k.AuditSetPositions.Remove(ctx, operator); err != nil {
			return err
		}
		if err := k.AuditSetSize.Set(ctx, last); err != nil {
			return err
		}
	}
	if v.Status == types.VERIFIER_STATUS_ACTIVE {
		v.Status = types.VERIFIER_STATUS_INACTIVE
	}
	v.StatusReason = reason
	return keeperutil.Emit(ctx, &types.EventVerifierDeactivated{Operator: v.Operator, Reason: reason})
}

func (k Keeper) auditSetSize(ctx context.Context) (uint64, error) {
	size, err := k.AuditSetSize.Get(ctx)
	if errors.Is(err, collections.ErrNotFound) {
		return 0, nil
	}
	return size, err
}

// AuditSetLen is how many verifiers the audit set holds.
func (k Keeper) AuditSetLen(ctx context.Context) (uint64, error) { return k.auditSetSize(ctx) }

// DrawVerifiers draws up to k distinct members of the audit set with types.DrawPositions
// from seed, skipping the operator exclude (the checkpoint's provider, if it is also a
// verifier). It reads at most MaxDrawAttempts(k) positions, never the whole set.
// Anyone can repeat the draw from the seed and the set (the Verifiers query with
// active_only lists it in position order).
func (k Keeper) DrawVerifiers(ctx context.Context, seed []byte, count uint32, exclude string) ([]string, error) {
	size, err := k.auditSetSize(ctx)
	if err != nil {
		return nil, err
	}
	var excluded sdk.AccAddress
	if exclude != "" {
		if excluded, err = k.addressCodec.StringToBytes(exclude); err != nil {
			return nil, err
		}
	}
	members := map[uint64]sdk.AccAddress{}
	positions, err := types.DrawPositions(seed, size, count, func(pos uint64) (bool, error) {
		addr, err := k.AuditSet.Get(ctx, pos)
		if err != nil {
			return false, err
		}
		members[pos] = addr
		return excluded != nil && addr.Equals(excluded), nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(positions))
	for _, pos := range positions {
		text, err := k.addressCodec.BytesToString(members[pos])
		if err != nil {
			return nil, err
		}
		out = append(out, text)
	}
	return out, nil
}

// SlashVerifier slashes an auditor for an attestation made at infractionHeight:
// floor(fraction × bond) and floor(fraction × amount) of each verifier unbonding entry
// begun at or after that height. The amount goes to recipientModule, or to the community
// pool when recipientModule is empty. The record counts the slash.
func (k Keeper) SlashVerifier(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, infractionHeight int64,
	reason, recipientModule string,
) (sdk.Coin, error) {
	if err := checkSlash(fraction, reason, recipientModule); err != nil {
		return sdk.Coin{}, err
	}
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return sdk.Coin{}, err
	}
	fromBond := fraction.MulInt(v.Bond.Amount).TruncateInt()
	fromUnbonding, err := k.slashUnbondings(ctx, operator, types.UNBONDING_ROLE_VERIFIER, fraction, infractionHeight)
	if err != nil {
		return sdk.Coin{}, err
	}
	total := sdk.NewCoin(v.Bond.Denom, fromBond.Add(fromUnbonding))
	if total.IsPositive() {
		if recipientModule == "" {
			err = k.distrKeeper.FundCommunityPool(ctx, sdk.NewCoins(total), k.moduleAddress)
		} else {
			err = k.bankKeeper.SendCoinsFromModuleToModule(ctx, types.ModuleName, recipientModule, sdk.NewCoins(total))
		}
		if err != nil {
			return sdk.Coin{}, err
		}
	}
	v.Bond.Amount = v.Bond.Amount.Sub(fromBond)
	v.Record.Slashes++
	if err := k.Verifiers.Set(ctx, operator, v); err != nil {
		return sdk.Coin{}, err
	}
	return total, keeperutil.Emit(ctx, &types.EventVerifierSlashed{
		Operator: v.Operator, Reason: reason, Fraction: fraction.String(), Amount: total,
		FromUnbonding: sdk.NewCoin(total.Denom, fromUnbonding), InfractionHeight: infractionHeight, RecipientModule: recipientModule,
	})
}

// DeactivateVerifier takes a verifier out of the audit set until it sends
// MsgActivateVerifier (after a missed assignment: a dead auditor must not keep being
// drawn and leave checkpoints unaudited). Deactivating an inactive or tombstoned
// verifier changes nothing.
func (k Keeper) DeactivateVerifier(ctx context.Context, operator sdk.AccAddress, reason string) error {
	if reason == "" {
		return errorsmod.Wrap(types.ErrInvalidReason, "deactivating needs a reason")
	}
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return err
	}
	if v.Status != types.VERIFIER_STATUS_ACTIVE {
		return nil
	}
	if err := k.leaveAuditSet(ctx, operator, &v, reason); err != nil {
		return err
	}
	return k.Verifiers.Set(ctx, operator, v)
}

// TombstoneVerifier bans a verifier for good (it attested to a proven fraud): out of the
// audit set, never to be activated again. Tombstoning twice changes nothing.
func (k Keeper) TombstoneVerifier(ctx context.Context, operator sdk.AccAddress, reason string) error {
	if reason == "" {
		return errorsmod.Wrap(types.ErrInvalidReason, "tombstoning needs a reason")
	}
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return err
	}
	if v.Status == types.VERIFIER_STATUS_TOMBSTONED {
		return nil
	}
	if v.Status == types.VERIFIER_STATUS_ACTIVE {
		if err := k.leaveAuditSet(ctx, operator, &v, reason); err != nil {
			return err
		}
	}
	v.Status, v.StatusReason = types.VERIFIER_STATUS_TOMBSTONED, reason
	if err := k.Verifiers.Set(ctx, operator, v); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventVerifierTombstoned{Operator: v.Operator, Reason: reason})
}

// RecordAudit counts one audit outcome in a verifier's record.
func (k Keeper) RecordAudit(ctx context.Context, operator sdk.AccAddress, outcome types.AuditOutcome) error {
	v, err := k.GetVerifier(ctx, operator)
	if err != nil {
		return err
	}
	switch outcome {
	case types.AuditAssigned:
		v.Record.Assigned++
	case types.AuditAttested:
		v.Record.Attested++
	case types.AuditChallenged:
		v.Record.Challenged++
	case types.AuditReported:
		v.Record.Reported++
	case types.AuditMissed:
		v.Record.Missed++
	default:
		return errorsmod.Wrapf(types.ErrInvalidReason, "unknown audit outcome %s", outcome)
	}
	if err := k.Verifiers.Set(ctx, operator, v); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventAuditRecorded{Operator: v.Operator, Outcome: outcome.String(), Record: v.Record})
}
