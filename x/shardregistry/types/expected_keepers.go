package types

import (
	"context"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// ProviderKeeper is the slice of x/stakingext that storage providers go through: who may
// hold a replica, the collateral lock each replica holds, and the slashes for misses.
type ProviderKeeper interface {
	GetProvider(ctx context.Context, operator sdk.AccAddress) (stakingexttypes.Provider, error)
	LockCollateral(ctx context.Context, operator sdk.AccAddress, ref string, amount sdk.Coin) error
	UnlockCollateral(ctx context.Context, operator sdk.AccAddress, ref string) (sdk.Coin, error)
	Slash(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, reason string, beneficiary sdk.AccAddress, beneficiaryShare math.LegacyDec) (sdk.Coin, error)
}

// MarketKeeper gives the randomness beacon (block hashes x/market stored itself), the
// jobs whose workers are assigned shards, and the storage pay of custody holders.
type MarketKeeper interface {
	BlockHash(ctx context.Context, height int64) ([]byte, error)
	GetJob(ctx context.Context, id uint64) (markettypes.Job, error)
	// PayStorage pays a custody holder for one proven period, from the job's storage
	// escrow (never its step escrow), at most what is left of it; it returns what it paid.
	PayStorage(ctx context.Context, jobID uint64, holder sdk.AccAddress, amount math.Int) (sdk.Coin, error)
	// OnCustodyRegistered and OnCustodyReleased keep the job's count of custody objects
	// held; the release of an ended job's last one refunds its storage escrow left.
	OnCustodyRegistered(ctx context.Context, jobID uint64) error
	OnCustodyReleased(ctx context.Context, jobID uint64) error
}
