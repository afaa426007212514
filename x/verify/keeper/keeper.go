// Package keeper holds x/verify's state and logic: checkpoint commitments, optimistic
// finality after a challenge window, bisection games and the one-step referee.
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

	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// CheckpointKey identifies a checkpoint: (lease, index).
type CheckpointKey = collections.Pair[uint64, uint64]

// ChallengeIndexes finds the games on one checkpoint.
type ChallengeIndexes struct {
	Checkpoint *indexes.Multi[CheckpointKey, uint64, types.Challenge]
}

// IndexesList implements collections.Indexes.
func (i ChallengeIndexes) IndexesList() []collections.Index[uint64, types.Challenge] {
	return []collections.Index[uint64, types.Challenge]{i.Checkpoint}
}

// AuditKey identifies an audit assignment: (lease, checkpoint index, auditor).
type AuditKey = collections.Triple[uint64, uint64, string]

// AuditIndexes finds an auditor's assignments.
type AuditIndexes struct {
	Auditor *indexes.Multi[string, AuditKey, types.Audit]
}

// IndexesList implements collections.Indexes.
func (i AuditIndexes) IndexesList() []collections.Index[AuditKey, types.Audit] {
	return []collections.Index[AuditKey, types.Audit]{i.Auditor}
}

// Keeper of x/verify.
type Keeper struct {
	cdc          codec.BinaryCodec
	addressCodec address.Codec
	authority    string

	accountKeeper  types.AccountKeeper
	bankKeeper     types.BankKeeper
	marketKeeper   types.MarketKeeper
	providerKeeper types.ProviderKeeper
	shardKeeper    types.ShardKeeper
	distrKeeper    types.DistributionKeeper

	Schema      collections.Schema
	Params      collections.Item[types.Params]
	Checkpoints collections.Map[CheckpointKey, types.Checkpoint]
	Challenges  *collections.IndexedMap[uint64, types.Challenge, ChallengeIndexes]
	// Openings are the provider's proven hashes at bisection midpoints, per checkpoint;
	// every game on that checkpoint reuses them, so sybil challengers cannot make the
	// provider answer the same question twice.
	Openings collections.Map[collections.Triple[uint64, uint64, uint64], []byte]
	// OpeningHeights are the heights the openings were revealed at. A reveal does not
	// touch the games waiting on it (however many sham games there are, it costs the
	// provider one write): each such game reads that height when it next moves and
	// passes the turn to its challenger then (effective).
	OpeningHeights collections.Map[collections.Triple[uint64, uint64, uint64], int64]
	// Assignments are the auditors drawn for each checkpoint, by (lease, index, auditor).
	Assignments *collections.IndexedMap[AuditKey, types.Audit, AuditIndexes]
	// AuditDrawQueue: (height, lease, index) of checkpoints whose auditors are drawn at
	// the end of height (the block after submission, whose hash is the draw's seed).
	AuditDrawQueue collections.KeySet[collections.Triple[int64, uint64, uint64]]
	// FinalizationQueue: (height, lease, index) of checkpoints whose window closes at height.
	FinalizationQueue collections.KeySet[collections.Triple[int64, uint64, uint64]]
	// CustodyQueue: (height, lease, index) of checkpoints past their window that wait for
	// their custody holders; looked at again at height (custody_recheck_blocks apart).
	CustodyQueue collections.KeySet[collections.Triple[int64, uint64, uint64]]
	// MoveDeadlines: (height, challenge) by which the party whose turn it is must move.
	MoveDeadlines   collections.KeySet[collections.Pair[int64, uint64]]
	NextChallengeID collections.Sequence
	// TileGames holds the phase 2–3 state of challenges past phase 1 (tiles.go).
	TileGames collections.Map[uint64, types.TileGame]
	// FileQueries are the open file queries (filequery.go), by id; an ended one is deleted.
	FileQueries collections.Map[uint64, types.FileQuery]
	// FileQueryDeadlines: (height, query) by which the party whose turn it is must move.
	FileQueryDeadlines collections.KeySet[collections.Pair[int64, uint64]]
	// FileQuerySeq is the id the next file query gets.
	FileQuerySeq collections.Sequence
	// FileQueriesByCommit: the open queries on each commit, (job, round, worker, query id).
	FileQueriesByCommit collections.KeySet[FileQueryKey]

	// challengesByLease reads the Challenges.Checkpoint index, (lease, index, challenge),
	// as (lease, (index, challenge)), so that a query pages through one lease's challenges
	// with a lease prefix. It is a view of the index's entries, not state of its own.
	challengesByLease collections.KeySet[collections.Pair[uint64, CheckpointKey]]
	// auditsByAuditor reads the Assignments.Auditor index as a key set, for pagination.
	auditsByAuditor collections.KeySet[collections.Pair[string, AuditKey]]
}

