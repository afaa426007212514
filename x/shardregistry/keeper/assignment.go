package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// jobDataset loads a market job and the dataset it trains on. A job x/market does not
// have is ErrJobNotFound; a store failure is returned as it is.
func (k Keeper) jobDataset(ctx context.Context, jobID uint64) (markettypes.Job, types.Dataset, error) {
	job, err := k.marketKeeper.GetJob(ctx, jobID)
	if err != nil {
		if !keeperutil.IsNotFound(err) {
			return job, types.Dataset{}, err
		}
		return job, types.Dataset{}, keeperutil.WrapCause(types.ErrJobNotFound, err, "job %d", jobID)
	}
	if job.Spec.DatasetId == "" {
		return job, types.Dataset{}, errorsmod.Wrapf(types.ErrNoDataset, "job %d names no dataset", jobID)
	}
	d, err := k.GetDataset(ctx, job.Spec.DatasetId)
	return job, d, err
}

// Assignment computes, for every worker of a market job, the shards of the job's dataset
// it trains on in an epoch: types.AssignShards on the job's seed. Nothing is stored; it
// costs shards × workers hashes, charged as gas_per_hash each.
func (k Keeper) Assignment(ctx context.Context, jobID, epoch uint64) (types.Dataset, [][]uint32, error) {
	job, d, err := k.jobDataset(ctx, jobID)
	if err != nil {
		return d, nil, err
	}
	if err := k.chargeAssignment(ctx, d.ShardCount, job.Spec.Workers); err != nil {
		return d, nil, err
	}
	return d, types.AssignShards(job.Seed, epoch, d.ShardCount, job.Spec.Workers), nil
}

// WorkerShards returns the shards (with their piece roots) that worker trains on in
// epoch of job jobID, for x/verify's referee to check a disputed batch against. It
// charges gas_per_hash per hash: shards × workers.
func (k Keeper) WorkerShards(ctx context.Context, jobID uint64, worker uint32, epoch uint64) ([]types.Shard, error) {
	job, d, err := k.jobDataset(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if worker >= job.Spec.Workers {
		return nil, errorsmod.Wrapf(types.ErrInvalidWorker, "job %d has workers 0..%d, not %d", jobID, job.Spec.Workers-1, worker)
	}
	if err := k.chargeAssignment(ctx, d.ShardCount, job.Spec.Workers); err != nil {
		return nil, err
	}
	return k.shardsOf(ctx, d.Id, types.AssignShards(job.Seed, epoch, d.ShardCount, job.Spec.Workers)[worker])
}

// DatasetShardCount is how many shards dataset id has (x/market checks a sync job's
// dataset against its workers). An unknown dataset is ErrDatasetNotFound.
func (k Keeper) DatasetShardCount(ctx context.Context, id string) (uint32, error) {
	d, err := k.GetDataset(ctx, id)
	return d.ShardCount, err
}

// RoundWorkerShards returns the shards (with their piece roots) that worker trains on in
// round of job jobID, a job that trains in rounds (types.AssignRoundShards), for x/verify's
// referee. A worker with no shard in the round gets none and no error. It charges
// gas_per_hash per hash: shards × workers.
func (k Keeper) RoundWorkerShards(ctx context.Context, jobID uint64, worker uint32, round uint64) ([]types.Shard, error) {
	job, d, err := k.jobDataset(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if worker >= job.Spec.Workers {
		return nil, errorsmod.Wrapf(types.ErrInvalidWorker, "job %d has workers 0..%d, not %d", jobID, job.Spec.Workers-1, worker)
	}
	if err := k.chargeAssignment(ctx, d.ShardCount, job.Spec.Workers); err != nil {
		return nil, err
	}
	a, err := types.AssignRoundShards(job.Seed, round, d.ShardCount, job.Spec.Workers)
	if err != nil {
		return nil, err
	}
	return k.shardsOf(ctx, d.Id, a[worker])
}

// shardsOf loads the shards of dataset id at indices.
func (k Keeper) shardsOf(ctx context.Context, id string, indices []uint32) ([]types.Shard, error) {
	shards := make([]types.Shard, 0, len(indices))
	for _, i := range indices {
		s, err := k.GetShard(ctx, id, i)
		if err != nil {
			return nil, err
		}
		shards = append(shards, s)
	}
	return shards, nil
}

func (k Keeper) chargeAssignment(ctx context.Context, shards, workers uint32) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	sdk.UnwrapSDKContext(ctx).GasMeter().ConsumeGas(params.GasPerHash*uint64(shards)*uint64(workers), "shard assignment")
	return nil
}
