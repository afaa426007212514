// Package keeper holds x/shardregistry's state and logic: datasets and their shards and
// pieces, replicas held by bonded storage providers, storage challenges with deadlines
// spread over each period, durability bookkeeping and shard-to-worker assignment.
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
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// DatasetIndexes lists datasets by owner.
type DatasetIndexes struct {
	Owner *indexes.Multi[[]byte, string, types.Dataset]
}

// IndexesList implements collections.Indexes.
func (i DatasetIndexes) IndexesList() []collections.Index[string, types.Dataset] {
	return []collections.Index[string, types.Dataset]{i.Owner}
}

// ReplicaIndexes list replicas by holder (sidecars), by dataset and by shard (durability).
type ReplicaIndexes struct {
	Holder  *indexes.Multi[[]byte, uint64, types.Replica]
	Dataset *indexes.Multi[string, uint64, types.Replica]
	Shard   *indexes.Multi[collections.Pair[string, uint32], uint64, types.Replica]
}

// IndexesList implements collections.Indexes.
func (i ReplicaIndexes) IndexesList() []collections.Index[uint64, types.Replica] {
	return []collections.Index[uint64, types.Replica]{i.Holder, i.Dataset, i.Shard}
}

const (
	datasetsByOwnerIndexName   = "datasets_by_owner"
	replicasByHolderIndexName  = "replicas_by_holder"
	replicasByDatasetIndexName = "replicas_by_dataset"
)

// Keeper of x/shardregistry.
type Keeper struct {
	cdc          codec.BinaryCodec
	storeService store.KVStoreService
	addressCodec address.Codec
	authority    string

	providerKeeper types.ProviderKeeper
	marketKeeper   types.MarketKeeper

	Schema   collections.Schema
	Params   collections.Item[types.Params]
	Datasets *collections.IndexedMap[string, types.Dataset, DatasetIndexes]
	// Shards: (dataset, shard index) → shard with all its pieces, fixed at registration.
	Shards collections.Map[collections.Pair[string, uint32], types.Shard]
	// Replicas, active and terminated; released replicas are deleted.
	Replicas      *collections.IndexedMap[uint64, types.Replica, ReplicaIndexes]
	NextReplicaID collections.Sequence

	// Deadlines: (height, replica id) whose due proof must have arrived by the end of
	// height. EndBlock walks it from its start up to now, with a per-block cap.
	Deadlines collections.KeySet[collections.Pair[int64, uint64]]

	// Durability bookkeeping, all derived from the active replicas (and rebuilt from them
	// at genesis): who holds a piece of which shard (one piece per holder and shard), how
	// many live holders each piece has (absent = 0), which pieces have open slots, and
	// which shards are below their target live count.
	ShardHolders    collections.KeySet[collections.Triple[string, uint32, []byte]]
	PieceHolders    collections.Map[collections.Triple[string, uint32, uint32], uint32]
	OpenSlots       collections.KeySet[collections.Triple[string, uint32, uint32]]
	UnderReplicated collections.KeySet[collections.Pair[string, uint32]]
	// CustodyReleases orders custody objects by the end of their retention: (unix nanos, dataset id).
	CustodyReleases collections.KeySet[collections.Pair[int64, string]]

	// Read-only views of index prefixes as plain key sets, for query pagination
	// (query.CollectionPaginate needs raw iteration, which indexes.Multi does not offer).
	// They are kept out of Schema so that each prefix is registered once.
	datasetsByOwnerPages   collections.KeySet[collections.Pair[[]byte, string]]
	replicasByHolderPages  collections.KeySet[collections.Pair[[]byte, uint64]]
	replicasByDatasetPages collections.KeySet[collections.Pair[string, uint64]]
}

