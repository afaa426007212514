package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/verify/types"
)

type msgServer struct {
	Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/verify Msg service. Handlers validate everything before
// their first write or transfer, so a rejected message changes nothing.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{Keeper: k} }

func (m msgServer) SubmitCheckpoint(ctx context.Context, msg *types.MsgSubmitCheckpoint) (*types.MsgSubmitCheckpointResponse, error) {
	return &types.MsgSubmitCheckpointResponse{}, m.submitCheckpoint(sdk.UnwrapSDKContext(ctx), msg)
}

func (m msgServer) Challenge(ctx context.Context, msg *types.MsgChallenge) (*types.MsgChallengeResponse, error) {
	id, err := m.openChallenge(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgChallengeResponse{ChallengeId: id}, nil
}

func (m msgServer) RevealHash(ctx context.Context, msg *types.MsgRevealHash) (*types.MsgRevealHashResponse, error) {
	return &types.MsgRevealHashResponse{}, m.revealHash(sdk.UnwrapSDKContext(ctx), msg)
}

func (m msgServer) Respond(ctx context.Context, msg *types.MsgRespond) (*types.MsgRespondResponse, error) {
	agreed, err := m.respond(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgRespondResponse{Agreed: agreed}, nil
}

func (m msgServer) Step(ctx context.Context, msg *types.MsgStep) (*types.MsgStepResponse, error) {
	outcome, err := m.executeStep(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgStepResponse{Outcome: outcome}, nil
}

func (m msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if msg.Authority != m.authority {
		return nil, errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", m.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidParams, "%s", err)
	}
	if err := m.Params.Set(ctx, msg.Params); err != nil {
		return nil, err
	}
	return &types.MsgUpdateParamsResponse{}, sdk.UnwrapSDKContext(ctx).EventManager().EmitTypedEvent(&types.EventParamsUpdated{Params: msg.Params})
}
