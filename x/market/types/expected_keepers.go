package types

import (
	"context"
	"time"

	"cosmossdk.io/core/address"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// WorkloadReferee is x/verify's side of job admission: whether a dispute over a step of
// this transformer configuration could be settled on chain. It returns an error that
// names the bound the configuration exceeds. The app sets it after both keepers exist
// (Keeper.SetWorkloadReferee); unset, nothing is refused for it.
type WorkloadReferee interface {
	CheckAdjudicable(ctx context.Context, cfg exact.Config) error
}

// AccountKeeper is what x/market needs from x/auth.
type AccountKeeper interface {
	AddressCodec() address.Codec
	GetModuleAddress(name string) sdk.AccAddress
}

// BankKeeper moves deposits into escrow and earnings and refunds out of it.
type BankKeeper interface {
	SendCoinsFromAccountToModule(ctx context.Context, senderAddr sdk.AccAddress, recipientModule string, amt sdk.Coins) error
	SendCoinsFromModuleToAccount(ctx context.Context, senderModule string, recipientAddr sdk.AccAddress, amt sdk.Coins) error
	// SendCoinsFromModuleToModule moves audit fees to x/verify and credits back from it.
	SendCoinsFromModuleToModule(ctx context.Context, senderModule, recipientModule string, amt sdk.Coins) error
	GetBalance(ctx context.Context, addr sdk.AccAddress, denom string) sdk.Coin
}

// ProviderKeeper is the slice of x/stakingext that the market uses: bid
// eligibility, collateral, penalties for non-performance and reputation.
type ProviderKeeper interface {
	CheckCanBid(ctx context.Context, operator sdk.AccAddress, collateral sdk.Coin) (stakingexttypes.Provider, error)
	LockCollateral(ctx context.Context, operator sdk.AccAddress, ref string, amount sdk.Coin) error
	UnlockCollateral(ctx context.Context, operator sdk.AccAddress, ref string) (sdk.Coin, error)
	Slash(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, reason string, beneficiary sdk.AccAddress, beneficiaryShare math.LegacyDec) (sdk.Coin, error)
	Jail(ctx context.Context, operator sdk.AccAddress, until time.Time, reason string) error
	RecordLeaseOutcome(ctx context.Context, operator sdk.AccAddress, completed bool) error
	ReputationScore(ctx context.Context, operator sdk.AccAddress) (int64, error)
}

// CustodyPolicy is x/shardregistry's check of a job spec's custody section against its
// params (piece counts, the retention bound) and the storage budget the job reserves for
// its holders from the deposit.
type CustodyPolicy interface {
	CheckCustodySpec(ctx context.Context, spec CustodySpec) error
	CustodyStorageBudget(ctx context.Context, spec CustodySpec) (math.Int, error)
}

// RoundCustody is x/shardregistry's custody of a sync job's round files, the same
// erasure-coded objects as checkpoint states (x/verify's path): a pseudo-gradient
// (pg-<job>-<round>-<worker>) or a global state (global-<job>-<round>) is registered
// with its pieces' roots, and counts as held once its data pieces have proven holders.
// The app sets it with SetRoundCustody; a sync job cannot run without it.
type RoundCustody interface {
	RegisterRoundCustody(ctx context.Context, id, owner, trainer string, jobID, leaseID, round uint64, root []byte, size uint64, dataPieces, parityPieces uint32, retainSeconds uint64, pieceRoots [][]byte) error
	CustodyHolders(ctx context.Context, id string) (live, needed uint32, err error)
	ReleaseCustodyNow(ctx context.Context, id string) error
	ReleaseCustodyAfterRetention(ctx context.Context, id string) error
}
