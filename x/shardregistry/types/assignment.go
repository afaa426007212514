package types

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
)

// assignmentDomain separates shard assignment from every other use of a job seed.
const assignmentDomain = "depinchain/shardregistry/assignment/v1"

// AssignShards assigns the numShards shards of a dataset to workers 0..numWorkers-1 of a
// job for one epoch by rendezvous (highest random weight) hashing: worker w gets shard s
// iff w maximises SHA-256(domain || seed || u64 epoch || u32 s || u32 w) (big-endian
// integers, hashes compared as big-endian numbers; the lower worker wins an exact tie).
// result[w] lists worker w's shards in ascending order. It costs numShards × numWorkers
// hashes and is shared by the chain, the sidecar and x/verify's referee.
func AssignShards(seed []byte, epoch uint64, numShards, numWorkers uint32) [][]uint32 {
	workers := make([]uint32, numWorkers)
	for i := range workers {
		workers[i] = uint32(i)
	}
	return AssignShardsToWorkers(seed, epoch, numShards, workers)
}

// AssignShardsToWorkers is AssignShards over an explicit list of worker ids (for example
// with one worker gone): result[i] lists the shards of workers[i]. Because every shard
// goes to the worker with the highest weight for it, removing a worker moves only that
// worker's shards, each to the worker with the next highest weight.
func AssignShardsToWorkers(seed []byte, epoch uint64, numShards uint32, workers []uint32) [][]uint32 {
	out := make([][]uint32, len(workers))
	if len(workers) == 0 {
		return out
	}
	prefix := make([]byte, 0, len(assignmentDomain)+len(seed)+16)
	prefix = append(prefix, assignmentDomain...)
	prefix = append(prefix, seed...)
	prefix = binary.BigEndian.AppendUint64(prefix, epoch)
	msg := make([]byte, len(prefix)+8)
	copy(msg, prefix)
	for s := uint32(0); s < numShards; s++ {
		binary.BigEndian.PutUint32(msg[len(prefix):], s)
		best := -1
		var bestWeight [32]byte
		for i, w := range workers {
			binary.BigEndian.PutUint32(msg[len(prefix)+4:], w)
			weight := sha256.Sum256(msg)
			c := bytes.Compare(weight[:], bestWeight[:])
			if best < 0 || c > 0 || (c == 0 && w < workers[best]) {
				best, bestWeight = i, weight
			}
		}
		out[best] = append(out[best], s)
	}
	return out
}
