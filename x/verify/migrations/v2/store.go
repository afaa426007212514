// Package v2 migrates x/verify's state from consensus version 1 to 2.
//
// Version 2 removes the cap on challenges per checkpoint (max_challenges_per_checkpoint,
// field 6 of the params, now reserved), adds the params of lost-bond splits, owner
// compensation and audits, and adds state that starts empty: audit assignments, the
// audit draw queue and the heights of reveals. Version 1 params decode with the removed
// field skipped; Migrate fills the new ones with their defaults and writes them back. It
// runs once, inside the "v3" upgrade handler (app/upgrades.go), through x/upgrade's
// RunMigrations.
package v2

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/verify/types"
)

// Migrate rewrites the params: every field version 1 did not have gets its default (the
// audit fee in the challenger bond's denomination), every field it had keeps its value.
func Migrate(ctx context.Context, params collections.Item[types.Params]) error {
	p, err := params.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading params: %w", err)
	}
	d := types.DefaultParams()
	if p.LostBondProviderShare.IsNil() {
		p.LostBondProviderShare = d.LostBondProviderShare
	}
	if p.LostBondOwnerShare.IsNil() {
		p.LostBondOwnerShare = d.LostBondOwnerShare
	}
	if p.OwnerCompensationRatio.IsNil() {
		p.OwnerCompensationRatio = d.OwnerCompensationRatio
	}
	if p.AuditFeePerStep.Denom == "" {
		p.AuditFeePerStep = sdk.NewCoin(p.ChallengerBond.Denom, d.AuditFeePerStep.Amount)
	}
	if p.AuditFraudSlashFraction.IsNil() {
		p.AuditFraudSlashFraction = d.AuditFraudSlashFraction
	}
	if p.AuditMissSlashFraction.IsNil() {
		p.AuditMissSlashFraction = d.AuditMissSlashFraction
	}
	if p.WithheldThreshold.IsNil() {
		p.WithheldThreshold = d.WithheldThreshold
	}
	if p.ChallengeWindow < 2 {
		// Version 2 draws auditors at the block after submission, inside the window.
		p.ChallengeWindow = 2
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("migrated params: %w", err)
	}
	return params.Set(ctx, p)
}
