package keeper

import (
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// hashFromBytes checks that b is a 32-byte hash, naming the field otherwise.
func hashFromBytes(field string, b []byte) (merkle.Hash, error) {
	h, err := merkle.HashFromBytes(b)
	if err != nil {
		return h, errorsmod.Wrapf(types.ErrInvalidHash, "%s: must be 32 bytes, got %d", field, len(b))
	}
	return h, nil
}

// verifyTraceLeaf checks that value is leaf `offset` of a trace tree of `size` leaves,
// charging gas per hash before hashing. The size comes from the checkpoint's step range
// (on-chain), never from the prover: RFC 6962 proofs do not commit to the tree size.
func verifyTraceLeaf(ctx sdk.Context, params types.Params, field string, root []byte, offset, size uint64, value []byte, proofBytes [][]byte) error {
	rootHash, err := hashFromBytes(field+" root", root)
	if err != nil {
		return err
	}
	leafValue, err := hashFromBytes(field, value)
	if err != nil {
		return err
	}
	return verifyInclusion(ctx, params, field, rootHash, offset, size, merkle.LeafHash(leafValue[:]), proofBytes)
}

func verifyInclusion(ctx sdk.Context, params types.Params, field string, root merkle.Hash, index, size uint64, leaf merkle.Hash, proofBytes [][]byte) error {
	if want := merkle.ProofLength(index, size); want < 0 || len(proofBytes) != want {
		return errorsmod.Wrapf(types.ErrInvalidProof, "%s: proof for leaf %d of %d must have %d hashes, got %d", field, index, size, want, len(proofBytes))
	}
	proof := make([]merkle.Hash, len(proofBytes))
	for i, p := range proofBytes {
		h, err := hashFromBytes(field+" proof", p)
		if err != nil {
			return err
		}
		proof[i] = h
	}
	ctx.GasMeter().ConsumeGas(params.GasPerHash*uint64(len(proof)+1), "merkle proof")
	if err := merkle.VerifyInclusion(root, index, size, leaf, proof); err != nil {
		return keeperutil.WrapCause(types.ErrInvalidProof, err, "%s", field)
	}
	return nil
}
