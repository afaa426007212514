package disputes

import (
	"testing"

	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
)

// The sample is a pure function of the seed and the checkpoint: the same
// verifier decides the same way after a restart, different seeds pick
// different checkpoints, and the rate holds over many checkpoints.
func TestSamplingIsDeterministicPerSeed(t *testing.T) {
	a := config.Verifier{Policy: config.PolicySample, SampleRate: 0.25, Seed: 1}
	b := a
	b.Seed = 2
	picked, differ := 0, 0
	const n = 4000
	for i := range uint64(n) {
		ref := checkpoint.Ref{LeaseID: i / 10, Index: i % 10}
		if sampled(a, ref) != sampled(a, ref) {
			t.Fatalf("checkpoint %s sampled differently on a second look", ref)
		}
		if sampled(a, ref) {
			picked++
		}
		if sampled(a, ref) != sampled(b, ref) {
			differ++
		}
	}
	if picked < n*20/100 || picked > n*30/100 {
		t.Fatalf("seed 1 picked %d of %d at rate 0.25", picked, n)
	}
	if differ < n/5 {
		t.Fatalf("seeds 1 and 2 disagree on only %d of %d checkpoints", differ, n)
	}
	all := config.Verifier{Policy: config.PolicyAll}
	if !sampled(all, checkpoint.Ref{LeaseID: 1}) {
		t.Fatal("policy all skipped a checkpoint")
	}
}
