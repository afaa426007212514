package diloco

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// assignDomain separates data assignment from other SHA-256 uses.
const assignDomain = "depinchain/diloco/assign/v1"

// Shard is one unit of data assignment: a named range [Start, End) of
// samples — bytes of the built-in corpus (CorpusShards), or a dataset
// shard's sample range. Only the ID enters the assignment, so the same
// list gives the same assignment wherever it is computed.
type Shard struct {
	ID         string
	Start, End uint64
}

// CorpusShards cuts a stream of size bytes into shards of shardBytes (the
// last one may be shorter), named "bytes:START-END".
func CorpusShards(size, shardBytes uint64) []Shard {
	var out []Shard
	for s := uint64(0); s < size && shardBytes > 0; s += shardBytes {
		e := min(s+shardBytes, size)
		out = append(out, Shard{ID: fmt.Sprintf("bytes:%d-%d", s, e), Start: s, End: e})
	}
	return out
}

// score is the rendezvous weight of (shard, worker) in a round:
// u64le(SHA-256(assignDomain || u64(len(seed)) || seed || u64(round) ||
// u32(len(id)) || id || u32(worker))[:8]).
func score(prefix []byte, id string, worker uint32) uint64 {
	b := binary.LittleEndian.AppendUint32(prefix, uint32(len(id)))
	b = append(b, id...)
	b = binary.LittleEndian.AppendUint32(b, worker)
	d := sha256.Sum256(b)
	return binary.LittleEndian.Uint64(d[:8])
}

// Assign returns, for each worker slot 0..workers-1, the indices into
// shards (ascending) of the shards it trains on in round: every shard goes
// to the slot of highest score (ties: the lower slot) — rendezvous
// hashing. So the slots' data are disjoint and cover the list; the
// assignment depends only on (seed, round, shard IDs, workers); a worker
// that drops out leaves its shards unused without moving anyone else's,
// and changing the number of slots moves only the shards the added or
// removed slots win or held. A slot may get no shard (likely only with
// fewer than a few shards per worker); such a worker cannot train that
// round (WorkerData says so).
func Assign(seed []byte, round uint64, shards []Shard, workers int) ([][]int, error) {
	if workers < 1 || workers > MaxWorkers {
		return nil, fmt.Errorf("%w: %d workers, need 1 to %d", ErrInvalid, workers, MaxWorkers)
	}
	seen := map[string]bool{}
	for i, s := range shards {
		switch {
		case s.ID == "":
			return nil, fmt.Errorf("%w: shard %d has no id", ErrInvalid, i)
		case seen[s.ID]:
			return nil, fmt.Errorf("%w: shard %d: id %q appears twice", ErrInvalid, i, s.ID)
		case s.End <= s.Start:
			return nil, fmt.Errorf("%w: shard %d (%s): empty range [%d, %d)", ErrInvalid, i, s.ID, s.Start, s.End)
		}
		seen[s.ID] = true
	}
	prefix := []byte(assignDomain)
	prefix = binary.LittleEndian.AppendUint64(prefix, uint64(len(seed)))
	prefix = append(prefix, seed...)
	prefix = binary.LittleEndian.AppendUint64(prefix, round)
	out := make([][]int, workers)
	for i, s := range shards {
		best, bestScore := 0, score(prefix, s.ID, 0)
		for w := 1; w < workers; w++ {
			if sc := score(prefix, s.ID, uint32(w)); sc > bestScore {
				best, bestScore = w, sc
			}
		}
		out[best] = append(out[best], i)
	}
	return out, nil
}

// WorkerData returns the training stream of worker in round over the
// built-in corpus or any byte stream: its assigned shards' bytes, in
// ascending shard order, concatenated. exact.StepBatch draws its windows
// from this stream, so a worker only ever reads its own shards.
func WorkerData(stream []byte, seed []byte, round uint64, shards []Shard, workers int, worker int) ([]byte, error) {
	a, err := Assign(seed, round, shards, workers)
	if err != nil {
		return nil, err
	}
	if worker < 0 || worker >= workers {
		return nil, fmt.Errorf("%w: worker %d outside [0, %d)", ErrInvalid, worker, workers)
	}
	var out []byte
	for _, i := range a[worker] {
		s := shards[i]
		if s.End > uint64(len(stream)) {
			return nil, fmt.Errorf("%w: shard %s ends at %d, the stream has %d bytes", ErrInvalid, s.ID, s.End, len(stream))
		}
		out = append(out, stream[s.Start:s.End]...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: worker %d has no data in round %d (%d shards over %d workers)", ErrInvalid, worker, round, len(shards), workers)
	}
	return out, nil
}
