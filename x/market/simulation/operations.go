package simulation

import (
	"context"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	"github.com/cosmos/cosmos-sdk/x/simulation"

	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/market/keeper"
	"github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// Operation weights: the keys a simulation params file may set, and their defaults.
const (
	OpWeightMsgSubmitJob        = "op_weight_msg_submit_job"
	OpWeightMsgPlaceBid         = "op_weight_msg_place_bid"
	OpWeightMsgWithdrawBid      = "op_weight_msg_withdraw_bid"
	OpWeightMsgCancelJob        = "op_weight_msg_cancel_job"
	OpWeightMsgTopUpDeposit     = "op_weight_msg_top_up_deposit"
	OpWeightMsgWithdrawEarnings = "op_weight_msg_withdraw_earnings"

	DefaultWeightMsgSubmitJob        = 15
	DefaultWeightMsgPlaceBid         = 60
	DefaultWeightMsgWithdrawBid      = 4
	DefaultWeightMsgCancelJob        = 3
	DefaultWeightMsgTopUpDeposit     = 8
	DefaultWeightMsgWithdrawEarnings = 15
)

// ProviderKeeper is what the operations read of x/stakingext: who the providers are
// and whether one may bid, worked out as the market does.
type ProviderKeeper interface {
	GetProvider(ctx context.Context, operator sdk.AccAddress) (stakingexttypes.Provider, error)
	AllProviders(ctx context.Context) ([]stakingexttypes.Provider, error)
	CheckCanBid(ctx context.Context, operator sdk.AccAddress, collateral sdk.Coin) (stakingexttypes.Provider, error)
}

// DatasetKeeper lists the datasets x/shardregistry holds, for dataset-backed jobs.
type DatasetKeeper interface {
	DatasetIDs(ctx context.Context) ([]string, error)
}

// Deps are what the operations sign with and read.
type Deps struct {
	simutil.Signer
	Keeper    keeper.Keeper
	Providers ProviderKeeper
	Datasets  DatasetKeeper
}

// WeightedOperations returns an operation for every message of x/market except the
// authority-only MsgUpdateParams, which ProposalMsgs covers.
func WeightedOperations(appParams simtypes.AppParams, d Deps) simulation.WeightedOperations {
	d.Module = types.ModuleName
	return simutil.WeightedOperations(appParams,
		SimulateMsgSubmitJob(d), SimulateMsgPlaceBid(d), SimulateMsgWithdrawBid(d), SimulateMsgCancelJob(d), SimulateMsgTopUpDeposit(d), SimulateMsgWithdrawEarnings(d),
	)
}

// jobsIn lists the jobs in one of states, by id.
func jobsIn(ctx sdk.Context, k keeper.Keeper, states ...types.JobState) ([]types.Job, error) {
	var out []types.Job
	for _, s := range states {
		iter, err := k.Jobs.Indexes.State.MatchExact(ctx, int32(s))
		if err != nil {
			return nil, err
		}
		ids, err := iter.PrimaryKeys()
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			j, err := k.Jobs.Get(ctx, id)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
	}
	return out, nil
}

var liveStates = []types.JobState{types.JOB_STATE_OPEN, types.JOB_STATE_LEASED}

var terminalStates = []types.JobState{types.JOB_STATE_COMPLETED, types.JOB_STATE_CANCELLED, types.JOB_STATE_EXPIRED, types.JOB_STATE_FAILED}

func (d Deps) datasetIDs(ctx sdk.Context) []string {
	ids, err := d.Datasets.DatasetIDs(ctx)
	if err != nil {
		return nil
	}
	return ids
}

// SimulateMsgSubmitJob submits a random valid job with a deposit covering some hours of
// its maximum rate. One time in ten it sends a job that must be refused: a checkpoint
// interval beyond total_steps, or a deposit below the minimum.
func SimulateMsgSubmitJob(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgSubmitJob, DefaultWeightMsgSubmitJob, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgSubmitJob{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		owner, _ := simtypes.RandomAcc(r, accs)
		msg.Owner = owner.Address.String()
		msg.Spec = RandomSpec(r, params, d.datasetIDs(ctx))
		rate := msg.Spec.MaxPricePerGpuHour.Amount.MulRaw(int64(msg.Spec.Gpu.PerWorker) * int64(msg.Spec.Workers))
		msg.Deposit = sdk.NewCoin(params.Denom, math.MaxInt(rate.MulRaw(int64(2+r.Intn(200))), params.MinDeposit.Amount))
		if simutil.Chance(r, 10) {
			if r.Intn(2) == 0 || !params.MinDeposit.Amount.GT(math.OneInt()) {
				msg.Spec.CheckpointInterval = msg.Spec.TotalSteps + 1
				return o.DeliverInvalid(owner, msg, types.ErrInvalidSpec, "checkpoint interval beyond total_steps")
			}
			msg.Deposit = params.MinDeposit.SubAmount(math.OneInt())
			return o.DeliverInvalid(owner, msg, types.ErrInvalidDeposit, "deposit below the minimum")
		}
		if o.Spendable(owner, params.Denom).Amount.QuoRaw(2).LT(msg.Deposit.Amount) {
			return o.NoOp(msg, "%s cannot afford a deposit of %s", owner.Address, msg.Deposit)
		}
		return o.Deliver(owner, msg, sdk.NewCoins(msg.Deposit))
	})
}

