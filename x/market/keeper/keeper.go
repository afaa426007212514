// Package keeper holds x/market's state and logic: jobs, bids, auctions,
// leases, escrow and lazily settled payment streams.
package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	"cosmossdk.io/collections/indexes"
	"cosmossdk.io/core/address"
	"cosmossdk.io/core/store"
	"cosmossdk.io/log"

	"github.com/cosmos/cosmos-sdk/codec"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
)

// JobIndexes lets queries list jobs by owner and by state without scanning all jobs.
type JobIndexes struct {
	Owner *indexes.Multi[[]byte, uint64, types.Job]
	State *indexes.Multi[int32, uint64, types.Job]
}

// IndexesList implements collections.Indexes.
func (i JobIndexes) IndexesList() []collections.Index[uint64, types.Job] {
	return []collections.Index[uint64, types.Job]{i.Owner, i.State}
}

// LeaseIndexes lists leases by provider (sidecars, withdrawals), by job (auctions,
// settlement) and by state (every active lease, for verifiers, without reading the
// closed ones). The state index came with consensus version 2; the "v2" upgrade
// back-fills it (migrations/v2).
type LeaseIndexes struct {
	Provider *indexes.Multi[[]byte, uint64, types.Lease]
	Job      *indexes.Multi[uint64, uint64, types.Lease]
	State    *indexes.Multi[int32, uint64, types.Lease]
}

// IndexesList implements collections.Indexes.
func (i LeaseIndexes) IndexesList() []collections.Index[uint64, types.Lease] {
	return []collections.Index[uint64, types.Lease]{i.Provider, i.Job, i.State}
}

// Keeper of x/market.
type Keeper struct {
	cdc          codec.BinaryCodec
	storeService store.KVStoreService
	addressCodec address.Codec
	authority    string

	accountKeeper  types.AccountKeeper
	bankKeeper     types.BankKeeper
	providerKeeper types.ProviderKeeper
	// custody bounds a job's custody section (x/shardregistry's params) and keeps its
	// custody objects. It is shared by every copy of the keeper (x/verify's calls
	// OnCheckpointFinal): the app fills it in with SetCustodyKeeper once that keeper
	// exists (it depends on this one).
	custody *custodyHolder
	// referee is shared by every copy of the keeper: the app fills it in once x/verify
	// exists (SetWorkloadReferee).
	referee *refereeHolder
	// roundTraces is shared by every copy of the keeper: the app fills it in once
	// x/verify exists (SetRoundTraceKeeper).
	roundTraces *roundTraceHolder

	Schema collections.Schema
	Params collections.Item[types.Params]
	Jobs   *collections.IndexedMap[uint64, types.Job, JobIndexes]
	// Bids are keyed (job, provider): one bid per provider per job, re-bidding replaces it.
	Bids   collections.Map[collections.Pair[uint64, []byte], types.Bid]
	Leases *collections.IndexedMap[uint64, types.Lease, LeaseIndexes]

	// The deadline indexes: EndBlock walks each from its start up to "now",
	// so a block's work depends on what is due in it, never on how many jobs exist.
	// BiddingDeadlines: (height, job) whose auction closes at the end of height.
	BiddingDeadlines collections.KeySet[collections.Pair[int64, uint64]]
	// CheckpointDeadlines: (height, lease) that must have checkpointed by the end of height.
	CheckpointDeadlines collections.KeySet[collections.Pair[int64, uint64]]
	// TimeDeadlines: (unix nanos, job) when a job's escrow runs dry or a lease reaches max duration.
	TimeDeadlines collections.KeySet[collections.Pair[int64, uint64]]
	// RateChecks: (unix nanos, lease) when an active lease's progress is next held against
	// its committed rate (consensus version 4).
	RateChecks collections.KeySet[collections.Pair[int64, uint64]]

	// Rounds of sync jobs, keyed (job, round); RoundCommits keyed (job, round, worker)
	// (consensus version 5).
	Rounds       collections.Map[collections.Pair[uint64, uint64], types.Round]
	RoundCommits collections.Map[collections.Triple[uint64, uint64, uint32], types.RoundCommit]
	// RoundDeadlines: (height, job, round) of rounds whose current state's deadline (commit,
	// aggregate or challenge) passes at the end of height.
	RoundDeadlines collections.KeySet[collections.Triple[int64, uint64, uint64]]

	NextJobID       collections.Sequence
	NextLeaseID     collections.Sequence
	NextBidSequence collections.Sequence
	// BlockHashes is the module's randomness beacon: recent block hashes it recorded itself.
	BlockHashes collections.Map[int64, []byte]
}

