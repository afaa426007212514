package keeper

import (
	"context"
	"time"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// registerProvider creates a provider record and moves its initial bond into the module
// account (MsgRegisterProvider). operatorText is the operator's canonical address.
func (k Keeper) registerProvider(ctx context.Context, operator sdk.AccAddress, operatorText string, msg *types.MsgRegisterProvider) (types.Provider, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidateDescription(msg.Moniker, msg.Endpoint, msg.Region); err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidateGPUs(msg.Gpus, params.MaxGpuClasses); err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidatePositiveAmount("bond", msg.Bond, params.BondDenom); err != nil {
		return types.Provider{}, err
	}
	provider := types.Provider{
		Operator:         operatorText,
		Moniker:          msg.Moniker,
		Endpoint:         msg.Endpoint,
		Region:           msg.Region,
		Gpus:             msg.Gpus,
		Bond:             msg.Bond,
		Locked:           sdk.NewCoin(params.BondDenom, math.ZeroInt()),
		Status:           types.PROVIDER_STATUS_ACTIVE,
		RegisteredHeight: sdk.UnwrapSDKContext(ctx).BlockHeight(),
	}
	if required := params.RequiredBond(provider.TotalGPUs()); msg.Bond.IsLT(required) {
		return types.Provider{}, errorsmod.Wrapf(types.ErrBondBelowMinimum, "bond %s is below the %s that %d GPUs need (min_bond_per_gpu is %s%s)",
			msg.Bond, required, provider.TotalGPUs(), params.MinBondPerGpu, params.BondDenom)
	}
	exists, err := k.Providers.Has(ctx, operator)
	if err != nil {
		return types.Provider{}, err
	}
	if exists {
		return types.Provider{}, errorsmod.Wrapf(types.ErrProviderExists, "%s is already a provider; use update-provider and bond instead", operatorText)
	}

	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, operator, types.ModuleName, sdk.NewCoins(msg.Bond)); err != nil {
		return types.Provider{}, err
	}
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return types.Provider{}, err
	}
	return provider, nil
}

// updateProvider replaces the descriptive fields and the GPU inventory
// (MsgUpdateProvider). It does not check the bond against the new inventory: a provider
// that adds GPUs without bonding more simply fails CheckCanBid until it does.
func (k Keeper) updateProvider(ctx context.Context, operator sdk.AccAddress, operatorText string, msg *types.MsgUpdateProvider) (types.Provider, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidateDescription(msg.Moniker, msg.Endpoint, msg.Region); err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidateGPUs(msg.Gpus, params.MaxGpuClasses); err != nil {
		return types.Provider{}, err
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return types.Provider{}, err
	}
	if provider.Status == types.PROVIDER_STATUS_TOMBSTONED {
		return types.Provider{}, errorsmod.Wrapf(types.ErrTombstoned, "%s is tombstoned and can no longer change its record", operatorText)
	}

	provider.Moniker, provider.Endpoint, provider.Region, provider.Gpus = msg.Moniker, msg.Endpoint, msg.Region, msg.Gpus
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return types.Provider{}, err
	}
	return provider, nil
}

// bond adds stake to a registered provider (MsgBond). Jailed providers may bond (to get
// back above the minimum before unjailing); tombstoned ones may not, as they can never
// bid again.
func (k Keeper) bond(ctx context.Context, operator sdk.AccAddress, operatorText string, amount sdk.Coin) (types.Provider, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Provider{}, err
	}
	if err := types.ValidatePositiveAmount("amount", amount, params.BondDenom); err != nil {
		return types.Provider{}, err
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return types.Provider{}, err
	}
	if provider.Status == types.PROVIDER_STATUS_TOMBSTONED {
		return types.Provider{}, errorsmod.Wrapf(types.ErrTombstoned, "%s is tombstoned and can never bid again; bonding more would only lock funds", operatorText)
	}

	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, operator, types.ModuleName, sdk.NewCoins(amount)); err != nil {
		return types.Provider{}, err
	}
	provider.Bond = provider.Bond.Add(amount)
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return types.Provider{}, err
	}
	return provider, nil
}