// SimulateMsgPlaceBid has an eligible provider bid on an open job at a price up to the
// job's maximum (and, in a later round, up to its price-per-step cap), committing a rate
// between the least that meets max_duration and ten times that. Eligibility is worked out
// the way the market does (stakingext's CheckCanBid, a GPU class satisfying the spec, not
// already serving the job, room for another bid). One time in ten it sends a bid that must
// be refused: above the maximum price, from an account that is no provider, without a
// rate, or with a rate too slow for max_duration.
func SimulateMsgPlaceBid(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgPlaceBid, DefaultWeightMsgPlaceBid, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgPlaceBid{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		open, err := jobsIn(ctx, d.Keeper, types.JOB_STATE_OPEN)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		var biddable []types.Job
		for _, j := range open {
			if ctx.BlockHeight() <= j.BiddingDeadline {
				biddable = append(biddable, j)
			}
		}
		job, ok := simutil.Pick(r, biddable)
		if !ok {
			return o.NoOp(msg, "no job open for bidding")
		}
		msg.JobId = job.Id
		maxPrice := job.Spec.MaxPricePerGpuHour
		least := job.Spec.TotalSteps
		for _, p := range job.Progress {
			least = min(least, p.Step)
		}
		if len(job.Progress) < int(job.Spec.Workers) {
			least = 0
		}
		minRate := types.ConservativeRate(job.Spec.TotalSteps-least, job.Spec.MaxDuration)
		msg.StepsPerHour = minRate + uint64(r.Int63n(int64(9*minRate+1)))

		if simutil.Chance(r, 10) {
			acc, _ := simtypes.RandomAcc(r, accs)
			msg.Provider = acc.Address.String()
			if r.Intn(2) == 0 {
				msg.PricePerGpuHour = maxPrice.AddAmount(math.NewInt(1 + r.Int63n(100)))
				return o.DeliverInvalid(acc, msg, types.ErrBidAboveMax, "price above the job's maximum")
			}
			if _, err := d.Providers.GetProvider(ctx, acc.Address); err != nil {
				msg.PricePerGpuHour = sdk.NewCoin(maxPrice.Denom, math.OneInt()) // under any price-per-step cap
				return o.DeliverInvalid(acc, msg, types.ErrProviderIneligible, "bidder is not a provider")
			}
		}
		if simutil.Chance(r, 10) && job.Spec.TotalSteps > least {
			acc, _ := simtypes.RandomAcc(r, accs)
			msg.Provider = acc.Address.String()
			msg.PricePerGpuHour = maxPrice
			if r.Intn(2) == 0 || minRate <= 1 {
				msg.StepsPerHour = 0
				return o.DeliverInvalid(acc, msg, types.ErrInvalidRate, "bid without a rate")
			}
			msg.StepsPerHour = minRate - 1
			if types.ValidateRate(msg.StepsPerHour, job.Spec.TotalSteps-least, job.Spec.MaxDuration) == nil {
				return o.NoOp(msg, "the least rate rounds to one that still meets max_duration")
			}
			return o.DeliverInvalid(acc, msg, types.ErrRateTooLow, "rate too slow for max_duration")
		}

		collateral := sdk.NewCoin(params.Denom, job.Spec.RequiredCollateral(params))
		serving, err := d.Keeper.ActiveLeases(ctx, job.Id)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		bids := 0
		if err := d.Keeper.Bids.Walk(ctx, collections.NewPrefixedPairRange[uint64, []byte](job.Id), func(collections.Pair[uint64, []byte], types.Bid) (bool, error) {
			bids++
			return false, nil
		}); err != nil {
			return o.NoOp(msg, "%s", err)
		}
		all, err := d.Providers.AllProviders(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		var eligible []stakingexttypes.Provider
	providers:
		for _, p := range all {
			addr, err := sdk.AccAddressFromBech32(p.Operator)
			if err != nil {
				continue
			}
			if _, err := d.Providers.CheckCanBid(ctx, addr, collateral); err != nil {
				continue
			}
			if !p.Satisfies(job.Spec.Gpu.Models, job.Spec.MinVRAMMiB(), job.Spec.Gpu.PerWorker) {
				continue
			}
			for _, l := range serving {
				if l.Provider == p.Operator {
					continue providers
				}
			}
			has, err := d.Keeper.Bids.Has(ctx, collections.Join(job.Id, []byte(addr)))
			if err != nil || (!has && bids >= int(params.MaxBidsPerJob)) {
				continue
			}
			eligible = append(eligible, p)
		}
		p, ok := simutil.Pick(r, eligible)
		if !ok {
			return o.NoOp(msg, "no eligible provider for job %d", job.Id)
		}
		acc, ok := o.Account(p.Operator)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", p.Operator)
		}
		msg.Provider = p.Operator
		top := maxPrice.Amount
		if job.CapStepsPerHour != 0 {
			// A later round takes no bid dearer per step than the first round's winner.
			top = math.MinInt(top, job.CapPricePerGpuHour.Amount.Mul(math.NewIntFromUint64(msg.StepsPerHour)).Quo(math.NewIntFromUint64(job.CapStepsPerHour)))
		}
		if !top.IsPositive() {
			return o.NoOp(msg, "no price under job %d's cap at %d steps per hour", job.Id, msg.StepsPerHour)
		}
		msg.PricePerGpuHour = sdk.NewCoin(maxPrice.Denom, math.NewInt(1+r.Int63n(top.Int64())))
		return o.Deliver(acc, msg, nil)
	})
}

