package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	"github.com/depinchain/depinchain/x/market/types"
)

// Invariant checks one property of the market state; it returns a description and
// whether the property is broken. Tests and simulation run them after every scenario
// (x/crisis is deprecated, so they are not registered with it).
type Invariant func(ctx context.Context) (string, bool)

// AllInvariants bundles every market invariant.
func AllInvariants(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		for _, inv := range []Invariant{ModuleBalanceInvariant(k), LeaseBalancesInvariant(k), DeadlineIndexInvariant(k), StorageInvariant(k), RoundsInvariant(k)} {
			if msg, broken := inv(ctx); broken {
				return msg, true
			}
		}
		return "", false
	}
}

// ModuleBalanceInvariant: the module account holds exactly the escrows of all jobs plus
// the pending and withdrawable balances of all leases. Nothing is minted or lost.
func ModuleBalanceInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		params, err := k.Params.Get(ctx)
		if err != nil {
			return err.Error(), true
		}
		backed := math.ZeroInt()
		if err := k.Jobs.Walk(ctx, nil, func(_ uint64, j types.Job) (bool, error) {
			backed = backed.Add(j.Escrow.Amount)
			if !j.StorageEscrow.Amount.IsNil() {
				backed = backed.Add(j.StorageEscrow.Amount)
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		if err := k.Leases.Walk(ctx, nil, func(_ uint64, l types.Lease) (bool, error) {
			backed = backed.Add(l.Pending.Amount).Add(l.Withdrawable.Amount)
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		balance := k.bankKeeper.GetBalance(ctx, k.moduleAddress(), params.Denom)
		if !balance.Amount.Equal(backed) {
			return fmt.Sprintf("market: module balance %s != escrows + storage escrows + pending + withdrawable %s%s", balance, backed, params.Denom), true
		}
		return "", false
	}
}

// StorageInvariant: a job's storage fees paid plus its storage escrow left never exceed
// its deposit (holders are only ever paid out of the budget reserved from it), and both
// are non-negative in the escrow's denom.
func StorageInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		msg := ""
		err := k.Jobs.Walk(ctx, nil, func(id uint64, j types.Job) (bool, error) {
			escrow, paid := coinOrZero(j.StorageEscrow, j.Escrow.Denom), coinOrZero(j.StorageFees, j.Escrow.Denom)
			if escrow.Denom != j.Escrow.Denom || paid.Denom != j.Escrow.Denom || escrow.IsNegative() || paid.IsNegative() ||
				escrow.Amount.Add(paid.Amount).GT(j.Deposited.Amount) {
				msg = fmt.Sprintf("market: job %d storage fees paid %s + storage escrow %s exceed its deposit %s", id, paid, escrow, j.Deposited)
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}

// LeaseBalancesInvariant: no lease balance is negative, committed ≤ pending, a lease
// never holds or paid out more than it accrued (pending + withdrawable + withdrawn ≤
// accrued; the difference is what closes and fraud refunded to the job), and it never
// accrued more than its claimed steps at its price per step (pay for work).
func LeaseBalancesInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		var msg string
		err := k.Leases.Walk(ctx, nil, func(_ uint64, l types.Lease) (bool, error) {
			switch {
			case l.Pending.IsNegative() || l.Committed.IsNegative() || l.Withdrawable.IsNegative():
				msg = fmt.Sprintf("market: lease %d has a negative balance", l.Id)
			case l.Pending.IsLT(l.Committed):
				msg = fmt.Sprintf("market: lease %d committed %s exceeds pending %s", l.Id, l.Committed, l.Pending)
			case l.Accrued.IsLT(l.Pending.Add(l.Withdrawable).Add(l.Withdrawn)):
				msg = fmt.Sprintf("market: lease %d pays out %s more than it accrued %s", l.Id, l.Pending.Add(l.Withdrawable).Add(l.Withdrawn), l.Accrued)
			case l.StepsPerHour != 0 && l.Accrued.Amount.GT(payThrough(l, l.ClaimedStep)):
				msg = fmt.Sprintf("market: lease %d accrued %s, more than its %d claimed steps at %s per step (%s)",
					l.Id, l.Accrued, l.ClaimedStep-min(l.ResumeStep, l.ClaimedStep), l.PricePerStep, payThrough(l, l.ClaimedStep))
			}
			return msg != "", nil
		})
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}

// DeadlineIndexInvariant: every open job has its auction in the bidding index and every
// active lease its checkpoint deadline in the checkpoint index (and, when it has one, its
// rate check in the rate-check index), so nothing due is missed.
func DeadlineIndexInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		var msg string
		err := k.Jobs.Walk(ctx, nil, func(_ uint64, j types.Job) (bool, error) {
			if j.State == types.JOB_STATE_OPEN {
				has, err := k.BiddingDeadlines.Has(ctx, collections.Join(j.BiddingDeadline, j.Id))
				if err != nil {
					return true, err
				}
				if !has {
					msg = fmt.Sprintf("market: open job %d has no bidding deadline entry at %d", j.Id, j.BiddingDeadline)
				}
			}
			return msg != "", nil
		})
		if err == nil && msg == "" {
			err = k.Leases.Walk(ctx, nil, func(_ uint64, l types.Lease) (bool, error) {
				if l.State == types.LEASE_STATE_ACTIVE {
					has, err := k.CheckpointDeadlines.Has(ctx, collections.Join(l.CheckpointDeadline, l.Id))
					if err != nil {
						return true, err
					}
					if !has {
						msg = fmt.Sprintf("market: active lease %d has no checkpoint deadline entry at %d", l.Id, l.CheckpointDeadline)
					}
				}
				if !l.RateCheckAt.IsZero() {
					has, err := k.RateChecks.Has(ctx, collections.Join(l.RateCheckAt.UnixNano(), l.Id))
					if err != nil {
						return true, err
					}
					if !has {
						msg = fmt.Sprintf("market: lease %d has no rate check entry at %s", l.Id, l.RateCheckAt)
					}
				}
				return msg != "", nil
			})
		}
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}
