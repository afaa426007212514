package types

import (
	"strconv"

	"cosmossdk.io/collections"
)

const (
	// ModuleName is the name of the module and of its module account, which holds every job's escrow
	// and every lease's unpaid earnings.
	ModuleName = "market"
	// StoreKey is the module's KV store key.
	StoreKey = ModuleName
)

// Collection prefixes. Their numbers are part of the state layout: never reuse one.
var (
	ParamsKey              = collections.NewPrefix(0)
	JobsKey                = collections.NewPrefix(1)
	JobsByOwnerKey         = collections.NewPrefix(2)
	JobsByStateKey         = collections.NewPrefix(3)
	BidsKey                = collections.NewPrefix(4)
	LeasesKey              = collections.NewPrefix(5)
	LeasesByProviderKey    = collections.NewPrefix(6)
	LeasesByJobKey         = collections.NewPrefix(7)
	BiddingDeadlinesKey    = collections.NewPrefix(8)
	CheckpointDeadlinesKey = collections.NewPrefix(9)
	TimeDeadlinesKey       = collections.NewPrefix(10)
	NextJobIDKey           = collections.NewPrefix(11)
	NextLeaseIDKey         = collections.NewPrefix(12)
	NextBidSequenceKey     = collections.NewPrefix(13)
	BlockHashesKey         = collections.NewPrefix(14)
	// LeasesByStateKey came with consensus version 2 (the "v2" upgrade back-fills it).
	LeasesByStateKey = collections.NewPrefix(15)
	// RateChecksKey came with consensus version 4 (the "v4" upgrade fills it).
	RateChecksKey = collections.NewPrefix(24)
	// RoundsKey, RoundCommitsKey and RoundDeadlinesKey came with consensus version 5
	// (rounds of sync jobs).
	RoundsKey         = collections.NewPrefix(25)
	RoundCommitsKey   = collections.NewPrefix(26)
	RoundDeadlinesKey = collections.NewPrefix(27)
)

// LeaseCollateralRef names the stakingext collateral lock of a lease, so it is released exactly once.
func LeaseCollateralRef(leaseID uint64) string {
	return "market/lease/" + strconv.FormatUint(leaseID, 10)
}
