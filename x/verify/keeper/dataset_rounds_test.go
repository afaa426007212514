package keeper_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// datasetRounds is a job of three workers that trains in rounds of 8 steps on a dataset
// of 12 shards (the corpus in 2 KiB shards, Reed–Solomon 2+1), and the dataset's stream.
type datasetRounds struct {
	e      *env
	job    markettypes.Job
	ds     shardtypes.Dataset
	out    string // the pieces' folder
	units  []diloco.Shard
	stream []byte // every shard's data pieces, in shard order
}

// syncDatasetSpec is a reference job of workers that trains in rounds of 8 steps on
// dataset id.
func syncDatasetSpec(workers uint32, id string) markettypes.JobSpec {
	spec := referenceSpec(32, 8)
	spec.Workers = workers
	spec.DatasetId = id
	spec.Sync = &markettypes.SyncSpec{Every: 8, OuterLrQ30: 1 << 29}
	spec.Custody = &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: 720 * time.Hour}
	return spec
}

func newDatasetRounds(t *testing.T) *datasetRounds {
	e := newEnv(t)
	d := &datasetRounds{e: e, out: e.registerCorpusDataset("corpus-rounds", 2048)}
	res, err := e.mmsg.SubmitJob(e.Ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: syncDatasetSpec(3, "corpus-rounds"), Deposit: coin(jobDeposit)})
	require.NoError(t, err)
	d.job = e.getJob(res.JobId)
	d.ds, err = e.ShardRegistry.GetDataset(e.Ctx, "corpus-rounds")
	require.NoError(t, err)
	require.Equal(t, uint32(12), d.ds.ShardCount)
	var all []shardtypes.Shard
	for i := range d.ds.ShardCount {
		sh, err := e.ShardRegistry.GetShard(e.Ctx, d.ds.Id, i)
		require.NoError(t, err)
		all = append(all, sh)
	}
	d.units, err = types.DatasetRoundShards(d.ds, all)
	require.NoError(t, err)
	d.stream = shardStream(t, d.out, all)
	return d
}

// workerStream is worker's training stream in round as the referee knows it (the layout of its
// shards x/shardregistry assigns in the round) with the bytes a prover reads from the
// pieces; ok is false for a worker the round gives no shard.
func (d *datasetRounds) workerStream(t *testing.T, worker uint32, round uint64) (traindata.Stream, []shardtypes.Shard, bool) {
	shards, err := d.e.ShardRegistry.RoundWorkerShards(d.e.Ctx, d.job.Id, worker, round)
	require.NoError(t, err)
	if len(shards) == 0 {
		_, err := types.DatasetLayout(d.ds, shards)
		require.ErrorIs(t, err, types.ErrUnsupportedData, "a worker without shards has no layout")
		return traindata.Stream{}, nil, false
	}
	layout, err := types.DatasetLayout(d.ds, shards)
	require.NoError(t, err)
	s, err := traindata.NewStream(layout, shardStream(t, d.out, shards))
	require.NoError(t, err)
	return s, shards, true
}

