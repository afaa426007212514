package datasets

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/provider/storage"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// A verifier's stream of a worker is the worker's data pieces in layout order, each
// checked against its root; it is kept per shard set, so another worker (or checkpoint)
// on the same shards downloads nothing, and a shard that cannot be had is named.
func TestWorkerStreamIsKeptPerShardSet(t *testing.T) {
	w := newWorld(t, rs21)
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{0, 2}}, {Worker: 1, Shards: []uint32{1}}, {Worker: 2, Shards: []uint32{0, 2}}}
	f, ctx, cache := w.fetcher(), context.Background(), t.TempDir()
	s0, err := f.WorkerStream(ctx, w.job(), 0, 3, cache)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, shard := range []uint32{0, 2} {
		want = append(append(want, w.piece(shard, 0)...), w.piece(shard, 1)...)
	}
	if !bytes.Equal(s0.Bytes, want) || !slices.Equal(s0.Segments, w.layout(0).Segments) {
		t.Fatalf("worker 0's stream is %d bytes in segments %+v, want the %d bytes of its layout %+v", len(s0.Bytes), s0.Segments, len(want), w.layout(0).Segments)
	}
	fetched := w.fetches.Load()
	dir, err := shardSetDir(cache, testDataset, []uint32{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); fetched != 4 || err != nil {
		t.Fatalf("%d downloads, the shard set's folder: %v", fetched, err)
	}
	s2, err := f.WorkerStream(ctx, w.job(), 2, 7, cache)
	if err != nil || !bytes.Equal(s2.Bytes, want) || w.fetches.Load() != fetched {
		t.Fatalf("worker 2 on worker 0's shards: %v, %d more downloads", err, w.fetches.Load()-fetched)
	}
	if _, err := f.WorkerStream(ctx, w.job(), 1, 0, cache); err != nil || w.fetches.Load() != fetched+2 {
		t.Fatalf("worker 1 on its own shard: %v, %d more downloads, want 2", err, w.fetches.Load()-fetched)
	}

	// Shard 1 with one intact piece of the two it needs, and no folder of it yet.
	for _, h := range []string{"h0", "h1"} {
		if err := os.Remove(storage.PiecePath(w.dirs[h], testDataset, 1, uint32(h[1]-'0'))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.WorkerStream(ctx, w.job(), 1, 0, t.TempDir())
	if !errors.Is(err, ErrNotFetchable) || !strings.Contains(err.Error(), `could not fetch dataset "unit-corpus" shard 1: `) {
		t.Fatalf("a shard too few holders serve: %v", err)
	}
}

// A job that trains in rounds: the stream of the step's round, diloco.WorkerData of the
// dataset over DatasetRoundShards, what the referee proves the round's steps against.
func TestWorkerStreamOfARound(t *testing.T) {
	w := newWorld(t, rs21)
	const workers = 2
	job := markettypes.Job{Id: 7, Seed: []byte("round seed"), Spec: markettypes.JobSpec{DatasetId: testDataset, Workers: workers,
		Sync: &markettypes.SyncSpec{Every: 4, OuterLrQ30: 1 << 29}}}
	units, err := verifytypes.DatasetRoundShards(w.ds, w.shards)
	if err != nil {
		t.Fatal(err)
	}
	var dataset []byte
	for _, sh := range w.shards {
		dataset = append(append(dataset, w.piece(sh.Index, 0)...), w.piece(sh.Index, 1)...)
	}
	f, cache := w.fetcher(), t.TempDir()
	for _, step := range []uint64{2, 5} {
		round := step / 4
		a, err := types.AssignRoundShards(job.Seed, round, w.ds.ShardCount, workers)
		if err != nil {
			t.Fatal(err)
		}
		for slot := range uint32(workers) {
			s, err := f.WorkerStream(context.Background(), job, slot, step, cache)
			if len(a[slot]) == 0 {
				if !errors.Is(err, ErrNoShardInRound) {
					t.Fatalf("round %d slot %d has no shard: %v", round, slot, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			ref, err := diloco.WorkerData(dataset, job.Seed, round, units, workers, int(slot))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.Bytes, ref) {
				t.Fatalf("round %d slot %d: %d bytes, WorkerData has %d", round, slot, len(s.Bytes), len(ref))
			}
		}
	}
}

// The verifier's dataset cache is bounded: past Options.StreamCacheBytes the least
// recently used shard sets go, and the one just returned stays even when it alone is
// over the bound.
func TestWorkerStreamEvictsTheLeastRecentlyUsedShardSet(t *testing.T) {
	w := newWorld(t, rs21)
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{0}}, {Worker: 1, Shards: []uint32{1}}, {Worker: 2, Shards: []uint32{2}}}
	f, ctx, cache := w.fetcher(), context.Background(), t.TempDir()
	setDir := func(shard uint32) string {
		dir, err := shardSetDir(cache, testDataset, []uint32{shard})
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	kept := func() []uint32 {
		var have []uint32
		for shard := range uint32(3) {
			if _, err := os.Stat(setDir(shard)); err == nil {
				have = append(have, shard)
			}
		}
		return have
	}
	setBytes := int64(2 * len(w.piece(0, 0))) // every shard is two data pieces of one size
	f.opts.StreamCacheBytes = 2 * setBytes
	for _, worker := range []uint32{0, 1, 0, 2} { // worker 0's set used again after 1's
		if _, err := f.WorkerStream(ctx, w.job(), worker, 0, cache); err != nil {
			t.Fatal(err)
		}
	}
	if got := kept(); !slices.Equal(got, []uint32{0, 2}) {
		t.Fatalf("shard sets kept under a bound of two: %v, want [0 2] (1 the least recently used)", got)
	}
	f.opts.StreamCacheBytes = 1
	s, err := f.WorkerStream(ctx, w.job(), 0, 0, cache)
	if err != nil || len(s.Bytes) != int(setBytes) {
		t.Fatalf("worker 0's stream under a bound smaller than it: %d bytes, %v", len(s.Bytes), err)
	}
	if got := kept(); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("shard sets kept under a bound of one byte: %v, want [0], the one in use", got)
	}
}
