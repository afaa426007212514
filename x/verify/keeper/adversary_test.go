package keeper_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"
	distrtypes "github.com/cosmos/cosmos-sdk/x/distribution/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// The attacks of issue 14 as keeper tests: each is written from the attacker's side and
// checks that it does not pay. The end-to-end versions with real binaries are in
// cmd/depinchaind and provider/cmd/depinprovider.

// sham is a challenger that agrees with the cheater at every step but the last: its games
// bisect all the way to [end−1, end] on steps the cheater "computed" (its own trace), so
// they hold the checkpoint open as long as a game can.
func (s *scenario) sham(label string, cheater *party) *party {
	hs := append([]merkle.Hash(nil), cheater.trace.Hashes...)
	hs[len(hs)-1][0] ^= 0xff
	return newParty(s.account(label), trace.New(cheater.trace.Start, hs), nil)
}

// holdings adds up the balances of the given accounts and of every module account and
// the community pool: what a conviction moves must come from and go to somewhere here.
func (e *env) holdings(accounts ...sdk.AccAddress) math.Int {
	total := math.ZeroInt()
	for _, a := range accounts {
		total = total.Add(e.Balance(a))
	}
	for _, m := range []string{types.ModuleName, markettypes.ModuleName, stakingexttypes.ModuleName, distrtypes.ModuleName} {
		total = total.Add(e.Balance(authtypes.NewModuleAddress(m)))
	}
	return total
}

// The squatting attack: a cheating provider and eight accounts of its own challenge its
// fraudulent checkpoint first and play their games so that each bisects onto steps the
// cheater committed itself. There is no cap, so an honest verifier still gets in, and it
// convicts the cheater. The sham games end moot: their bonds come back, and nothing more.
// The cheater's side loses the slash and the pay of the checkpoint; the provider had to
// answer each midpoint once for all nine games.
func TestSquattingAttackFails(t *testing.T) {
	s := newScenario(t, 16, 16)
	params := s.verifyParams()
	cheater := s.liar(s.prov, 0, 16, 5, false)
	cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
	var shams []*party
	var shamGames []*game
	for i := 0; i < 8; i++ {
		sh := s.sham(fmt.Sprintf("sham-%d", i), cheater)
		shams = append(shams, sh)
		shamGames = append(shamGames, s.game(s.openChallenge(sh, s.lease.Id, 0), cheater, sh, nil))
	}
	require.Equal(t, uint32(8), s.checkpoint(s.lease.Id, 0).OpenChallenges)
	// The shams agree with the cheater all the way down: every game waits at [15, 16].
	for moved := true; moved; {
		moved = false
		for _, g := range shamGames {
			if g.move(s.run) {
				moved = true
			}
		}
	}
	for _, g := range shamGames {
		ch := s.challenge(g.id)
		require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
		require.Equal(t, uint64(15), ch.Lo, "the sham bisected onto the cheater's own steps")
	}
	shamAddrs := []sdk.AccAddress{s.prov}
	shamBals := map[string]math.Int{}
	for _, sh := range shams {
		shamAddrs = append(shamAddrs, sh.addr)
		shamBals[sh.addr.String()] = s.Balance(sh.addr)
	}
	cheaterBond := s.provider(s.prov).Bond.Amount
	cheaterBal := s.Balance(s.prov)
	v := s.verifier("honest-verifier", 0, 16)
	before := s.holdings(append(shamAddrs, v.addr, s.owner)...)

	// The honest verifier comes ninth: accepted.
	id := s.openChallenge(v, s.lease.Id, 0)
	require.Equal(t, uint32(9), s.checkpoint(s.lease.Id, 0).OpenChallenges)
	fc := s.beforeFraud(v)
	g := s.game(id, cheater, v, v)
	g.blocks = true
	ch := g.play(s.run)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, ch.Outcome, ch.OutcomeReason)
	require.Equal(t, uint64(4), ch.Lo, "the honest game found the first fabricated step")
	require.LessOrEqual(t, ch.Deadline-ch.OpenedHeight, int64(params.MaxDisputeBlocks()), "the honest game ended within its own deadlines")
	s.requireFraudPunished(fc, id, v)
	for step, n := range cheater.reveals {
		require.Equal(t, 1, n, "h_%d revealed %d times for nine games", step, n)
	}

	// The sham games end moot at their deadlines: their bonds come back, nothing more.
	for _, g := range shamGames {
		s.advanceTo(max(s.Ctx.BlockHeight(), s.challenge(g.id).Deadline+1))
		require.Equal(t, types.CHALLENGE_OUTCOME_MOOT, s.challenge(g.id).Outcome)
	}
	for _, sh := range shams {
		require.Equal(t, shamBals[sh.addr.String()].Add(params.ChallengerBond.Amount), s.Balance(sh.addr), "a sham gets its bond back and no more")
	}
	slashed := params.FraudSlashFraction.MulInt(cheaterBond).TruncateInt()
	require.Equal(t, cheaterBond.Sub(slashed), s.provider(s.prov).Bond.Amount)
	require.Equal(t, cheaterBal, s.Balance(s.prov), "the cheater won nothing back")
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, s.checkpoint(s.lease.Id, 0).Status)
	require.True(t, s.getLease(s.lease.Id).Withdrawable.IsZero(), "the fabricated checkpoint is never paid")
	require.Equal(t, before, s.holdings(append(shamAddrs, v.addr, s.owner)...), "no coin was minted or burned")
	_ = cp
}