// NewKeeper builds the keeper and its state schema.
func NewKeeper(
	cdc codec.BinaryCodec,
	storeService store.KVStoreService,
	addressCodec address.Codec,
	ak types.AccountKeeper,
	bk types.BankKeeper,
	mk types.MarketKeeper,
	pk types.ProviderKeeper,
	sk types.ShardKeeper,
	dk types.DistributionKeeper,
	authority string,
) Keeper {
	if _, err := addressCodec.StringToBytes(authority); err != nil {
		panic(fmt.Errorf("invalid x/verify authority %q: %w", authority, err))
	}
	if ak.GetModuleAddress(types.ModuleName) == nil {
		panic("the x/verify module account has not been set")
	}
	sb := collections.NewSchemaBuilder(storeService)
	cpKeyCodec := collections.PairKeyCodec(collections.Uint64Key, collections.Uint64Key)
	k := Keeper{
		cdc:            cdc,
		addressCodec:   addressCodec,
		authority:      authority,
		accountKeeper:  ak,
		bankKeeper:     bk,
		marketKeeper:   mk,
		providerKeeper: pk,
		shardKeeper:    sk,
		distrKeeper:    dk,
		Params:         collections.NewItem(sb, types.ParamsKey, "params", codec.CollValue[types.Params](cdc)),
		Checkpoints:    collections.NewMap(sb, types.CheckpointsKey, "checkpoints", cpKeyCodec, codec.CollValue[types.Checkpoint](cdc)),
		Challenges: collections.NewIndexedMap(sb, types.ChallengesKey, "challenges", collections.Uint64Key, codec.CollValue[types.Challenge](cdc),
			ChallengeIndexes{Checkpoint: indexes.NewMulti(sb, types.ChallengesByCheckpoint, "challenges_by_checkpoint", cpKeyCodec, collections.Uint64Key,
				func(_ uint64, c types.Challenge) (CheckpointKey, error) {
					return collections.Join(c.LeaseId, c.CheckpointIndex), nil
				})}),
		Openings: collections.NewMap(sb, types.OpeningsKey, "openings",
			collections.TripleKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.Uint64Key), collections.BytesValue),
		FinalizationQueue: collections.NewKeySet(sb, types.FinalizationQueueKey, "finalization_queue",
			collections.TripleKeyCodec(collections.Int64Key, collections.Uint64Key, collections.Uint64Key)),
		CustodyQueue: collections.NewKeySet(sb, types.CustodyQueueKey, "custody_queue",
			collections.TripleKeyCodec(collections.Int64Key, collections.Uint64Key, collections.Uint64Key)),
		MoveDeadlines: collections.NewKeySet(sb, types.MoveDeadlinesKey, "move_deadlines",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		NextChallengeID: collections.NewSequence(sb, types.NextChallengeIDKey, "next_challenge_id"),
		TileGames:       collections.NewMap(sb, types.TileGamesKey, "tile_games", collections.Uint64Key, codec.CollValue[types.TileGame](cdc)),
		FileQueries:     collections.NewMap(sb, types.FileQueriesKey, "file_queries", collections.Uint64Key, codec.CollValue[types.FileQuery](cdc)),
		FileQueryDeadlines: collections.NewKeySet(sb, types.FileQueryDeadlinesKey, "file_query_deadlines",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		FileQuerySeq: collections.NewSequence(sb, types.FileQuerySeqKey, "file_query_seq"),
		FileQueriesByCommit: collections.NewKeySet(sb, types.FileQueriesByCommitKey, "file_queries_by_commit",
			collections.QuadKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.Uint32Key, collections.Uint64Key)),
		OpeningHeights: collections.NewMap(sb, types.OpeningHeightsKey, "opening_heights",
			collections.TripleKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.Uint64Key), collections.Int64Value),
		Assignments: collections.NewIndexedMap(sb, types.AuditsKey, "audits",
			collections.TripleKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.StringKey), codec.CollValue[types.Audit](cdc),
			AuditIndexes{Auditor: indexes.NewMulti(sb, types.AuditsByAuditor, "audits_by_auditor", collections.StringKey,
				collections.TripleKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.StringKey),
				func(_ AuditKey, a types.Audit) (string, error) { return a.Auditor, nil })}),
		AuditDrawQueue: collections.NewKeySet(sb, types.AuditDrawQueueKey, "audit_draw_queue",
			collections.TripleKeyCodec(collections.Int64Key, collections.Uint64Key, collections.Uint64Key)),
	}
	schema, err := sb.Build()
	if err != nil {
		panic(err)
	}
	k.Schema = schema

	views := collections.NewSchemaBuilder(storeService)
	k.challengesByLease = collections.NewKeySet(views, types.ChallengesByCheckpoint, "challenges_by_checkpoint",
		collections.PairKeyCodec(collections.Uint64Key, cpKeyCodec))
	k.auditsByAuditor = collections.NewKeySet(views, types.AuditsByAuditor, "audits_by_auditor",
		collections.PairKeyCodec(collections.StringKey, collections.TripleKeyCodec(collections.Uint64Key, collections.Uint64Key, collections.StringKey)))
	return k
}

