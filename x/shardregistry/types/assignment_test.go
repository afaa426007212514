package types_test

import (
	"crypto/sha256"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

func owners(assign [][]uint32, workers []uint32) map[uint32]uint32 {
	out := map[uint32]uint32{}
	for i, shards := range assign {
		for _, s := range shards {
			out[s] = workers[i]
		}
	}
	return out
}

// TestAssignmentBalance: every shard goes to exactly one worker, loads are close to
// S/W, and the assignment is a pure function of (seed, epoch).
func TestAssignmentBalance(t *testing.T) {
	seed := sha256.Sum256([]byte("job 7"))
	const shards, workers = 4096, 16
	a := types.AssignShards(seed[:], 1, shards, workers)
	require.Equal(t, a, types.AssignShards(seed[:], 1, shards, workers))
	require.NotEqual(t, a, types.AssignShards(seed[:], 2, shards, workers))
	total := 0
	mean := float64(shards) / workers
	for w, s := range a {
		total += len(s)
		require.True(t, slices.IsSorted(s))
		// Binomial(4096, 1/16): sd ≈ 15.5; allow 4 sd.
		require.InDelta(t, mean, len(s), 4*math.Sqrt(mean), "worker %d", w)
	}
	require.Equal(t, shards, total)
	require.Len(t, owners(a, []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}), shards)
}

// TestAssignmentMinimalMovement: removing one of W workers moves only that worker's
// shards (about 1/W of all), and every other shard stays where it was.
func TestAssignmentMinimalMovement(t *testing.T) {
	seed := sha256.Sum256([]byte("job 9"))
	const shards, W = 3000, 10
	all := []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	before := owners(types.AssignShardsToWorkers(seed[:], 5, shards, all), all)
	for _, gone := range []uint32{0, 4, 9} {
		rest := slices.DeleteFunc(slices.Clone(all), func(w uint32) bool { return w == gone })
		after := owners(types.AssignShardsToWorkers(seed[:], 5, shards, rest), rest)
		moved := 0
		for s := uint32(0); s < shards; s++ {
			if before[s] == gone {
				moved++
				require.NotEqual(t, gone, after[s])
				continue
			}
			require.Equal(t, before[s], after[s], "shard %d of a remaining worker must not move", s)
		}
		require.InDelta(t, float64(shards)/W, moved, 4*math.Sqrt(float64(shards)/W), "about 1/W of the shards move")
		t.Logf("removing worker %d of %d moved %d of %d shards (%.1f%%, 1/W = %.1f%%)", gone, W, moved, shards, 100*float64(moved)/shards, 100.0/W)
	}
	// AssignShards is AssignShardsToWorkers over 0..W-1.
	require.Equal(t, types.AssignShards(seed[:], 5, shards, W), types.AssignShardsToWorkers(seed[:], 5, shards, all))
	require.Empty(t, types.AssignShards(seed[:], 5, shards, 0))
}
