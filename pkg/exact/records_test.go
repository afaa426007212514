package exact

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
)

func TestStepRecordsChainRootsAndProveChunks(t *testing.T) {
	s := trained(t, tinyConfig(), 1)
	b, err := StepBatch(s.Config, testSeed, s.Step, testCorpus)
	require.NoError(t, err)
	var outs []*Tensor
	recs, next, err := (&Executor{Observer: func(op *Op, out *Tensor) {
		if op.Index%97 == 0 {
			outs = append(outs, &Tensor{Spec: out.Spec, Data: append([]int64(nil), out.Data...)})
		}
	}}).StepRecords(s, b)
	require.NoError(t, err)
	want, _, err := Step(s, b)
	require.NoError(t, err)
	require.Equal(t, want.Root(), next.Root())
	g := TrainGraph(s.Config)
	require.Len(t, recs, len(g.Ops))
	produced := map[int]merkle.Hash{}
	for i, r := range recs {
		op := g.Ops[i]
		require.Equal(t, op.Index, r.Index)
		require.Equal(t, op.Kind, r.Kind)
		for j, in := range op.Inputs {
			if h, ok := produced[in]; ok {
				require.Equal(t, h, r.InputRoots[j], "op %d input %d is the producer's output", i, j)
			}
		}
		produced[op.Output] = r.OutputRoot
	}
	// A state tensor's input root is the root of its bytes in the state.
	wid := g.ID("tok_emb.w")
	for _, r := range recs {
		if g.Ops[r.Index].Inputs[0] == wid {
			require.Equal(t, s.Tensor("tok_emb.w").Root(), r.InputRoots[0])
			break
		}
	}
	for _, out := range outs {
		for _, c := range []int{0, out.Spec.Chunks() - 1} {
			chunk, proof, err := out.ChunkProof(c)
			require.NoError(t, err)
			require.NoError(t, merkle.VerifyInclusion(out.Root(), uint64(c), uint64(out.Spec.Chunks()), merkle.LeafHash(chunk), proof))
		}
		_, _, err := out.ChunkProof(out.Spec.Chunks())
		require.Error(t, err)
	}
}
