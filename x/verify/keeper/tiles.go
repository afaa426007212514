package keeper

import (
	"fmt"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Phases 2 and 3 of a game (pkg/tiles has the entries, leaves and descents; README.md
// the walk-through). Phase 1 ends at the one-step turn: step lo is disputed, h_lo agreed.
// There the challenger may send MsgStep (configs within max_step_macs) or, for any
// adjudicable config, MsgCommitRecords, which starts:
//
//	RECORDS      challenger committed; the provider commits, proving its store leaf is
//	             its h_{lo+1} (otherwise an honest record tree could back a wrong h_{lo+1}).
//	OPERATORS    descent over the two record trees: provider reveals children, then the
//	             challenger; to the leftmost differing record `entry`.
//	OPEN_RECORD  each opens its record (output root) against its leaf; a record
//	             inconsistent with the graph cannot be opened and its party times out.
//	CHUNKS       descent over the two output chunk trees, to chunk `chunk`.
//	REVEAL_CHUNK operators only: the provider reveals its chunk bytes.
//	PROVE        the challenger proves the provider's chunk (or one element) wrong from
//	             openings against agreed roots; the referee decides and the game ends.
//
// The turn is GAME_TURN_TILE_PROVIDER or GAME_TURN_TILE_CHALLENGER; missing a deadline
// loses (endOverdue). The burden of the last move is the challenger's: a provider whose
// chunk is right is never asked to prove it.

// tileStep returns the entry list of the checkpoint's job config.
func (k Keeper) tileStep(ctx sdk.Context, cp types.Checkpoint) (*tiles.Step, exact.Config, error) {
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil {
		return nil, exact.Config{}, err
	}
	cfg, err := types.JobConfig(job)
	if err != nil {
		return nil, exact.Config{}, err
	}
	return tiles.NewStep(cfg), cfg, nil
}

// tileMove loads a game for a phase 2–3 move by sender, who must be the party to move.
func (k Keeper) tileMove(ctx sdk.Context, id uint64, sender string) (types.Params, types.Challenge, types.Checkpoint, types.TileGame, error) {
	var (
		cp types.Checkpoint
		tg types.TileGame
	)
	params, err := k.Params.Get(ctx)
	if err != nil {
		return params, types.Challenge{}, cp, tg, err
	}
	ch, err := k.GetChallenge(ctx, id)
	if err != nil {
		return params, ch, cp, tg, err
	}
	if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED || (ch.Turn != types.GAME_TURN_TILE_PROVIDER && ch.Turn != types.GAME_TURN_TILE_CHALLENGER) {
		return params, ch, cp, tg, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is not in phase 2–3 (turn %s)", ch.Id, ch.Turn)
	}
	party := ch.Provider
	if ch.Turn == types.GAME_TURN_TILE_CHALLENGER {
		party = ch.Challenger
	}
	if sender != party {
		return params, ch, cp, tg, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d waits for %s (%s)", ch.Id, party, ch.Turn)
	}
	if err := checkInTime(ctx, ch); err != nil {
		return params, ch, cp, tg, err
	}
	if cp, err = k.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex); err != nil {
		return params, ch, cp, tg, err
	}
	if err := checkPending(ch, cp); err != nil {
		return params, ch, cp, tg, err
	}
	tg, err = k.TileGames.Get(ctx, ch.Id)
	return params, ch, cp, tg, err
}

// passTurn saves the tile game and gives the move to turn with a fresh deadline.
func (k Keeper) passTurn(ctx sdk.Context, params types.Params, ch types.Challenge, tg types.TileGame, turn types.GameTurn) error {
	if err := k.TileGames.Set(ctx, ch.Id, tg); err != nil {
		return err
	}
	ch.Turn = turn
	return k.setDeadline(ctx, params, &ch, ctx.BlockHeight()+int64(params.MoveTimeout))
}

func hash32(field string, b []byte) (merkle.Hash, error) {
	h, err := merkle.HashFromBytes(b)
	if err != nil {
		return h, errorsmod.Wrapf(types.ErrInvalidHash, "%s: %s", field, err)
	}
	return h, nil
}

func hashes(field string, bs [][]byte) ([]merkle.Hash, error) {
	out := make([]merkle.Hash, len(bs))
	for i, b := range bs {
		h, err := hash32(fmt.Sprintf("%s[%d]", field, i), b)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

func chargeCost(ctx sdk.Context, params types.Params, c tiles.Cost) {
	ctx.GasMeter().ConsumeGas(params.GasPerByte*uint64(c.Bytes), "tile bytes")
	ctx.GasMeter().ConsumeGas(params.GasPerHash*uint64(c.Hashes), "tile hashes")
	ctx.GasMeter().ConsumeGas(params.GasPerMac*uint64(c.Elems), "tile referee work")
}

// commitRecords is MsgCommitRecords: the challenger's at the one-step turn, then the
// provider's.
func (k Keeper) commitRecords(ctx sdk.Context, msg *types.MsgCommitRecords) error {
	root, err := hash32("record_root", msg.RecordRoot)
	if err != nil {
		return err
	}
	stored, err := k.GetChallenge(ctx, msg.ChallengeId)
	if err != nil {
		return err
	}
	if stored.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED && stored.Turn == types.GAME_TURN_ONE_STEP {
		params, err := k.Params.Get(ctx)
		if err != nil {
			return err
		}
		if msg.Sender != stored.Challenger {
			return errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d: the challenger %s starts phase 2", stored.Id, stored.Challenger)
		}
		if err := checkInTime(ctx, stored); err != nil {
			return err
		}
		cp, err := k.GetCheckpoint(ctx, stored.LeaseId, stored.CheckpointIndex)
		if err != nil {
			return err
		}
		if err := checkPending(stored, cp); err != nil {
			return err
		}
		step, _, err := k.tileStep(ctx, cp)
		if err != nil {
			return err
		}
		tg := types.TileGame{ChallengeId: stored.Id, Phase: types.TILE_PHASE_RECORDS, ChallengerRecordRoot: root[:], Entries: uint64(step.Len())}
		return k.passTurn(ctx, params, stored, tg, types.GAME_TURN_TILE_PROVIDER)
	}
	params, ch, cp, tg, err := k.tileMove(ctx, msg.ChallengeId, msg.Sender)
	if err != nil {
		return err
	}
	if tg.Phase != types.TILE_PHASE_RECORDS || ch.Turn != types.GAME_TURN_TILE_PROVIDER {
		return errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is at %s", ch.Id, tg.Phase)
	}
	claimed, ok, err := k.traceHashAt(ctx, cp, ch.Hi)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("challenge %d: provider hash at %d missing in phase 2", ch.Id, ch.Hi)
	}
	next, err := hash32("h_hi", claimed)
	if err != nil {
		return err
	}
	store := tg.Entries - 1
	if err := verifyInclusion(ctx, params, "store_proof", root, store, tg.Entries, tiles.RecordLeaf(int(store), tiles.KindStore, next), msg.StoreProof); err != nil {
		return err
	}
	tg.ProviderRecordRoot = root[:]
	if sameHash(tg.ProviderRecordRoot, tg.ChallengerRecordRoot) {
		return k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_PROVIDER_WON,
			fmt.Sprintf("the challenger committed the provider's records of step %d", ch.Lo), false)
	}
	tg.Phase, tg.Lo, tg.Hi = types.TILE_PHASE_OPERATORS, 0, tg.Entries
	tg.ProviderNode, tg.ChallengerNode = tg.ProviderRecordRoot, tg.ChallengerRecordRoot
	return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_PROVIDER)
}

