package types

import "cosmossdk.io/errors"

// Errors of x/stakingext. Their codes are part of the chain's interface
// (clients and the provider sidecar match on them): never renumber one.
var (
	ErrProviderNotFound     = errors.Register(ModuleName, 2, "provider not found")
	ErrProviderExists       = errors.Register(ModuleName, 3, "provider already registered")
	ErrInvalidGPU           = errors.Register(ModuleName, 4, "invalid GPU inventory")
	ErrInsufficientFreeBond = errors.Register(ModuleName, 5, "insufficient free bond")
	ErrJailed               = errors.Register(ModuleName, 6, "provider is jailed")
	ErrTombstoned           = errors.Register(ModuleName, 7, "provider is tombstoned")
	ErrStillJailed          = errors.Register(ModuleName, 8, "provider's jail time has not passed yet")
	ErrNotJailed            = errors.Register(ModuleName, 9, "provider is not jailed")
	ErrLockExists           = errors.Register(ModuleName, 10, "collateral lock already exists")
	ErrLockNotFound         = errors.Register(ModuleName, 11, "collateral lock not found")
	ErrTooManyUnbondings    = errors.Register(ModuleName, 12, "too many unbonding entries")
	ErrInvalidAuthority     = errors.Register(ModuleName, 13, "invalid authority")
	ErrInvalidDenom         = errors.Register(ModuleName, 14, "invalid denomination")
	ErrInvalidDescription   = errors.Register(ModuleName, 15, "invalid provider description")
	ErrInvalidAmount        = errors.Register(ModuleName, 16, "invalid amount")
	ErrBondBelowMinimum     = errors.Register(ModuleName, 17, "bond below the minimum for the registered GPUs")
	ErrInvalidParams        = errors.Register(ModuleName, 18, "invalid params")
	ErrInvalidGenesis       = errors.Register(ModuleName, 19, "invalid genesis state")
	ErrInvalidLockRef       = errors.Register(ModuleName, 20, "invalid collateral lock reference")
	ErrInvalidSlash         = errors.Register(ModuleName, 21, "invalid slash request")
	ErrInvalidReason        = errors.Register(ModuleName, 22, "invalid reason")
	ErrBlockedRecipient     = errors.Register(ModuleName, 23, "address is not allowed to receive funds")
	ErrVerifierNotFound     = errors.Register(ModuleName, 24, "verifier not found")
	ErrVerifierExists       = errors.Register(ModuleName, 25, "verifier already registered")
	ErrVerifierTombstoned   = errors.Register(ModuleName, 26, "verifier is tombstoned")
	ErrVerifierActive       = errors.Register(ModuleName, 27, "verifier is already in the audit set")
	ErrVerifierBondTooLow   = errors.Register(ModuleName, 28, "verifier bond below min_verifier_bond")
)
