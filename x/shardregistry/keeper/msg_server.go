package keeper

import (
	"context"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// msgServer is the x/shardregistry Msg service. Every handler has one shape: parse the
// message's addresses (keeperutil.ParseAddress), call the keeper method that checks the
// message against state and applies it, and answer with keeperutil.Respond (the
// response and the message's typed event). The keeper methods validate everything
// before their first write, so a rejected message leaves state and balances exactly as
// they were. Where a message's event must come before the events of what follows it
// (releasing a replica reopens its slot, declaring a fault terminates it), the keeper
// emits it in place.
type msgServer struct {
	k Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/shardregistry Msg service.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{k: k} }

func (s msgServer) RegisterDataset(ctx context.Context, msg *types.MsgRegisterDataset) (*types.MsgRegisterDatasetResponse, error) {
	if _, err := keeperutil.ParseAddress(s.k.addressCodec, "owner", msg.Owner); err != nil {
		return nil, err
	}
	d, err := s.k.registerDataset(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgRegisterDatasetResponse{DatasetId: d.Id}, &types.EventDatasetRegistered{
		DatasetId: d.Id, Owner: d.Owner, Name: d.Name, ManifestRoot: d.ManifestRoot, Encoding: d.Encoding,
		ChunkSize: d.ChunkSize, TotalSize: d.TotalSize, ShardCount: d.ShardCount, SampleCount: d.SampleCount,
	})
}

func (s msgServer) ClaimReplica(ctx context.Context, msg *types.MsgClaimReplica) (*types.MsgClaimReplicaResponse, error) {
	holder, err := keeperutil.ParseAddress(s.k.addressCodec, "holder", msg.Holder)
	if err != nil {
		return nil, err
	}
	r, d, piece, holders, err := s.k.claimReplica(sdk.UnwrapSDKContext(ctx), holder, msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgClaimReplicaResponse{ReplicaId: r.Id, NextDeadline: r.NextDeadline}, &types.EventReplicaClaimed{
		ReplicaId: r.Id, DatasetId: d.Id, Shard: r.Shard, Piece: r.Piece, Holder: r.Holder,
		PieceCid: types.PieceCID(piece.Root), Collateral: r.Collateral, LiveHolders: holders,
		RequiredHolders: d.Encoding.HoldersPerPiece(), NextPeriod: r.NextPeriod, NextDeadline: r.NextDeadline,
	})
}

// ReleaseReplica compares the sender with the replica's holder as text, so it parses no
// address; the keeper emits EventReplicaReleased (see msgServer).
func (s msgServer) ReleaseReplica(ctx context.Context, msg *types.MsgReleaseReplica) (*types.MsgReleaseReplicaResponse, error) {
	unlocked, err := s.k.releaseReplica(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgReleaseReplicaResponse{CollateralUnlocked: unlocked}, nil
}

// DeclareFault compares the sender with the replica's holder as text, so it parses no
// address; the keeper emits EventFaultDeclared (see msgServer).
func (s msgServer) DeclareFault(ctx context.Context, msg *types.MsgDeclareFault) (*types.MsgDeclareFaultResponse, error) {
	slashed, err := s.k.declareFault(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgDeclareFaultResponse{Slashed: slashed}, nil
}

// SubmitStorageProof compares the sender with the replica's holder as text, so it
// parses no address.
func (s msgServer) SubmitStorageProof(ctx context.Context, msg *types.MsgSubmitStorageProof) (*types.MsgSubmitStorageProofResponse, error) {
	r, proven, err := s.k.submitStorageProof(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgSubmitStorageProofResponse{NextPeriod: r.NextPeriod, NextDeadline: r.NextDeadline}, &types.EventStorageProofAccepted{
		ReplicaId: r.Id, Holder: r.Holder, Period: proven, NextPeriod: r.NextPeriod, NextDeadline: r.NextDeadline,
	})
}

func (s msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if err := s.k.updateParams(ctx, msg); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgUpdateParamsResponse{}, &types.EventParamsUpdated{Params: msg.Params})
}
