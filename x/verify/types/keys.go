package types

import "cosmossdk.io/collections"

const (
	// ModuleName is the module's name and the name of its account, which holds challenger bonds.
	ModuleName = "verify"
	// StoreKey is the module's KV store key.
	StoreKey = ModuleName
)

// Collection prefixes; never reuse a number.
var (
	ParamsKey              = collections.NewPrefix(0)
	CheckpointsKey         = collections.NewPrefix(1)
	ChallengesKey          = collections.NewPrefix(2)
	ChallengesByCheckpoint = collections.NewPrefix(3)
	OpeningsKey            = collections.NewPrefix(4)
	FinalizationQueueKey   = collections.NewPrefix(5)
	MoveDeadlinesKey       = collections.NewPrefix(6)
	NextChallengeIDKey     = collections.NewPrefix(7)
)

// Prefixes added with consensus version 2 (audits, lazily applied reveals).
var (
	OpeningHeightsKey = collections.NewPrefix(8)
	AuditsKey         = collections.NewPrefix(9)
	AuditsByAuditor   = collections.NewPrefix(10)
	AuditDrawQueueKey = collections.NewPrefix(11)
)

// Prefixes added with consensus version 3 (phases 2–3: operators and tiles).
var (
	TileGamesKey = collections.NewPrefix(12)
)

// Prefixes added with consensus version 4 (custody of checkpoint states).
var (
	CustodyQueueKey = collections.NewPrefix(13)
)

// Prefixes added with consensus version 5 (file queries).
var (
	FileQueriesKey         = collections.NewPrefix(14)
	FileQueryDeadlinesKey  = collections.NewPrefix(15)
	FileQuerySeqKey        = collections.NewPrefix(16)
	FileQueriesByCommitKey = collections.NewPrefix(17)
)
