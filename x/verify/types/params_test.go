package types_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/x/verify/types"
)

func TestDefaultParamsValid(t *testing.T) {
	p := types.DefaultParams()
	require.NoError(t, p.Validate())
	// The referee can re-execute a step of the reference model under the default cap.
	require.LessOrEqual(t, uint64(exact.ReferenceConfig().MACsPerStep()), p.MaxStepMacs)
}

func TestParamsValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*types.Params)
		want   string
	}{
		{"zero window", func(p *types.Params) { p.ChallengeWindow = 0 }, "challenge_window"},
		{"zero move timeout", func(p *types.Params) { p.MoveTimeout = 0 }, "move_timeout"},
		{"zero bond", func(p *types.Params) { p.ChallengerBond = sdk.NewInt64Coin("udepin", 0) }, "challenger_bond"},
		{"bad bond denom", func(p *types.Params) { p.ChallengerBond = sdk.Coin{Denom: "1x", Amount: math.OneInt()} }, "challenger_bond"},
		{"nil bond amount", func(p *types.Params) { p.ChallengerBond = sdk.Coin{Denom: "udepin"} }, "challenger_bond"},
		{"zero slash", func(p *types.Params) { p.FraudSlashFraction = math.LegacyZeroDec() }, "fraud_slash_fraction"},
		{"slash above one", func(p *types.Params) { p.FraudSlashFraction = math.LegacyNewDecWithPrec(101, 2) }, "fraud_slash_fraction"},
		{"nil slash", func(p *types.Params) { p.FraudSlashFraction = math.LegacyDec{} }, "fraud_slash_fraction"},
		{"negative share", func(p *types.Params) { p.WhistleblowerShare = math.LegacyNewDec(-1) }, "whistleblower_share"},
		{"share above one", func(p *types.Params) { p.WhistleblowerShare = math.LegacyNewDec(2) }, "whistleblower_share"},
		{"nil share", func(p *types.Params) { p.WhistleblowerShare = math.LegacyDec{} }, "whistleblower_share"},
		{"one-block window", func(p *types.Params) { p.ChallengeWindow = 1 }, "challenge_window"},
		{"huge move timeout", func(p *types.Params) { p.MoveTimeout = 1<<32 + 1 }, "move_timeout"},
		{"bond shares above one", func(p *types.Params) {
			p.LostBondProviderShare = math.LegacyNewDecWithPrec(40, 2)
			p.LostBondOwnerShare = math.LegacyNewDecWithPrec(70, 2)
		}, "lost_bond_owner_share"},
		{"provider keeps most of a lost bond", func(p *types.Params) { p.LostBondProviderShare = math.LegacyNewDecWithPrec(50, 2) }, "lost_bond_provider_share"},
		{"nil owner share", func(p *types.Params) { p.LostBondOwnerShare = math.LegacyDec{} }, "lost_bond_owner_share"},
		{"negative compensation", func(p *types.Params) { p.OwnerCompensationRatio = math.LegacyNewDec(-1) }, "owner_compensation_ratio"},
		{"audit fee in another denom", func(p *types.Params) { p.AuditFeePerStep = sdk.NewInt64Coin("uother", 1) }, "audit_fee_per_step"},
		{"zero audit fraud slash", func(p *types.Params) { p.AuditFraudSlashFraction = math.LegacyZeroDec() }, "audit_fraud_slash_fraction"},
		{"miss slash above one", func(p *types.Params) { p.AuditMissSlashFraction = math.LegacyNewDec(2) }, "audit_miss_slash_fraction"},
		{"withheld at one", func(p *types.Params) { p.WithheldThreshold = math.LegacyOneDec() }, "withheld_threshold"},
		{"zero macs", func(p *types.Params) { p.MaxStepMacs = 0 }, "max_step_macs"},
		{"free referee", func(p *types.Params) { p.GasPerMac = 0 }, "gas_per_mac"},
		{"overflowing referee gas", func(p *types.Params) { p.GasPerMac = 1 << 40; p.MaxStepMacs = 1 << 24 }, "gas_per_mac"},
		{"zero deadlines", func(p *types.Params) { p.MaxDeadlinesPerBlock = 0 }, "max_deadlines_per_block"},
		{"free file query", func(p *types.Params) { p.FileQueryDeposit = sdk.NewInt64Coin("udepin", 0) }, "file_query_deposit"},
		{"file query deposit in another denom", func(p *types.Params) { p.FileQueryDeposit = sdk.NewInt64Coin("uother", 1) }, "file_query_deposit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := types.DefaultParams()
			tc.change(&p)
			err := p.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// The edges are allowed.
	p := types.DefaultParams()
	p.FraudSlashFraction, p.WhistleblowerShare = math.LegacyOneDec(), math.LegacyZeroDec()
	require.NoError(t, p.Validate())
	p.WhistleblowerShare = math.LegacyOneDec()
	require.NoError(t, p.Validate())
}
