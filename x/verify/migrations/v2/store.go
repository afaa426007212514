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
// The new fields are set whatever they decode to: version 1 never wrote them, and
// gogoproto decodes an absent decimal as zero, which for withheld_threshold would mean
// that one report withholds a checkpoint.
func Migrate(ctx context.Context, params collections.Item[types.Params]) error {
	p, err := params.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading params: %w", err)
	}
	d := types.DefaultParams()
	p.LostBondProviderShare = d.LostBondProviderShare
	p.LostBondOwnerShare = d.LostBondOwnerShare
	p.OwnerCompensationRatio = d.OwnerCompensationRatio
	p.AuditFeePerStep = sdk.NewCoin(p.ChallengerBond.Denom, d.AuditFeePerStep.Amount)
	p.AuditFraudSlashFraction = d.AuditFraudSlashFraction
	p.AuditMissSlashFraction = d.AuditMissSlashFraction
	p.WithheldThreshold = d.WithheldThreshold
	if p.ChallengeWindow < 2 {
		// Version 2 draws auditors at the block after submission, inside the window.
		p.ChallengeWindow = 2
	}
	// Params that later versions add (custody, version 4; the file query deposit, version
	// 5) are still zero here; their own migrations fill them in, so the check gives them
	// their defaults.
	check := p
	check.CustodyGraceBlocks, check.CustodyRecheckBlocks = d.CustodyGraceBlocks, d.CustodyRecheckBlocks
	check.FileQueryDeposit = sdk.NewCoin(p.ChallengerBond.Denom, d.FileQueryDeposit.Amount)
	if err := check.Validate(); err != nil {
		return fmt.Errorf("migrated params: %w", err)
	}
	return params.Set(ctx, p)
}
