package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/x/market/types"
)

// CommitRound is not implemented yet (PROTO READY commit only).
func (s msgServer) CommitRound(_ context.Context, _ *types.MsgCommitRound) (*types.MsgCommitRoundResponse, error) {
	return nil, errorsmod.Wrap(types.ErrInvalidRoundCommit, "not implemented yet")
}

// CommitGlobal is not implemented yet (PROTO READY commit only).
func (s msgServer) CommitGlobal(_ context.Context, _ *types.MsgCommitGlobal) (*types.MsgCommitGlobalResponse, error) {
	return nil, errorsmod.Wrap(types.ErrInvalidRoundCommit, "not implemented yet")
}
