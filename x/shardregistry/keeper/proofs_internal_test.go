package keeper

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"testing"

	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/log"
	storetypes "cosmossdk.io/store/types"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

func gasCtx() sdk.Context {
	return sdk.NewContext(nil, cmtproto.Header{}, false, log.NewNopLogger()).WithGasMeter(storetypes.NewGasMeter(1 << 40))
}

// syntheticProof makes a valid proof of chunk index in a perfect tree of 2^depth chunks
// without hashing the other chunks: siblings are random and the root is folded from them.
func syntheticProof(rng *rand.Rand, depth int, chunk []byte) (types.Piece, types.ChunkProof, uint64) {
	count := uint64(1) << depth
	index := rng.Uint64() % count
	node := merkle.LeafHash(chunk)
	proof := types.ChunkProof{Index: index, Chunk: chunk}
	for level := 0; level < depth; level++ {
		var sibling merkle.Hash
		rng.Read(sibling[:])
		if index>>level&1 == 1 {
			node = merkle.NodeHash(sibling, node)
		} else {
			node = merkle.NodeHash(node, sibling)
		}
		proof.Proof = append(proof.Proof, bytes.Clone(sibling[:]))
	}
	piece := types.Piece{Root: node[:], SizeBytes: count * uint64(len(chunk)), ChunkCount: count}
	return piece, proof, index
}

// TestProofGasIsExact: verification charges exactly gas_per_byte per chunk byte plus
// gas_per_hash per hash (leaf and proof), and a proof of the wrong depth is rejected
// before any gas is charged or anything hashed.
func TestProofGasIsExact(t *testing.T) {
	params := types.DefaultParams()
	rng := rand.New(rand.NewSource(1))
	chunk := make([]byte, 4096)
	rng.Read(chunk)
	for _, depth := range []int{0, 1, 7, 20, 40} {
		piece, proof, index := syntheticProof(rng, depth, chunk)
		ctx := gasCtx()
		require.NoError(t, verifyChunkProofs(ctx, params, piece, 4096, []uint64{index}, []types.ChunkProof{proof}))
		require.Equal(t, ProofGas(params, 4096, depth), ctx.GasMeter().GasConsumed(), "depth %d", depth)
		require.Equal(t, params.GasPerByte*4096+params.GasPerHash*uint64(depth+1), ctx.GasMeter().GasConsumed())

		deep := proof
		deep.Proof = append(append([][]byte(nil), proof.Proof...), make([]byte, 32))
		ctx = gasCtx()
		err := verifyChunkProofs(ctx, params, piece, 4096, []uint64{index}, []types.ChunkProof{deep})
		require.ErrorIs(t, err, types.ErrInvalidProof)
		require.Contains(t, err.Error(), fmt.Sprintf("must have exactly %d", depth))
		require.Zero(t, ctx.GasMeter().GasConsumed(), "rejected before hashing")
	}
	// The tree size comes from the chain: the same hashes claimed against a larger
	// piece (a deeper tree) are refused.
	piece, proof, index := syntheticProof(rng, 5, chunk)
	piece.ChunkCount *= 4
	piece.SizeBytes *= 4
	err := verifyChunkProofs(gasCtx(), params, piece, 4096, []uint64{index}, []types.ChunkProof{proof})
	require.ErrorIs(t, err, types.ErrInvalidProof)
}

// BenchmarkVerifyStorageProof: one 4 KiB chunk's proof at growing tree depth; gas/op is
// what the chain charges for it.
func BenchmarkVerifyStorageProof(b *testing.B) {
	params := types.DefaultParams()
	chunk := bytes.Repeat([]byte{0x5a}, 4096)
	for _, depth := range []int{0, 4, 8, 12, 16, 20, 24, 32} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			piece, proof, index := syntheticProof(rand.New(rand.NewSource(int64(depth))), depth, chunk)
			proofs, indices := []types.ChunkProof{proof}, []uint64{index}
			var gas uint64
			base := gasCtx()
			for b.Loop() {
				ctx := base.WithGasMeter(storetypes.NewGasMeter(1 << 40))
				if err := verifyChunkProofs(ctx, params, piece, 4096, indices, proofs); err != nil {
					b.Fatal(err)
				}
				gas = ctx.GasMeter().GasConsumed()
			}
			b.ReportMetric(float64(gas), "gas/op")
			b.ReportMetric(float64(depth+1), "hashes/op")
		})
	}
}

// BenchmarkChallengeIndices: deriving a period's challenge.
func BenchmarkChallengeIndices(b *testing.B) {
	hash := sha256.Sum256([]byte("block"))
	key := types.ReplicaKey("corpus-v1", 3, 2, bytes.Repeat([]byte{1}, 20))
	for b.Loop() {
		types.ChallengeIndices(hash[:], key, 42, 1<<20, 4)
	}
}
