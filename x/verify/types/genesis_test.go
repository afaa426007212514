package types_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/verify/types"
)

func hash(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// validGenesis has two checkpoints of lease 1, an open and a finished challenge on the
// first, and an opening inside it.
func validGenesis() types.GenesisState {
	cp := func(index, start, end uint64, open uint32) types.Checkpoint {
		return types.Checkpoint{
			LeaseId: 1, Index: index, StartStep: start, EndStep: end, StartHash: hash(1), FinalHash: hash(2),
			StateRoot: hash(3), TraceRoot: hash(4), Status: types.CHECKPOINT_STATUS_PENDING, OpenChallenges: open,
			Claim: sdk.NewInt64Coin("udepin", 5), WorkloadVersion: types.ExactWorkloadVersion,
		}
	}
	return types.GenesisState{
		Params:      types.DefaultParams(),
		Checkpoints: []types.Checkpoint{cp(0, 0, 16, 1), cp(1, 16, 32, 0)},
		Challenges: []types.Challenge{
			{Id: 1, LeaseId: 1, CheckpointIndex: 0, Outcome: types.CHALLENGE_OUTCOME_PROVIDER_WON, Turn: types.GAME_TURN_DONE},
			{Id: 2, LeaseId: 1, CheckpointIndex: 0, Turn: types.GAME_TURN_CHALLENGER, Lo: 0, Hi: 16, Mid: 8, Deadline: 40},
		},
		Openings:        []types.Opening{{LeaseId: 1, CheckpointIndex: 0, Step: 8, Hash: hash(9)}},
		NextChallengeId: 3,
	}
}

func TestGenesisValidate(t *testing.T) {
	require.NoError(t, types.DefaultGenesis().Validate())
	require.Equal(t, uint64(1), types.DefaultGenesis().NextChallengeId)
	gs := validGenesis()
	require.NoError(t, gs.Validate())

	for _, tc := range []struct {
		name   string
		change func(*types.GenesisState)
		want   string
	}{
		{"bad params", func(gs *types.GenesisState) { gs.Params.ChallengeWindow = 0 }, "params"},
		{"duplicate checkpoint", func(gs *types.GenesisState) { gs.Checkpoints[1].Index = 0 }, "duplicate"},
		{"empty range", func(gs *types.GenesisState) { gs.Checkpoints[1].EndStep = 16 }, "end_step"},
		{"short final hash", func(gs *types.GenesisState) { gs.Checkpoints[0].FinalHash = hash(2)[:31] }, "final_hash"},
		{"short trace root", func(gs *types.GenesisState) { gs.Checkpoints[0].TraceRoot = nil }, "trace_root"},
		{"short state root", func(gs *types.GenesisState) { gs.Checkpoints[0].StateRoot = hash(3)[:1] }, "state_root"},
		{"challenge id zero", func(gs *types.GenesisState) { gs.Challenges[0].Id = 0 }, "challenge 0"},
		{"challenge id not below next", func(gs *types.GenesisState) { gs.NextChallengeId = 2 }, "next_challenge_id"},
		{"duplicate challenge id", func(gs *types.GenesisState) { gs.Challenges[1].Id = 1 }, "unique"},
		{"challenge of unknown checkpoint", func(gs *types.GenesisState) { gs.Challenges[1].CheckpointIndex = 5 }, "unknown checkpoint"},
		{"open count too high", func(gs *types.GenesisState) { gs.Checkpoints[1].OpenChallenges = 1 }, "open_challenges"},
		{"open count too low", func(gs *types.GenesisState) { gs.Checkpoints[0].OpenChallenges = 0 }, "open_challenges"},
		{"opening at the start", func(gs *types.GenesisState) { gs.Openings[0].Step = 0 }, "opening"},
		{"opening at the end", func(gs *types.GenesisState) { gs.Openings[0].Step = 16 }, "opening"},
		{"opening of unknown checkpoint", func(gs *types.GenesisState) { gs.Openings[0].CheckpointIndex = 7 }, "opening"},
		{"short opening", func(gs *types.GenesisState) { gs.Openings[0].Hash = hash(9)[:4] }, "opening"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := validGenesis()
			tc.change(&gs)
			err := gs.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
