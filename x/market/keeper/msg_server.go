package keeper

import (
	"context"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/market/types"
)

type msgServer struct {
	Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/market Msg service.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{Keeper: k} }

// Every handler validates everything before its first write or transfer, so a
// rejected message leaves state and balances exactly as they were.

func (m msgServer) SubmitJob(ctx context.Context, msg *types.MsgSubmitJob) (*types.MsgSubmitJobResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	owner, err := m.addressCodec.StringToBytes(msg.Owner)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidSpec, "owner: invalid address %q", msg.Owner)
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if err := msg.Spec.ValidateWithParams(params); err != nil {
		return nil, err
	}
	if err := validateDeposit(msg.Deposit, params); err != nil {
		return nil, err
	}
	if err := m.bankKeeper.SendCoinsFromAccountToModule(ctx, owner, types.ModuleName, sdk.NewCoins(msg.Deposit)); err != nil {
		return nil, errorsmod.Wrapf(err, "escrowing deposit %s", msg.Deposit)
	}
	id, err := m.NextJobID.Next(ctx)
	if err != nil {
		return nil, err
	}
	job := types.Job{
		Id:            id,
		Owner:         msg.Owner,
		Spec:          msg.Spec,
		CreatedHeight: sdkCtx.BlockHeight(),
		Seed:          m.jobSeed(sdkCtx, id),
		Escrow:        msg.Deposit,
		Deposited:     msg.Deposit,
	}
	if err := m.openAuction(sdkCtx, &job, nil); err != nil {
		return nil, err
	}
	if err := sdkCtx.EventManager().EmitTypedEvent(&types.EventJobCreated{
		JobId: id, Owner: msg.Owner, GpuModels: msg.Spec.Gpu.Models, MinVramGib: msg.Spec.Gpu.MinVramGib,
		GpusPerWorker: msg.Spec.Gpu.PerWorker, Workers: msg.Spec.Workers, Workload: msg.Spec.Workload.Kind,
		MaxPricePerGpuHour: msg.Spec.MaxPricePerGpuHour, BiddingDeadline: job.BiddingDeadline,
		TotalSteps: msg.Spec.TotalSteps, Deposit: msg.Deposit, DatasetId: msg.Spec.DatasetId,
	}); err != nil {
		return nil, err
	}
	return &types.MsgSubmitJobResponse{JobId: id}, nil
}

func validateDeposit(c sdk.Coin, params types.Params) error {
	if !c.IsValid() || !c.IsPositive() {
		return errorsmod.Wrapf(types.ErrInvalidDeposit, "deposit must be a positive coin, got %s", c)
	}
	if c.Denom != params.Denom {
		return errorsmod.Wrapf(types.ErrInvalidDeposit, "deposit must be in %s, got %s", params.Denom, c.Denom)
	}
	if c.IsLT(params.MinDeposit) {
		return errorsmod.Wrapf(types.ErrInvalidDeposit, "deposit %s is below the minimum %s", c, params.MinDeposit)
	}
	return nil
}

