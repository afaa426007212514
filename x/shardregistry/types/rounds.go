package types

import (
	"fmt"
	"strconv"

	"github.com/depinchain/depinchain/pkg/diloco"
)

// A job that trains in rounds (a market job with a sync spec) draws its data per round,
// not per epoch: in round r its dataset's shards are assigned among the job's worker
// slots by pkg/diloco's rendezvous assignment (diloco.Assign of the job seed and r), the
// rule the built-in corpus's shards follow too. The chain (x/verify's referee), the
// sidecar and diloco.Simulate all assign through RoundShards.

// RoundShardID names shard index of a dataset as a unit of the per-round assignment.
func RoundShardID(index uint32) string { return "shard-" + strconv.FormatUint(uint64(index), 10) }

// RoundShards is a dataset's shards as pkg/diloco assignment units, in shard order: unit
// i is shard i, named RoundShardID(i), spanning its data bytes in the dataset's stream —
// every shard's data pieces, shard after shard (x/verify's DatasetLayout of all shards) —
// where dataBytes[i] is shard i's data bytes. Only the names enter diloco.Assign, so the
// chain, which knows the shard count and not every shard's size, assigns with dataBytes
// nil: each unit then spans one position, [i, i+1), the same names in the same order.
func RoundShards(shardCount uint32, dataBytes []uint64) ([]diloco.Shard, error) {
	if dataBytes != nil && len(dataBytes) != int(shardCount) {
		return nil, fmt.Errorf("%w: %d shard sizes for %d shards", ErrInvalidDataset, len(dataBytes), shardCount)
	}
	out := make([]diloco.Shard, shardCount)
	var off uint64
	for i := range out {
		size := uint64(1)
		if dataBytes != nil {
			size = dataBytes[i]
		}
		out[i] = diloco.Shard{ID: RoundShardID(uint32(i)), Start: off, End: off + size}
		off += size
	}
	return out, nil
}

// AssignRoundShards returns, for each worker slot 0..workers-1 of a job trained in rounds
// on a dataset of shardCount shards, the shards (ascending indices) it trains on in
// round: diloco.Assign over RoundShards. The slots' shards are disjoint and cover the
// dataset; a slot may get none (the fewer shards per slot, the likelier), and such a slot
// sits the round out. It costs shardCount × workers hashes.
func AssignRoundShards(seed []byte, round uint64, shardCount, workers uint32) ([][]uint32, error) {
	units, err := RoundShards(shardCount, nil)
	if err != nil {
		return nil, err
	}
	a, err := diloco.Assign(seed, round, units, int(workers))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDataset, err)
	}
	out := make([][]uint32, len(a))
	for w, idx := range a {
		for _, i := range idx {
			out[w] = append(out[w], uint32(i))
		}
	}
	return out, nil
}
