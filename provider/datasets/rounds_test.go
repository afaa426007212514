package datasets

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// A worker of a job that trains in rounds gets, in each round, the data pieces of the
// shards that round assigns its slot (types.AssignRoundShards), checked against their
// roots: diloco.WorkerData of the dataset's stream over DatasetRoundShards, what the
// referee proves its steps against and Simulate trains it on. A slot the round gives no
// shard (here: more slots than shards) is told so with ErrNoShardInRound.
func TestPrepareRoundWritesTheRoundsShards(t *testing.T) {
	w := newWorld(t, rs21)
	const workers = 8
	job := markettypes.Job{Id: 7, Seed: []byte("round seed"), Spec: markettypes.JobSpec{DatasetId: testDataset, Workers: workers,
		Sync: &markettypes.SyncSpec{Every: 4, OuterLrQ30: 1 << 29}}}
	units, err := verifytypes.DatasetRoundShards(w.ds, w.shards)
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	for _, sh := range w.shards {
		stream = append(stream, w.piece(sh.Index, 0)...)
		stream = append(stream, w.piece(sh.Index, 1)...)
	}
	f := w.fetcher()
	idle := 0
	for round := range uint64(2) {
		a, err := types.AssignRoundShards(job.Seed, round, w.ds.ShardCount, workers)
		if err != nil {
			t.Fatal(err)
		}
		for slot := range uint32(workers) {
			dir := filepath.Join(t.TempDir(), "data")
			res, err := f.PrepareRound(context.Background(), job, slot, round, dir)
			if len(a[slot]) == 0 {
				if !errors.Is(err, ErrNoShardInRound) {
					t.Fatalf("round %d slot %d has no shard: %v, want ErrNoShardInRound", round, slot, err)
				}
				idle++
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, sh := range a[slot] {
				want = append(want, FileName(len(want), sh, 0), FileName(len(want)+1, sh, 1))
			}
			got, err := exact.ReadStreamDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := diloco.WorkerData(stream, job.Seed, round, units, workers, int(slot))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref) || len(res.Files) != len(want) {
				t.Fatalf("round %d slot %d: files %v (want %v), %d bytes; WorkerData has %d", round, slot, res.Files, want, len(got), len(ref))
			}
			for i := range want {
				if res.Files[i] != want[i] {
					t.Fatalf("round %d slot %d: files %v, want %v", round, slot, res.Files, want)
				}
			}
		}
	}
	if idle == 0 {
		t.Fatalf("%d shards over %d slots left none idle", w.ds.ShardCount, workers)
	}
	if _, err := f.PrepareRound(context.Background(), w.job(), 0, 0, t.TempDir()); err == nil {
		t.Fatal("a job without rounds prepared round data")
	}
}
