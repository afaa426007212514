package types

import (
	"crypto/sha256"
	"encoding/binary"
)

// Domain-separation prefixes of the module's derivations from stored block hashes.
const (
	challengeDomain = "depinchain/shardregistry/challenge/v1"
	deadlineDomain  = "depinchain/shardregistry/deadline/v1"
)

// ReplicaKey is the canonical byte encoding of (dataset, shard, piece, holder) that
// challenges and deadlines are derived from:
//
//	u16 len(dataset id) || dataset id || u32 shard || u32 piece || u16 len(holder) || holder address bytes
//
// It is fixed before the replica exists, so a claimant can compute its first challenge.
func ReplicaKey(datasetID string, shard, piece uint32, holder []byte) []byte {
	b := make([]byte, 0, 2+len(datasetID)+8+2+len(holder))
	b = binary.BigEndian.AppendUint16(b, uint16(len(datasetID)))
	b = append(b, datasetID...)
	b = binary.BigEndian.AppendUint32(b, shard)
	b = binary.BigEndian.AppendUint32(b, piece)
	b = binary.BigEndian.AppendUint16(b, uint16(len(holder)))
	return append(b, holder...)
}

// PeriodOf is the challenge period of a height: period p spans heights
// [p*period_blocks + 1, (p+1)*period_blocks].
func PeriodOf(height int64, periodBlocks uint64) uint64 {
	if height < 1 {
		return 0
	}
	return uint64(height-1) / periodBlocks
}

// PeriodStart is the first height of period p; its stored block hash seeds the period's
// challenges.
func PeriodStart(period, periodBlocks uint64) int64 {
	return int64(period*periodBlocks + 1)
}

// DeadlineOffset is how far into every period a replica's deadline lies:
// proof_window_blocks + (H(deadline domain || replica key) mod (period_blocks −
// proof_window_blocks)). Deadlines of different replicas spread evenly over the period,
// so no block has to sweep them all, and a holder always has at least
// proof_window_blocks blocks after the seed block to answer.
func DeadlineOffset(replicaKey []byte, p Params) uint64 {
	h := sha256.New()
	h.Write([]byte(deadlineDomain))
	h.Write(replicaKey)
	sum := h.Sum(nil)
	return p.ProofWindowBlocks + binary.BigEndian.Uint64(sum[:8])%(p.PeriodBlocks-p.ProofWindowBlocks)
}

// Schedule is one period's challenge of a replica.
type Schedule struct {
	Period     uint64
	SeedHeight int64
	Deadline   int64
}

// ScheduleFor is the challenge of period p under params.
func ScheduleFor(period uint64, replicaKey []byte, p Params) Schedule {
	start := PeriodStart(period, p.PeriodBlocks)
	return Schedule{Period: period, SeedHeight: start, Deadline: start + int64(DeadlineOffset(replicaKey, p))}
}

// NextSchedule is the first challenge after one was handled (answered, missed or, for a
// claim, answered by the claim) at height `at`: the earliest period whose seed block
// comes after the handled challenge's seed block and whose deadline is still ahead.
// Normally that is the next period; when EndBlock processed a miss late (its per-block
// cap was reached) periods whose deadline already passed are skipped rather than
// charged. It only compares heights, so it stays sound when period_blocks changes.
func NextSchedule(replicaKey []byte, p Params, at, handledSeedHeight int64) Schedule {
	s := ScheduleFor(PeriodOf(at, p.PeriodBlocks), replicaKey, p)
	if s.SeedHeight <= handledSeedHeight || s.Deadline <= at {
		// The next period starts after `at`, so both conditions hold for it.
		s = ScheduleFor(s.Period+1, replicaKey, p)
	}
	return s
}

// ChallengeSeed is SHA-256(challenge domain || block hash || replica key || u64 period),
// where block hash is the one x/market stored at the period's start height.
func ChallengeSeed(blockHash, replicaKey []byte, period uint64) [32]byte {
	h := sha256.New()
	h.Write([]byte(challengeDomain))
	h.Write(blockHash)
	h.Write(replicaKey)
	var pb [8]byte
	binary.BigEndian.PutUint64(pb[:], period)
	h.Write(pb[:])
	var seed [32]byte
	h.Sum(seed[:0])
	return seed
}

// ChallengeIndices lists the chunks a replica must prove for a period: count distinct
// indices below chunkCount (every chunk, in order, when there are no more than count).
// Index j is the first 8 bytes of SHA-256(seed || u32 j), big-endian, mod chunkCount,
// moved to the next unused index (wrapping) if already taken. It also returns how many
// SHA-256 computations that took (the seed's included), for gas.
func ChallengeIndices(blockHash, replicaKey []byte, period, chunkCount uint64, count uint32) ([]uint64, int) {
	if chunkCount <= uint64(count) {
		all := make([]uint64, chunkCount)
		for i := range all {
			all[i] = uint64(i)
		}
		return all, 0
	}
	seed := ChallengeSeed(blockHash, replicaKey, period)
	indices := make([]uint64, 0, count)
	taken := make(map[uint64]struct{}, count)
	var msg [32 + 4]byte
	copy(msg[:], seed[:])
	for j := uint32(0); j < count; j++ {
		binary.BigEndian.PutUint32(msg[32:], j)
		sum := sha256.Sum256(msg[:])
		idx := binary.BigEndian.Uint64(sum[:8]) % chunkCount
		for {
			if _, dup := taken[idx]; !dup {
				break
			}
			idx = (idx + 1) % chunkCount
		}
		taken[idx] = struct{}{}
		indices = append(indices, idx)
	}
	return indices, 1 + int(count)
}
