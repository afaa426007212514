package trace_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
)

func TestTrace(t *testing.T) {
	hs := make([]merkle.Hash, 17)
	leaves := make([][]byte, len(hs))
	for i := range hs {
		hs[i] = merkle.LeafHash([]byte{byte(i)})
		leaves[i] = hs[i][:]
	}
	tr := trace.New(100, hs)
	require.Equal(t, uint64(116), tr.End())
	require.Equal(t, merkle.Root(leaves), tr.Root(), "the trace tree's leaves are the step hashes")
	for step := uint64(100); step <= 116; step++ {
		h, proofBytes, err := tr.Open(step)
		require.NoError(t, err)
		require.Equal(t, hs[step-100], h)
		proof := make([]merkle.Hash, len(proofBytes))
		for i, p := range proofBytes {
			proof[i], err = merkle.HashFromBytes(p)
			require.NoError(t, err)
		}
		require.NoError(t, merkle.VerifyInclusion(tr.Root(), step-100, 17, merkle.LeafHash(h[:]), proof))
	}
	for _, step := range []uint64{99, 117, 0} {
		_, _, err := tr.Open(step)
		require.ErrorIs(t, err, trace.ErrOutOfRange)
	}
	// merkle.HashesToBytes copies.
	b := merkle.HashesToBytes(hs[:1])
	b[0][0] ^= 1
	require.NotEqual(t, b[0], hs[0][:])
}
