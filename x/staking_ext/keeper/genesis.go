package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// InitGenesis loads a genesis state after validating it. Addresses are
// stored in their canonical form. The module account must already hold
// exactly the bonds and unbondings the state records (x/bank's genesis runs
// first); a mismatch is an error, as the module would otherwise pay out
// tokens it does not have. Nothing is written unless all checks pass.
func (k Keeper) InitGenesis(ctx context.Context, gs *types.GenesisState) error {
	if err := gs.Validate(k.addressCodec); err != nil {
		return err
	}
	backed := sdk.NewCoin(gs.Params.BondDenom, math.ZeroInt())
	for _, provider := range gs.Providers {
		backed = backed.Add(provider.Bond)
	}
	for _, unbonding := range gs.Unbondings {
		backed = backed.Add(unbonding.Amount)
	}
	for _, v := range gs.Verifiers {
		backed = backed.Add(v.Bond)
	}
	if balance := k.bankKeeper.GetBalance(ctx, k.moduleAddress, gs.Params.BondDenom); !balance.IsEqual(backed) {
		return errorsmod.Wrapf(types.ErrInvalidGenesis, "the %s module account holds %s but bonds and unbondings add up to %s",
			types.ModuleName, balance, backed)
	}

	k.accountKeeper.GetModuleAccount(ctx, types.ModuleName)
	if err := k.Params.Set(ctx, gs.Params); err != nil {
		return err
	}
	for _, provider := range gs.Providers {
		operator, operatorText, err := keeperutil.ParseAddressCanonical(k.addressCodec, "provider operator", provider.Operator)
		if err != nil {
			return err
		}
		provider.Operator = operatorText
		if err := k.Providers.Set(ctx, operator, provider); err != nil {
			return err
		}
	}
	for _, lock := range gs.Locks {
		operator, operatorText, err := keeperutil.ParseAddressCanonical(k.addressCodec, "lock operator", lock.Operator)
		if err != nil {
			return err
		}
		lock.Operator = operatorText
		if err := k.Locks.Set(ctx, collections.Join(operator, lock.Ref), lock); err != nil {
			return err
		}
	}
	for _, unbonding := range gs.Unbondings {
		_, operatorText, err := keeperutil.ParseAddressCanonical(k.addressCodec, "unbonding operator", unbonding.Operator)
		if err != nil {
			return err
		}
		unbonding.Operator = operatorText
		if err := k.Unbondings.Set(ctx, unbonding.Id, unbonding); err != nil {
			return err
		}
	}
	for _, v := range gs.Verifiers {
		operator, operatorText, err := keeperutil.ParseAddressCanonical(k.addressCodec, "verifier operator", v.Operator)
		if err != nil {
			return err
		}
		v.Operator = operatorText
		if err := k.Verifiers.Set(ctx, operator, v); err != nil {
			return err
		}
	}
	for _, member := range gs.AuditSet {
		operator, err := k.addressCodec.StringToBytes(member)
		if err != nil {
			return err
		}
		if _, err := k.joinAuditSet(ctx, operator); err != nil {
			return err
		}
	}
	return k.NextUnbondingID.Set(ctx, gs.NextUnbondingId)
}

// ExportGenesis writes out the whole state, the unbonding id sequence included.
func (k Keeper) ExportGenesis(ctx context.Context) (*types.GenesisState, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	providers, err := collectValues(k.Providers.Iterate(ctx, nil))
	if err != nil {
		return nil, err
	}
	locks, err := collectValues(k.Locks.Iterate(ctx, nil))
	if err != nil {
		return nil, err
	}
	unbondings, err := collectValues(k.Unbondings.Iterate(ctx, nil))
	if err != nil {
		return nil, err
	}
	nextUnbondingID, err := k.NextUnbondingID.Peek(ctx)
	if err != nil {
		return nil, err
	}
	verifiers, err := collectValues(k.Verifiers.Iterate(ctx, nil))
	if err != nil {
		return nil, err
	}
	members, err := collectValues(k.AuditSet.Iterate(ctx, nil))
	if err != nil {
		return nil, err
	}
	auditSet := make([]string, len(members))
	for i, m := range members {
		if auditSet[i], err = k.addressCodec.BytesToString(m); err != nil {
			return nil, err
		}
	}
	return &types.GenesisState{
		Verifiers:       verifiers,
		AuditSet:        auditSet,
		Params:          params,
		Providers:       providers,
		Locks:           locks,
		Unbondings:      unbondings,
		NextUnbondingId: nextUnbondingID,
	}, nil
}

// collectValues drains an iterator into a slice; Values closes the iterator.
func collectValues[K, V any](iter collections.Iterator[K, V], err error) ([]V, error) {
	if err != nil {
		return nil, err
	}
	return iter.Values()
}
