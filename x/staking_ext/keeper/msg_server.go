package keeper

import (
	"context"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// msgServer is the x/stakingext Msg service. Every handler has one shape: parse the
// message's addresses (keeperutil.ParseAddressCanonical: records and events carry the
// canonical text), call the keeper method that checks the message against state and
// applies it, emit the message's typed event (keeperutil.Emit) and answer. The keeper
// methods validate the whole message against current state before their first write or
// transfer, so a rejected message changes nothing even outside a transaction's cache.
type msgServer struct {
	k Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/stakingext Msg service.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{k: k} }

func (s msgServer) RegisterProvider(ctx context.Context, msg *types.MsgRegisterProvider) (*types.MsgRegisterProviderResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	provider, err := s.k.registerProvider(ctx, operator, operatorText, msg)
	if err != nil {
		return nil, err
	}
	if err := keeperutil.Emit(ctx, &types.EventProviderRegistered{
		Operator: operatorText, Moniker: provider.Moniker, Endpoint: provider.Endpoint, Gpus: provider.Gpus, Bond: provider.Bond,
	}); err != nil {
		return nil, err
	}
	return &types.MsgRegisterProviderResponse{}, nil
}

func (s msgServer) UpdateProvider(ctx context.Context, msg *types.MsgUpdateProvider) (*types.MsgUpdateProviderResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	provider, err := s.k.updateProvider(ctx, operator, operatorText, msg)
	if err != nil {
		return nil, err
	}
	if err := keeperutil.Emit(ctx, &types.EventProviderUpdated{
		Operator: operatorText, Moniker: provider.Moniker, Endpoint: provider.Endpoint, Region: provider.Region, Gpus: provider.Gpus,
	}); err != nil {
		return nil, err
	}
	return &types.MsgUpdateProviderResponse{}, nil
}

func (s msgServer) Bond(ctx context.Context, msg *types.MsgBond) (*types.MsgBondResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	provider, err := s.k.bond(ctx, operator, operatorText, msg.Amount)
	if err != nil {
		return nil, err
	}
	if err := keeperutil.Emit(ctx, &types.EventBonded{Operator: operatorText, Amount: msg.Amount, Bond: provider.Bond}); err != nil {
		return nil, err
	}
	return &types.MsgBondResponse{}, nil
}

func (s msgServer) Unbond(ctx context.Context, msg *types.MsgUnbond) (*types.MsgUnbondResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	unbonding, err := s.k.unbond(ctx, operator, operatorText, msg.Amount)
	if err != nil {
		return nil, err
	}
	if err := keeperutil.Emit(ctx, &types.EventUnbondingStarted{
		UnbondingId: unbonding.Id, Operator: operatorText, Amount: unbonding.Amount, CompletionTime: unbonding.CompletionTime,
	}); err != nil {
		return nil, err
	}
	return &types.MsgUnbondResponse{UnbondingId: unbonding.Id}, nil
}

func (s msgServer) Unjail(ctx context.Context, msg *types.MsgUnjail) (*types.MsgUnjailResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	if err := s.k.unjail(ctx, operator, operatorText); err != nil {
		return nil, err
	}
	if err := keeperutil.Emit(ctx, &types.EventProviderUnjailed{Operator: operatorText}); err != nil {
		return nil, err
	}
	return &types.MsgUnjailResponse{}, nil
}

func (s msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if err := s.k.updateParams(ctx, msg); err != nil {
		return nil, err
	}
	if err := keeperutil.Emit(ctx, &types.EventParamsUpdated{Params: msg.Params}); err != nil {
		return nil, err
	}
	return &types.MsgUpdateParamsResponse{}, nil
}