// SimulateMsgWithdrawBid withdraws an open bid; withdrawing a bid that does not exist
// must fail.
func SimulateMsgWithdrawBid(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgWithdrawBid, DefaultWeightMsgWithdrawBid, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgWithdrawBid{}
		iter, err := d.Keeper.Bids.Iterate(ctx, nil)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		bids, err := iter.Values()
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		if simutil.Chance(r, 10) {
			acc, _ := simtypes.RandomAcc(r, accs)
			*msg = types.MsgWithdrawBid{Provider: acc.Address.String(), JobId: 1 << 40}
			return o.DeliverInvalid(acc, msg, types.ErrBidNotFound, "no such bid")
		}
		bid, ok := simutil.Pick(r, bids)
		if !ok {
			return o.NoOp(msg, "no bids")
		}
		acc, ok := o.Account(bid.Provider)
		if !ok {
			return o.NoOp(msg, "bidder %s is not a simulated account", bid.Provider)
		}
		*msg = types.MsgWithdrawBid{Provider: bid.Provider, JobId: bid.JobId}
		return o.Deliver(acc, msg, nil)
	})
}

// SimulateMsgCancelJob has an owner cancel a live job. Cancelling someone else's job, or
// an owner's job that is already over, must fail.
func SimulateMsgCancelJob(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgCancelJob, DefaultWeightMsgCancelJob, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgCancelJob{}
		if simutil.Chance(r, 20) {
			over, err := jobsIn(ctx, d.Keeper, terminalStates...)
			if err != nil {
				return o.NoOp(msg, "%s", err)
			}
			if job, ok := simutil.Pick(r, over); ok {
				if owner, ok := o.Account(job.Owner); ok {
					*msg = types.MsgCancelJob{Owner: job.Owner, JobId: job.Id}
					return o.DeliverInvalid(owner, msg, types.ErrJobClosed, "job already over")
				}
			}
		}
		live, err := jobsIn(ctx, d.Keeper, liveStates...)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		job, ok := simutil.Pick(r, live)
		if !ok {
			return o.NoOp(msg, "no live job")
		}
		if simutil.Chance(r, 20) {
			other, _ := simtypes.RandomAcc(r, accs)
			if other.Address.String() != job.Owner {
				*msg = types.MsgCancelJob{Owner: other.Address.String(), JobId: job.Id}
				return o.DeliverInvalid(other, msg, types.ErrNotJobOwner, "someone else's job")
			}
		}
		owner, ok := o.Account(job.Owner)
		if !ok {
			return o.NoOp(msg, "owner %s is not a simulated account", job.Owner)
		}
		*msg = types.MsgCancelJob{Owner: job.Owner, JobId: job.Id}
		return o.Deliver(owner, msg, nil)
	})
}

