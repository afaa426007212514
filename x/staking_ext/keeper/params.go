package keeper

import (
	"bytes"
	"context"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// updateParams replaces all params; only the authority (gov) may (MsgUpdateParams). The
// bond denomination is frozen once anything is bonded, because existing bonds, locks and
// unbondings are all in it.
func (k Keeper) updateParams(ctx context.Context, msg *types.MsgUpdateParams) error {
	authority, err := k.addressCodec.StringToBytes(msg.Authority)
	if err != nil {
		return keeperutil.WrapCause(types.ErrInvalidAuthority, err, "authority %q is not an address", msg.Authority)
	}
	expected, err := k.addressCodec.StringToBytes(k.authority)
	if err != nil {
		return err
	}
	if !bytes.Equal(authority, expected) {
		return errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", k.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return err
	}
	if source := k.slashWindow.source; source != nil {
		required, err := source.RequiredUnbondingBlocks(ctx)
		if err != nil {
			return err
		}
		if err := msg.Params.ValidateUnbondingCover(required); err != nil {
			return err
		}
	}
	current, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if msg.Params.BondDenom != current.BondDenom {
		bonded, err := k.anythingBonded(ctx)
		if err != nil {
			return err
		}
		if bonded {
			return errorsmod.Wrapf(types.ErrInvalidParams, "bond_denom cannot change from %s to %s while providers or unbondings exist",
				current.BondDenom, msg.Params.BondDenom)
		}
	}
	return k.Params.Set(ctx, msg.Params)
}

// anythingBonded reports whether any provider, verifier or unbonding exists.
func (k Keeper) anythingBonded(ctx context.Context) (bool, error) {
	providers, err := k.Providers.Iterate(ctx, nil)
	if err != nil {
		return false, err
	}
	defer providers.Close()
	if providers.Valid() {
		return true, nil
	}
	verifiers, err := k.Verifiers.Iterate(ctx, nil)
	if err != nil {
		return false, err
	}
	defer verifiers.Close()
	if verifiers.Valid() {
		return true, nil
	}
	unbondings, err := k.Unbondings.Iterate(ctx, nil)
	if err != nil {
		return false, err
	}
	defer unbondings.Close()
	return unbondings.Valid(), nil
}
