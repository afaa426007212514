package types

import (
	"context"

	"cosmossdk.io/core/address"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// AccountKeeper is what x/verify needs from x/auth.
type AccountKeeper interface {
	AddressCodec() address.Codec
	GetModuleAddress(name string) sdk.AccAddress
}

// BankKeeper holds challenger bonds and pays them out.
type BankKeeper interface {
	SendCoinsFromAccountToModule(ctx context.Context, senderAddr sdk.AccAddress, recipientModule string, amt sdk.Coins) error
	SendCoinsFromModuleToAccount(ctx context.Context, senderModule string, recipientAddr sdk.AccAddress, amt sdk.Coins) error
	GetBalance(ctx context.Context, addr sdk.AccAddress, denom string) sdk.Coin
}

// MarketKeeper is x/market's side of verified training: payment moves with checkpoints.
type MarketKeeper interface {
	GetJob(ctx context.Context, id uint64) (markettypes.Job, error)
	GetLease(ctx context.Context, id uint64) (markettypes.Lease, error)
	OnCheckpointSubmitted(ctx context.Context, leaseID uint64) (sdk.Coin, error)
	OnCheckpointFinal(ctx context.Context, leaseID uint64, claim sdk.Coin, step uint64, stateHash []byte, uri string) error
	OnCheckpointRejected(ctx context.Context, leaseID uint64) error
}

// ProviderKeeper punishes a provider proven to have committed a wrong checkpoint.
type ProviderKeeper interface {
	Slash(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, reason string, beneficiary sdk.AccAddress, beneficiaryShare math.LegacyDec) (sdk.Coin, error)
	Tombstone(ctx context.Context, operator sdk.AccAddress, reason string) error
}

// ShardKeeper gives the referee a dataset-backed job's data layout: the worker's shards
// (assigned by rendezvous hashing on the job seed) and their piece roots, registered up
// front in x/shardregistry.
type ShardKeeper interface {
	GetDataset(ctx context.Context, id string) (shardtypes.Dataset, error)
	WorkerShards(ctx context.Context, jobID uint64, worker uint32, epoch uint64) ([]shardtypes.Shard, error)
}
