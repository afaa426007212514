package keeper_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/testutil/keepers"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Phases 2–3 on the real keepers with real exact computations of the reference config:
// phase 1 narrows to step k-1 → k, then both sides play the operator and tile phases with
// pkg/dispute's move builder.

const tileK = 3 // the disputed step is tileK-1 → tileK

// tileSide is one side of a tile game: its account, its trace and its execution of the
// disputed step.
type tileSide struct {
	party *party
	tiles *tiles.Party
}

// tamperOp is an executor wrong in exactly one element of operator op's output (by enough
// that the next state differs).
func tamperOp(op, elem int) exact.Executor {
	return exact.Executor{Observer: func(o *exact.Op, out *exact.Tensor) {
		if o.Index == op { // by 2^20 (16.0 at Q16): not rounded away downstream
			if out.Data[elem] > 0 {
				out.Data[elem] -= 1 << 20
			} else {
				out.Data[elem] += 1 << 20
			}
		}
	}}
}

// side builds an account's side: its step tileK-1 → tileK computed by ex on batch (nil:
// the honest one) from pre (nil: the honest state), then honest training on from there.
func (s *scenario) side(addr sdk.AccAddress, ex exact.Executor, pre *exact.State, batch func([][]byte)) tileSide {
	t := s.t
	if pre == nil {
		pre = s.run.stateAt(t, tileK-1)
	}
	b, err := exact.StepBatch(pre.Config, s.job.Seed, tileK-1, s.run.data.Bytes)
	require.NoError(t, err)
	if batch != nil {
		for i := range b { // the windows alias the shared corpus
			b[i] = append([]byte(nil), b[i]...)
		}
		batch(b)
	}
	p, err := dispute.TileEvidence(ex, pre, b)
	require.NoError(t, err)
	hs := append([]merkle.Hash(nil), s.run.hashes[:tileK]...)
	cur := p.Next
	hs = append(hs, cur.Root())
	for cur.Step < 8 {
		cur, err = exact.Run(cur, s.run.data.Bytes, s.job.Seed, 1, nil)
		require.NoError(t, err)
		hs = append(hs, cur.Root())
	}
	return tileSide{party: newParty(addr, trace.New(0, hs), nil), tiles: p}
}

type tileResult struct {
	ch      types.Challenge
	decided *types.EventTileDecided
	// gas is the most gas one message of each type used; moves counts them.
	gas   map[string]uint64
	moves int
	total uint64
	// fc is the balances and bond right after the challenge opened.
	fc fraudCheck
}

// playTiles runs a whole game: provider prov committed checkpoint 0 (steps 0..8), chal
// challenges it; phase 1 with the step game, then phases 2–3 with dispute.TileMove. A
// move the chain refuses ends the game by the mover's timeout.
func (s *scenario) playTiles(prov, chal tileSide) tileResult {
	return s.playTilesPausing(prov, chal, nil)
}

// playTilesPausing is playTiles calling pause (when set) before every phase 2–3 move.
func (s *scenario) playTilesPausing(prov, chal tileSide, pause func(*types.QueryChallengeResponse)) tileResult {
	t := s.t
	s.advance(30)
	s.submitCheckpoint(prov.party, s.lease.Id, 0)
	id := s.openChallenge(chal.party, s.lease.Id, 0)
	res := tileResult{gas: map[string]uint64{}, fc: s.beforeFraud(chal.party)}
	g := s.game(id, prov.party, chal.party, nil)
	ch := g.play(s.run)
	require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
	require.Equal(t, uint64(tileK-1), ch.Lo)
	job := s.getJob(s.job.Id)
	for {
		q, err := s.query.Challenge(s.Ctx, &types.QueryChallengeRequest{ChallengeId: id})
		require.NoError(t, err)
		ch = q.Challenge
		if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED {
			break
		}
		if pause != nil && q.TileGame != nil {
			pause(q)
		}
		side := chal
		if ch.Turn == types.GAME_TURN_TILE_PROVIDER {
			side = prov
		}
		gm := dispute.Game{Challenge: ch, Checkpoint: s.checkpoint(s.lease.Id, 0), Job: job, Tile: q.TileGame}
		msg, err := dispute.NextMove(side.party.addr.String(), dispute.SideOf(ch, side.party.addr.String()), gm, s.Ctx.BlockHeight(),
			dispute.Evidence{Trace: side.party.trace, PreferTiles: true, Tiles: func(dispute.Game) (*tiles.Party, error) { return side.tiles, nil }})
		if err == nil {
			var used uint64
			used, err = s.deliver(func(ctx sdk.Context) error { return s.send(ctx, msg) })
			name := strings.TrimPrefix(fmt.Sprintf("%T", msg), "*types.")
			res.gas[name] = max(res.gas[name], used)
			res.moves++
			if err == nil {
				res.total += used
			}
		}
		if err != nil {
			// The mover cannot move (a record it cannot open, nothing to prove): it times out.
			s.advanceTo(ch.Deadline + 1)
		}
	}
	res.ch = ch
	for _, ev := range typedEvents[*types.EventTileDecided](s.env) {
		if ev.ChallengeId == id {
			res.decided = ev
		}
	}
	s.requireInvariants()
	return res
}

