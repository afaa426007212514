package dispute_test

import (
	"bytes"
	"testing"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// A worker of a job that trains in rounds that trains on another slot's shards loses the
// one-step phase: the challenger's MsgStep carries the batch of the accused worker's own
// shards of the round, proven against that worker's data root (what the referee checks),
// and re-executing the step on it gives the honest hash, not the cheater's.
func TestRoundWorkerTrainingOnAnotherSlotsShardsFailsAtTheBatch(t *testing.T) {
	job := testJob()
	job.Spec.Workers = 2
	job.Spec.Sync = &markettypes.SyncSpec{Every: 4, OuterLrQ30: 1 << 29, OuterMomentumQ30: 0}
	const worker, other, lo = 1, 0, 4 // round 1's first step
	own, err := verifytypes.WorkerTrainingData(job, worker, lo)
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := verifytypes.WorkerTrainingData(job, other, lo)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(own.Bytes, stolen.Bytes) {
		t.Fatal("two slots got the same data")
	}
	if _, err := verifytypes.JobTrainingData(job); err == nil {
		t.Fatal("a job training in rounds has no one stream, JobTrainingData must say so")
	}
	pre, err := exact.Init(exact.ReferenceConfig(), job.Seed)
	if err != nil {
		t.Fatal(err)
	}
	pre.Step = lo
	step := func(data []byte) merkle.Hash {
		batch, err := exact.StepBatch(pre.Config, job.Seed, lo, data)
		if err != nil {
			t.Fatal(err)
		}
		_, info, err := exact.Step(pre, batch)
		if err != nil {
			t.Fatal(err)
		}
		return info.Root
	}
	honest, cheat := step(own.Bytes), step(stolen.Bytes)
	if honest == cheat {
		t.Fatal("the step does not depend on the data")
	}

	g := game(verifytypes.GAME_TURN_ONE_STEP, lo, lo, lo+1, 100)
	g.Job = job
	g.Checkpoint.Worker, g.Checkpoint.StartStep, g.Checkpoint.EndStep = worker, lo, lo+4
	msg, err := dispute.OneStep("chal", g, pre.Encode())
	if err != nil {
		t.Fatal(err)
	}
	// The referee's side: every chunk proven against the accused worker's data root, the
	// batch rebuilt from them, the step re-executed.
	root := own.Segments[0].Root
	chunks := map[uint64][]byte{}
	for _, c := range msg.Data {
		proof := make([]merkle.Hash, len(c.Proof))
		for i, p := range c.Proof {
			copy(proof[i][:], p)
		}
		if err := merkle.VerifyInclusion(root, c.Index, own.Chunks(), merkle.LeafHash(c.Data), proof); err != nil {
			t.Fatalf("data chunk %d does not prove against worker %d's round data: %v", c.Index, worker, err)
		}
		chunks[c.Index] = c.Data
	}
	windows, err := exact.BatchWindows(pre.Config, job.Seed, lo, own.Size())
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := make([]byte, own.Size())
	for _, w := range windows {
		for off := w.Start; off < w.Start+w.Length; off++ {
			c, ok := chunks[off/verifytypes.DataChunkSize]
			if !ok {
				t.Fatalf("the move lacks data chunk %d", off/verifytypes.DataChunkSize)
			}
			rebuilt[off] = c[off%verifytypes.DataChunkSize]
		}
	}
	if got := step(rebuilt); got != honest || got == cheat {
		t.Fatalf("re-executing on the proven batch gave %s; honest %s, trained on slot %d's shards %s", got, honest, other, cheat)
	}
	// Nor can the stolen shards stand in for the worker's: they do not prove against its root.
	proofs, err := own.Prove(windows[:1])
	if err != nil {
		t.Fatal(err)
	}
	p := proofs[0]
	lo0, hi0 := p.Index*verifytypes.DataChunkSize, p.Index*verifytypes.DataChunkSize+uint64(len(p.Data))
	if hi0 <= uint64(len(stolen.Bytes)) && merkle.VerifyInclusion(root, p.Index, own.Chunks(), merkle.LeafHash(stolen.Bytes[lo0:hi0]), p.Proof) == nil {
		t.Fatal("slot 0's bytes prove as worker 1's")
	}
}
