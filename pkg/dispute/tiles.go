package dispute

import (
	"fmt"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/tiles"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Phases 2 and 3 (operators, tiles): both sides re-execute the disputed
// step lo → lo+1 on demand (Evidence.Tiles) and answer from that execution;
// nothing is stored between moves but what the chain shows (Game.Tile).

// TileEvidence builds a party's view of the disputed step from its state at
// lo and the step's batch: what Evidence.Tiles returns. ex may tamper (tests).
func TileEvidence(ex exact.Executor, pre *exact.State, batch [][]byte) (*tiles.Party, error) {
	return tiles.NewParty(tiles.NewStep(pre.Config), ex, pre, batch)
}

// StepParty is the usual Evidence.Tiles: decode the party's state at lo and
// rebuild the step's batch from the job's data.
func StepParty(g Game, stateAt func(uint64) ([]byte, error)) (*tiles.Party, error) {
	enc, err := stateAt(g.Challenge.Lo)
	if err != nil {
		return nil, err
	}
	pre, err := exact.Decode(enc)
	if err != nil {
		return nil, err
	}
	data, err := g.TrainingData()
	if err != nil {
		return nil, err
	}
	batch, err := exact.StepBatch(pre.Config, g.Job.Seed, g.Challenge.Lo, data.Bytes)
	if err != nil {
		return nil, err
	}
	return TileEvidence(exact.Executor{}, pre, batch)
}

// CommitRecords is a party's phase 2 commitment.
func CommitRecords(sender string, g Game, p *tiles.Party) *verifytypes.MsgCommitRecords {
	root := p.C.Root
	msg := &verifytypes.MsgCommitRecords{Sender: sender, ChallengeId: g.Challenge.Id, RecordRoot: root[:]}
	if sender == g.Challenge.Provider {
		msg.StoreProof = merkle.HashesToBytes(p.C.Proof(p.Step.Store()))
	}
	return msg
}

func tilePartyOf(g Game, ev Evidence) (*tiles.Party, error) {
	if ev.Tiles == nil {
		return nil, fmt.Errorf("dispute: challenge %d is in phase 2–3 and this party cannot re-execute step %d", g.Challenge.Id, g.Challenge.Lo)
	}
	return ev.Tiles(g)
}

// TileMove is the move of the side on turn in phases 2–3, built from the
// chain's TileGame and the party's execution of the step.
func TileMove(sender string, g Game, p *tiles.Party) (sdk.Msg, error) {
	tg, id := g.Tile, g.Challenge.Id
	if tg == nil {
		return nil, fmt.Errorf("dispute: challenge %d has no phase 2–3 state", id)
	}
	e := int(tg.Entry)
	switch tg.Phase {
	case verifytypes.TILE_PHASE_RECORDS:
		return CommitRecords(sender, g, p), nil
	case verifytypes.TILE_PHASE_OPERATORS:
		l, r := p.C.Children(tg.Lo, tg.Hi)
		return &verifytypes.MsgRevealNode{Sender: sender, ChallengeId: id, Left: l[:], Right: r[:]}, nil
	case verifytypes.TILE_PHASE_CHUNKS:
		l, r, err := p.OutputChildren(e, tg.Lo, tg.Hi)
		if err != nil {
			return nil, err
		}
		return &verifytypes.MsgRevealNode{Sender: sender, ChallengeId: id, Left: l[:], Right: r[:]}, nil
	case verifytypes.TILE_PHASE_OPEN_RECORD:
		root := p.C.Roots[e]
		return &verifytypes.MsgOpenRecord{Sender: sender, ChallengeId: id, OutputRoot: root[:]}, nil
	case verifytypes.TILE_PHASE_REVEAL_CHUNK:
		data, _, err := p.OutputChunk(e, int(tg.Chunk))
		if err != nil {
			return nil, err
		}
		return &verifytypes.MsgRevealChunk{Provider: sender, ChallengeId: id, Data: data}, nil
	case verifytypes.TILE_PHASE_PROVE:
		return proveTile(sender, g, p)
	}
	return nil, fmt.Errorf("dispute: challenge %d is at tile phase %s, which waits on nobody", id, tg.Phase)
}

// ErrNothingToProve: the provider's chunk is what this party computed too;
// the challenger has lost this game (it will time out).
var ErrNothingToProve = fmt.Errorf("dispute: the provider's chunk matches this party's")

func proveTile(sender string, g Game, p *tiles.Party) (*verifytypes.MsgProveTile, error) {
	tg, s := g.Tile, p.Step
	e, c := int(tg.Entry), int(tg.Chunk)
	msg := &verifytypes.MsgProveTile{Challenger: sender, ChallengeId: g.Challenge.Id}
	addRecords := func() {
		for _, o := range p.InputOpenings(e) {
			msg.Inputs = append(msg.Inputs, verifytypes.RecordOpening{Entry: uint64(o.Entry), Root: o.Root[:], Proof: merkle.HashesToBytes(o.Proof)})
		}
	}
	addOpen := func(o tiles.Opening) {
		msg.Openings = append(msg.Openings, verifytypes.TileOpening{Input: uint32(o.Input), Chunk: uint64(o.Chunk), Data: o.Data, Proof: merkle.HashesToBytes(o.Proof)})
	}
	en := s.Entries[e]
	switch {
	case en.Op != nil:
		i, err := p.FirstDifference(e, c, tg.ProviderChunk)
		if err != nil {
			return nil, err
		}
		if i < 0 {
			return nil, ErrNothingToProve
		}
		opens, err := p.ElementOpenings(e, c*tiles.ElemsPerChunk(s.Spec(e))+i)
		if err != nil {
			return nil, err
		}
		msg.Element = uint64(i)
		addRecords()
		for _, o := range opens {
			addOpen(o)
		}
	case en.Kind == tiles.KindStore:
		src, err := tiles.NextStateSource(s.Config, c)
		if err != nil {
			return nil, err
		}
		in, ch := src.Tensor, src.Chunk
		if in < 0 {
			in, ch = s.LossInput(), 0
		}
		o, err := p.StoreInputChunk(in, ch)
		if err != nil {
			return nil, err
		}
		addRecords()
		addOpen(o)
	default:
		ls, err := s.LoadOf(e)
		if err != nil {
			return nil, err
		}
		switch ls.Source {
		case tiles.LoadState:
			fc, _, err := tiles.StateChunk(s.Config, ls.Name, c)
			if err != nil {
				return nil, err
			}
			enc := p.Pre.Encode()
			leaves := merkle.LeafHashesOfBytes(enc, exact.ChunkSize)
			proof, err := merkle.InclusionProof(leaves, uint64(fc))
			if err != nil {
				return nil, err
			}
			lo := fc * exact.ChunkSize
			addOpen(tiles.Opening{Chunk: fc, Data: enc[lo:min(lo+exact.ChunkSize, len(enc))], Proof: proof})
		case tiles.LoadWindow:
			data, err := g.TrainingData()
			if err != nil {
				return nil, err
			}
			windows, err := exact.BatchWindows(s.Config, g.Job.Seed, g.Challenge.Lo, data.Size())
			if err != nil {
				return nil, err
			}
			spans, err := tiles.WindowSpans(s.Config, ls.Micro, c)
			if err != nil {
				return nil, err
			}
			var ranges []exact.Window
			for _, sp := range spans {
				w := windows[sp.Window]
				ranges = append(ranges, exact.Window{Start: w.Start + uint64(sp.Start), Length: uint64(sp.End - sp.Start)})
			}
			proofs, err := data.Prove(ranges)
			if err != nil {
				return nil, err
			}
			for _, pr := range proofs {
				msg.Data = append(msg.Data, verifytypes.DataChunk{Index: pr.Index, Data: pr.Data, Proof: merkle.HashesToBytes(pr.Proof)})
			}
		}
	}
	return msg, nil
}

func tileMove(sender string, g Game, ev Evidence) (sdk.Msg, error) {
	p, err := tilePartyOf(g, ev)
	if err != nil {
		return nil, err
	}
	return TileMove(sender, g, p)
}