// send delivers one phase 2–3 (or timeout) message through the Msg server.
func (s *scenario) send(ctx sdk.Context, msg sdk.Msg) error {
	var err error
	switch m := msg.(type) {
	case *types.MsgCommitRecords:
		_, err = s.msg.CommitRecords(ctx, m)
	case *types.MsgRevealNode:
		_, err = s.msg.RevealNode(ctx, m)
	case *types.MsgOpenRecord:
		_, err = s.msg.OpenRecord(ctx, m)
	case *types.MsgRevealChunk:
		_, err = s.msg.RevealChunk(ctx, m)
	case *types.MsgProveTile:
		_, err = s.msg.ProveTile(ctx, m)
	case *types.MsgClaimTimeout:
		_, err = s.msg.ClaimTimeout(ctx, m)
	default:
		err = fmt.Errorf("unexpected %T", msg)
	}
	return err
}

func refOp(t *testing.T, kind string, match func(string) bool) (op, elem int) {
	g := exact.TrainGraph(exact.ReferenceConfig())
	for _, o := range g.Ops {
		if o.Kind == kind && match(g.Tensors[o.Output].Name) {
			return o.Index, g.Tensors[o.Output].Elems() / 2
		}
	}
	t.Fatalf("no %s operator", kind)
	return 0, 0
}

func logGas(t *testing.T, r tileResult) {
	names := make([]string, 0, len(r.gas))
	for n := range r.gas {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%d", n, r.gas[n])
	}
	t.Logf("%d phase 2–3 moves, %d gas in all; most gas per message:%s", r.moves, r.total, b.String())
}

func TestTileGameCatchesOneWrongElement(t *testing.T) {
	anyName := func(string) bool { return true }
	for _, tc := range []struct {
		name  string
		kind  string
		match func(string) bool
	}{
		{"forward matmul", exact.KindMatmul, func(n string) bool { return strings.HasSuffix(n, ".qkv") }},
		{"attention softmax", exact.KindSoftmax, anyName},
		{"normalisation", exact.KindRMSApply, anyName},
		{"backward matmul", exact.KindMatmul, func(n string) bool { return strings.HasSuffix(n, ".dW") }},
		{"AdamW update", exact.KindAdamW, anyName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, 8, 8)
			op, elem := refOp(t, tc.kind, tc.match)
			liar := s.side(s.prov, tamperOp(op, elem), nil, nil)
			v := s.side(s.account("verifier"), exact.Executor{}, nil, nil)
			r := s.playTiles(liar, v)
			require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, r.ch.Outcome, r.ch.OutcomeReason)
			require.NotNil(t, r.decided)
			require.Equal(t, tc.kind, r.decided.Kind)
			require.Equal(t, uint64(liar.tiles.Step.Writer(liar.tiles.Step.Graph.Ops[op].Output)), r.decided.Entry)
			require.False(t, r.decided.ProviderRight)
			require.NotEqual(t, r.decided.Computed, r.decided.Claimed)
			s.requireFraudPunished(r.fc, r.ch.Id, v.party)
			logGas(t, r)
			// Every move stays under the bound CheckAdjudicable computes from the graph.
			params := s.verifyParams()
			w := liar.tiles.Step.WorstCase(func(c tiles.Cost) uint64 { return types.TileMoveGas(params, c) })
			for name, g := range r.gas {
				require.LessOrEqual(t, g, types.MoveGasBound(params, w.Cost), name)
			}
		})
	}
	t.Run("data token", func(t *testing.T) {
		s := newScenario(t, 8, 8)
		liar := s.side(s.prov, exact.Executor{}, nil, func(b [][]byte) { b[1][5] ^= 0x20 })
		v := s.side(s.account("verifier"), exact.Executor{}, nil, nil)
		r := s.playTiles(liar, v)
		require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, r.ch.Outcome, r.ch.OutcomeReason)
		require.NotNil(t, r.decided)
		require.Equal(t, tiles.KindLoad, r.decided.Kind)
		s.requireFraudPunished(r.fc, r.ch.Id, v.party)
		logGas(t, r)
	})
}