// revealNode is MsgRevealNode: a descent move over the record trees or the chunk trees.
func (k Keeper) revealNode(ctx sdk.Context, msg *types.MsgRevealNode) error {
	params, ch, cp, tg, err := k.tileMove(ctx, msg.ChallengeId, msg.Sender)
	if err != nil {
		return err
	}
	if tg.Phase != types.TILE_PHASE_OPERATORS && tg.Phase != types.TILE_PHASE_CHUNKS {
		return errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is at %s, not a descent", ch.Id, tg.Phase)
	}
	l, err := hash32("left", msg.Left)
	if err != nil {
		return err
	}
	r, err := hash32("right", msg.Right)
	if err != nil {
		return err
	}
	chargeCost(ctx, params, tiles.NodeRevealCost)
	if ch.Turn == types.GAME_TURN_TILE_PROVIDER {
		if err := tiles.CheckChildren(merkle.Hash(tg.ProviderNode), l, r); err != nil {
			return keeperutil.WrapCause(types.ErrInvalidTileMove, err, "provider")
		}
		tg.ProviderLeft, tg.ProviderRight = l[:], r[:]
		return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_CHALLENGER)
	}
	d := tiles.Descent{Lo: tg.Lo, Hi: tg.Hi, Provider: merkle.Hash(tg.ProviderNode), Challenger: merkle.Hash(tg.ChallengerNode)}
	d, err = d.Next(merkle.Hash(tg.ProviderLeft), merkle.Hash(tg.ProviderRight), l, r)
	if err != nil {
		return keeperutil.WrapCause(types.ErrInvalidTileMove, err, "")
	}
	tg.Lo, tg.Hi, tg.ProviderNode, tg.ChallengerNode = d.Lo, d.Hi, d.Provider[:], d.Challenger[:]
	tg.ProviderLeft, tg.ProviderRight = nil, nil
	tg.Rounds++
	if !d.Done() {
		return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_PROVIDER)
	}
	if tg.Phase == types.TILE_PHASE_OPERATORS {
		tg.Phase, tg.Entry = types.TILE_PHASE_OPEN_RECORD, d.Lo
		return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_PROVIDER)
	}
	return k.atChunk(ctx, params, ch, cp, tg)
}