// unbond queues free bond for return once unbonding_period and unbonding_blocks have
// passed (MsgUnbond). Until then a fraud slash for a checkpoint committed at or before
// the unbonding's height reaches it (SlashInfraction). Only
// free bond (bond − locked) can leave, so collateral backing leases and disputes stays.
// A provider may unbond below min_bond_per_gpu × GPUs; it stays registered but
// CheckCanBid rejects it until it bonds again. Tombstoned and jailed providers may
// unbond their free bond too: tombstoning bans, it does not confiscate beyond the slash
// that came with it.
func (k Keeper) unbond(ctx context.Context, operator sdk.AccAddress, operatorText string, amount sdk.Coin) (types.Unbonding, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Unbonding{}, err
	}
	if err := types.ValidatePositiveAmount("amount", amount, params.BondDenom); err != nil {
		return types.Unbonding{}, err
	}
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return types.Unbonding{}, err
	}
	if free := provider.FreeBond(); free.IsLT(amount) {
		return types.Unbonding{}, errorsmod.Wrapf(types.ErrInsufficientFreeBond, "cannot unbond %s: free bond is %s (bond %s, locked %s)",
			amount, free, provider.Bond, provider.Locked)
	}
	unbonding, err := k.queueUnbonding(ctx, params, operator, operatorText, amount, types.UNBONDING_ROLE_PROVIDER)
	if err != nil {
		return types.Unbonding{}, err
	}
	provider.Bond = provider.Bond.Sub(amount)
	if err := k.Providers.Set(ctx, operator, provider); err != nil {
		return types.Unbonding{}, err
	}
	return unbonding, nil
}

// queueUnbonding checks that operator may start one more unbonding of amount and queues
// it: paid out at block time + unbonding_period, but not before creation height +
// unbonding_blocks, and slashable for infractions of role committed up to its creation
// height until then. The caller has checked that the role's bond covers amount and
// takes it off that bond.
func (k Keeper) queueUnbonding(ctx context.Context, params types.Params, operator sdk.AccAddress, operatorText string,
	amount sdk.Coin, role types.UnbondingRole,
) (types.Unbonding, error) {
	if k.bankKeeper.BlockedAddr(operator) {
		return types.Unbonding{}, errorsmod.Wrapf(types.ErrBlockedRecipient, "%s may not receive funds, so its unbonding could never be paid out", operatorText)
	}
	entries, err := k.countUnbondings(ctx, operator, params.MaxUnbondingEntries)
	if err != nil {
		return types.Unbonding{}, err
	}
	if entries >= params.MaxUnbondingEntries {
		return types.Unbonding{}, errorsmod.Wrapf(types.ErrTooManyUnbondings, "%s already has %d unbonding entries (max_unbonding_entries); wait for one to complete",
			operatorText, entries)
	}
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	completion := sdkCtx.BlockTime().Add(params.UnbondingPeriod)
	if _, err := types.CompletionTimeKey(completion); err != nil {
		return types.Unbonding{}, err
	}

	id, err := k.NextUnbondingID.Next(ctx)
	if err != nil {
		return types.Unbonding{}, err
	}
	unbonding := types.Unbonding{
		Id:             id,
		Operator:       operatorText,
		Amount:         amount,
		CreationHeight: sdkCtx.BlockHeight(),
		CompletionTime: completion,
		Role:           role,
		// CompletionHeight came with consensus version 2.
		CompletionHeight: sdkCtx.BlockHeight() + int64(params.UnbondingBlocks),
	}
	if err := k.Unbondings.Set(ctx, id, unbonding); err != nil {
		return types.Unbonding{}, err
	}
	return unbonding, nil
}

// unjail re-activates a jailed provider whose jail time is over (MsgUnjail). Unjailing is
// explicit so that the operator confirms the host is back before bidding.
func (k Keeper) unjail(ctx context.Context, operator sdk.AccAddress, operatorText string) error {
	provider, err := k.GetProvider(ctx, operator)
	if err != nil {
		return err
	}
	switch provider.Status {
	case types.PROVIDER_STATUS_TOMBSTONED:
		return errorsmod.Wrapf(types.ErrTombstoned, "%s is tombstoned and can never be unjailed", operatorText)
	case types.PROVIDER_STATUS_JAILED:
	default:
		return errorsmod.Wrapf(types.ErrNotJailed, "%s is %s", operatorText, provider.Status)
	}
	if blockTime := sdk.UnwrapSDKContext(ctx).BlockTime(); blockTime.Before(provider.JailedUntil) {
		return errorsmod.Wrapf(types.ErrStillJailed, "%s is jailed until %s, block time is %s", operatorText,
			provider.JailedUntil.UTC().Format(time.RFC3339), blockTime.UTC().Format(time.RFC3339))
	}

	provider.Status = types.PROVIDER_STATUS_ACTIVE
	return k.Providers.Set(ctx, operator, provider)
}

// countUnbondings counts operator's queued unbondings, stopping at limit so
// that the cost stays bounded by the entry limit.
func (k Keeper) countUnbondings(ctx context.Context, operator sdk.AccAddress, limit uint32) (uint32, error) {
	iter, err := k.Unbondings.Indexes.Operator.MatchExact(ctx, operator)
	if err != nil {
		return 0, err
	}
	defer iter.Close()
	var count uint32
	for ; iter.Valid() && count < limit; iter.Next() {
		count++
	}
	return count, nil
}
