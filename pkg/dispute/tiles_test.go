package dispute_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/tiles"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// The phase 2–3 turns: who moves and what each phase's move is, built from the state at
// lo (the keeper tests play whole games with these moves).
func TestTileMovesByPhase(t *testing.T) {
	ev := honest(t, 3)
	ev.Tiles = func(g dispute.Game) (*tiles.Party, error) { return dispute.StepParty(g, ev.StateAt) }
	require.True(t, dispute.WaitsOn(verifytypes.GAME_TURN_TILE_PROVIDER, dispute.Defender))
	require.True(t, dispute.WaitsOn(verifytypes.GAME_TURN_TILE_CHALLENGER, dispute.Challenger))
	require.False(t, dispute.WaitsOn(verifytypes.GAME_TURN_TILE_CHALLENGER, dispute.Defender))

	// At the one-step turn a challenger that prefers tiles commits its records.
	g := game(verifytypes.GAME_TURN_ONE_STEP, 2, 0, 3, 100)
	ev.PreferTiles = true
	msg, err := dispute.NextMove("chal", dispute.Challenger, g, 90, ev)
	require.NoError(t, err)
	p, err := ev.Tiles(g)
	require.NoError(t, err)
	require.Equal(t, p.C.Root[:], msg.(*verifytypes.MsgCommitRecords).RecordRoot)
	require.Empty(t, msg.(*verifytypes.MsgCommitRecords).StoreProof)

	// The provider's commitment proves its store leaf.
	g.Challenge.Turn = verifytypes.GAME_TURN_TILE_PROVIDER
	g.Tile = &verifytypes.TileGame{Phase: verifytypes.TILE_PHASE_RECORDS}
	msg, err = dispute.NextMove("prov", dispute.Defender, g, 90, ev)
	require.NoError(t, err)
	cr := msg.(*verifytypes.MsgCommitRecords)
	proof := make([]merkle.Hash, len(cr.StoreProof))
	for i, b := range cr.StoreProof {
		copy(proof[i][:], b)
	}
	store := p.Step.Store()
	require.NoError(t, merkle.VerifyInclusion(p.C.Root, uint64(store), uint64(p.Step.Len()), p.C.Leaves[store], proof))

	// A descent move reveals the two children of the current node.
	g.Tile = &verifytypes.TileGame{Phase: verifytypes.TILE_PHASE_OPERATORS, Lo: 0, Hi: uint64(p.Step.Len())}
	msg, err = dispute.NextMove("prov", dispute.Defender, g, 90, ev)
	require.NoError(t, err)
	rn := msg.(*verifytypes.MsgRevealNode)
	require.Equal(t, p.C.Root, merkle.NodeHash(merkle.Hash(rn.Left), merkle.Hash(rn.Right)))

	// Past the deadline, the other side claims the timeout.
	msg, err = dispute.NextMove("chal", dispute.Challenger, g, 101, ev)
	require.NoError(t, err)
	require.IsType(t, &verifytypes.MsgClaimTimeout{}, msg)
}
