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

// RoundTraceKeeper is x/verify's side of a round's finality. A worker's round checkpoint
// is the trace its pseudo-gradient was computed from; proven wrong in a game, it excludes
// the worker from the round, whose global is then aggregated again without it. So a
// round's global is not final while the checkpoint of one of its entered workers can
// still be challenged or is under challenge. The app sets it after both keepers exist
// (Keeper.SetRoundTraceKeeper); unset, nothing waits for it.
type RoundTraceKeeper interface {
	// RoundCheckpointPending reports whether lease's checkpoint ending at endStep is still
	// pending (in its challenge window, under challenge, or waiting to finalize).
	RoundCheckpointPending(ctx context.Context, leaseID, endStep uint64) (bool, error)
	// DiscardRoundCheckpoints sets aside, with no penalty, the lease's pending checkpoints
	// from fromStep on: they trained a round deleted with its voided start global, which
	// the lease redoes from the new global (its next checkpoint starts at fromStep).
	DiscardRoundCheckpoints(ctx context.Context, leaseID, fromStep uint64, reason string) error
	// RoundFilesQueried reports whether a file query (a worker made to open its start
	// state or error buffer) is open on a commit of the round: one may end in the
	// worker's exclusion.
	RoundFilesQueried(ctx context.Context, jobID, round uint64) (bool, error)
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

// CustodyKeeper is x/shardregistry's side of a job's custody: the check of a custody
// section against its params (piece counts, the retention bound), the storage budget the
// job reserves for its holders from the deposit, and the retention of the custody objects
// holding its final checkpoints' states.
type CustodyKeeper interface {
	CheckCustodySpec(ctx context.Context, spec CustodySpec) error
	CustodyStorageBudget(ctx context.Context, spec CustodySpec) (math.Int, error)
	// ReleaseCustodyAfterRetention schedules custody object id's release the job's
	// retain_checkpoints from now (an object already released is left alone).
	ReleaseCustodyAfterRetention(ctx context.Context, id string) error
	// WalkCustody visits every custody object still held (the v5 migration counts them).
	WalkCustody(ctx context.Context, visit func(HeldCustody) error) error

	// A sync job's round files are the same erasure-coded objects as checkpoint states
	// (x/verify's path): a pseudo-gradient (pg-<job>-<round>-<worker>) or a global state
	// (global-<job>-<round>) is registered with its pieces' roots, and counts as held once
	// its data pieces have proven holders.
	RegisterRoundCustody(ctx context.Context, id, owner, trainer string, jobID, leaseID, round uint64, root []byte, size uint64, dataPieces, parityPieces uint32, retainSeconds uint64, pieceRoots [][]byte) error
	CustodyHolders(ctx context.Context, id string) (live, needed uint32, err error)
	ReleaseCustodyNow(ctx context.Context, id string) error

	// DatasetShardCount is how many shards a registered dataset has (fixed at
	// registration): a sync job's rounds assign them among its worker slots.
	DatasetShardCount(ctx context.Context, id string) (uint32, error)
}

// HeldCustody is what x/market needs to know of a custody object x/shardregistry holds.
type HeldCustody struct {
	ID              string
	JobID           uint64
	LeaseID         uint64
	CheckpointIndex uint64
	StateRoot       []byte
	// ReleaseScheduled is set once the object's release time is fixed.
	ReleaseScheduled bool
}
