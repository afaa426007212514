package types

import "cosmossdk.io/errors"

// x/verify errors. Codes are stable.
var (
	ErrLeaseNotActive     = errors.Register(ModuleName, 2, "lease is not active")
	ErrNotLeaseProvider   = errors.Register(ModuleName, 3, "sender is not the lease's provider")
	ErrWrongIndex         = errors.Register(ModuleName, 4, "checkpoint out of order")
	ErrWrongRange         = errors.Register(ModuleName, 5, "invalid step range")
	ErrInvalidHash        = errors.Register(ModuleName, 6, "invalid hash")
	ErrInvalidProof       = errors.Register(ModuleName, 7, "invalid Merkle proof")
	ErrInvalidCheckpoint  = errors.Register(ModuleName, 8, "invalid checkpoint")
	ErrCheckpointNotFound = errors.Register(ModuleName, 9, "checkpoint not found")
	ErrNotChallengeable   = errors.Register(ModuleName, 10, "checkpoint cannot be challenged")
	ErrNotAdjudicable     = errors.Register(ModuleName, 11, "workload cannot be adjudicated on-chain")
	// ErrTooManyChallenges is no longer returned: consensus version 2 removed the cap on
	// challenges per checkpoint. The code stays registered so that it is never reused.
	ErrTooManyChallenges  = errors.Register(ModuleName, 12, "checkpoint has the maximum number of open challenges")
	ErrChallengeNotFound  = errors.Register(ModuleName, 13, "challenge not found")
	ErrNotYourTurn        = errors.Register(ModuleName, 14, "not this party's turn")
	ErrNoGameWaiting      = errors.Register(ModuleName, 15, "no game waits for this step")
	ErrAlreadyRevealed    = errors.Register(ModuleName, 16, "hash already revealed")
	ErrInvalidPreState    = errors.Register(ModuleName, 17, "invalid pre-state")
	ErrInvalidData        = errors.Register(ModuleName, 18, "invalid training data")
	ErrStepTooExpensive   = errors.Register(ModuleName, 19, "step exceeds the referee's cost cap")
	ErrInvalidAuthority   = errors.Register(ModuleName, 20, "invalid authority")
	ErrInvalidParams      = errors.Register(ModuleName, 21, "invalid params")
	ErrSelfChallenge      = errors.Register(ModuleName, 22, "a provider cannot challenge its own checkpoint")
	ErrNoDisagreement     = errors.Register(ModuleName, 23, "challenger agrees with the checkpoint")
	ErrUnsupportedData    = errors.Register(ModuleName, 24, "training data not available to the referee")
	ErrMoveTooLate        = errors.Register(ModuleName, 25, "the move's deadline has passed")
	ErrNotDue             = errors.Register(ModuleName, 26, "the deadline has not passed")
	ErrNotAssigned        = errors.Register(ModuleName, 27, "not assigned to audit this checkpoint")
	ErrAlreadyAnswered    = errors.Register(ModuleName, 28, "audit already answered")
	ErrAttestationDiffers = errors.Register(ModuleName, 29, "attested trace root differs from the checkpoint's")
	ErrNothingToReport    = errors.Register(ModuleName, 30, "the start state is not this provider's to serve")
	ErrInvalidGenesis     = errors.Register(ModuleName, 31, "invalid genesis state")
	// ErrInvalidTileMove: a phase 2–3 move that does not check out (children that do not
	// hash to the party's node, an opening that does not prove, a record of the wrong kind).
	ErrInvalidTileMove = errors.Register(ModuleName, 32, "invalid operator or tile move")
	// ErrInvalidParityProof: a MsgProveParityFault that proves nothing (no custody object,
	// not a parity piece, a chunk out of range, an opening of the wrong length or that does
	// not match its registered root).
	ErrInvalidParityProof = errors.Register(ModuleName, 33, "invalid parity fraud proof")
	// ErrParityConsistent: the opened parity chunk is the Reed-Solomon parity of the opened
	// data chunks: the trainer's parity is right there.
	ErrParityConsistent = errors.Register(ModuleName, 34, "the parity chunk is the parity of the data chunks")
)

// Round fault proofs (MsgProveRoundFault).
var (
	// ErrInvalidRoundProof: a MsgProveRoundFault that proves nothing: no such round or
	// commit, a chunk out of range, a missing or extra opening, an opening that does not
	// match its committed root.
	ErrInvalidRoundProof = errors.Register(ModuleName, 35, "invalid round fault proof")
	// ErrRoundConsistent: the accused chunk is what pkg/diloco computes from the opened
	// chunks: that part of the round is right.
	ErrRoundConsistent = errors.Register(ModuleName, 36, "the round's chunk is consistent with its inputs")
)

// File queries (MsgOpenFileQuery, MsgAnswerFileQuery, MsgDescendFileQuery).
var (
	// ErrInvalidFileQuery: a file query that cannot be opened (no such commit, an excluded
	// one, a file the job does not have, a header that does not open).
	ErrInvalidFileQuery = errors.Register(ModuleName, 37, "invalid file query")
	// ErrFileQueryNotFound: no open file query has this id (it never existed or it ended).
	ErrFileQueryNotFound = errors.Register(ModuleName, 38, "file query not found")
	// ErrFileQueryOpen: the same file of the same commit already has an open query.
	ErrFileQueryOpen = errors.Register(ModuleName, 39, "a file query on this file is already open")
	// ErrInvalidFileAnswer: an answer that does not check out (children that do not hash
	// to the node, a chunk whose leaf hash is not the node, children at a leaf or a chunk
	// above one).
	ErrInvalidFileAnswer = errors.Register(ModuleName, 40, "invalid file query answer")
)
