package app_test

import (
	"testing"

	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	dbm "github.com/cosmos/cosmos-db"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/log"

	simtestutil "github.com/cosmos/cosmos-sdk/testutil/sims"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	govkeeper "github.com/cosmos/cosmos-sdk/x/gov/keeper"
	govtypes "github.com/cosmos/cosmos-sdk/x/gov/types"
	govv1 "github.com/cosmos/cosmos-sdk/x/gov/types/v1"
	govv1beta1 "github.com/cosmos/cosmos-sdk/x/gov/types/v1beta1"

	"github.com/depinchain/depinchain/app"
)

// A legacy text proposal executes: the gov keeper has a legacy router. Without one
// (found by the simulation's gov operations) every MsgExecLegacyContent panicked.
func TestLegacyTextProposalExecutes(t *testing.T) {
	a := app.New(log.NewNopLogger(), dbm.NewMemDB(), nil, true, simtestutil.EmptyAppOptions{})
	ctx := a.NewContextLegacy(true, cmtproto.Header{Height: 1})
	authority := authtypes.NewModuleAddress(govtypes.ModuleName).String()
	msg, err := govv1.NewLegacyContent(govv1beta1.NewTextProposal("title", "description"), authority)
	require.NoError(t, err)
	_, err = govkeeper.NewMsgServerImpl(&a.GovKeeper).ExecLegacyContent(ctx, msg)
	require.NoError(t, err)
}