// In every round of a sync job on a dataset the workers' layouts (the referee's data) are
// the data pieces of the shards AssignRoundShards gives them: disjoint, together the
// whole dataset, reshuffled from round to round, and byte for byte what
// diloco.WorkerData cuts from the dataset's stream with DatasetRoundShards — the data
// diloco.Simulate trains each worker on.
func TestDatasetRoundLayoutsAreTheRoundsAssignment(t *testing.T) {
	d := newDatasetRounds(t)
	var first [][]uint32
	reshuffled := false
	for round := range uint64(4) {
		want, err := shardtypes.AssignRoundShards(d.job.Seed, round, d.ds.ShardCount, 3)
		require.NoError(t, err)
		byRoot := map[merkle.Hash]uint32{}
		var covered []uint32
		for w := range uint32(3) {
			s, shards, ok := d.workerStream(t, w, round)
			indices := make([]uint32, len(shards))
			for i, sh := range shards {
				indices[i] = sh.Index
			}
			require.True(t, slices.Equal(want[w], indices), "round %d worker %d: shards %v, the assignment %v", round, w, indices, want[w])
			covered = append(covered, indices...)
			simData, simErr := diloco.WorkerData(d.stream, d.job.Seed, round, d.units, 3, int(w))
			if !ok {
				require.ErrorIs(t, simErr, diloco.ErrInvalid, "Simulate's worker without shards has no data either")
				continue
			}
			require.NoError(t, simErr)
			require.Equal(t, simData, s.Bytes, "round %d worker %d: the referee's stream is not Simulate's", round, w)
			for _, seg := range s.Segments {
				other, dup := byRoot[seg.Root]
				require.False(t, dup, "round %d: a data piece of worker %d is also worker %d's", round, w, other)
				byRoot[seg.Root] = w
			}
		}
		slices.Sort(covered)
		require.Len(t, covered, int(d.ds.ShardCount), "round %d: the workers' shards cover the dataset once", round)
		for i, idx := range covered {
			require.Equal(t, uint32(i), idx)
		}
		if round == 0 {
			first = want
		} else if !slices.EqualFunc(first, want, slices.Equal) {
			reshuffled = true
		}
	}
	require.True(t, reshuffled, "every round assigned the same shards")

	// A slot outside the job has no shards.
	_, err := d.e.ShardRegistry.RoundWorkerShards(d.e.Ctx, d.job.Id, 3, 0)
	require.ErrorIs(t, err, shardtypes.ErrInvalidWorker)
}

// A worker of a sync job on a dataset that trains on another slot's shards of the round
// loses at the batch: the data chunks of a disputed step prove only against the worker's
// own assigned pieces (the referee's layout), and the step re-executed on the batch
// rebuilt from them is the honest one, not the one trained on the other slot's data.
// (The built-in corpus's twin: pkg/dispute TestRoundWorkerTrainingOnAnotherSlotsShardsFailsAtTheBatch.)
func TestDatasetRoundWorkerTrainingOnAnotherSlotsShardsFailsAtTheBatch(t *testing.T) {
	d := newDatasetRounds(t)
	const lo = 8 // round 1's first step
	var own, stolen traindata.Stream
	worker := -1
	for w := range uint32(3) {
		s, _, ok := d.workerStream(t, w, 1)
		switch {
		case !ok:
		case worker < 0:
			own, worker = s, int(w)
		case stolen.Size() == 0:
			stolen = s
		}
	}
	require.NotZero(t, stolen.Size(), "round 1 gives two slots shards")
	cfg, err := types.JobConfig(d.job)
	require.NoError(t, err)
	pre, err := exact.Init(cfg, d.job.Seed)
	require.NoError(t, err)
	pre.Step = lo
	step := func(data []byte) merkle.Hash {
		batch, err := exact.StepBatch(cfg, d.job.Seed, lo, data)
		require.NoError(t, err)
		_, info, err := exact.Step(pre, batch)
		require.NoError(t, err)
		return info.Root
	}
	honest, cheat := step(own.Bytes), step(stolen.Bytes)
	require.NotEqual(t, honest, cheat, "the step does not depend on the data")

	// The chunks a MsgStep carries for the step (types.StepData), checked as the referee
	// checks them: each against its segment of the worker's round layout.
	chunks, err := types.StepData(own, cfg, d.job.Seed, lo)
	require.NoError(t, err)
	rebuilt := make([]byte, own.Size())
	proven := map[uint64]bool{}
	for _, c := range chunks {
		seg, local, start, _, ok := own.Layout.Chunk(c.Index)
		require.True(t, ok)
		proof := make([]merkle.Hash, len(c.Proof))
		for i, p := range c.Proof {
			copy(proof[i][:], p)
		}
		require.NoError(t, merkle.VerifyInclusion(seg.Root, local, seg.Chunks(), merkle.LeafHash(c.Data), proof),
			"chunk %d does not prove against worker %d's round data", c.Index, worker)
		copy(rebuilt[start:], c.Data)
		proven[c.Index] = true

		// The other slot's bytes at the same place do not prove against it.
		if end := start + uint64(len(c.Data)); end <= stolen.Size() && string(stolen.Bytes[start:end]) != string(c.Data) {
			require.Error(t, merkle.VerifyInclusion(seg.Root, local, seg.Chunks(), merkle.LeafHash(stolen.Bytes[start:end]), proof))
		}
	}
	windows, err := exact.BatchWindows(cfg, d.job.Seed, lo, own.Size())
	require.NoError(t, err)
	for _, w := range windows {
		for off := w.Start; off < w.Start+w.Length; off++ {
			n, ok := own.Layout.ChunkAt(off)
			require.True(t, ok && proven[n], "the move lacks the chunk of byte %d", off)
		}
	}
	got := step(rebuilt)
	require.Equal(t, honest, got, "re-executing on the proven batch")
	require.NotEqual(t, cheat, got)
}

