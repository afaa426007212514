package types

import (
	"context"

	"cosmossdk.io/core/address"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
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

// MarketKeeper is x/market's side of verified training: payment moves with checkpoints,
// audit fees come from the escrow and go back to it, and the block hashes are the
// randomness of the audit draw.
type MarketKeeper interface {
	GetJob(ctx context.Context, id uint64) (markettypes.Job, error)
	GetLease(ctx context.Context, id uint64) (markettypes.Lease, error)
	// OnCheckpointSubmitted claims the pay for the lease's steps up to endStep (pay for work).
	OnCheckpointSubmitted(ctx context.Context, leaseID, endStep uint64) (sdk.Coin, error)
	// OnCheckpointFinal releases the claim and records the worker's progress; custodyID
	// names the custody object holding the state, whose retention x/market then manages.
	OnCheckpointFinal(ctx context.Context, leaseID uint64, claim sdk.Coin, step uint64, stateHash []byte, uri, custodyID string) error
	// OnCheckpointRejected returns the unfinalized pay it refunded to the job.
	OnCheckpointRejected(ctx context.Context, leaseID uint64) (sdk.Coin, error)
	// OnCheckpointWithheld closes the lease for non-performance: its auditors could not
	// fetch the state its checkpoint starts from.
	OnCheckpointWithheld(ctx context.Context, leaseID uint64, reason string) error
	// TakeAuditFees moves up to want fees of perAuditor from the job's escrow to toModule
	// and returns how many it could pay.
	TakeAuditFees(ctx context.Context, jobID, leaseID, index uint64, perAuditor sdk.Coin, want uint32, toModule string) (uint32, error)
	// CreditJob moves amount from fromModule to the job's escrow (to its owner once the
	// job is over). kind says what it is: markettypes.CreditAuditFee, ...
	CreditJob(ctx context.Context, fromModule string, jobID uint64, amount sdk.Coin, kind string) error
	BlockHash(ctx context.Context, height int64) ([]byte, error)

	// Training rounds (jobs with a sync spec): what a round fault proof is checked against,
	// and what its conviction changes.
	GetRound(ctx context.Context, jobID, round uint64) (markettypes.Round, error)
	GetRoundCommit(ctx context.Context, jobID, round uint64, worker uint32) (markettypes.RoundCommit, error)
	// ExcludeRoundWorker removes a convicted worker from the round's entered list and voids
	// a committed aggregation of that round (it is re-aggregated without the worker).
	ExcludeRoundWorker(ctx context.Context, jobID, round uint64, worker uint32, reason string) error
	// RejectGlobal voids the round's committed aggregation (G_{round+1}) and the rounds
	// built on it, and returns its aggregator.
	RejectGlobal(ctx context.Context, jobID, round uint64) (aggregator string, err error)
}

// ProviderKeeper is x/stakingext: it punishes a provider proven to have committed a
// wrong checkpoint, and keeps the verifiers the audits draw from.
type ProviderKeeper interface {
	SlashInfraction(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, infractionHeight int64, reason, recipientModule string) (sdk.Coin, error)
	Tombstone(ctx context.Context, operator sdk.AccAddress, reason string) error
	GetParams(ctx context.Context) (stakingexttypes.Params, error)

	DrawVerifiers(ctx context.Context, seed []byte, count uint32, exclude string) ([]string, error)
	SlashVerifier(ctx context.Context, operator sdk.AccAddress, fraction math.LegacyDec, infractionHeight int64, reason, recipientModule string) (sdk.Coin, error)
	TombstoneVerifier(ctx context.Context, operator sdk.AccAddress, reason string) error
	DeactivateVerifier(ctx context.Context, operator sdk.AccAddress, reason string) error
	RecordAudit(ctx context.Context, operator sdk.AccAddress, outcome stakingexttypes.AuditOutcome) error
}

// DistributionKeeper receives what a conviction's slash leaves after the challenger and
// the owner, and the community pool's share of lost challenger bonds.
type DistributionKeeper interface {
	FundCommunityPool(ctx context.Context, amount sdk.Coins, sender sdk.AccAddress) error
}

// ShardKeeper gives the referee a dataset-backed job's data layout: the worker's shards
// (assigned by rendezvous hashing on the job seed) and their piece roots, registered up
// front in x/shardregistry.
type ShardKeeper interface {
	GetDataset(ctx context.Context, id string) (shardtypes.Dataset, error)
	// RegisterCustody registers a checkpoint's state as a custody object of
	// erasure-coded pieces (it checks the data pieces' roots against info.StateRoot).
	RegisterCustody(ctx context.Context, owner string, info shardtypes.CustodyInfo, stateSize uint64, dataPieces, parityPieces uint32, pieceRoots [][]byte) (shardtypes.Dataset, error)
	// CustodyHolders is how many of a custody object's pieces have an active, proven
	// holder, and how many its state needs to be rebuilt.
	CustodyHolders(ctx context.Context, id string) (live, needed uint32, err error)
	// CustodyPieceRoots is a custody object's layout and registered piece roots (data
	// pieces first), what a parity fraud proof is checked against.
	CustodyPieceRoots(ctx context.Context, id string) (custody.Layout, []merkle.Hash, error)
	// ReleaseCustodyNow ends a custody object's retention now (withheld or rejected
	// checkpoint). Final checkpoints' objects are x/market's to retain (OnCheckpointFinal).
	ReleaseCustodyNow(ctx context.Context, id string) error
	WorkerShards(ctx context.Context, jobID uint64, worker uint32, epoch uint64) ([]shardtypes.Shard, error)
	// RoundWorkerShards is worker's shards in round of a job that trains in rounds
	// (shardtypes.AssignRoundShards); none for a slot the round gives no shard.
	RoundWorkerShards(ctx context.Context, jobID uint64, worker uint32, round uint64) ([]shardtypes.Shard, error)
}