// NewKeeper builds the keeper and its state schema.
func NewKeeper(
	cdc codec.BinaryCodec,
	storeService store.KVStoreService,
	addressCodec address.Codec,
	ak types.AccountKeeper,
	bk types.BankKeeper,
	pk types.ProviderKeeper,
	authority string,
) Keeper {
	if _, err := addressCodec.StringToBytes(authority); err != nil {
		panic(fmt.Errorf("invalid x/market authority %q: %w", authority, err))
	}
	if ak.GetModuleAddress(types.ModuleName) == nil {
		panic("the x/market module account has not been set")
	}
	sb := collections.NewSchemaBuilder(storeService)
	k := Keeper{
		cdc:            cdc,
		storeService:   storeService,
		addressCodec:   addressCodec,
		authority:      authority,
		accountKeeper:  ak,
		bankKeeper:     bk,
		providerKeeper: pk,
		referee:        &refereeHolder{},
		roundTraces:    &roundTraceHolder{},
		custody:        &custodyHolder{},
		Params:         collections.NewItem(sb, types.ParamsKey, "params", codec.CollValue[types.Params](cdc)),
		Jobs: collections.NewIndexedMap(sb, types.JobsKey, "jobs", collections.Uint64Key, codec.CollValue[types.Job](cdc),
			JobIndexes{
				Owner: indexes.NewMulti(sb, types.JobsByOwnerKey, "jobs_by_owner", collections.BytesKey, collections.Uint64Key,
					func(_ uint64, j types.Job) ([]byte, error) { return addressCodec.StringToBytes(j.Owner) }),
				State: indexes.NewMulti(sb, types.JobsByStateKey, "jobs_by_state", collections.Int32Key, collections.Uint64Key,
					func(_ uint64, j types.Job) (int32, error) { return int32(j.State), nil }),
			}),
		Bids: collections.NewMap(sb, types.BidsKey, "bids",
			collections.PairKeyCodec(collections.Uint64Key, collections.BytesKey), codec.CollValue[types.Bid](cdc)),
		Leases: collections.NewIndexedMap(sb, types.LeasesKey, "leases", collections.Uint64Key, codec.CollValue[types.Lease](cdc),
			LeaseIndexes{
				Provider: indexes.NewMulti(sb, types.LeasesByProviderKey, "leases_by_provider", collections.BytesKey, collections.Uint64Key,
					func(_ uint64, l types.Lease) ([]byte, error) { return addressCodec.StringToBytes(l.Provider) }),
				Job: indexes.NewMulti(sb, types.LeasesByJobKey, "leases_by_job", collections.Uint64Key, collections.Uint64Key,
					func(_ uint64, l types.Lease) (uint64, error) { return l.JobId, nil }),
				State: indexes.NewMulti(sb, types.LeasesByStateKey, "leases_by_state", collections.Int32Key, collections.Uint64Key,
					func(_ uint64, l types.Lease) (int32, error) { return int32(l.State), nil }),
			}),
		BiddingDeadlines: collections.NewKeySet(sb, types.BiddingDeadlinesKey, "bidding_deadlines",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		CheckpointDeadlines: collections.NewKeySet(sb, types.CheckpointDeadlinesKey, "checkpoint_deadlines",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		TimeDeadlines: collections.NewKeySet(sb, types.TimeDeadlinesKey, "time_deadlines",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		RateChecks: collections.NewKeySet(sb, types.RateChecksKey, "rate_checks",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		Rounds: collections.NewMap(sb, types.RoundsKey, "rounds",
			collections.PairKeyCodec(collections.Uint64Key, collections.Uint64Key), codec.CollValue[types.Round](cdc)),
		RoundCommits: collections.NewMap(sb, types.RoundCommitsKey, "round_commits",
			collections.TripleKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.Uint32Key), codec.CollValue[types.RoundCommit](cdc)),
		RoundDeadlines: collections.NewKeySet(sb, types.RoundDeadlinesKey, "round_deadlines",
			collections.TripleKeyCodec(collections.Int64Key, collections.Uint64Key, collections.Uint64Key)),
		NextJobID:       collections.NewSequence(sb, types.NextJobIDKey, "next_job_id"),
		NextLeaseID:     collections.NewSequence(sb, types.NextLeaseIDKey, "next_lease_id"),
		NextBidSequence: collections.NewSequence(sb, types.NextBidSequenceKey, "next_bid_sequence"),
		BlockHashes:     collections.NewMap(sb, types.BlockHashesKey, "block_hashes", collections.Int64Key, collections.BytesValue),
	}
	schema, err := sb.Build()
	if err != nil {
		panic(err)
	}
	k.Schema = schema
	return k
}

// Authority is the address allowed to change params (the gov module account).
func (k Keeper) Authority() string { return k.authority }

// Logger returns a module-scoped logger.
func (k Keeper) Logger(ctx context.Context) log.Logger {
	return sdk.UnwrapSDKContext(ctx).Logger().With("module", "x/"+types.ModuleName)
}

// GetJob returns a job or ErrJobNotFound.
func (k Keeper) GetJob(ctx context.Context, id uint64) (types.Job, error) {
	job, err := k.Jobs.Get(ctx, id)
	if err != nil {
		return job, keeperutil.NotFound(err, types.ErrJobNotFound, "job %d", id)
	}
	return job, nil
}

// GetLease returns a lease or ErrLeaseNotFound.
func (k Keeper) GetLease(ctx context.Context, id uint64) (types.Lease, error) {
	lease, err := k.Leases.Get(ctx, id)
	if err != nil {
		return lease, keeperutil.NotFound(err, types.ErrLeaseNotFound, "lease %d", id)
	}
	return lease, nil
}

func (k Keeper) moduleAddress() sdk.AccAddress {
	return k.accountKeeper.GetModuleAddress(types.ModuleName)
}

type refereeHolder struct{ source types.WorkloadReferee }

// SetWorkloadReferee gives the keeper (and every copy of it) x/verify's judgement of which
// workloads a dispute could settle, so MsgSubmitJob refuses the others before escrowing.
func (k Keeper) SetWorkloadReferee(r types.WorkloadReferee) { k.referee.source = r }

type roundTraceHolder struct{ keeper types.RoundTraceKeeper }

// SetRoundTraceKeeper gives the keeper (and every copy of it) x/verify's view of round
// checkpoints, so a round's global waits for its entered workers' traces to be settled.
func (k Keeper) SetRoundTraceKeeper(r types.RoundTraceKeeper) { k.roundTraces.keeper = r }

type custodyHolder struct{ keeper types.CustodyKeeper }

// SetCustodyKeeper gives the keeper (and every copy of it) x/shardregistry's bounds on a
// job spec's custody section and its custody objects. The app calls it once, after
// building both keepers.
func (k Keeper) SetCustodyKeeper(c types.CustodyKeeper) { k.custody.keeper = c }
