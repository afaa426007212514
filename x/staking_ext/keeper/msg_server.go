package keeper

import (
	"bytes"
	"context"
	"time"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// msgServer handles the module's transactions. Every handler validates the
// whole message against current state before its first write or transfer, so
// a rejected message changes nothing even outside a transaction's cache.
type msgServer struct {
	k Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the Msg service implementation.
func NewMsgServerImpl(k Keeper) types.MsgServer {
	return msgServer{k: k}
}

// RegisterProvider creates a provider record and moves its initial bond into
// the module account.
func (s msgServer) RegisterProvider(ctx context.Context, msg *types.MsgRegisterProvider) (*types.MsgRegisterProviderResponse, error) {
	operator, operatorText, err := s.k.parseAddress("operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	params, err := s.k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if err := types.ValidateDescription(msg.Moniker, msg.Endpoint, msg.Region); err != nil {
		return nil, err
	}
	if err := types.ValidateGPUs(msg.Gpus, params.MaxGpuClasses); err != nil {
		return nil, err
	}
	if err := types.ValidatePositiveAmount("bond", msg.Bond, params.BondDenom); err != nil {
		return nil, err
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
		return nil, types.ErrBondBelowMinimum.Wrapf("bond %s is below the %s that %d GPUs need (min_bond_per_gpu is %s%s)",
			msg.Bond, required, provider.TotalGPUs(), params.MinBondPerGpu, params.BondDenom)
	}
	exists, err := s.k.Providers.Has(ctx, operator)
	if err != nil {
		return nil, err
	}
	if exists {
		return nil, types.ErrProviderExists.Wrapf("%s is already a provider; use update-provider and bond instead", operatorText)
	}

	if err := s.k.bankKeeper.SendCoinsFromAccountToModule(ctx, operator, types.ModuleName, sdk.NewCoins(msg.Bond)); err != nil {
		return nil, err
	}
	if err := s.k.Providers.Set(ctx, operator, provider); err != nil {
		return nil, err
	}
	return &types.MsgRegisterProviderResponse{}, emit(ctx, &types.EventProviderRegistered{
		Operator: operatorText,
		Moniker:  provider.Moniker,
		Endpoint: provider.Endpoint,
		Gpus:     provider.Gpus,
		Bond:     provider.Bond,
	})
}

// UpdateProvider replaces the descriptive fields and the GPU inventory. It
// does not check the bond against the new inventory: a provider that adds
// GPUs without bonding more simply fails CheckCanBid until it does.
func (s msgServer) UpdateProvider(ctx context.Context, msg *types.MsgUpdateProvider) (*types.MsgUpdateProviderResponse, error) {
	operator, operatorText, err := s.k.parseAddress("operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	params, err := s.k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if err := types.ValidateDescription(msg.Moniker, msg.Endpoint, msg.Region); err != nil {
		return nil, err
	}
	if err := types.ValidateGPUs(msg.Gpus, params.MaxGpuClasses); err != nil {
		return nil, err
	}
	provider, err := s.k.GetProvider(ctx, operator)
	if err != nil {
		return nil, err
	}
	if provider.Status == types.PROVIDER_STATUS_TOMBSTONED {
		return nil, types.ErrTombstoned.Wrapf("%s is tombstoned and can no longer change its record", operatorText)
	}

	provider.Moniker, provider.Endpoint, provider.Region, provider.Gpus = msg.Moniker, msg.Endpoint, msg.Region, msg.Gpus
	if err := s.k.Providers.Set(ctx, operator, provider); err != nil {
		return nil, err
	}
	return &types.MsgUpdateProviderResponse{}, emit(ctx, &types.EventProviderUpdated{
		Operator: operatorText,
		Moniker:  provider.Moniker,
		Endpoint: provider.Endpoint,
		Region:   provider.Region,
		Gpus:     provider.Gpus,
	})
}

// Bond adds stake to a registered provider. Jailed providers may bond (to
// get back above the minimum before unjailing); tombstoned ones may not, as
// they can never bid again.
func (s msgServer) Bond(ctx context.Context, msg *types.MsgBond) (*types.MsgBondResponse, error) {
	operator, operatorText, err := s.k.parseAddress("operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	params, err := s.k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if err := types.ValidatePositiveAmount("amount", msg.Amount, params.BondDenom); err != nil {
		return nil, err
	}
	provider, err := s.k.GetProvider(ctx, operator)
	if err != nil {
		return nil, err
	}
	if provider.Status == types.PROVIDER_STATUS_TOMBSTONED {
		return nil, types.ErrTombstoned.Wrapf("%s is tombstoned and can never bid again; bonding more would only lock funds", operatorText)
	}

	if err := s.k.bankKeeper.SendCoinsFromAccountToModule(ctx, operator, types.ModuleName, sdk.NewCoins(msg.Amount)); err != nil {
		return nil, err
	}
	provider.Bond = provider.Bond.Add(msg.Amount)
	if err := s.k.Providers.Set(ctx, operator, provider); err != nil {
		return nil, err
	}
	return &types.MsgBondResponse{}, emit(ctx, &types.EventBonded{Operator: operatorText, Amount: msg.Amount, Bond: provider.Bond})
}

// Unbond queues free bond for return once unbonding_period has passed. Only
// free bond (bond − locked) can leave, so collateral backing leases and
// disputes stays. A provider may unbond below min_bond_per_gpu × GPUs; it
// stays registered but CheckCanBid rejects it until it bonds again.
// Tombstoned and jailed providers may unbond their free bond too: tombstoning
// bans, it does not confiscate beyond the slash that came with it.
func (s msgServer) Unbond(ctx context.Context, msg *types.MsgUnbond) (*types.MsgUnbondResponse, error) {
	operator, operatorText, err := s.k.parseAddress("operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	params, err := s.k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if err := types.ValidatePositiveAmount("amount", msg.Amount, params.BondDenom); err != nil {
		return nil, err
	}
	provider, err := s.k.GetProvider(ctx, operator)
	if err != nil {
		return nil, err
	}
	if free := provider.FreeBond(); free.IsLT(msg.Amount) {
		return nil, types.ErrInsufficientFreeBond.Wrapf("cannot unbond %s: free bond is %s (bond %s, locked %s)",
			msg.Amount, free, provider.Bond, provider.Locked)
	}
	if s.k.bankKeeper.BlockedAddr(operator) {
		return nil, types.ErrBlockedRecipient.Wrapf("%s may not receive funds, so its unbonding could never be paid out", operatorText)
	}
	entries, err := s.k.countUnbondings(ctx, operator, params.MaxUnbondingEntries)
	if err != nil {
		return nil, err
	}
	if entries >= params.MaxUnbondingEntries {
		return nil, types.ErrTooManyUnbondings.Wrapf("%s already has %d unbonding entries (max_unbonding_entries); wait for one to complete",
			operatorText, entries)
	}
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	completion := sdkCtx.BlockTime().Add(params.UnbondingPeriod)
	if _, err := types.CompletionTimeKey(completion); err != nil {
		return nil, err
	}

	id, err := s.k.NextUnbondingID.Next(ctx)
	if err != nil {
		return nil, err
	}
	unbonding := types.Unbonding{
		Id:             id,
		Operator:       operatorText,
		Amount:         msg.Amount,
		CreationHeight: sdkCtx.BlockHeight(),
		CompletionTime: completion,
	}
	if err := s.k.Unbondings.Set(ctx, id, unbonding); err != nil {
		return nil, err
	}
	provider.Bond = provider.Bond.Sub(msg.Amount)
	if err := s.k.Providers.Set(ctx, operator, provider); err != nil {
		return nil, err
	}
	return &types.MsgUnbondResponse{UnbondingId: id}, emit(ctx, &types.EventUnbondingStarted{
		UnbondingId:    id,
		Operator:       operatorText,
		Amount:         msg.Amount,
		CompletionTime: completion,
	})
}

// Unjail re-activates a jailed provider whose jail time is over. Unjailing is
// explicit so that the operator confirms the host is back before bidding.
func (s msgServer) Unjail(ctx context.Context, msg *types.MsgUnjail) (*types.MsgUnjailResponse, error) {
	operator, operatorText, err := s.k.parseAddress("operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	provider, err := s.k.GetProvider(ctx, operator)
	if err != nil {
		return nil, err
	}
	switch provider.Status {
	case types.PROVIDER_STATUS_TOMBSTONED:
		return nil, types.ErrTombstoned.Wrapf("%s is tombstoned and can never be unjailed", operatorText)
	case types.PROVIDER_STATUS_JAILED:
	default:
		return nil, types.ErrNotJailed.Wrapf("%s is %s", operatorText, provider.Status)
	}
	if blockTime := sdk.UnwrapSDKContext(ctx).BlockTime(); blockTime.Before(provider.JailedUntil) {
		return nil, types.ErrStillJailed.Wrapf("%s is jailed until %s, block time is %s", operatorText,
			provider.JailedUntil.UTC().Format(time.RFC3339), blockTime.UTC().Format(time.RFC3339))
	}

	provider.Status = types.PROVIDER_STATUS_ACTIVE
	if err := s.k.Providers.Set(ctx, operator, provider); err != nil {
		return nil, err
	}
	return &types.MsgUnjailResponse{}, emit(ctx, &types.EventProviderUnjailed{Operator: operatorText})
}

// UpdateParams replaces all params; only the authority (gov) may do it. The
// bond denomination is frozen once anything is bonded, because existing
// bonds, locks and unbondings are all in it.
func (s msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	authority, err := s.k.addressCodec.StringToBytes(msg.Authority)
	if err != nil {
		return nil, types.ErrInvalidAuthority.Wrapf("authority %q is not an address: %s", msg.Authority, err)
	}
	expected, err := s.k.addressCodec.StringToBytes(s.k.authority)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(authority, expected) {
		return nil, types.ErrInvalidAuthority.Wrapf("expected %s, got %s", s.k.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return nil, err
	}
	current, err := s.k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if msg.Params.BondDenom != current.BondDenom {
		bonded, err := s.k.anythingBonded(ctx)
		if err != nil {
			return nil, err
		}
		if bonded {
			return nil, types.ErrInvalidParams.Wrapf("bond_denom cannot change from %s to %s while providers or unbondings exist",
				current.BondDenom, msg.Params.BondDenom)
		}
	}

	if err := s.k.Params.Set(ctx, msg.Params); err != nil {
		return nil, err
	}
	return &types.MsgUpdateParamsResponse{}, emit(ctx, &types.EventParamsUpdated{Params: msg.Params})
}

// parseAddress decodes an address field of a message, naming the field when
// it is invalid, and returns it with its canonical text form.
func (k Keeper) parseAddress(field, text string) (sdk.AccAddress, string, error) {
	addr, err := k.addressCodec.StringToBytes(text)
	if err != nil {
		return nil, "", sdkerrors.ErrInvalidAddress.Wrapf("%s %q: %s", field, text, err)
	}
	canonical, err := k.addressCodec.BytesToString(addr)
	if err != nil {
		return nil, "", sdkerrors.ErrInvalidAddress.Wrapf("%s %q: %s", field, text, err)
	}
	return addr, canonical, nil
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

// anythingBonded reports whether any provider or unbonding exists.
func (k Keeper) anythingBonded(ctx context.Context) (bool, error) {
	providers, err := k.Providers.Iterate(ctx, nil)
	if err != nil {
		return false, err
	}
	defer providers.Close()
	if providers.Valid() {
		return true, nil
	}
	unbondings, err := k.Unbondings.Iterate(ctx, nil)
	if err != nil {
		return false, err
	}
	defer unbondings.Close()
	return unbondings.Valid(), nil
}