// atChunk moves a game whose chunk descent reached its leaf to the last moves.
func (k Keeper) atChunk(ctx sdk.Context, params types.Params, ch types.Challenge, cp types.Checkpoint, tg types.TileGame) error {
	step, _, err := k.tileStep(ctx, cp)
	if err != nil {
		return err
	}
	tg.Chunk = tg.Lo
	if step.Entries[tg.Entry].Op != nil {
		tg.Phase = types.TILE_PHASE_REVEAL_CHUNK
		return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_PROVIDER)
	}
	tg.Phase = types.TILE_PHASE_PROVE
	return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_CHALLENGER)
}

// openRecord is MsgOpenRecord: a party's output root of the disputed entry.
func (k Keeper) openRecord(ctx sdk.Context, msg *types.MsgOpenRecord) error {
	params, ch, cp, tg, err := k.tileMove(ctx, msg.ChallengeId, msg.Sender)
	if err != nil {
		return err
	}
	if tg.Phase != types.TILE_PHASE_OPEN_RECORD {
		return errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is at %s", ch.Id, tg.Phase)
	}
	root, err := hash32("output_root", msg.OutputRoot)
	if err != nil {
		return err
	}
	step, _, err := k.tileStep(ctx, cp)
	if err != nil {
		return err
	}
	e := int(tg.Entry)
	leaf := tiles.RecordLeaf(e, step.Entries[e].Kind, root)
	ctx.GasMeter().ConsumeGas(2*params.GasPerHash, "record leaf")
	node := tg.ProviderNode
	if ch.Turn == types.GAME_TURN_TILE_CHALLENGER {
		node = tg.ChallengerNode
	}
	if !sameHash(leaf[:], node) {
		return errorsmod.Wrapf(types.ErrInvalidTileMove, "record %d (%s) with output root %x is not the committed leaf", e, step.Entries[e].Kind, root)
	}
	if ch.Turn == types.GAME_TURN_TILE_PROVIDER {
		tg.ProviderOutputRoot = root[:]
		return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_CHALLENGER)
	}
	tg.ChallengerOutputRoot = root[:]
	d, err := tiles.NewDescent(step.OutputChunks(e), merkle.Hash(tg.ProviderOutputRoot), root)
	if err != nil { // the leaves differ with the same index and kind, so the roots do
		return keeperutil.WrapCause(types.ErrInvalidTileMove, err, "")
	}
	tg.Phase, tg.Lo, tg.Hi, tg.ProviderNode, tg.ChallengerNode = types.TILE_PHASE_CHUNKS, d.Lo, d.Hi, d.Provider[:], d.Challenger[:]
	if d.Done() {
		return k.atChunk(ctx, params, ch, cp, tg)
	}
	return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_PROVIDER)
}

