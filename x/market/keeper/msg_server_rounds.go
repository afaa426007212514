package keeper

import (
	"context"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

func (s msgServer) CommitRound(ctx context.Context, msg *types.MsgCommitRound) (*types.MsgCommitRoundResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "provider", msg.Provider); err != nil {
		return nil, err
	}
	_, id, err := s.k.commitRound(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgCommitRoundResponse{CustodyId: id}, nil
}

func (s msgServer) CommitGlobal(ctx context.Context, msg *types.MsgCommitGlobal) (*types.MsgCommitGlobalResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "provider", msg.Provider); err != nil {
		return nil, err
	}
	r, id, err := s.k.commitGlobal(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgCommitGlobalResponse{CustodyId: id, ChallengeDeadline: r.ChallengeDeadline}, nil
}
