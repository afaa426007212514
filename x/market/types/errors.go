package types

import "cosmossdk.io/errors"

// x/market errors. Codes are stable: clients match on them.
var (
	ErrInvalidSpec          = errors.Register(ModuleName, 2, "invalid job spec")
	ErrInvalidDeposit       = errors.Register(ModuleName, 3, "invalid deposit")
	ErrJobNotFound          = errors.Register(ModuleName, 4, "job not found")
	ErrJobNotOpen           = errors.Register(ModuleName, 5, "job is not open for bidding")
	ErrNotJobOwner          = errors.Register(ModuleName, 6, "sender is not the job owner")
	ErrJobClosed            = errors.Register(ModuleName, 7, "job is closed")
	ErrBidNotFound          = errors.Register(ModuleName, 8, "bid not found")
	ErrBidAboveMax          = errors.Register(ModuleName, 9, "bid price above the job's maximum")
	ErrInvalidPrice         = errors.Register(ModuleName, 10, "invalid bid price")
	ErrProviderIneligible   = errors.Register(ModuleName, 11, "provider cannot bid on this job")
	ErrTooManyBids          = errors.Register(ModuleName, 12, "job has the maximum number of bids")
	ErrLeaseNotFound        = errors.Register(ModuleName, 13, "lease not found")
	ErrLeaseNotActive       = errors.Register(ModuleName, 14, "lease is not active")
	ErrNothingToWithdraw    = errors.Register(ModuleName, 15, "nothing to withdraw")
	ErrNotLeaseProvider     = errors.Register(ModuleName, 16, "sender is not the lease's provider")
	ErrInvalidAuthority     = errors.Register(ModuleName, 17, "invalid authority")
	ErrInvalidParams        = errors.Register(ModuleName, 18, "invalid params")
	ErrInvalidAmount        = errors.Register(ModuleName, 19, "invalid amount")
	ErrBiddingClosed        = errors.Register(ModuleName, 20, "bidding deadline has passed")
	ErrInsufficientCommit   = errors.Register(ModuleName, 21, "release exceeds committed payment")
	ErrBlockHashUnavailable = errors.Register(ModuleName, 22, "block hash not retained")
	// ErrCheckpointDeadlinePassed: the lease missed its checkpoint deadline; it is lost even
	// while EndBlock's per-block cap has not closed it yet.
	ErrCheckpointDeadlinePassed = errors.Register(ModuleName, 23, "lease missed its checkpoint deadline")
	// ErrWrongRegion: the job's regions do not include the provider's registered region.
	ErrWrongRegion = errors.Register(ModuleName, 40, "provider is not in one of the job's regions")
	// ErrRuntimeNotAllowed: the bid's runtime may not serve the job (a container job runs
	// the owner's image unless its workload allows an operator-installed trainer).
	ErrRuntimeNotAllowed = errors.Register(ModuleName, 41, "runtime not allowed for this job")
	// ErrInvalidRate: a bid commits no throughput (steps_per_hour 0) or an impossible one.
	ErrInvalidRate = errors.Register(ModuleName, 50, "invalid committed rate")
	// ErrRateTooLow: at the committed rate the job's remaining steps do not fit in max_duration.
	ErrRateTooLow = errors.Register(ModuleName, 51, "committed rate cannot finish the job within max_duration")
	// ErrPricePerStepAboveCap: a replacement bid asks more per step than the job's first
	// auction accepted, which would break the owner's cost bound.
	ErrPricePerStepAboveCap = errors.Register(ModuleName, 52, "price per step above the job's cap")
	// Rounds of sync jobs (consensus version 5).
	ErrRoundNotFound       = errors.Register(ModuleName, 60, "round not found")
	ErrRoundCommitNotFound = errors.Register(ModuleName, 61, "round commit not found")
	ErrNotSyncJob          = errors.Register(ModuleName, 62, "job has no sync section")
	ErrWrongRound          = errors.Register(ModuleName, 63, "wrong round")
	ErrRoundNotOpen        = errors.Register(ModuleName, 64, "round is not open")
	ErrRoundNotAggregating = errors.Register(ModuleName, 65, "round is not aggregating")
	ErrInvalidRoundCommit  = errors.Register(ModuleName, 66, "invalid round commit")
	ErrEnteredMismatch     = errors.Register(ModuleName, 67, "entered does not match the round's entered workers")
	ErrNotRoundWorker      = errors.Register(ModuleName, 68, "worker does not train in this round")
	ErrStaleGlobal         = errors.Register(ModuleName, 69, "trained from a global state that is not the round's")
)