// A sync job may name a dataset that is registered with at least one shard per worker
// (every round assigns the shards among the slots); anything else is refused at submit,
// naming the dataset, and changes nothing.
func TestSyncJobOnADatasetNeedsAShardPerWorker(t *testing.T) {
	e := newEnv(t)
	e.registerCorpusDataset("corpus-rounds", 4096) // 6 shards
	submit := func(spec markettypes.JobSpec) func(ctx sdk.Context) error {
		return func(ctx sdk.Context) error {
			_, err := e.mmsg.SubmitJob(ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: spec, Deposit: coin(jobDeposit)})
			return err
		}
	}
	err := e.requireRejected(markettypes.ErrInvalidSpec, submit(syncDatasetSpec(2, "no-such-dataset")))
	require.ErrorContains(t, err, "dataset:")
	require.ErrorContains(t, err, "no-such-dataset")
	err = e.requireRejected(markettypes.ErrInvalidSpec, submit(syncDatasetSpec(7, "corpus-rounds")))
	require.ErrorContains(t, err, `dataset: "corpus-rounds" has 6 shards and a sync job assigns them among its 7 workers every round`)
	_, err = e.deliver(submit(syncDatasetSpec(6, "corpus-rounds")))
	require.NoError(t, err)
}

// A round of a sync job on a dataset opens only for the slots its assignment gives a
// shard: a slot given none sits the round out, neither awaited nor counted as missing it.
// (As many slots as shards: some slot is idle in round 0 for this job's seed.)
func TestDatasetRoundOpensForTheSlotsWithShards(t *testing.T) {
	e := newEnv(t)
	e.registerCorpusDataset("corpus-few", 5000)
	ds, err := e.ShardRegistry.GetDataset(e.Ctx, "corpus-few")
	require.NoError(t, err)
	n := ds.ShardCount
	res, err := e.mmsg.SubmitJob(e.Ctx, &markettypes.MsgSubmitJob{Owner: e.owner.String(), Spec: syncDatasetSpec(n, "corpus-few"), Deposit: coin(jobDeposit)})
	require.NoError(t, err)
	for i := range n {
		prov := e.registerProvider(fmt.Sprintf("worker-%d", i), 2)
		_, err = e.mmsg.PlaceBid(e.Ctx, &markettypes.MsgPlaceBid{Provider: prov.String(), JobId: res.JobId, PricePerGpuHour: coin(bidPrice), StepsPerHour: testRate})
		require.NoError(t, err)
	}
	for deadline := e.getJob(res.JobId).BiddingDeadline; e.Ctx.BlockHeight() <= deadline; {
		e.nextBlock()
	}
	require.Len(t, e.ActiveLeasesOfJob(t, res.JobId), int(n))
	job := e.getJob(res.JobId)
	round, err := e.Market.GetRound(e.Ctx, job.Id, 0)
	require.NoError(t, err)
	a, err := shardtypes.AssignRoundShards(job.Seed, 0, n, n)
	require.NoError(t, err)
	var withData []uint32
	for w, shards := range a {
		if len(shards) > 0 {
			withData = append(withData, uint32(w))
		}
	}
	require.Less(t, len(withData), int(n), "every slot has a shard in round 0: pick another dataset")
	require.Equal(t, withData, round.Workers, "round 0's workers are the slots with shards")
}
