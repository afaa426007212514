package leases

import (
	"context"

	"github.com/cosmos/cosmos-sdk/types/query"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// requestWithdrawal asks the worker to withdraw; requests made while one is
// pending are one withdrawal.
func (r *Role) requestWithdrawal() { r.withdraw.Push(struct{}{}) }

// withdrawEarnings withdraws what every lease of the operator has released.
func (r *Role) withdrawEarnings(ctx context.Context) error {
	var ids []uint64
	req := &markettypes.QueryLeasesRequest{Provider: r.opts.Operator}
	for {
		res, err := r.opts.Chain.Leases(ctx, req)
		if err != nil {
			return err
		}
		for _, l := range res.Leases {
			if l.Withdrawable.IsPositive() {
				ids = append(ids, l.Id)
			}
		}
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			break
		}
		req.Pagination = &query.PageRequest{Key: res.Pagination.NextKey}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := r.opts.Submit(ctx, &markettypes.MsgWithdrawEarnings{Provider: r.opts.Operator, LeaseIds: ids})
	return err
}