func (m msgServer) PlaceBid(ctx context.Context, msg *types.MsgPlaceBid) (*types.MsgPlaceBidResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	provider, err := m.addressCodec.StringToBytes(msg.Provider)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "provider: invalid address %q", msg.Provider)
	}
	job, err := m.GetJob(ctx, msg.JobId)
	if err != nil {
		return nil, err
	}
	if job.State != types.JOB_STATE_OPEN {
		return nil, errorsmod.Wrapf(types.ErrJobNotOpen, "job %d is %s", job.Id, job.State)
	}
	if sdkCtx.BlockHeight() > job.BiddingDeadline {
		return nil, errorsmod.Wrapf(types.ErrBiddingClosed, "job %d closed bidding at height %d", job.Id, job.BiddingDeadline)
	}
	price := msg.PricePerGpuHour
	if !price.IsValid() || !price.IsPositive() || price.Denom != job.Spec.MaxPricePerGpuHour.Denom {
		return nil, errorsmod.Wrapf(types.ErrInvalidPrice, "price must be a positive amount of %s, got %s", job.Spec.MaxPricePerGpuHour.Denom, price)
	}
	if job.Spec.MaxPricePerGpuHour.IsLT(price) {
		return nil, errorsmod.Wrapf(types.ErrBidAboveMax, "bid %s per GPU-hour exceeds job %d's maximum %s", price, job.Id, job.Spec.MaxPricePerGpuHour)
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	collateral := sdk.NewCoin(params.Denom, job.Spec.RequiredCollateral(params))
	p, err := m.providerKeeper.CheckCanBid(ctx, provider, collateral)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "%s", err)
	}
	if !p.Satisfies(job.Spec.Gpu.Models, job.Spec.MinVRAMMiB(), job.Spec.Gpu.PerWorker) {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible,
			"provider %s has no GPU class with %d GPUs of models %v and at least %d GiB VRAM",
			msg.Provider, job.Spec.Gpu.PerWorker, job.Spec.Gpu.Models, job.Spec.Gpu.MinVramGib)
	}
	active, err := m.ActiveLeases(sdkCtx, job.Id)
	if err != nil {
		return nil, err
	}
	for _, l := range active {
		if l.Provider == msg.Provider {
			return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "provider %s already serves worker %d of job %d", msg.Provider, l.Worker, job.Id)
		}
	}
	key := collections.Join(job.Id, []byte(provider))
	existing, err := m.Bids.Has(ctx, key)
	if err != nil {
		return nil, err
	}
	if !existing {
		bids, err := m.bidsOfJob(sdkCtx, job.Id)
		if err != nil {
			return nil, err
		}
		if len(bids) >= int(params.MaxBidsPerJob) {
			return nil, errorsmod.Wrapf(types.ErrTooManyBids, "job %d already has %d bids", job.Id, len(bids))
		}
	}
	seq, err := m.NextBidSequence.Next(ctx)
	if err != nil {
		return nil, err
	}
	bid := types.Bid{JobId: job.Id, Provider: msg.Provider, PricePerGpuHour: price, CreatedHeight: sdkCtx.BlockHeight(), Sequence: seq}
	if err := m.Bids.Set(ctx, key, bid); err != nil {
		return nil, err
	}
	if err := sdkCtx.EventManager().EmitTypedEvent(&types.EventBidPlaced{JobId: job.Id, Provider: msg.Provider, PricePerGpuHour: price}); err != nil {
		return nil, err
	}
	return &types.MsgPlaceBidResponse{}, nil
}

func (m msgServer) WithdrawBid(ctx context.Context, msg *types.MsgWithdrawBid) (*types.MsgWithdrawBidResponse, error) {
	provider, err := m.addressCodec.StringToBytes(msg.Provider)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrBidNotFound, "provider: invalid address %q", msg.Provider)
	}
	key := collections.Join(msg.JobId, []byte(provider))
	has, err := m.Bids.Has(ctx, key)
	if err != nil {
		return nil, err
	}
	if !has {
		return nil, errorsmod.Wrapf(types.ErrBidNotFound, "provider %s has no bid on job %d", msg.Provider, msg.JobId)
	}
	if err := m.Bids.Remove(ctx, key); err != nil {
		return nil, err
	}
	if err := sdk.UnwrapSDKContext(ctx).EventManager().EmitTypedEvent(&types.EventBidWithdrawn{JobId: msg.JobId, Provider: msg.Provider}); err != nil {
		return nil, err
	}
	return &types.MsgWithdrawBidResponse{}, nil
}

func (m msgServer) CancelJob(ctx context.Context, msg *types.MsgCancelJob) (*types.MsgCancelJobResponse, error) {
	job, err := m.GetJob(ctx, msg.JobId)
	if err != nil {
		return nil, err
	}
	if job.Owner != msg.Owner {
		return nil, errorsmod.Wrapf(types.ErrNotJobOwner, "job %d belongs to %s, not %s", job.Id, job.Owner, msg.Owner)
	}
	if job.State.IsTerminal() {
		return nil, errorsmod.Wrapf(types.ErrJobClosed, "job %d is already %s", job.Id, job.State)
	}
	refunded, err := m.closeJob(sdk.UnwrapSDKContext(ctx), &job, types.JOB_STATE_CANCELLED, types.LEASE_CLOSE_REASON_CANCELLED, "cancelled by owner")
	if err != nil {
		return nil, err
	}
	return &types.MsgCancelJobResponse{Refunded: refunded}, nil
}

