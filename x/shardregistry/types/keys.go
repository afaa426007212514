package types

import (
	"strconv"

	"cosmossdk.io/collections"
)

const (
	// ModuleName is the name of the module, of its store key and of its error codespace.
	// Its module account holds nothing: replica collateral stays in the holders' stakingext
	// bonds as collateral locks.
	ModuleName = "shardregistry"
	// StoreKey is the module's KV store key.
	StoreKey = ModuleName
)

// Collection prefixes. Their numbers are part of the state layout: never reuse one.
var (
	ParamsKey            = collections.NewPrefix(0)
	DatasetsKey          = collections.NewPrefix(1)
	DatasetsByOwnerKey   = collections.NewPrefix(2)
	ShardsKey            = collections.NewPrefix(3)
	ReplicasKey          = collections.NewPrefix(4)
	ReplicasByHolderKey  = collections.NewPrefix(5)
	ReplicasByDatasetKey = collections.NewPrefix(6)
	ReplicasByShardKey   = collections.NewPrefix(7)
	NextReplicaIDKey     = collections.NewPrefix(8)
	DeadlinesKey         = collections.NewPrefix(9)
	ShardHoldersKey      = collections.NewPrefix(10)
	PieceHoldersKey      = collections.NewPrefix(11)
	OpenSlotsKey         = collections.NewPrefix(12)
	UnderReplicatedKey   = collections.NewPrefix(13)
	CustodyReleasesKey   = collections.NewPrefix(14)
)

// ReplicaCollateralRef names the stakingext collateral lock of a replica, so that it is
// released exactly once.
func ReplicaCollateralRef(replicaID uint64) string {
	return ModuleName + "/replica/" + strconv.FormatUint(replicaID, 10)
}
