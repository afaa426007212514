package bidding

import (
	"context"
	"fmt"
	"math/big"

	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/internal/rolekit"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// BondQuerier reads a provider and x/stakingext's params;
// stakingexttypes.QueryClient satisfies it.
type BondQuerier interface {
	Provider(ctx context.Context, in *stakingexttypes.QueryProviderRequest, opts ...grpc.CallOption) (*stakingexttypes.QueryProviderResponse, error)
	Params(ctx context.Context, in *stakingexttypes.QueryParamsRequest, opts ...grpc.CallOption) (*stakingexttypes.QueryParamsResponse, error)
}

// watchBond exports the operator's bond every HealthInterval (and so re-reads its
// standing, whatever events were missed): a lease's
// collateral is locked from the free bond when the auction closes, so a bid
// with too little free bond loses, and below min_bond_per_gpu × GPUs no bid
// is accepted at all. The operator's alerts watch these.
func (r *Role) watchBond(ctx context.Context) {
	rolekit.Every(ctx, r.opts.HealthInterval, func() {
		if err := r.refreshBond(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reading the provider's bond failed", "err", err)
		}
	})
}

// refreshBond reads the operator's provider record and x/stakingext's params, exports the
// bond and records the provider's standing (noteStanding).
func (r *Role) refreshBond(ctx context.Context) error {
	r.standing.mu.Lock()
	gen := r.standing.gen
	r.standing.mu.Unlock()
	p, err := r.opts.Bond.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: r.opts.Operator})
	if err != nil {
		return fmt.Errorf("reading provider %s: %w", r.opts.Operator, err)
	}
	params, err := r.opts.Bond.Params(ctx, &stakingexttypes.QueryParamsRequest{})
	if err != nil {
		return fmt.Errorf("reading x/stakingext params: %w", err)
	}
	required := params.Params.RequiredBond(p.Provider.TotalGPUs())
	r.opts.Metrics.SetBond(coinFloat(p.Provider.Bond), coinFloat(p.Provider.Locked), coinFloat(required))
	r.noteStanding(gen, p.Provider.CheckBidding(params.Params))
	return nil
}

// coinFloat is a coin's amount as a metric value (exact below 2^53).
func coinFloat(c sdk.Coin) float64 {
	if c.Amount.IsNil() {
		return 0
	}
	f, _ := new(big.Float).SetInt(c.Amount.BigInt()).Float64()
	return f
}