func (m msgServer) TopUpDeposit(ctx context.Context, msg *types.MsgTopUpDeposit) (*types.MsgTopUpDepositResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	depositor, err := m.addressCodec.StringToBytes(msg.Depositor)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidDeposit, "depositor: invalid address %q", msg.Depositor)
	}
	job, err := m.GetJob(ctx, msg.JobId)
	if err != nil {
		return nil, err
	}
	if job.State.IsTerminal() {
		return nil, errorsmod.Wrapf(types.ErrJobClosed, "job %d is %s", job.Id, job.State)
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	if !msg.Amount.IsValid() || !msg.Amount.IsPositive() || msg.Amount.Denom != params.Denom {
		return nil, errorsmod.Wrapf(types.ErrInvalidDeposit, "amount must be a positive amount of %s, got %s", params.Denom, msg.Amount)
	}
	// The transfer is the last check that can fail, so it comes before the first write.
	if err := m.bankKeeper.SendCoinsFromAccountToModule(ctx, depositor, types.ModuleName, sdk.NewCoins(msg.Amount)); err != nil {
		return nil, errorsmod.Wrapf(err, "topping up job %d with %s", job.Id, msg.Amount)
	}
	// Settle before crediting: time already worked is paid at the old balance, and the dry
	// moment is recomputed from the new one.
	if _, err := m.settleJob(sdkCtx, &job); err != nil {
		return nil, err
	}
	job.Escrow = job.Escrow.Add(msg.Amount)
	job.Deposited = job.Deposited.Add(msg.Amount)
	if err := m.scheduleTimeDeadline(sdkCtx, &job); err != nil {
		return nil, err
	}
	if err := m.Jobs.Set(ctx, job.Id, job); err != nil {
		return nil, err
	}
	if err := sdkCtx.EventManager().EmitTypedEvent(&types.EventDepositToppedUp{JobId: job.Id, Amount: msg.Amount, Escrow: job.Escrow}); err != nil {
		return nil, err
	}
	return &types.MsgTopUpDepositResponse{}, nil
}

func (m msgServer) WithdrawEarnings(ctx context.Context, msg *types.MsgWithdrawEarnings) (*types.MsgWithdrawEarningsResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	provider, err := m.addressCodec.StringToBytes(msg.Provider)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrNotLeaseProvider, "provider: invalid address %q", msg.Provider)
	}
	ids := msg.LeaseIds
	if len(ids) == 0 {
		iter, err := m.Leases.Indexes.Provider.MatchExact(ctx, provider)
		if err != nil {
			return nil, err
		}
		if ids, err = iter.PrimaryKeys(); err != nil {
			return nil, err
		}
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	total := sdk.NewInt64Coin(params.Denom, 0)
	var paid []types.Lease
	seen := map[uint64]bool{}
	for _, id := range ids {
		if seen[id] {
			return nil, errorsmod.Wrapf(types.ErrInvalidAmount, "lease %d listed twice", id)
		}
		seen[id] = true
		lease, err := m.GetLease(ctx, id)
		if err != nil {
			return nil, err
		}
		if lease.Provider != msg.Provider {
			return nil, errorsmod.Wrapf(types.ErrNotLeaseProvider, "lease %d belongs to %s", id, lease.Provider)
		}
		if lease.Withdrawable.IsPositive() {
			total = total.Add(lease.Withdrawable)
			lease.Withdrawn = lease.Withdrawn.Add(lease.Withdrawable)
			lease.Withdrawable = sdk.NewInt64Coin(lease.Withdrawable.Denom, 0)
			paid = append(paid, lease)
		}
	}
	if !total.IsPositive() {
		return nil, errorsmod.Wrapf(types.ErrNothingToWithdraw, "provider %s has no earnings released by final checkpoints", msg.Provider)
	}
	paidIDs := make([]uint64, 0, len(paid))
	for _, l := range paid {
		if err := m.Leases.Set(ctx, l.Id, l); err != nil {
			return nil, err
		}
		paidIDs = append(paidIDs, l.Id)
	}
	if err := m.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, provider, sdk.NewCoins(total)); err != nil {
		return nil, err
	}
	if err := sdkCtx.EventManager().EmitTypedEvent(&types.EventEarningsWithdrawn{Provider: msg.Provider, LeaseIds: paidIDs, Amount: total}); err != nil {
		return nil, err
	}
	return &types.MsgWithdrawEarningsResponse{Amount: total}, nil
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
	if err := sdk.UnwrapSDKContext(ctx).EventManager().EmitTypedEvent(&types.EventParamsUpdated{Params: msg.Params}); err != nil {
		return nil, err
	}
	return &types.MsgUpdateParamsResponse{}, nil
}