func TestTileGameLyingChallengerLoses(t *testing.T) {
	op, elem := refOp(t, exact.KindSoftmax, func(string) bool { return true })
	for _, tc := range []struct {
		name string
		liar func(s *scenario) tileSide
		// kind is the entry the referee decides on; "" when the liar cannot even make
		// its last move (its chunk of h_lo does not prove) and times out.
		kind string
	}{
		{"at the tile level", func(s *scenario) tileSide {
			return s.side(s.account("liar"), tamperOp(op, elem), nil, nil)
		}, exact.KindSoftmax},
		{"about the inputs (a pre-state weight)", func(s *scenario) tileSide {
			pre := s.run.stateAt(s.t, tileK-1)
			pre.Tensor("l0.mlp_in.w").Data[3]++
			return s.side(s.account("liar"), exact.Executor{}, pre, nil)
		}, ""},
		{"about the data", func(s *scenario) tileSide {
			return s.side(s.account("liar"), exact.Executor{}, nil, func(b [][]byte) { b[0][0] ^= 1 })
		}, tiles.KindLoad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, 8, 8)
			honest := s.side(s.prov, exact.Executor{}, nil, nil)
			r := s.playTiles(honest, tc.liar(s))
			require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, r.ch.Outcome, r.ch.OutcomeReason)
			if tc.kind == "" {
				require.Nil(t, r.decided)
				require.Contains(t, r.ch.OutcomeReason, "phase 2–3")
				return
			}
			require.NotNil(t, r.decided)
			require.Equal(t, tc.kind, r.decided.Kind)
			require.True(t, r.decided.ProviderRight)
		})
	}
}

// A record inconsistent with the graph (the right output root under the wrong kind)
// cannot be opened: its party loses at the first move that depends on it.
func TestTileGameInconsistentRecordsLose(t *testing.T) {
	for _, lyingProvider := range []bool{true, false} {
		t.Run(fmt.Sprintf("provider lies: %v", lyingProvider), func(t *testing.T) {
			s := newScenario(t, 8, 8)
			op, elem := refOp(t, exact.KindSoftmax, func(string) bool { return true })
			honest := s.side(s.prov, exact.Executor{}, nil, nil)
			// The liar computes one softmax element wrong (so phase 1 reaches step tileK-1)
			// and, before it, commits a record of the wrong kind.
			liar := s.side(s.account("liar"), tamperOp(op, elem), nil, nil)
			if lyingProvider {
				liar.party.addr = s.prov
			}
			c := liar.tiles.C
			e := liar.tiles.Step.Writer(liar.tiles.Step.Graph.Ops[op].Output) - 3
			leaves := append([]merkle.Hash(nil), c.Leaves...)
			leaves[e] = tiles.RecordLeaf(e, exact.KindAdd, c.Roots[e])
			liar.tiles.C = &tiles.Commitment{Roots: c.Roots, Leaves: leaves, Root: merkle.RootFromLeafHashes(leaves)}
			var r tileResult
			if lyingProvider {
				r = s.playTiles(liar, s.side(s.account("verifier"), exact.Executor{}, nil, nil))
				require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, r.ch.Outcome, r.ch.OutcomeReason)
			} else {
				r = s.playTiles(honest, liar)
				require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, r.ch.Outcome, r.ch.OutcomeReason)
			}
			require.Nil(t, r.decided, "decided by timeout at the record opening")
			require.Contains(t, r.ch.OutcomeReason, "phase 2–3")
		})
	}
}

