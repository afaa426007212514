package types

import "cosmossdk.io/collections"

const (
	// ModuleName is the module's name, its module account and its route.
	ModuleName = "stakingext"

	// StoreKey is the KV store the module's collections live in. It is not the module
	// name: multistore keys may not prefix one another, and "stakingext" starts with
	// x/staking's "staking".
	StoreKey = "providerbonds"

	// DefaultBondDenom is the denomination providers bond unless governance changes it.
	DefaultBondDenom = "udepin"
)

// Collection prefixes. They are part of the state layout: never renumber one,
// only add new ones.
var (
	ParamsKey                 = collections.NewPrefix(0)
	ProvidersKey              = collections.NewPrefix(1)
	ProvidersByStatusKey      = collections.NewPrefix(2)
	LocksKey                  = collections.NewPrefix(3)
	UnbondingsKey             = collections.NewPrefix(4)
	UnbondingsByCompletionKey = collections.NewPrefix(5)
	UnbondingsByOperatorKey   = collections.NewPrefix(6)
	NextUnbondingIDKey        = collections.NewPrefix(7)
)

// Prefixes of the verifier registry (consensus version 2).
var (
	VerifiersKey         = collections.NewPrefix(8)
	AuditSetKey          = collections.NewPrefix(9)
	AuditSetPositionsKey = collections.NewPrefix(10)
	AuditSetSizeKey      = collections.NewPrefix(11)
)