// RequiredUnbondingBlocks is how long an unbonding must stay slashable for the current
// params (types.Params.RequiredUnbondingBlocks); x/stakingext checks its
// unbonding_blocks against it.
func (k Keeper) RequiredUnbondingBlocks(ctx context.Context) (uint64, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	return params.RequiredUnbondingBlocks(), nil
}

// Authority is the address allowed to change params.
func (k Keeper) Authority() string { return k.authority }

// Logger returns a module-scoped logger.
func (k Keeper) Logger(ctx context.Context) log.Logger {
	return sdk.UnwrapSDKContext(ctx).Logger().With("module", "x/"+types.ModuleName)
}

// GetCheckpoint returns a checkpoint or ErrCheckpointNotFound.
func (k Keeper) GetCheckpoint(ctx context.Context, leaseID, index uint64) (types.Checkpoint, error) {
	cp, err := k.Checkpoints.Get(ctx, collections.Join(leaseID, index))
	if err != nil {
		return cp, keeperutil.NotFound(err, types.ErrCheckpointNotFound, "lease %d has no checkpoint %d", leaseID, index)
	}
	return cp, nil
}

// GetChallenge returns a challenge or ErrChallengeNotFound.
func (k Keeper) GetChallenge(ctx context.Context, id uint64) (types.Challenge, error) {
	ch, err := k.Challenges.Get(ctx, id)
	if err != nil {
		return ch, keeperutil.NotFound(err, types.ErrChallengeNotFound, "challenge %d", id)
	}
	return ch, nil
}

// lastCheckpoint returns the lease's latest checkpoint, if it has one.
func (k Keeper) lastCheckpoint(ctx context.Context, leaseID uint64) (types.Checkpoint, bool, error) {
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID).Descending())
	if err != nil {
		return types.Checkpoint{}, false, err
	}
	defer iter.Close()
	if !iter.Valid() {
		return types.Checkpoint{}, false, nil
	}
	cp, err := iter.Value()
	return cp, err == nil, err
}

// lastKeptCheckpoint is the lease's last checkpoint before index that was not
// REJECTED. On a lease still serving, a rejected checkpoint was discarded with the round
// it trained (DiscardRoundCheckpoints); the walk back passes the few of them.
func (k Keeper) lastKeptCheckpoint(ctx context.Context, leaseID, index uint64) (types.Checkpoint, bool, error) {
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID).EndExclusive(index).Descending())
	if err != nil {
		return types.Checkpoint{}, false, err
	}
	defer iter.Close()
	for ; iter.Valid(); iter.Next() {
		cp, err := iter.Value()
		if err != nil {
			return types.Checkpoint{}, false, err
		}
		if cp.Status != types.CHECKPOINT_STATUS_REJECTED {
			return cp, true, nil
		}
	}
	return types.Checkpoint{}, false, nil
}

func (k Keeper) saveCheckpoint(ctx context.Context, cp types.Checkpoint) error {
	return k.Checkpoints.Set(ctx, collections.Join(cp.LeaseId, cp.Index), cp)
}

func (k Keeper) moduleAddress() sdk.AccAddress {
	return k.accountKeeper.GetModuleAddress(types.ModuleName)
}

// assignmentEpoch is the shard-assignment epoch a job's training stream is drawn from;
// every lease of a worker slot trains on the same shards, so a replacement resumes the
// same stream.
const assignmentEpoch = 0

// dataLayout is the committed layout of a worker's training stream at step: the built-in
// corpus, the worker's assigned shards of it in the step's round for a job that trains in
// rounds (types.WorkerTrainingData), or the data pieces of the shards x/shardregistry
// assigns to the worker — in the step's round (shardtypes.AssignRoundShards) for a job
// that trains in rounds, in epoch 0 otherwise. What x/shardregistry refuses (no such
// dataset, no shard for the worker) makes the data ErrUnsupportedData; a store failure is
// returned as it is.
func (k Keeper) dataLayout(ctx context.Context, job markettypes.Job, worker uint32, step uint64) (traindata.Layout, error) {
	if job.Spec.DatasetId == "" {
		d, err := types.WorkerTrainingData(job, worker, step)
		return d.Layout, err
	}
	ds, err := k.shardKeeper.GetDataset(ctx, job.Spec.DatasetId)
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return traindata.Layout{}, err
		}
		return traindata.Layout{}, keeperutil.WrapCause(types.ErrUnsupportedData, err, "job %d", job.Id)
	}
	var shards []shardtypes.Shard
	if job.Spec.Sync != nil {
		sync, serr := types.JobSync(job)
		if serr != nil {
			return traindata.Layout{}, serr
		}
		shards, err = k.shardKeeper.RoundWorkerShards(ctx, job.Id, worker, sync.RoundOf(step))
	} else {
		shards, err = k.shardKeeper.WorkerShards(ctx, job.Id, worker, assignmentEpoch)
	}
	if err != nil {
		if !keeperutil.IsRefusal(err) {
			return traindata.Layout{}, err
		}
		return traindata.Layout{}, keeperutil.WrapCause(types.ErrUnsupportedData, err, "job %d worker %d", job.Id, worker)
	}
	return types.DatasetLayout(ds, shards)
}
