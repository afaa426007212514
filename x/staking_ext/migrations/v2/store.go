// Package v2 migrates x/stakingext's state from consensus version 1 to 2.
//
// Version 2 makes slashes reach the money: an unbonding entry stays slashable for
// infractions committed before it began until unbonding_blocks have passed (on top of
// unbonding_period), and verifiers (auditors) register with their own bonds. Version 1
// state has no unbonding_blocks or min_verifier_bond param and unbonding entries without
// a completion height; Migrate fills both in. The verifier registry starts empty. It
// runs once, inside the "v3" upgrade handler (app/upgrades.go), through x/upgrade's
// RunMigrations.
package v2

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"

	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// UnbondingStore is the unbonding queue: the keeper's indexed map, so that its indexes
// stay in step with what the migration writes.
type UnbondingStore interface {
	Walk(ctx context.Context, ranger collections.Ranger[uint64], fn func(uint64, types.Unbonding) (bool, error)) error
	Set(ctx context.Context, id uint64, u types.Unbonding) error
}

// Collections are the parts of the state the migration reads and writes.
type Collections struct {
	Params     collections.Item[types.Params]
	Unbondings UnbondingStore
}

// Migrate sets the new params to their defaults where version 1 left them empty and
// gives every queued unbonding its completion height, creation height + unbonding_blocks
// (entries already carrying one keep it). Every version 1 entry left a provider bond,
// which is the zero value of its role.
func Migrate(ctx context.Context, c Collections) error {
	params, err := c.Params.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading params: %w", err)
	}
	defaults := types.DefaultParams()
	if params.UnbondingBlocks == 0 {
		params.UnbondingBlocks = defaults.UnbondingBlocks
	}
	if params.MinVerifierBond.IsNil() || !params.MinVerifierBond.IsPositive() {
		params.MinVerifierBond = defaults.MinVerifierBond
	}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("migrated params: %w", err)
	}
	if err := c.Params.Set(ctx, params); err != nil {
		return err
	}
	// Read everything first and write afterwards: no store write happens while an
	// iterator over the same store is open.
	var changed []types.Unbonding
	if err := c.Unbondings.Walk(ctx, nil, func(_ uint64, u types.Unbonding) (bool, error) {
		if u.CompletionHeight == 0 {
			u.CompletionHeight = u.CreationHeight + int64(params.UnbondingBlocks)
			changed = append(changed, u)
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("reading unbondings: %w", err)
	}
	for _, u := range changed {
		if err := c.Unbondings.Set(ctx, u.Id, u); err != nil {
			return fmt.Errorf("writing unbonding %d: %w", u.Id, err)
		}
	}
	return nil
}