// NewKeeper builds the keeper and its state schema.
func NewKeeper(
	cdc codec.BinaryCodec,
	storeService store.KVStoreService,
	addressCodec address.Codec,
	pk types.ProviderKeeper,
	mk types.MarketKeeper,
	authority string,
) Keeper {
	if _, err := addressCodec.StringToBytes(authority); err != nil {
		panic(fmt.Errorf("invalid x/shardregistry authority %q: %w", authority, err))
	}
	sb := collections.NewSchemaBuilder(storeService)
	holderBytes := func(r types.Replica) ([]byte, error) { return addressCodec.StringToBytes(r.Holder) }
	k := Keeper{
		cdc:            cdc,
		storeService:   storeService,
		addressCodec:   addressCodec,
		authority:      authority,
		providerKeeper: pk,
		marketKeeper:   mk,
		Params:         collections.NewItem(sb, types.ParamsKey, "params", codec.CollValue[types.Params](cdc)),
		Datasets: collections.NewIndexedMap(sb, types.DatasetsKey, "datasets", collections.StringKey, codec.CollValue[types.Dataset](cdc),
			DatasetIndexes{
				Owner: indexes.NewMulti(sb, types.DatasetsByOwnerKey, datasetsByOwnerIndexName, collections.BytesKey, collections.StringKey,
					func(_ string, d types.Dataset) ([]byte, error) { return addressCodec.StringToBytes(d.Owner) }),
			}),
		Shards: collections.NewMap(sb, types.ShardsKey, "shards",
			collections.PairKeyCodec(collections.StringKey, collections.Uint32Key), codec.CollValue[types.Shard](cdc)),
		Replicas: collections.NewIndexedMap(sb, types.ReplicasKey, "replicas", collections.Uint64Key, codec.CollValue[types.Replica](cdc),
			ReplicaIndexes{
				Holder: indexes.NewMulti(sb, types.ReplicasByHolderKey, replicasByHolderIndexName, collections.BytesKey, collections.Uint64Key,
					func(_ uint64, r types.Replica) ([]byte, error) { return holderBytes(r) }),
				Dataset: indexes.NewMulti(sb, types.ReplicasByDatasetKey, replicasByDatasetIndexName, collections.StringKey, collections.Uint64Key,
					func(_ uint64, r types.Replica) (string, error) { return r.DatasetId, nil }),
				Shard: indexes.NewMulti(sb, types.ReplicasByShardKey, "replicas_by_shard",
					collections.PairKeyCodec(collections.StringKey, collections.Uint32Key), collections.Uint64Key,
					func(_ uint64, r types.Replica) (collections.Pair[string, uint32], error) {
						return collections.Join(r.DatasetId, r.Shard), nil
					}),
			}),
		NextReplicaID: collections.NewSequence(sb, types.NextReplicaIDKey, "next_replica_id"),
		Deadlines: collections.NewKeySet(sb, types.DeadlinesKey, "deadlines",
			collections.PairKeyCodec(collections.Int64Key, collections.Uint64Key)),
		ShardHolders: collections.NewKeySet(sb, types.ShardHoldersKey, "shard_holders",
			collections.TripleKeyCodec(collections.StringKey, collections.Uint32Key, collections.BytesKey)),
		PieceHolders: collections.NewMap(sb, types.PieceHoldersKey, "piece_holders",
			collections.TripleKeyCodec(collections.StringKey, collections.Uint32Key, collections.Uint32Key), collections.Uint32Value),
		OpenSlots: collections.NewKeySet(sb, types.OpenSlotsKey, "open_slots",
			collections.TripleKeyCodec(collections.StringKey, collections.Uint32Key, collections.Uint32Key)),
		UnderReplicated: collections.NewKeySet(sb, types.UnderReplicatedKey, "under_replicated",
			collections.PairKeyCodec(collections.StringKey, collections.Uint32Key)),
		CustodyReleases: collections.NewKeySet(sb, types.CustodyReleasesKey, "custody_releases",
			collections.PairKeyCodec(collections.Int64Key, collections.StringKey)),
	}
	schema, err := sb.Build()
	if err != nil {
		panic(err)
	}
	k.Schema = schema

	views := collections.NewSchemaBuilder(storeService)
	k.datasetsByOwnerPages = collections.NewKeySet(views, types.DatasetsByOwnerKey, datasetsByOwnerIndexName,
		collections.PairKeyCodec(collections.BytesKey, collections.StringKey))
	k.replicasByHolderPages = collections.NewKeySet(views, types.ReplicasByHolderKey, replicasByHolderIndexName,
		collections.PairKeyCodec(collections.BytesKey, collections.Uint64Key))
	k.replicasByDatasetPages = collections.NewKeySet(views, types.ReplicasByDatasetKey, replicasByDatasetIndexName,
		collections.PairKeyCodec(collections.StringKey, collections.Uint64Key))
	return k
}

// Authority is the address allowed to change params (the gov module account).
func (k Keeper) Authority() string { return k.authority }

// Logger returns a module-scoped logger.
func (k Keeper) Logger(ctx context.Context) log.Logger {
	return sdk.UnwrapSDKContext(ctx).Logger().With("module", "x/"+types.ModuleName)
}

// GetDataset returns a dataset or ErrDatasetNotFound.
func (k Keeper) GetDataset(ctx context.Context, id string) (types.Dataset, error) {
	d, err := k.Datasets.Get(ctx, id)
	if err != nil {
		return d, keeperutil.NotFound(err, types.ErrDatasetNotFound, "dataset %q", id)
	}
	return d, nil
}

// DatasetIDs returns the ids of every registered dataset in id order, for the
// simulation's jobs that train on one.
func (k Keeper) DatasetIDs(ctx context.Context) ([]string, error) {
	iter, err := k.Datasets.Iterate(ctx, nil)
	if err != nil {
		return nil, err
	}
	return iter.Keys()
}

// GetShard returns a shard of a dataset or ErrShardNotFound.
func (k Keeper) GetShard(ctx context.Context, datasetID string, index uint32) (types.Shard, error) {
	s, err := k.Shards.Get(ctx, collections.Join(datasetID, index))
	if err != nil {
		return s, keeperutil.NotFound(err, types.ErrShardNotFound, "shard %d of dataset %q", index, datasetID)
	}
	return s, nil
}

// GetReplica returns a replica or ErrReplicaNotFound.
func (k Keeper) GetReplica(ctx context.Context, id uint64) (types.Replica, error) {
	r, err := k.Replicas.Get(ctx, id)
	if err != nil {
		return r, keeperutil.NotFound(err, types.ErrReplicaNotFound, "replica %d", id)
	}
	return r, nil
}

// replicaKey is the replica key of r (see types.ReplicaKey).
func (k Keeper) replicaKey(r types.Replica) ([]byte, error) {
	holder, err := k.addressCodec.StringToBytes(r.Holder)
	if err != nil {
		return nil, err
	}
	return types.ReplicaKey(r.DatasetId, r.Shard, r.Piece, holder), nil
}
