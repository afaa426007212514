package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/datasets"
	"github.com/depinchain/depinchain/provider/pieces"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const roundsDatasetID = "fortunes-rounds"

// roundsDatasetJobYAML is roundsJobYAML on a dataset: three workers, two rounds of 8
// steps, each worker training on its shards of the fortunes in each round. Its commit
// window is short, so a round that gives a slot no shard (which then sits it out) closes
// within the test's time.
var roundsDatasetJobYAML = strings.NewReplacer(
	"name: rounds-lm", "name: rounds-fortunes",
	"commit_blocks: 200", "commit_blocks: 80",
	"total_steps: 16", "dataset: "+roundsDatasetID+"\ntotal_steps: 16",
).Replace(roundsJobYAML)

// TestSidecarsTrainInRoundsOnADataset: the owner registers 128 KB of Debian's fortunes
// as a dataset of 8 KiB shards (Reed–Solomon 2+1), whose pieces the three custody
// holders h1..h3 hold and claim; three trainers w1..w3 bid on a sync job on it (its data
// is fetchable), win its slots and train two rounds. In each round every worker fetches
// the data pieces of the shards diloco.Assign gives its slot in that round from the
// holders, checks them against their registered roots and trains on them. The chain's
// global roots are diloco.Simulate's over the dataset's bytes with the same assignment
// (x/verify's DatasetRoundShards), bit for bit; the workers' shards in each round are
// disjoint and cover the dataset, and each worker's round folder holds exactly the data
// pieces of its assigned shards.
func TestSidecarsTrainInRoundsOnADataset(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	if _, err := os.Stat("/usr/share/games/fortunes/fortunes"); err != nil {
		t.Fatalf("Debian's fortunes are not installed (scripts/deps.sh installs them): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	r := newRoundsCluster(ctx, t, nil, nil, nil, map[string]string{"storage_role.claim_local": "true"})
	c := r.c
	m, built := registerFortunes(ctx, t, c.node, r.dir, roundsDatasetID, "131072", "8KiB")
	holdPieces(t, r.dir, roundsDatasetID, m, built, roundsHolders)
	c.startSidecars(ctx, t, append(slices.Clone(roundsTrainers), roundsHolders...)...)
	registry := shardtypes.NewQueryClient(c.conn)
	c.waitFor(ctx, t, fmt.Sprintf("every piece of the %d-shard dataset claimed", len(m.Shards)), 2*time.Minute,
		allClaimed(ctx, registry, roundsDatasetID, len(m.Shards)))
	r.submitJob(ctx, t, roundsDatasetJobYAML)
	c.waitFor(ctx, t, "round 1's global (G_2) is committed", 5*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0
	})

	// Simulate's data: the dataset's bytes as built (every shard's two data pieces, in
	// shard order), cut into the chain's round units.
	dsRes, err := registry.Dataset(ctx, &shardtypes.QueryDatasetRequest{DatasetId: roundsDatasetID})
	if err != nil {
		t.Fatal(err)
	}
	var all []shardtypes.Shard
	for i := range dsRes.Dataset.ShardCount {
		res, err := registry.Shard(ctx, &shardtypes.QueryShardRequest{DatasetId: roundsDatasetID, Index: i})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, pieces.ShardOf(dsRes.Dataset, res.Shard).Shard)
		for p := range uint32(2) {
			r.stream = append(r.stream, readFile(t, filepath.Join(built, manifest.PieceFile(i, p)))...)
		}
	}
	if r.shards, err = verifytypes.DatasetRoundShards(dsRes.Dataset, all); err != nil {
		t.Fatal(err)
	}
	jobRes, err := r.market.Job(ctx, &markettypes.QueryJobRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	idle := map[uint64][]int{} // slots a round gives no shard: they sit it out
	for rn := range uint64(2) {
		a, err := shardtypes.AssignRoundShards(jobRes.Job.Seed, rn, dsRes.Dataset.ShardCount, 3)
		if err != nil {
			t.Fatal(err)
		}
		var covered []uint32
		for slot, shards := range a {
			if len(shards) == 0 {
				idle[rn] = append(idle[rn], slot)
				continue
			}
			covered = append(covered, shards...)
			// The slot's trainer fetched exactly its shards' data pieces for the round.
			if got, want := r.roundDataFiles(t, r.slots[uint32(slot)], rn), dataFiles(shards); !slices.Equal(got, want) {
				t.Fatalf("round %d: %s (slot %d) holds %v, its shards' data pieces are %v", rn, r.slots[uint32(slot)], slot, got, want)
			}
		}
		slices.Sort(covered)
		if len(covered) != int(dsRes.Dataset.ShardCount) || len(slices.Compact(covered)) != int(dsRes.Dataset.ShardCount) {
			t.Fatalf("round %d: the slots' shards %v are not disjoint or do not cover the %d shards", rn, a, dsRes.Dataset.ShardCount)
		}
		t.Logf("round %d: shards by slot %v", rn, a)
	}
	r.checkSimulate(ctx, t, idle, nil)
	r.roundTimes(ctx, t, roundsTrainers...)
}

// roundDataFiles are the data pieces trainer fetched for round rn, in stream order, as
// its rounds role logged them ("round data ready"): the folder itself is pruned once the
// round's global is final.
func (r *roundsRun) roundDataFiles(t testing.TB, trainer string, rn uint64) []string {
	t.Helper()
	raw, err := os.ReadFile(r.c.sidecars[trainer].LogPath())
	if err != nil {
		t.Fatal(err)
	}
	round := fmt.Sprintf(" round=%d ", rn)
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.Contains(line, `msg="round data ready"`) || !strings.Contains(line, round) {
			continue
		}
		_, list, ok := strings.Cut(line, " pieces=")
		if !ok {
			t.Fatalf("%s's round data line names no pieces: %s", trainer, line)
		}
		return strings.Split(strings.TrimSpace(list), ",")
	}
	return nil
}

// dataFiles are the names datasets.FileName gives the data pieces of shards (two each).
func dataFiles(shards []uint32) []string {
	var out []string
	for _, sh := range shards {
		for p := range uint32(2) {
			out = append(out, datasets.FileName(len(out), sh, p))
		}
	}
	return out
}
