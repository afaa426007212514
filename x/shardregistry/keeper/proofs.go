package keeper

import (
	"context"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// seedHash is the block hash x/market stored at a challenge's seed height.
func (k Keeper) seedHash(ctx context.Context, seedHeight int64) ([]byte, error) {
	if h := sdk.UnwrapSDKContext(ctx).BlockHeight(); seedHeight > h {
		return nil, errorsmod.Wrapf(types.ErrChallengeNotOpen, "its seed block %d is not reached yet (height %d)", seedHeight, h)
	}
	hash, err := k.marketKeeper.BlockHash(ctx, seedHeight)
	if err != nil {
		if !keeperutil.IsNotFound(err) {
			return nil, err
		}
		return nil, keeperutil.WithCause(errorsmod.Wrapf(types.ErrBlockHashUnavailable,
			"x/market holds no block hash for height %d (%s); its block_hash_retention must cover period_blocks", seedHeight, err), err)
	}
	return hash, nil
}

// challengeIndices derives the chunks challenged for a replica key in a period seeded at
// seedHeight (see types.ChallengeIndices), charging gas for the hashes when charge is set.
func (k Keeper) challengeIndices(ctx context.Context, params types.Params, replicaKey []byte, period uint64, seedHeight int64, chunkCount uint64, charge bool) ([]uint64, error) {
	hash, err := k.seedHash(ctx, seedHeight)
	if err != nil {
		return nil, err
	}
	if charge {
		// The derivation hashes at most 1 + challenges_per_period times: charge that up front.
		sdk.UnwrapSDKContext(ctx).GasMeter().ConsumeGas(params.GasPerHash*uint64(1+params.ChallengesPerPeriod), "storage challenge derivation")
	}
	indices, _ := types.ChallengeIndices(hash, replicaKey, period, chunkCount, params.ChallengesPerPeriod)
	return indices, nil
}

// verifyChunkProofs checks that proofs answer exactly the challenged indices of a piece,
// in order, each with the chunk's exact length and an RFC 6962 proof of exactly
// merkle.ProofLength hashes against the piece's registered root. The piece's size and
// chunk count come from the chain, never from the prover: a proof does not commit to
// the tree size. Gas is charged per chunk before it is hashed: gas_per_byte for each
// byte and gas_per_hash for the leaf and each proof hash.
func verifyChunkProofs(ctx sdk.Context, params types.Params, piece types.Piece, chunkSize uint32, indices []uint64, proofs []types.ChunkProof) error {
	if len(proofs) != len(indices) {
		return errorsmod.Wrapf(types.ErrInvalidProof, "the challenge asks for %d chunks %v, got %d proofs", len(indices), indices, len(proofs))
	}
	root, err := merkle.HashFromBytes(piece.Root)
	if err != nil {
		return keeperutil.WrapCause(types.ErrInvalidProof, err, "piece root")
	}
	for j, p := range proofs {
		want := indices[j]
		if p.Index != want {
			return errorsmod.Wrapf(types.ErrInvalidProof, "proof %d is for chunk %d, but the challenge asks for chunk %d (challenged: %v)", j, p.Index, want, indices)
		}
		if wantLen := types.ChunkLength(piece.SizeBytes, chunkSize, want); uint64(len(p.Chunk)) != wantLen {
			return errorsmod.Wrapf(types.ErrInvalidProof, "chunk %d is %d bytes, must be %d", want, len(p.Chunk), wantLen)
		}
		if depth := merkle.ProofLength(want, piece.ChunkCount); depth < 0 || len(p.Proof) != depth {
			return errorsmod.Wrapf(types.ErrInvalidProof, "proof of chunk %d has %d hashes; in a piece of %d chunks it must have exactly %d",
				want, len(p.Proof), piece.ChunkCount, depth)
		}
		path := make([]merkle.Hash, len(p.Proof))
		for i, b := range p.Proof {
			h, err := merkle.HashFromBytes(b)
			if err != nil {
				return keeperutil.WrapCause(types.ErrInvalidProof, err, "proof of chunk %d, hash %d", want, i)
			}
			path[i] = h
		}
		ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(len(p.Chunk))+params.GasPerHash*uint64(len(path)+1), "storage proof")
		if err := merkle.VerifyInclusion(root, want, piece.ChunkCount, merkle.LeafHash(p.Chunk), path); err != nil {
			return keeperutil.WrapCause(types.ErrInvalidProof, err, "chunk %d does not match piece root %x", want, piece.Root)
		}
	}
	return nil
}

// ProofGas is the gas verifyChunkProofs charges for one chunk of chunkLen bytes with a
// proof of depth hashes (tests and clients use it to budget).
func ProofGas(params types.Params, chunkLen, depth int) uint64 {
	return params.GasPerByte*uint64(chunkLen) + params.GasPerHash*uint64(depth+1)
}
