package cli

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/cosmos/cosmos-sdk/client"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/dispute"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Phases 2–3 by hand: each command reads the game, re-executes the disputed step from
// --state (this party's encoded state at the game's step lo) and sends the move
// pkg/dispute builds, the same one the sidecar would.

func recordsCmd() *cobra.Command {
	return tileCmd("records", "Phase 2: commit the record root of the disputed step (the challenger at the one-step turn, then the provider)",
		[]types.TilePhase{types.TILE_PHASE_RECORDS})
}

func operatorCmd() *cobra.Command {
	return tileCmd("operator", "Phase 2: the next move of the descent over the step's operator records, or open the disputed record",
		[]types.TilePhase{types.TILE_PHASE_OPERATORS, types.TILE_PHASE_OPEN_RECORD})
}

func tileMoveCmd() *cobra.Command {
	return tileCmd("tile", "Phase 3: the next move of the descent over the disputed output's chunks, the provider's chunk, or the challenger's proof",
		[]types.TilePhase{types.TILE_PHASE_CHUNKS, types.TILE_PHASE_REVEAL_CHUNK, types.TILE_PHASE_PROVE})
}

func tileCmd(name, short string, phases []types.TilePhase) *cobra.Command {
	cmd := moveCmd(name+" [challenge-id] --state [file]", short, []string{"challenge-id"}, flagState,
		"this party's encoded state at the game's step lo (required)",
		func(cmd *cobra.Command, ids []uint64) error {
			statePath, err := requiredFlag(cmd, flagState)
			if err != nil {
				return err
			}
			return broadcastMove(cmd, func(clientCtx client.Context, sender string) (sdk.Msg, error) {
				g, err := dispute.Read(cmd.Context(), types.NewQueryClient(clientCtx), markettypes.NewQueryClient(clientCtx), ids[0])
				if err != nil {
					return nil, err
				}
				stateAt := func(uint64) ([]byte, error) { return os.ReadFile(statePath) }
				if g.Challenge.Turn == types.GAME_TURN_ONE_STEP && slices.Contains(phases, types.TILE_PHASE_RECORDS) {
					p, err := dispute.StepParty(g, stateAt)
					if err != nil {
						return nil, err
					}
					return dispute.CommitRecords(sender, g, p), nil
				}
				if g.Tile == nil || !slices.Contains(phases, g.Tile.Phase) {
					phase := "phase 1"
					if g.Tile != nil {
						phase = g.Tile.Phase.String()
					}
					return nil, fmt.Errorf("challenge %d is at %s (turn %s): not a move of `%s`", ids[0], phase, g.Challenge.Turn, name)
				}
				if !dispute.WaitsOn(g.Challenge.Turn, dispute.SideOf(g.Challenge, sender)) {
					return nil, fmt.Errorf("challenge %d waits on the other side (%s)", ids[0], g.Challenge.Turn)
				}
				p, err := dispute.StepParty(g, stateAt)
				if err != nil {
					return nil, err
				}
				return dispute.TileMove(sender, g, p)
			})
		})
	return cmd
}