// SimulateMsgTopUpDeposit has anyone top up a live job's escrow. Topping up a job that is
// over, or in another denomination, must fail.
func SimulateMsgTopUpDeposit(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgTopUpDeposit, DefaultWeightMsgTopUpDeposit, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgTopUpDeposit{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		depositor, _ := simtypes.RandomAcc(r, accs)
		if simutil.Chance(r, 10) {
			over, err := jobsIn(ctx, d.Keeper, terminalStates...)
			if err != nil {
				return o.NoOp(msg, "%s", err)
			}
			if job, ok := simutil.Pick(r, over); ok {
				*msg = types.MsgTopUpDeposit{Depositor: depositor.Address.String(), JobId: job.Id, Amount: sdk.NewInt64Coin(params.Denom, 1)}
				return o.DeliverInvalid(depositor, msg, types.ErrJobClosed, "job already over")
			}
		}
		live, err := jobsIn(ctx, d.Keeper, liveStates...)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		job, ok := simutil.Pick(r, live)
		if !ok {
			return o.NoOp(msg, "no live job")
		}
		*msg = types.MsgTopUpDeposit{Depositor: depositor.Address.String(), JobId: job.Id}
		if simutil.Chance(r, 10) {
			msg.Amount = sdk.NewInt64Coin("notthedenom", 1+r.Int63n(100))
			return o.DeliverInvalid(depositor, msg, types.ErrInvalidDeposit, "top-up in another denomination")
		}
		spendable := o.Spendable(depositor, params.Denom)
		if spendable.Amount.LT(math.NewInt(10)) {
			return o.NoOp(msg, "%s has nothing to top up with", depositor.Address)
		}
		msg.Amount = sdk.NewCoin(params.Denom, math.NewInt(1+r.Int63n(min(spendable.Amount.QuoRaw(10).Int64(), 10_000_000))))
		return o.Deliver(depositor, msg, sdk.NewCoins(msg.Amount))
	})
}

// SimulateMsgWithdrawEarnings has a provider withdraw what final checkpoints released,
// from all its leases or from a list of them. Withdrawing with nothing released, or
// listing a lease twice, must fail.
func SimulateMsgWithdrawEarnings(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgWithdrawEarnings, DefaultWeightMsgWithdrawEarnings, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgWithdrawEarnings{}
		iter, err := d.Keeper.Leases.Iterate(ctx, nil)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		leases, err := iter.Values()
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		earning := map[string][]uint64{}
		var providers []string
		for _, l := range leases {
			if !l.Withdrawable.IsPositive() {
				continue
			}
			if _, seen := earning[l.Provider]; !seen {
				providers = append(providers, l.Provider)
			}
			earning[l.Provider] = append(earning[l.Provider], l.Id)
		}
		if simutil.Chance(r, 10) {
			acc, _ := simtypes.RandomAcc(r, accs)
			if _, earns := earning[acc.Address.String()]; !earns {
				*msg = types.MsgWithdrawEarnings{Provider: acc.Address.String()}
				return o.DeliverInvalid(acc, msg, types.ErrNothingToWithdraw, "nothing released to withdraw")
			}
		}
		provider, ok := simutil.Pick(r, providers)
		if !ok {
			return o.NoOp(msg, "no released earnings")
		}
		acc, ok := o.Account(provider)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", provider)
		}
		*msg = types.MsgWithdrawEarnings{Provider: provider}
		switch r.Intn(10) {
		case 0:
			id := earning[provider][0]
			msg.LeaseIds = []uint64{id, id}
			return o.DeliverInvalid(acc, msg, types.ErrInvalidAmount, "lease listed twice")
		case 1, 2, 3:
			msg.LeaseIds = earning[provider]
		}
		return o.Deliver(acc, msg, nil)
	})
}
