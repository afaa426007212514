package keeper

import (
	"context"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// msgServer is the x/market Msg service. Every handler has one shape: parse the
// message's addresses (keeperutil.ParseAddress), call the keeper method that checks the
// message against state and applies it, and answer with keeperutil.Respond (the
// response and the message's typed event). The keeper methods validate everything
// before their first write or transfer, so a rejected message leaves state and balances
// exactly as they were.
type msgServer struct {
	k Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/market Msg service.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{k: k} }

func (s msgServer) SubmitJob(ctx context.Context, msg *types.MsgSubmitJob) (*types.MsgSubmitJobResponse, error) {
	owner, err := keeperutil.ParseAddress(s.k.addressCodec, "owner", msg.Owner)
	if err != nil {
		return nil, err
	}
	job, err := s.k.submitJob(sdk.UnwrapSDKContext(ctx), owner, msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgSubmitJobResponse{JobId: job.Id}, &types.EventJobCreated{
		JobId: job.Id, Owner: msg.Owner, GpuModels: msg.Spec.Gpu.Models, MinVramGib: msg.Spec.Gpu.MinVramGib,
		GpusPerWorker: msg.Spec.Gpu.PerWorker, Workers: msg.Spec.Workers, Workload: msg.Spec.Workload.Kind,
		MaxPricePerGpuHour: msg.Spec.MaxPricePerGpuHour, BiddingDeadline: job.BiddingDeadline,
		TotalSteps: msg.Spec.TotalSteps, Deposit: msg.Deposit, DatasetId: msg.Spec.DatasetId,
	})
}

func (s msgServer) PlaceBid(ctx context.Context, msg *types.MsgPlaceBid) (*types.MsgPlaceBidResponse, error) {
	provider, err := keeperutil.ParseAddress(s.k.addressCodec, "provider", msg.Provider)
	if err != nil {
		return nil, err
	}
	bid, err := s.k.placeBid(sdk.UnwrapSDKContext(ctx), provider, msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgPlaceBidResponse{}, &types.EventBidPlaced{JobId: bid.JobId, Provider: bid.Provider, PricePerGpuHour: bid.PricePerGpuHour})
}

func (s msgServer) WithdrawBid(ctx context.Context, msg *types.MsgWithdrawBid) (*types.MsgWithdrawBidResponse, error) {
	provider, err := keeperutil.ParseAddress(s.k.addressCodec, "provider", msg.Provider)
	if err != nil {
		return nil, err
	}
	if err := s.k.withdrawBid(ctx, provider, msg); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgWithdrawBidResponse{}, &types.EventBidWithdrawn{JobId: msg.JobId, Provider: msg.Provider})
}

// CancelJob compares the sender with the job's owner as text, so it parses no address;
// closing the job emits its own events (EventLeaseClosed, EventJobClosed).
func (s msgServer) CancelJob(ctx context.Context, msg *types.MsgCancelJob) (*types.MsgCancelJobResponse, error) {
	refunded, err := s.k.cancelJob(sdk.UnwrapSDKContext(ctx), msg)
	if err != nil {
		return nil, err
	}
	return &types.MsgCancelJobResponse{Refunded: refunded}, nil
}

func (s msgServer) TopUpDeposit(ctx context.Context, msg *types.MsgTopUpDeposit) (*types.MsgTopUpDepositResponse, error) {
	depositor, err := keeperutil.ParseAddress(s.k.addressCodec, "depositor", msg.Depositor)
	if err != nil {
		return nil, err
	}
	job, err := s.k.topUpDeposit(sdk.UnwrapSDKContext(ctx), depositor, msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgTopUpDepositResponse{}, &types.EventDepositToppedUp{JobId: job.Id, Amount: msg.Amount, Escrow: job.Escrow})
}

func (s msgServer) WithdrawEarnings(ctx context.Context, msg *types.MsgWithdrawEarnings) (*types.MsgWithdrawEarningsResponse, error) {
	provider, err := keeperutil.ParseAddress(s.k.addressCodec, "provider", msg.Provider)
	if err != nil {
		return nil, err
	}
	total, paidIDs, err := s.k.withdrawEarnings(ctx, provider, msg)
	if err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgWithdrawEarningsResponse{Amount: total}, &types.EventEarningsWithdrawn{Provider: msg.Provider, LeaseIds: paidIDs, Amount: total})
}

func (s msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if err := s.k.updateParams(ctx, msg); err != nil {
		return nil, err
	}
	return keeperutil.Respond(ctx, &types.MsgUpdateParamsResponse{}, &types.EventParamsUpdated{Params: msg.Params})
}
