package types

import "cosmossdk.io/errors"

// x/shardregistry errors. Codes are stable: clients match on them.
var (
	ErrInvalidDataset       = errors.Register(ModuleName, 2, "invalid dataset")
	ErrInvalidManifest      = errors.Register(ModuleName, 3, "invalid manifest")
	ErrDatasetExists        = errors.Register(ModuleName, 4, "dataset id already registered")
	ErrDatasetNotFound      = errors.Register(ModuleName, 5, "dataset not found")
	ErrShardNotFound        = errors.Register(ModuleName, 6, "shard not found")
	ErrPieceNotFound        = errors.Register(ModuleName, 7, "piece not found")
	ErrReplicaNotFound      = errors.Register(ModuleName, 8, "replica not found")
	ErrNotHolder            = errors.Register(ModuleName, 9, "sender is not the replica's holder")
	ErrReplicaNotActive     = errors.Register(ModuleName, 10, "replica is not active")
	ErrProviderIneligible   = errors.Register(ModuleName, 11, "holder cannot take a replica")
	ErrNoOpenSlot           = errors.Register(ModuleName, 12, "piece has all the holders it needs")
	ErrAlreadyHolder        = errors.Register(ModuleName, 13, "holder already holds a piece of this shard")
	ErrWrongPeriod          = errors.Register(ModuleName, 14, "proof is for the wrong period")
	ErrChallengeNotOpen     = errors.Register(ModuleName, 15, "challenge not open yet")
	ErrDeadlinePassed       = errors.Register(ModuleName, 16, "deadline has passed")
	ErrInvalidProof         = errors.Register(ModuleName, 17, "invalid storage proof")
	ErrProofOwed            = errors.Register(ModuleName, 18, "replica owes a proof for the current period")
	ErrInvalidAuthority     = errors.Register(ModuleName, 19, "invalid authority")
	ErrInvalidParams        = errors.Register(ModuleName, 20, "invalid params")
	ErrBlockHashUnavailable = errors.Register(ModuleName, 21, "challenge seed block hash unavailable")
	ErrJobNotFound          = errors.Register(ModuleName, 22, "job not found")
	ErrNoDataset            = errors.Register(ModuleName, 23, "job has no dataset")
	ErrInvalidAddress       = errors.Register(ModuleName, 24, "invalid address") // unused: messages answer sdkerrors.ErrInvalidAddress; 24 stays reserved
	ErrInvalidWorker        = errors.Register(ModuleName, 25, "no such worker in the job")
)

// Custody (checkpoint state objects registered by x/verify).
var (
	ErrInvalidCustody = errors.Register(ModuleName, 26, "invalid custody")
	ErrNotCustodian   = errors.Register(ModuleName, 27, "the trainer of a checkpoint may not hold a piece of its state")
)