// revealChunk is MsgRevealChunk: the provider's bytes of the disputed output chunk.
func (k Keeper) revealChunk(ctx sdk.Context, msg *types.MsgRevealChunk) error {
	params, ch, _, tg, err := k.tileMove(ctx, msg.ChallengeId, msg.Provider)
	if err != nil {
		return err
	}
	if tg.Phase != types.TILE_PHASE_REVEAL_CHUNK {
		return errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is at %s", ch.Id, tg.Phase)
	}
	if len(msg.Data) > exact.ChunkSize {
		return errorsmod.Wrapf(types.ErrInvalidTileMove, "a chunk has at most %d bytes, got %d", exact.ChunkSize, len(msg.Data))
	}
	chargeCost(ctx, params, tiles.Cost{Bytes: int64(len(msg.Data)), Hashes: int64(len(msg.Data))/64 + 1})
	if leaf := merkle.LeafHash(msg.Data); !sameHash(leaf[:], tg.ProviderNode) {
		return errorsmod.Wrapf(types.ErrInvalidTileMove, "the chunk's leaf hash %x is not the provider's leaf %x", leaf, tg.ProviderNode)
	}
	tg.ProviderChunk = msg.Data
	tg.Phase = types.TILE_PHASE_PROVE
	return k.passTurn(ctx, params, ch, tg, types.GAME_TURN_TILE_CHALLENGER)
}

func toOpenings(os []types.TileOpening) ([]tiles.Opening, error) {
	out := make([]tiles.Opening, len(os))
	for i, o := range os {
		proof, err := hashes(fmt.Sprintf("openings[%d].proof", i), o.Proof)
		if err != nil {
			return nil, err
		}
		out[i] = tiles.Opening{Input: int(o.Input), Chunk: int(o.Chunk), Data: o.Data, Proof: proof}
	}
	return out, nil
}

func toRecords(rs []types.RecordOpening) ([]tiles.RecordOpening, error) {
	out := make([]tiles.RecordOpening, len(rs))
	for i, r := range rs {
		root, err := hash32(fmt.Sprintf("inputs[%d].root", i), r.Root)
		if err != nil {
			return nil, err
		}
		proof, err := hashes(fmt.Sprintf("inputs[%d].proof", i), r.Proof)
		if err != nil {
			return nil, err
		}
		out[i] = tiles.RecordOpening{Entry: int(r.Entry), Root: root, Proof: proof}
	}
	return out, nil
}