// Shams that let their games time out before the honest verifier convicts the cheater
// pay for it: a challenger bond the provider wins goes lost_bond_owner_share to the job
// and the rest but lost_bond_provider_share to the community pool, so self-challenges
// cost the cheater (1 − lost_bond_provider_share) of every bond.
func TestSelfChallengesAreNotARefundMachine(t *testing.T) {
	s := newScenario(t, 16, 16)
	params := s.verifyParams()
	cheater := s.liar(s.prov, 0, 16, 5, false)
	s.submitCheckpoint(cheater, s.lease.Id, 0)
	const n = 4
	var ids []uint64
	spentBefore := s.Balance(s.prov)
	var shams []*party
	for i := 0; i < n; i++ {
		sh := s.sham(fmt.Sprintf("sham-%d", i), cheater)
		shams = append(shams, sh)
		spentBefore = spentBefore.Add(s.Balance(sh.addr))
		ids = append(ids, s.openChallenge(sh, s.lease.Id, 0))
	}
	// Nobody answers: the provider reveals once, the shams never respond.
	require.True(t, s.game(ids[0], cheater, shams[0], nil).move(s.run))
	s.advanceTo(s.challenge(ids[0]).Deadline + 1)
	after := s.Balance(s.prov)
	for i, id := range ids {
		require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, s.challenge(id).Outcome)
		after = after.Add(s.Balance(shams[i].addr))
	}
	bond := params.ChallengerBond.Amount
	kept := params.LostBondProviderShare.MulInt(bond).TruncateInt()
	require.Equal(t, spentBefore.Sub(bond.Sub(kept).MulRaw(n)), after, "the cheater's side lost %s of every bond", bond.Sub(kept))
	require.Equal(t, params.LostBondOwnerShare.MulInt(bond).TruncateInt().MulRaw(n), s.getJob(s.job.Id).Compensation.Amount,
		"the job was credited for the delay")
}

// A reveal costs the provider one write, whatever the number of games waiting on the
// step: nobody can price an honest provider out of its defence by opening games.
func TestRevealCostDoesNotGrowWithGames(t *testing.T) {
	gasWith := func(games int) uint64 {
		s := newScenario(t, 16, 16)
		prov := s.honest(0, 16)
		s.submitCheckpoint(prov, s.lease.Id, 0)
		var first uint64
		for i := 0; i < games; i++ {
			id := s.openChallenge(s.liar(s.account(fmt.Sprintf("liar-%d", i)), 0, 16, 9, false), s.lease.Id, 0)
			if i == 0 {
				first = id
			}
		}
		g := s.game(first, prov, nil, nil)
		gas, err := s.deliver(func(ctx sdk.Context) error { return g.reveal(ctx, 8) })
		require.NoError(t, err)
		for id := first; id < first+uint64(games); id++ {
			require.Equal(t, types.GAME_TURN_CHALLENGER, s.challenge(id).Turn, "the reveal reached game %d", id)
		}
		return gas
	}
	one, many := gasWith(1), gasWith(40)
	t.Logf("reveal gas: %d with 1 game, %d with 40", one, many)
	require.Equal(t, one, many)
}

