package keeper

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// jobSeedDomain separates job seeds from every other use of the stored block hashes.
const jobSeedDomain = "depinchain/market/job-seed/v1"

// recordBlockHash stores this block's hash and forgets the one that fell out of the
// retention window. Consensus code derives randomness only from these stored hashes:
// never from anything a transaction sender chooses.
func (k Keeper) recordBlockHash(ctx sdk.Context) error {
	hash := ctx.HeaderHash()
	if len(hash) == 0 {
		return nil // no header hash outside of real block execution (e.g. genesis)
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	height := ctx.BlockHeight()
	if err := k.BlockHashes.Set(ctx, height, hash); err != nil {
		return err
	}
	return k.BlockHashes.Remove(ctx, height-int64(params.BlockHashRetention))
}

// BlockHash returns the hash the module stored for a height, for modules (x/verify,
// x/shardregistry) that derive challenges from it.
func (k Keeper) BlockHash(ctx context.Context, height int64) ([]byte, error) {
	hash, err := k.BlockHashes.Get(ctx, height)
	if err != nil {
		return nil, keeperutil.NotFound(err, types.ErrBlockHashUnavailable, "height %d", height)
	}
	return hash, nil
}

// jobSeed fixes a job's data order and shard assignment from the hash of the block that
// includes the job, which its owner could not know when signing.
func (k Keeper) jobSeed(ctx sdk.Context, jobID uint64) []byte {
	h := sha256.New()
	h.Write([]byte(jobSeedDomain))
	h.Write(ctx.HeaderHash())
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], jobID)
	h.Write(id[:])
	return h.Sum(nil)
}
