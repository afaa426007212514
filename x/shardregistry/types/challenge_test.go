package types_test

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// TestChallengeIndicesAreDeterministic: the same block hash, replica key and period give
// the same indices; a different block hash, key or period gives different ones; they are
// distinct and in range; a piece with no more chunks than challenges is challenged whole.
func TestChallengeIndicesAreDeterministic(t *testing.T) {
	hash := sha256.Sum256([]byte("block 21"))
	other := sha256.Sum256([]byte("block 22"))
	key := types.ReplicaKey("corpus-v1", 3, 1, []byte("holder-address-bytes"))
	const chunks = 1000

	a, hashes := types.ChallengeIndices(hash[:], key, 1, chunks, 8)
	b, _ := types.ChallengeIndices(hash[:], key, 1, chunks, 8)
	require.Equal(t, a, b)
	require.Equal(t, 9, hashes)
	require.Len(t, a, 8)
	seen := map[uint64]bool{}
	for _, i := range a {
		require.Less(t, i, uint64(chunks))
		require.False(t, seen[i], "indices are distinct")
		seen[i] = true
	}
	c, _ := types.ChallengeIndices(other[:], key, 1, chunks, 8)
	require.NotEqual(t, a, c, "a different block hash gives a different challenge")
	d, _ := types.ChallengeIndices(hash[:], types.ReplicaKey("corpus-v1", 3, 1, []byte("another-holder-bytes")), 1, chunks, 8)
	require.NotEqual(t, a, d, "a different replica key gives a different challenge")
	e, _ := types.ChallengeIndices(hash[:], key, 2, chunks, 8)
	require.NotEqual(t, a, e, "a different period gives a different challenge")

	all, _ := types.ChallengeIndices(hash[:], key, 1, 3, 8)
	require.Equal(t, []uint64{0, 1, 2}, all)
	// Distinct even when the challenge covers almost every chunk.
	dense, _ := types.ChallengeIndices(hash[:], key, 1, 9, 8)
	seen = map[uint64]bool{}
	for _, i := range dense {
		require.False(t, seen[i])
		seen[i] = true
	}

	// Over many periods every chunk gets challenged about equally often.
	counts := make([]int, 16)
	for p := uint64(0); p < 4000; p++ {
		idx, _ := types.ChallengeIndices(hash[:], key, p, 16, 1)
		counts[idx[0]]++
	}
	for i, n := range counts {
		require.InDelta(t, 250, n, 75, "chunk %d", i)
	}
}

func TestSchedule(t *testing.T) {
	p := types.DefaultParams()
	p.PeriodBlocks, p.ProofWindowBlocks = 100, 10
	require.Equal(t, uint64(0), types.PeriodOf(1, 100))
	require.Equal(t, uint64(0), types.PeriodOf(100, 100))
	require.Equal(t, uint64(1), types.PeriodOf(101, 100))
	require.Equal(t, int64(101), types.PeriodStart(1, 100))

	offsets := map[uint64]int{}
	for i := 0; i < 9000; i++ {
		key := types.ReplicaKey("d", uint32(i), 0, []byte{byte(i), byte(i >> 8)})
		off := types.DeadlineOffset(key, p)
		require.GreaterOrEqual(t, off, uint64(10))
		require.Less(t, off, uint64(100))
		offsets[off]++
		s := types.ScheduleFor(3, key, p)
		require.Equal(t, int64(301), s.SeedHeight)
		require.Equal(t, s.SeedHeight+int64(off), s.Deadline)
		require.Equal(t, uint64(3), types.PeriodOf(s.Deadline, 100), "the deadline lies inside its period")
	}
	require.Len(t, offsets, 90, "deadlines use every block of the period after the proof window")
	for off, n := range offsets {
		require.InDelta(t, 100, n, 45, "offset %d", off)
	}

	key := types.ReplicaKey("d", 1, 0, []byte{1})
	s3 := types.ScheduleFor(3, key, p)
	// Proved (or claimed) in period 3: the next challenge is period 4's.
	require.Equal(t, types.ScheduleFor(4, key, p), types.NextSchedule(key, p, s3.Deadline-1, s3.SeedHeight))
	// Missed at the deadline: period 4.
	require.Equal(t, types.ScheduleFor(4, key, p), types.NextSchedule(key, p, s3.Deadline, s3.SeedHeight))
	// A miss processed late, after period 5's deadline: period 6, not a burst of misses.
	s5 := types.ScheduleFor(5, key, p)
	require.Equal(t, types.ScheduleFor(6, key, p), types.NextSchedule(key, p, s5.Deadline, s3.SeedHeight))
	// Processed late but before period 5's deadline: period 5.
	require.Equal(t, s5, types.NextSchedule(key, p, s5.SeedHeight+1, s3.SeedHeight))
}