// The worst single message of phases 2–3 fits types.MaxMoveGas (10% of the block gas
// limit) for a 1.2 B-parameter config (computed from its graph, nothing run), which
// x/market's default params allow and CheckAdjudicable accepts.
func TestTileMovesFitTheBlockGasBound(t *testing.T) {
	e := newEnv(t)
	params := e.verifyParams()
	big := exact.Config{
		Model: exact.ModelConfig{Layers: 24, DModel: 2048, Heads: 16, DFF: 8192, Context: 2048, Vocab: exact.Vocab},
		Train: exact.TrainConfig{Batch: 8, MicroBatch: 4, LR: 1e-4},
	}.WithDefaults()
	require.Greater(t, big.ParamCount(), int64(1_000_000_000))
	require.NoError(t, big.CheckLimits(markettypes.DefaultParams().TransformerLimits()), "x/market's default params refuse the 1B config")
	require.Equal(t, uint64(types.BlockGasLimit/10), types.MaxMoveGas)
	for _, cfg := range []exact.Config{exact.ReferenceConfig(), big} {
		w := tiles.NewStep(cfg).WorstCase(func(c tiles.Cost) uint64 { return types.TileMoveGas(params, c) })
		gas := types.MoveGasBound(params, w.Cost)
		t.Logf("%d params: worst move %s, %d bytes, %d elements, %d gas = %.4f of the block gas limit; descents %d + %d rounds",
			cfg.ParamCount(), w.Kind, w.Cost.Bytes, w.Cost.Elems, gas, float64(gas)/types.BlockGasLimit, w.RecordRounds, w.ChunkRounds)
		require.LessOrEqual(t, gas, types.MaxMoveGas)
		require.NoError(t, e.Verify.CheckAdjudicable(e.Ctx, cfg))
	}
	// A config whose rows are so long that one element's inputs exceed the bound is refused.
	huge := big
	huge.Model.DFF, huge.Train.MicroBatch, huge.Train.Batch, huge.Model.Context = 65536, 256, 256, 4096
	require.ErrorIs(t, e.Verify.CheckAdjudicable(e.Ctx, huge), types.ErrStepTooExpensive)
}

// Export in the middle of the chunk descent, import into a fresh chain and in place: the
// tile state comes back as it was and the game finishes as it would have.
func TestTileGameGenesisRoundTrip(t *testing.T) {
	s := newScenario(t, 8, 8)
	op, elem := refOp(t, exact.KindRMSApply, func(string) bool { return true })
	liar := s.side(s.prov, tamperOp(op, elem), nil, nil)
	v := s.side(s.account("verifier"), exact.Executor{}, nil, nil)
	exported := false
	r := s.playTilesPausing(liar, v, func(q *types.QueryChallengeResponse) {
		if exported || q.TileGame.Phase != types.TILE_PHASE_CHUNKS {
			return
		}
		exported = true
		gs, err := s.Verify.ExportGenesis(s.Ctx)
		require.NoError(t, err)
		require.NoError(t, gs.Validate())
		require.Len(t, gs.TileGames, 1)
		require.Equal(t, *q.TileGame, gs.TileGames[0])
		bz, err := s.Codec.MarshalJSON(gs)
		require.NoError(t, err)
		var imported types.GenesisState
		require.NoError(t, s.Codec.UnmarshalJSON(bz, &imported))
		fresh := keepers.New(t)
		require.NoError(t, fresh.Verify.InitGenesis(fresh.Ctx, &imported))
		again, err := fresh.Verify.ExportGenesis(fresh.Ctx)
		require.NoError(t, err)
		require.Equal(t, gs, again)
		s.wipeVerify()
		require.NoError(t, s.Verify.InitGenesis(s.Ctx, &imported))
		bad := imported
		bad.TileGames = append([]types.TileGame(nil), imported.TileGames...)
		bad.TileGames[0].ChallengeId = 99
		require.Error(t, bad.Validate())
	})
	require.True(t, exported)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, r.ch.Outcome, r.ch.OutcomeReason)
	require.Equal(t, exact.KindRMSApply, r.decided.Kind)
}
