package types

import (
	errorsmod "cosmossdk.io/errors"

	"github.com/depinchain/depinchain/pkg/diloco"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// DatasetRoundShards is a whole dataset as the stream a job that trains in rounds on it
// is assigned over: the dataset's shards (all of them, in index order) as
// shardtypes.RoundShards units, each spanning its data pieces' bytes (DatasetLayout of the
// shard) in the concatenation of every shard's data pieces. diloco.WorkerData of that
// concatenation with these units is a worker's stream in a round: the bytes of
// DatasetLayout over its assigned shards, what the referee checks its steps against — so
// diloco.Simulate over them is the reference of a dataset-backed sync job.
func DatasetRoundShards(ds shardtypes.Dataset, shards []shardtypes.Shard) ([]diloco.Shard, error) {
	if len(shards) != int(ds.ShardCount) {
		return nil, errorsmod.Wrapf(ErrUnsupportedData, "dataset %s has %d shards, got %d", ds.Id, ds.ShardCount, len(shards))
	}
	sizes := make([]uint64, len(shards))
	for i, sh := range shards {
		if sh.Index != uint32(i) {
			return nil, errorsmod.Wrapf(ErrUnsupportedData, "shard %d of %s is at position %d: the shards must be in index order", sh.Index, ds.Id, i)
		}
		layout, err := DatasetLayout(ds, []shardtypes.Shard{sh})
		if err != nil {
			return nil, err
		}
		sizes[i] = layout.Size()
	}
	return shardtypes.RoundShards(ds.ShardCount, sizes)
}
