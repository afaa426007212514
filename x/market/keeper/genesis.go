package keeper

import (
	"context"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/market/types"
)

// InitGenesis loads the market state, rebuilding the deadline indexes from the
// objects themselves: they are derived data, so they are not exported separately.
func (k Keeper) InitGenesis(ctx context.Context, gs *types.GenesisState) error {
	if err := k.Params.Set(ctx, gs.Params); err != nil {
		return err
	}
	for _, job := range gs.Jobs {
		if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
			return err
		}
		if job.State == types.JOB_STATE_OPEN {
			if err := k.BiddingDeadlines.Set(ctx, collections.Join(job.BiddingDeadline, job.Id)); err != nil {
				return err
			}
		}
		if !job.TimeDeadline.IsZero() {
			if err := k.TimeDeadlines.Set(ctx, collections.Join(job.TimeDeadline.UnixNano(), job.Id)); err != nil {
				return err
			}
		}
	}
	for _, bid := range gs.Bids {
		provider, err := k.addressCodec.StringToBytes(bid.Provider)
		if err != nil {
			return err
		}
		if err := k.Bids.Set(ctx, collections.Join(bid.JobId, provider), bid); err != nil {
			return err
		}
	}
	for _, lease := range gs.Leases {
		if err := k.Leases.Set(ctx, lease.Id, lease); err != nil {
			return err
		}
		if lease.State == types.LEASE_STATE_ACTIVE {
			if err := k.CheckpointDeadlines.Set(ctx, collections.Join(lease.CheckpointDeadline, lease.Id)); err != nil {
				return err
			}
		}
		if !lease.RateCheckAt.IsZero() {
			if err := k.RateChecks.Set(ctx, collections.Join(lease.RateCheckAt.UnixNano(), lease.Id)); err != nil {
				return err
			}
		}
	}
	for _, r := range gs.Rounds {
		if err := k.Rounds.Set(ctx, collections.Join(r.JobId, r.Round), r); err != nil {
			return err
		}
		if r.Deadline != 0 {
			if err := k.RoundDeadlines.Set(ctx, collections.Join3(r.Deadline, r.JobId, r.Round)); err != nil {
				return err
			}
		}
	}
	for _, c := range gs.RoundCommits {
		if err := k.RoundCommits.Set(ctx, collections.Join3(c.JobId, c.Round, c.Worker), c); err != nil {
			return err
		}
	}
	for _, bh := range gs.BlockHashes {
		if err := k.BlockHashes.Set(ctx, bh.Height, bh.Hash); err != nil {
			return err
		}
	}
	if err := k.NextJobID.Set(ctx, gs.NextJobId); err != nil {
		return err
	}
	if err := k.NextLeaseID.Set(ctx, gs.NextLeaseId); err != nil {
		return err
	}
	return k.NextBidSequence.Set(ctx, gs.NextBidSequence)
}

// ExportGenesis writes out the whole market state.
func (k Keeper) ExportGenesis(ctx context.Context) (*types.GenesisState, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	gs := &types.GenesisState{Params: params}
	if err := k.Jobs.Walk(ctx, nil, func(_ uint64, j types.Job) (bool, error) {
		gs.Jobs = append(gs.Jobs, j)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Bids.Walk(ctx, nil, func(_ collections.Pair[uint64, []byte], b types.Bid) (bool, error) {
		gs.Bids = append(gs.Bids, b)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Leases.Walk(ctx, nil, func(_ uint64, l types.Lease) (bool, error) {
		gs.Leases = append(gs.Leases, l)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.Rounds.Walk(ctx, nil, func(_ collections.Pair[uint64, uint64], r types.Round) (bool, error) {
		gs.Rounds = append(gs.Rounds, r)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.RoundCommits.Walk(ctx, nil, func(_ collections.Triple[uint64, uint64, uint32], c types.RoundCommit) (bool, error) {
		gs.RoundCommits = append(gs.RoundCommits, c)
		return false, nil
	}); err != nil {
		return nil, err
	}
	if err := k.BlockHashes.Walk(ctx, nil, func(h int64, hash []byte) (bool, error) {
		gs.BlockHashes = append(gs.BlockHashes, types.BlockHash{Height: h, Hash: hash})
		return false, nil
	}); err != nil {
		return nil, err
	}
	if gs.NextJobId, err = k.NextJobID.Peek(ctx); err != nil {
		return nil, err
	}
	if gs.NextLeaseId, err = k.NextLeaseID.Peek(ctx); err != nil {
		return nil, err
	}
	if gs.NextBidSequence, err = k.NextBidSequence.Peek(ctx); err != nil {
		return nil, err
	}
	return gs, nil
}