// proveTile is MsgProveTile: the referee recomputes the disputed chunk (loads, store) or
// one element of it (operators) and ends the game.
func (k Keeper) proveTile(ctx sdk.Context, msg *types.MsgProveTile) (types.ChallengeOutcome, error) {
	params, ch, cp, tg, err := k.tileMove(ctx, msg.ChallengeId, msg.Challenger)
	if err != nil {
		return 0, err
	}
	if tg.Phase != types.TILE_PHASE_PROVE {
		return 0, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d is at %s", ch.Id, tg.Phase)
	}
	step, cfg, err := k.tileStep(ctx, cp)
	if err != nil {
		return 0, err
	}
	opens, err := toOpenings(msg.Openings)
	if err != nil {
		return 0, err
	}
	recs, err := toRecords(msg.Inputs)
	if err != nil {
		return 0, err
	}
	e, c := int(tg.Entry), int(tg.Chunk)
	en := step.Entries[e]
	ev := &types.EventTileDecided{ChallengeId: ch.Id, Entry: tg.Entry, Kind: en.Kind, Chunk: tg.Chunk}
	var cost tiles.Cost
	fail := func(err error) (types.ChallengeOutcome, error) {
		return 0, keeperutil.WrapCause(types.ErrInvalidTileMove, err, "entry %d (%s) chunk %d", e, en.Kind, c)
	}
	switch {
	case en.Op != nil:
		roots, rc, err := step.AgreedInputRoots(merkle.Hash(tg.ChallengerRecordRoot), e, recs)
		cost = rc
		if err != nil {
			chargeCost(ctx, params, cost)
			return fail(err)
		}
		right, computed, ec, err := step.JudgeElement(e, c, tg.ProviderChunk, int(msg.Element), roots, opens)
		cost.Bytes, cost.Hashes, cost.Elems = cost.Bytes+ec.Bytes, cost.Hashes+ec.Hashes, cost.Elems+ec.Elems
		chargeCost(ctx, params, cost)
		if err != nil {
			return fail(err)
		}
		claimed, _ := tiles.ChunkElement(step.Spec(e), tg.ProviderChunk, int(msg.Element))
		ev.Element, ev.Computed, ev.Claimed, ev.ProviderRight, ev.ElemsRead = msg.Element, computed, claimed, right, uint64(ec.Elems)
	case en.Kind == tiles.KindStore:
		roots, rc, err := step.AgreedInputRoots(merkle.Hash(tg.ChallengerRecordRoot), e, recs)
		cost = rc
		if err != nil || len(opens) != 1 {
			chargeCost(ctx, params, cost)
			return fail(fmt.Errorf("the store needs its input records and one opening: %v", err))
		}
		want, sc, err := step.StoreChunk(c, roots, opens[0], ch.Hi)
		cost.Bytes, cost.Hashes = cost.Bytes+sc.Bytes, cost.Hashes+sc.Hashes
		chargeCost(ctx, params, cost)
		if err != nil {
			return fail(err)
		}
		leaf := merkle.LeafHash(want)
		ev.ProviderRight = sameHash(leaf[:], tg.ProviderNode)
	default:
		want, err := k.loadChunk(ctx, params, ch, cp, cfg, step, e, c, opens, msg.Data)
		if err != nil {
			return fail(err)
		}
		leaf := merkle.LeafHash(want)
		ev.ProviderRight = sameHash(leaf[:], tg.ProviderNode)
	}
	tg.Phase = types.TILE_PHASE_UNSPECIFIED
	if err := k.TileGames.Set(ctx, ch.Id, tg); err != nil {
		return 0, err
	}
	if err := keeperutil.Emit(ctx, ev); err != nil {
		return 0, err
	}
	if ev.ProviderRight {
		return types.CHALLENGE_OUTCOME_PROVIDER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_PROVIDER_WON,
			fmt.Sprintf("the referee confirmed chunk %d of entry %d (%s) of step %d", c, e, en.Kind, ch.Lo), false)
	}
	return types.CHALLENGE_OUTCOME_CHALLENGER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_CHALLENGER_WON,
		fmt.Sprintf("the referee found chunk %d of entry %d (%s) of step %d wrong", c, e, en.Kind, ch.Lo), false)
}

// loadChunk is the true chunk c of load entry e: the step counter, the pre-state file's
// chunk proven against the agreed h_lo, or window bytes proven against the data roots.
func (k Keeper) loadChunk(ctx sdk.Context, params types.Params, ch types.Challenge, cp types.Checkpoint, cfg exact.Config, step *tiles.Step, e, c int, opens []tiles.Opening, data []types.DataChunk) ([]byte, error) {
	ls, err := step.LoadOf(e)
	if err != nil {
		return nil, err
	}
	switch ls.Source {
	case tiles.LoadStep:
		return tiles.StepChunk(ch.Lo), nil
	case tiles.LoadState:
		fc, n, err := tiles.StateChunk(cfg, ls.Name, c)
		if err != nil {
			return nil, err
		}
		if len(opens) != 1 || opens[0].Chunk != fc {
			return nil, fmt.Errorf("a state tensor's chunk %d is state file chunk %d: open that one", c, fc)
		}
		agreed, ok, err := k.traceHashAt(ctx, cp, ch.Lo)
		if err != nil || !ok {
			return nil, fmt.Errorf("h_%d missing: %v", ch.Lo, err)
		}
		_, _, size := exact.StateLayout(cfg)
		cost, err := tiles.VerifyChunk(merkle.Hash(agreed), size, fc, opens[0].Data, opens[0].Proof)
		chargeCost(ctx, params, cost)
		if err != nil {
			return nil, err
		}
		return opens[0].Data[:n], nil
	}
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil {
		return nil, err
	}
	layout, err := k.dataLayout(ctx, job, cp.Worker, cp.StartStep)
	if err != nil {
		return nil, err
	}
	proven, err := k.provenDataChunks(ctx, params, layout, data)
	if err != nil {
		return nil, err
	}
	windows, err := exact.BatchWindows(cfg, job.Seed, ch.Lo, layout.Size())
	if err != nil {
		return nil, err
	}
	spans, err := tiles.WindowSpans(cfg, ls.Micro, c)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, sp := range spans {
		w := windows[sp.Window]
		b, err := readProven(layout, proven, w.Start+uint64(sp.Start), w.Start+uint64(sp.End))
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}
