package keeper_test

import (
	"testing"

	"cosmossdk.io/collections"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// The v3 migration ends a game over a checkpoint of the retired MLP as moot, with the
// challenger's bond back: nobody can play its one-step phase any more.
func TestMigrate2to3EndsGamesOverMLPCheckpoints(t *testing.T) {
	s := newScenario(t, 16, 8)
	s.submitCheckpoint(s.liar(s.prov, 0, 8, 3, false), s.lease.Id, 0)
	mlpGame := s.openChallenge(s.verifier("verifier", 0, 8), s.lease.Id, 0)
	cp := s.checkpoint(s.lease.Id, 0)
	cp.WorkloadVersion = keeper.RetiredWorkloadVersion
	require.NoError(t, s.Verify.Checkpoints.Set(s.Ctx, collections.Join(cp.LeaseId, cp.Index), cp))
	challenger := s.account("verifier")
	before := s.Balance(challenger)

	require.NoError(t, keeper.NewMigrator(s.Verify).Migrate2to3(s.Ctx))

	ch := s.challenge(mlpGame)
	require.Equal(t, types.CHALLENGE_OUTCOME_MOOT, ch.Outcome)
	require.Equal(t, before.Add(s.verifyParams().ChallengerBond.Amount), s.Balance(challenger), "the challenger's bond comes back")
	require.Contains(t, s.resolvedEvent(mlpGame).Reason, "retired the MLP")
}

// The custody migration gives version-3 params (which have no custody params, so zero)
// the custody defaults, and leaves the rest alone.
func TestMigrate3to4SetsCustodyParams(t *testing.T) {
	s := newScenario(t, 16, 8)
	p := s.verifyParams()
	p.CustodyGraceBlocks, p.CustodyRecheckBlocks = 0, 0
	p.ChallengeWindow = 123
	require.NoError(t, s.Verify.Params.Set(s.Ctx, p))

	require.NoError(t, keeper.NewMigrator(s.Verify).Migrate3to4(s.Ctx))

	got := s.verifyParams()
	require.Equal(t, types.DefaultParams().CustodyGraceBlocks, got.CustodyGraceBlocks)
	require.Equal(t, types.DefaultParams().CustodyRecheckBlocks, got.CustodyRecheckBlocks)
	require.Equal(t, uint64(123), got.ChallengeWindow)
	require.NoError(t, got.Validate())
}
