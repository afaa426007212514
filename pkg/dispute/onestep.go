package dispute

import (
	"fmt"

	sdk "github.com/cosmos/cosmos-sdk/types"

	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// OneStep is the challenger's move in the one-step phase: the encoded
// exact state at the agreed step lo, and every training-data chunk that
// step's batch reads with its Merkle proof, for the chain to re-execute the
// step and decide the game.
func OneStep(sender string, g Game, preState []byte) (*verifytypes.MsgStep, error) {
	data, err := g.TrainingData()
	if err != nil {
		return nil, err
	}
	cfg, err := verifytypes.JobConfig(g.Job)
	if err != nil {
		return nil, err
	}
	chunks, err := verifytypes.StepData(data, cfg, g.Job.Seed, g.Challenge.Lo)
	if err != nil {
		return nil, err
	}
	return &verifytypes.MsgStep{Sender: sender, ChallengeId: g.Challenge.Id, PreState: preState, Data: chunks}, nil
}

func oneStepMove(sender string, g Game, ev Evidence) (sdk.Msg, error) {
	if ev.Tiles != nil && (ev.PreferTiles || ev.StateAt == nil) {
		p, err := ev.Tiles(g)
		if err != nil {
			return nil, err
		}
		return CommitRecords(sender, g, p), nil
	}
	if ev.StateAt == nil {
		return nil, fmt.Errorf("dispute: challenge %d needs the state at step %d and this party cannot rebuild it", g.Challenge.Id, g.Challenge.Lo)
	}
	pre, err := ev.StateAt(g.Challenge.Lo)
	if err != nil {
		return nil, err
	}
	return OneStep(sender, g, pre)
}
