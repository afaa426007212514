package keeper

import (
	"context"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// msgServer is the x/stakingext Msg service. Every handler has one shape: parse the
// message's addresses (keeperutil.ParseAddressCanonical: records and events carry the
// canonical text), call the keeper method that checks the message against state and
// applies it, and answer with keeperutil.Respond (the response and the message's typed
// event). The keeper methods validate the whole message against current state before
// their first write or transfer, so a rejected message changes nothing even outside a
// transaction's cache.
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
	return keeperutil.Respond(ctx, &types.MsgRegisterProviderResponse{}, &types.EventProviderRegistered{
		Operator: operatorText, Moniker: provider.Moniker, Endpoint: provider.Endpoint, Gpus: provider.Gpus, Bond: provider.Bond,
	})
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
	return keeperutil.Respond(ctx, &types.MsgUpdateProviderResponse{}, &types.EventProviderUpdated{
		Operator: operatorText, Moniker: provider.Moniker, Endpoint: provider.Endpoint, Region: provider.Region, Gpus: provider.Gpus,
	})
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
	return keeperutil.Respond(ctx, &types.MsgBondResponse{}, &types.EventBonded{Operator: operatorText, Amount: msg.Amount, Bond: provider.Bond})
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
	return keeperutil.Respond(ctx, &types.MsgUnbondResponse{UnbondingId: unbonding.Id}, &types.EventUnbondingStarted{
		UnbondingId: unbonding.Id, Operator: operatorText, Amount: unbonding.Amount, CompletionTime: unbonding.CompletionTime,
		Role: unbonding.Role, CompletionHeight: unbonding.CompletionHeight,
	})
}

func (s msgServer) Unjail(ctx context.Context, msg *types.MsgUnjail) (*types.MsgUnjailResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	if err := s.k.unjail(ctx, operator, operatorText); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgUnjailResponse{}, &types.EventProviderUnjailed{Operator: operatorText})
}

func (s msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if err := s.k.updateParams(ctx, msg); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgUpdateParamsResponse{}, &types.EventParamsUpdated{Params: msg.Params})
}

func (s msgServer) RegisterVerifier(ctx context.Context, msg *types.MsgRegisterVerifier) (*types.MsgRegisterVerifierResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	v, pos, err := s.k.registerVerifier(ctx, operator, operatorText, msg.Bond)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgRegisterVerifierResponse{}, &types.EventVerifierRegistered{Operator: operatorText, Bond: v.Bond, Position: pos})
}

func (s msgServer) BondVerifier(ctx context.Context, msg *types.MsgBondVerifier) (*types.MsgBondVerifierResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	v, err := s.k.bondVerifier(ctx, operator, operatorText, msg.Amount)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgBondVerifierResponse{}, &types.EventVerifierBonded{Operator: operatorText, Amount: msg.Amount, Bond: v.Bond})
}

func (s msgServer) UnbondVerifier(ctx context.Context, msg *types.MsgUnbondVerifier) (*types.MsgUnbondVerifierResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	unbonding, err := s.k.unbondVerifier(ctx, operator, operatorText, msg.Amount)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgUnbondVerifierResponse{UnbondingId: unbonding.Id}, &types.EventUnbondingStarted{
		UnbondingId: unbonding.Id, Operator: operatorText, Amount: unbonding.Amount, CompletionTime: unbonding.CompletionTime,
		Role: unbonding.Role, CompletionHeight: unbonding.CompletionHeight,
	})
}

func (s msgServer) ActivateVerifier(ctx context.Context, msg *types.MsgActivateVerifier) (*types.MsgActivateVerifierResponse, error) {
	operator, operatorText, err := keeperutil.ParseAddressCanonical(s.k.addressCodec, "operator", msg.Operator)
	if err != nil {
		return nil, err
	}
	pos, err := s.k.activateVerifier(ctx, operator, operatorText)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgActivateVerifierResponse{}, &types.EventVerifierActivated{Operator: operatorText, Position: pos})
}