// Unbond, then cheat: the provider moves part of its free bond out before committing
// (that part was not at stake) and the rest right after committing a fabricated
// checkpoint. The slash reaches the second unbonding: the loss is fraud_slash_fraction
// of the bond it had when it committed, as documented, however it unbonds afterwards.
func TestUnbondThenCheat(t *testing.T) {
	s := newScenario(t, 16, 16)
	params := s.verifyParams()
	prov := s.provider(s.prov)
	early := coin(5_000_000)
	_, err := s.sxMsg.Unbond(s.Ctx, &stakingexttypes.MsgUnbond{Operator: s.prov.String(), Amount: early})
	require.NoError(t, err)
	s.nextBlock()

	cheater := s.liar(s.prov, 0, 16, 5, false)
	cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
	atCommit := s.provider(s.prov).Bond.Amount
	require.Equal(t, prov.Bond.Amount.Sub(early.Amount), atCommit)
	s.nextBlock()
	free := s.provider(s.prov).FreeBond()
	res, err := s.sxMsg.Unbond(s.Ctx, &stakingexttypes.MsgUnbond{Operator: s.prov.String(), Amount: free})
	require.NoError(t, err)
	late := res.UnbondingId
	require.Equal(t, s.provider(s.prov).Locked, s.provider(s.prov).Bond, "only the lease's collateral is left bonded")

	v := s.verifier("verifier", 0, 16)
	id := s.openChallenge(v, s.lease.Id, 0)
	ch := s.game(id, cheater, v, v).play(s.run)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, ch.Outcome)

	lateEntry, err := s.StakingExt.Unbondings.Get(s.Ctx, late)
	require.NoError(t, err)
	earlyEntry, err := s.StakingExt.Unbondings.Get(s.Ctx, late-1)
	require.NoError(t, err)
	require.Equal(t, early, earlyEntry.Amount, "what left before the commit was not at stake")
	fromBond := params.FraudSlashFraction.MulInt(atCommit.Sub(free.Amount)).TruncateInt()
	fromEntry := params.FraudSlashFraction.MulInt(free.Amount).TruncateInt()
	require.Equal(t, free.Amount.Sub(fromEntry), lateEntry.Amount.Amount, "the slash reached the unbonding begun after the commit")
	loss := fromBond.Add(fromEntry)
	require.Equal(t, coin(loss.Int64()), s.resolvedEvent(id).Slashed)
	// The documented loss: fraud_slash_fraction × the bond at the commit (to rounding).
	expected := params.FraudSlashFraction.MulInt(atCommit).TruncateInt()
	require.True(t, expected.Sub(loss).Abs().LTE(math.OneInt()), "loss %s, documented %s", loss, expected)
	require.Less(t, s.Ctx.BlockHeight()-cp.SubmittedHeight, int64(s.stakingParams().UnbondingBlocks), "the entry is still queued")
}

func (e *env) stakingParams() stakingexttypes.Params {
	p, err := e.StakingExt.GetParams(e.Ctx)
	require.NoError(e.t, err)
	return p
}

// The rule spanning x/verify and x/stakingext holds from both sides: neither module's
// governance can make the longest dispute outlast the unbonding floor.
func TestUnbondingCoversTheLongestDispute(t *testing.T) {
	e := newEnv(t)
	p := e.verifyParams()
	staking := e.stakingParams()
	require.GreaterOrEqual(t, staking.UnbondingBlocks, p.RequiredUnbondingBlocks())
	// Phase 1's two moves per round, then the one-step proof or every move of phases 2–3.
	require.Equal(t, p.ChallengeWindow+(2*types.MaxBisectionRounds+1+types.MaxTileMoves)*p.MoveTimeout, p.RequiredUnbondingBlocks())
	require.Equal(t, uint64(41+150), types.MaxGameMoves)

	tooSlow := p
	tooSlow.MoveTimeout = staking.UnbondingBlocks // one move alone outlasts the floor
	err := e.requireRejected(types.ErrInvalidParams, func(ctx sdk.Context) error {
		_, err := e.msg.UpdateParams(ctx, &types.MsgUpdateParams{Authority: e.Authority, Params: tooSlow})
		return err
	})
	require.Contains(t, err.Error(), "unbonding_blocks")

	short := staking
	short.UnbondingBlocks = p.RequiredUnbondingBlocks() - 1
	before := e.snapshot()
	_, err = e.sxMsg.UpdateParams(e.Ctx, &stakingexttypes.MsgUpdateParams{Authority: e.Authority, Params: short})
	require.ErrorIs(t, err, stakingexttypes.ErrInvalidParams)
	require.Contains(t, err.Error(), "unbonding_blocks")
	e.requireUnchanged(before)

	short.UnbondingBlocks = p.RequiredUnbondingBlocks()
	_, err = e.sxMsg.UpdateParams(e.Ctx, &stakingexttypes.MsgUpdateParams{Authority: e.Authority, Params: short})
	require.NoError(t, err, "exactly the longest dispute is enough")
}
