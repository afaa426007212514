package keeper_test

import (
	"crypto/sha256"
	"fmt"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/testutil/keepers"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// fraudCheck records what a proven fraud must change, taken before the game ends.
type fraudCheck struct {
	providerBond   math.Int
	challengerBals map[string]math.Int
}

func (s *scenario) beforeFraud(challengers ...*party) fraudCheck {
	fc := fraudCheck{providerBond: s.provider(s.prov).Bond.Amount, challengerBals: map[string]math.Int{}}
	for _, c := range challengers {
		fc.challengerBals[c.addr.String()] = s.Balance(c.addr)
	}
	return fc
}

// requireFraudPunished checks the aftermath of challenge `id` proving the provider wrong:
// the provider slashed by fraud_slash_fraction and tombstoned; the slash paying the
// winner whistleblower_share of it (on top of its bond back), then the job
// owner_compensation_ratio × the pay it refunded, then the community pool; the lease
// closed for fraud with its pending payment back in the job's escrow, every pending
// checkpoint of the lease rejected, and the job open for bidding again. Other games on the
// rejected checkpoints stay open until they next move or time out (they end moot).
// Balances in fc were taken while the bonds were posted.
func (s *scenario) requireFraudPunished(fc fraudCheck, id uint64, winner *party) {
	s.t.Helper()
	t := s.t
	params := s.verifyParams()
	ch := s.challenge(id)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, ch.Outcome, ch.OutcomeReason)
	require.Equal(t, types.GAME_TURN_DONE, ch.Turn)

	slashed := params.FraudSlashFraction.MulInt(fc.providerBond).TruncateInt()
	reward := params.WhistleblowerShare.MulInt(slashed).TruncateInt()
	p := s.provider(s.prov)
	require.Equal(t, fc.providerBond.Sub(slashed), p.Bond.Amount)
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_TOMBSTONED, p.Status)
	require.Equal(t, uint64(1), p.Reputation.Slashes)

	refunded := math.ZeroInt()
	for _, r := range typedEvents[*markettypes.EventPaymentRefunded](s.env) {
		if r.LeaseId == s.lease.Id {
			refunded = refunded.Add(r.Amount.Amount)
		}
	}
	require.True(t, refunded.IsPositive(), "the lease's unfinalized pay is refunded")
	compensation := math.MinInt(slashed.Sub(reward), params.OwnerCompensationRatio.MulInt(refunded).TruncateInt())

	ev := s.resolvedEvent(id)
	require.Equal(t, coin(slashed.Int64()), ev.Slashed)
	require.Equal(t, coin(reward.Int64()), ev.Reward)
	require.Equal(t, coin(compensation.Int64()), ev.OwnerCompensation, "the owner is compensated for the lost progress after the reward")
	require.Equal(t, coin(slashed.Sub(reward).Sub(compensation).Int64()), ev.CommunityPool, "the rest goes to the community pool")
	require.Equal(t, params.ChallengerBond, ev.Bond)
	require.Equal(t, winner.addr.String(), ev.Challenger)

	// Bond back (it was posted when fc was taken) plus the reward.
	require.Equal(t, fc.challengerBals[winner.addr.String()].Add(ch.Bond.Amount).Add(reward), s.Balance(winner.addr))

	lease := s.getLease(s.lease.Id)
	require.Equal(t, markettypes.LEASE_STATE_CLOSED, lease.State)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_FRAUD, lease.CloseReason)
	require.True(t, lease.Pending.IsZero())
	require.True(t, lease.Committed.IsZero())
	job := s.getJob(s.job.Id)
	require.Equal(t, markettypes.JOB_STATE_OPEN, job.State, "the job goes back to auction")
	require.True(t, job.Compensation.Amount.GTE(compensation), "the job's compensation %s counts this conviction's %s", job.Compensation, compensation)
	if lease.Withdrawn.IsZero() && lease.Withdrawable.IsZero() {
		require.Equal(t, job.Deposited.Add(job.Compensation).Sub(job.AuditFees), job.Escrow,
			"nothing was final, so everything paid in is back in escrow, plus what the job was credited, less audit fees")
	}

	cps, err := s.query.Checkpoints(s.Ctx, &types.QueryCheckpointsRequest{LeaseId: s.lease.Id})
	require.NoError(t, err)
	for _, cp := range cps.Checkpoints {
		require.NotEqual(t, types.CHECKPOINT_STATUS_PENDING, cp.Status, "checkpoint %d", cp.Index)
		if cp.Index >= ch.CheckpointIndex {
			require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, cp.Status, "checkpoint %d", cp.Index)
		}
	}
	require.True(t, s.openBonds().Add(s.unsettledFees()).Equal(s.ModuleBalance(types.ModuleName)))
	s.requireInvariants()
}

// unsettledFees adds up the audit fees x/verify holds.
func (e *env) unsettledFees() math.Int {
	total := math.ZeroInt()
	require.NoError(e.t, e.Verify.Assignments.Walk(e.Ctx, nil, func(_ keeper.AuditKey, a types.Audit) (bool, error) {
		if !a.Settled {
			total = total.Add(a.Fee.Amount)
		}
		return false, nil
	}))
	return total
}

func (e *env) openBonds() math.Int {
	total := math.ZeroInt()
	res, err := e.query.Challenges(e.Ctx, &types.QueryChallengesRequest{OpenOnly: true})
	require.NoError(e.t, err)
	for _, ch := range res.Challenges {
		total = total.Add(ch.Bond.Amount)
	}
	return total
}

func TestHonestProviderBeatsLyingChallenger(t *testing.T) {
	for _, tc := range []struct {
		name    string
		k       uint64
		corrupt bool
	}{
		{"made-up hashes from step 40", 40, false},
		{"corrupted step 40, recomputed after", 40, true},
		{"wrong at the first step", 1, true},
		{"wrong at the last step", 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, 64, 64)
			bond := s.verifyParams().ChallengerBond
			prov := s.honest(0, 64)
			cp := s.submitCheckpoint(prov, s.lease.Id, 0)
			chal := s.liar(s.account("liar"), 0, 64, tc.k, tc.corrupt)

			funds := s.Balance(chal.addr)
			id := s.openChallenge(chal, s.lease.Id, 0)
			require.Equal(t, funds.Sub(bond.Amount), s.Balance(chal.addr))
			require.Equal(t, bond.Amount, s.ModuleBalance(types.ModuleName))
			require.Equal(t, uint32(1), s.checkpoint(s.lease.Id, 0).OpenChallenges)
			provBal := s.Balance(s.prov)

			g := s.game(id, prov, chal, chal) // the liar even runs the referee itself
			g.blocks = true
			ch := g.play(s.run)
			require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, ch.Outcome, ch.OutcomeReason)
			require.Equal(t, ceilLog2(64), ch.Rounds)
			require.Equal(t, tc.k-1, ch.Lo)
			require.Equal(t, tc.k, ch.Hi)
			for step, n := range prov.reveals {
				require.Equal(t, 1, n, "step %d", step)
			}
			steps := typedEvents[*types.EventStepExecuted](s.env)
			require.Len(t, steps, 1)
			require.Equal(t, steps[0].ComputedHash, steps[0].ProviderHash)
			require.Equal(t, uint64(s.run.cfg.MACsPerStep()), steps[0].Macs)

			// The bond is split: lost_bond_provider_share to the provider for its defence,
			// lost_bond_owner_share to the job for the delay, the rest to the community
			// pool. Nothing is slashed.
			params := s.verifyParams()
			toProvider := params.LostBondProviderShare.MulInt(bond.Amount).TruncateInt()
			toOwner := params.LostBondOwnerShare.MulInt(bond.Amount).TruncateInt()
			require.Equal(t, provBal.Add(toProvider), s.Balance(s.prov))
			require.Equal(t, toOwner, s.getJob(s.job.Id).Compensation.Amount)
			ev := s.resolvedEvent(id)
			require.Equal(t, toProvider, ev.BondToProvider.Amount)
			require.Equal(t, toOwner, ev.BondToOwner.Amount)
			require.Equal(t, bond.Amount.Sub(toProvider).Sub(toOwner), ev.CommunityPool.Amount)
			require.True(t, s.ModuleBalance(types.ModuleName).IsZero())
			p := s.provider(s.prov)
			require.Equal(t, stakingexttypes.PROVIDER_STATUS_ACTIVE, p.Status)
			require.Equal(t, int64(providerBond), p.Bond.Amount.Int64())

			// The checkpoint still waits out its window, then finalizes.
			require.Less(t, s.Ctx.BlockHeight(), cp.ChallengeDeadline)
			require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)
			s.advanceTo(cp.ChallengeDeadline + 1)
			require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
			require.Equal(t, markettypes.JOB_STATE_COMPLETED, s.getJob(s.job.Id).State)
		})
	}
}

func TestLyingProviderLosesToHonestChallenger(t *testing.T) {
	for _, tc := range []struct {
		name    string
		k       uint64
		corrupt bool
	}{
		{"made-up hashes from the middle", 21, false},
		{"one corrupted step in the middle, recomputed after", 21, true},
		{"corrupted first step", 1, true},
		{"made-up first step", 1, false},
		{"corrupted last step", 32, true},
		{"made-up last step", 32, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, 64, 32)
			s.advance(30)
			liar := s.liar(s.prov, 0, 32, tc.k, tc.corrupt)
			cp0 := s.submitCheckpoint(liar, s.lease.Id, 0)
			s.advance(30)
			// It keeps going from its wrong state; the next checkpoint chains on it.
			next := newParty(s.prov, s.run.garbageFrom(32, 64, 32), nil)
			cp1 := s.submitCheckpoint(next, s.lease.Id, 1)
			require.Equal(t, cp0.FinalHash, cp1.StartHash)

			v := s.verifier("verifier", 0, 32)
			id := s.openChallenge(v, s.lease.Id, 0)
			fc := s.beforeFraud(v)
			g := s.game(id, liar, v, v)
			g.blocks = true
			ch := g.play(s.run)
			require.Equal(t, ceilLog2(32), ch.Rounds)
			require.Equal(t, tc.k-1, ch.Lo)
			require.Equal(t, tc.k, ch.Hi)
			steps := typedEvents[*types.EventStepExecuted](s.env)
			require.Len(t, steps, 1)
			require.Equal(t, s.run.hashes[tc.k][:], steps[0].ComputedHash)
			require.NotEqual(t, steps[0].ComputedHash, steps[0].ProviderHash)
			s.requireFraudPunished(fc, id, v)
			require.Len(t, typedEvents[*types.EventCheckpointRejected](s.env), 2)

			// Nothing changes when the windows close.
			s.advanceTo(cp1.ChallengeDeadline + 1)
			require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, s.checkpoint(s.lease.Id, 0).Status)
			require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, s.checkpoint(s.lease.Id, 1).Status)
		})
	}
}

// Earlier final checkpoints stay paid when a later one is proven wrong; the job resumes
// from the last final one.
func TestFraudAfterFinalCheckpoint(t *testing.T) {
	s := newScenario(t, 64, 32)
	s.advance(10)
	cp0 := s.submitCheckpoint(s.honest(0, 32), s.lease.Id, 0)
	s.advanceTo(cp0.ChallengeDeadline + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	s.advance(10)
	liar := s.liar(s.prov, 32, 64, 50, true)
	s.submitCheckpoint(liar, s.lease.Id, 1)
	v := s.verifier("verifier", 32, 64)
	id := s.openChallenge(v, s.lease.Id, 1)
	fc := s.beforeFraud(v)
	ch := s.game(id, liar, v, v).play(s.run)
	require.Equal(t, ceilLog2(32), ch.Rounds)
	s.requireFraudPunished(fc, id, v)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	lease := s.getLease(s.lease.Id)
	require.Equal(t, cp0.Claim, lease.Withdrawable, "the final checkpoint's payment stays with the provider")
	job := s.getJob(s.job.Id)
	require.Equal(t, uint64(32), job.Progress[0].Step)
	require.Equal(t, cp0.FinalHash, job.Progress[0].StateHash)
}

func TestTimeouts(t *testing.T) {
	t.Run("provider misses its reveal", func(t *testing.T) {
		s := newScenario(t, 16, 16)
		s.submitCheckpoint(s.liar(s.prov, 0, 16, 5, false), s.lease.Id, 0)
		v := s.verifier("verifier", 0, 16)
		id := s.openChallenge(v, s.lease.Id, 0)
		fc := s.beforeFraud(v)
		ch := s.challenge(id)
		require.Equal(t, types.GAME_TURN_PROVIDER, ch.Turn)
		require.Equal(t, s.Ctx.BlockHeight()+int64(s.verifyParams().MoveTimeout), ch.Deadline)
		s.advanceTo(ch.Deadline) // the deadline height is still in time
		require.Equal(t, types.CHALLENGE_OUTCOME_UNSPECIFIED, s.challenge(id).Outcome)
		s.nextBlock()
		ch = s.challenge(id)
		require.Contains(t, ch.OutcomeReason, "did not reveal")
		s.requireFraudPunished(fc, id, v)
	})
	t.Run("challenger misses its answer", func(t *testing.T) {
		s := newScenario(t, 16, 16)
		prov := s.honest(0, 16)
		cp := s.submitCheckpoint(prov, s.lease.Id, 0)
		chal := s.liar(s.account("liar"), 0, 16, 9, false)
		id := s.openChallenge(chal, s.lease.Id, 0)
		g := s.game(id, prov, chal, nil)
		require.True(t, g.move(s.run)) // the provider reveals h_8
		ch := s.challenge(id)
		require.Equal(t, types.GAME_TURN_CHALLENGER, ch.Turn)
		provBal := s.Balance(s.prov)
		s.advanceTo(ch.Deadline)
		require.Equal(t, types.CHALLENGE_OUTCOME_UNSPECIFIED, s.challenge(id).Outcome)
		s.nextBlock()
		ch = s.challenge(id)
		require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, ch.Outcome)
		require.Contains(t, ch.OutcomeReason, "answer at step 8")
		require.Equal(t, provBal.Add(s.verifyParams().LostBondProviderShare.MulInt(ch.Bond.Amount).TruncateInt()), s.Balance(s.prov))
		s.advanceTo(cp.ChallengeDeadline + 1)
		require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	})
	t.Run("nobody runs the referee: the burden is on the challenger", func(t *testing.T) {
		s := newScenario(t, 16, 16)
		liar := s.liar(s.prov, 0, 16, 5, true)
		cp := s.submitCheckpoint(liar, s.lease.Id, 0)
		v := s.verifier("verifier", 0, 16)
		id := s.openChallenge(v, s.lease.Id, 0)
		ch := s.game(id, liar, v, nil).play(s.run)
		require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
		require.Equal(t, uint64(4), ch.Lo)
		provBal := s.Balance(s.prov)
		s.advanceTo(ch.Deadline + 1)
		ch = s.challenge(id)
		require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, ch.Outcome)
		require.Contains(t, ch.OutcomeReason, "MsgStep")
		require.Equal(t, provBal.Add(s.verifyParams().LostBondProviderShare.MulInt(ch.Bond.Amount).TruncateInt()), s.Balance(s.prov))
		s.advanceTo(cp.ChallengeDeadline + 1)
		require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	})
}

// A move after its deadline is refused even when the end blocker has not yet timed the
// game out (it caps the deadlines it handles per block).
func TestLateMoveRejected(t *testing.T) {
	s := newScenario(t, 16, 16)
	s.setVerifyParams(func(p *types.Params) { p.MaxDeadlinesPerBlock = 1 })
	prov := s.honest(0, 16)
	s.submitCheckpoint(prov, s.lease.Id, 0)
	// Two games time out at the same height; the cap handles one per block.
	a := s.liar(s.account("liar-a"), 0, 16, 9, false)
	b := s.liar(s.account("liar-b"), 0, 16, 9, false)
	ida := s.openChallenge(a, s.lease.Id, 0)
	idb := s.openChallenge(b, s.lease.Id, 0)
	require.True(t, s.game(ida, prov, a, nil).move(s.run)) // one reveal serves both games
	chb := s.challenge(idb)
	require.Equal(t, types.GAME_TURN_CHALLENGER, chb.Turn)
	s.advanceTo(chb.Deadline + 1)
	require.NotEqual(t, types.CHALLENGE_OUTCOME_UNSPECIFIED, s.challenge(ida).Outcome)
	require.Equal(t, types.CHALLENGE_OUTCOME_UNSPECIFIED, s.challenge(idb).Outcome, "the second timeout waits for the next block")
	g := s.game(idb, prov, b, nil)
	s.requireRejected(types.ErrMoveTooLate, func(ctx sdk.Context) error {
		_, err := s.msg.Respond(ctx, g.respondMsg(chb.Mid))
		return err
	})
	s.nextBlock()
	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, s.challenge(idb).Outcome)
}

func TestConcurrentChallengesHonestProvider(t *testing.T) {
	s := newScenario(t, 64, 32)
	// No game times out here; 500 keeps the longest dispute (types.MaxGameMoves moves)
	// within x/stakingext's default unbonding_blocks.
	s.setVerifyParams(func(p *types.Params) { p.MoveTimeout = 500 })
	prov := s.honest(0, 32)
	cp0 := s.submitCheckpoint(prov, s.lease.Id, 0)
	s.advance(5)
	cp1 := s.submitCheckpoint(s.honest(32, 64), s.lease.Id, 1)
	bond := s.verifyParams().ChallengerBond.Amount

	a := s.liar(s.account("liar-a"), 0, 32, 20, false)
	c := s.liar(s.account("liar-c"), 0, 32, 10, true)
	ida := s.openChallenge(a, s.lease.Id, 0)
	idc := s.openChallenge(c, s.lease.Id, 0)
	ga, gc := s.game(ida, prov, a, a), s.game(idc, prov, c, c)
	// Both wait on the provider at the same midpoint; one reveal moves both.
	require.Equal(t, types.GAME_TURN_PROVIDER, s.challenge(idc).Turn)
	require.True(t, ga.move(s.run))
	require.Equal(t, types.GAME_TURN_CHALLENGER, s.challenge(ida).Turn)
	require.Equal(t, types.GAME_TURN_CHALLENGER, s.challenge(idc).Turn)
	// Interleave until both games wait for the referee.
	for moved := true; moved; {
		moved = false
		for _, g := range []*game{ga, gc} {
			if s.challenge(g.id).Turn != types.GAME_TURN_ONE_STEP && g.move(s.run) {
				moved = true
			}
		}
	}
	// A third liar with A's trace, opened now: every midpoint it needs is on-chain, so the
	// provider never has to answer it.
	b := s.liar(s.account("liar-b"), 0, 32, 20, false)
	idb := s.openChallenge(b, s.lease.Id, 0)
	require.Equal(t, types.GAME_TURN_CHALLENGER, s.challenge(idb).Turn)
	revealsBefore := len(prov.reveals)
	gb := s.game(idb, prov, b, nil)
	chb := gb.play(s.run)
	require.Equal(t, types.GAME_TURN_ONE_STEP, chb.Turn)
	require.Equal(t, ceilLog2(32), chb.Rounds)
	require.Equal(t, revealsBefore, len(prov.reveals), "the provider answered the reused midpoints again")
	for step, n := range prov.reveals {
		require.Equal(t, 1, n, "h_%d revealed %d times", step, n)
	}
	require.Len(t, typedEvents[*types.EventHashRevealed](s.env), len(prov.reveals))
	require.Equal(t, uint32(3), s.checkpoint(s.lease.Id, 0).OpenChallenges)

	// A loses at the referee; C and B are still open, so both checkpoints stay frozen
	// even after their windows close.
	require.True(t, ga.move(s.run))
	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, s.challenge(ida).Outcome)
	require.True(t, gc.move(s.run))
	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, s.challenge(idc).Outcome)
	s.advanceTo(cp1.ChallengeDeadline + 2)
	require.Less(t, cp0.ChallengeDeadline, s.Ctx.BlockHeight())
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 1).Status, "frozen behind checkpoint 0")
	require.True(t, s.getLease(s.lease.Id).Withdrawable.IsZero())

	// B's referee step: the last game ends, and both checkpoints finalize in that transaction.
	provBal := s.Balance(s.prov)
	gb.stepper = b
	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, gb.play(s.run).Outcome)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 1).Status)
	require.Equal(t, provBal.Add(s.verifyParams().LostBondProviderShare.MulInt(bond).TruncateInt()), s.Balance(s.prov))
	lease := s.getLease(s.lease.Id)
	require.Equal(t, cp0.Claim.Add(cp1.Claim), lease.Withdrawable)
	require.Equal(t, markettypes.JOB_STATE_COMPLETED, s.getJob(s.job.Id).State)
	require.True(t, s.ModuleBalance(types.ModuleName).IsZero())
}

func TestConcurrentChallengesLyingProvider(t *testing.T) {
	s := newScenario(t, 64, 32)
	liar := s.liar(s.prov, 0, 32, 20, false)
	s.submitCheckpoint(liar, s.lease.Id, 0)
	liar1 := newParty(s.prov, s.run.garbageFrom(32, 64, 32), nil)
	s.submitCheckpoint(liar1, s.lease.Id, 1)

	a := s.verifier("verifier-a", 0, 32)
	b := s.verifier("verifier-b", 0, 32)
	d := s.verifier("verifier-d", 32, 64) // disputes the second checkpoint
	ida := s.openChallenge(a, s.lease.Id, 0)
	idb := s.openChallenge(b, s.lease.Id, 0)
	idd := s.openChallenge(d, s.lease.Id, 1)
	fc := s.beforeFraud(a, b, d)
	gb, gd := s.game(idb, liar, b, b), s.game(idd, liar1, d, d)
	require.True(t, gb.move(s.run))
	require.True(t, gd.move(s.run))

	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, s.game(ida, liar, a, a).play(s.run).Outcome)
	s.requireFraudPunished(fc, ida, a)
	// The conviction does not end the other games itself (there may be any number of
	// them): their checkpoints are rejected, so they take no more moves, and they end moot
	// when they time out or when anyone claims it.
	stranger := newParty(s.account("stranger"), s.run.trace(0, 32), nil)
	for i, o := range []struct {
		id uint64
		p  *party
	}{{idb, b}, {idd, d}} {
		ch := s.challenge(o.id)
		require.Equal(t, types.CHALLENGE_OUTCOME_UNSPECIFIED, ch.Outcome)
		err := s.requireRejected(types.ErrNotYourTurn, func(ctx sdk.Context) error {
			_, err := s.msg.Respond(ctx, &types.MsgRespond{Challenger: o.p.addr.String(), ChallengeId: o.id, Hash: make([]byte, 32)})
			return err
		})
		require.Contains(t, err.Error(), "ends moot")
		if i == 0 {
			res, err := s.msg.ClaimTimeout(s.Ctx, &types.MsgClaimTimeout{Sender: stranger.addr.String(), ChallengeId: o.id})
			require.NoError(t, err)
			require.Equal(t, types.CHALLENGE_OUTCOME_MOOT, res.Outcome, "claimed before its deadline: the checkpoint is rejected")
		} else {
			s.advanceTo(ch.Deadline + 1)
		}
		ch = s.challenge(o.id)
		require.Equal(t, types.CHALLENGE_OUTCOME_MOOT, ch.Outcome)
		require.Equal(t, types.GAME_TURN_DONE, ch.Turn)
		require.Equal(t, fc.challengerBals[o.p.addr.String()].Add(ch.Bond.Amount), s.Balance(o.p.addr), "bond returned")
		// A moot game takes no more moves.
		s.requireRejected(types.ErrNotYourTurn, func(ctx sdk.Context) error {
			_, err := s.msg.Respond(ctx, &types.MsgRespond{Challenger: o.p.addr.String(), ChallengeId: o.id, Hash: make([]byte, 32)})
			return err
		})
	}
	for _, i := range []uint64{0, 1} {
		require.Zero(t, s.checkpoint(s.lease.Id, i).OpenChallenges)
	}
	require.True(t, s.ModuleBalance(types.ModuleName).IsZero())
	// No deadline of a finished game is left behind.
	moves := keepers.KeySetPart("move deadlines", func() sdk.Context { return s.Ctx }, s.Verify.MoveDeadlines)
	require.Empty(t, moves.Read(t))
}

func TestChallengeWindowBoundary(t *testing.T) {
	s := newScenario(t, 64, 32)
	prov := s.honest(0, 32)
	cp0 := s.submitCheckpoint(prov, s.lease.Id, 0)
	s.advance(3)
	cp1 := s.submitCheckpoint(s.honest(32, 64), s.lease.Id, 1)

	// In the last block of the window a challenge is accepted and blocks finalization.
	s.advanceTo(cp0.ChallengeDeadline)
	chal := s.liar(s.account("liar"), 0, 32, 7, false)
	id := s.openChallenge(chal, s.lease.Id, 0)
	s.advanceTo(cp1.ChallengeDeadline)
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)

	// Checkpoint 1 is in its last block: still challengeable. One block later it is not,
	// though it is still pending (frozen behind checkpoint 0).
	late := s.liar(s.account("late"), 32, 64, 40, false)
	s.nextBlock()
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 1).Status)
	err := s.requireRejected(types.ErrNotChallengeable, func(ctx sdk.Context) error {
		_, err := s.msg.Challenge(ctx, challengeMsg(late, s.lease.Id, 1))
		return err
	})
	require.Contains(t, err.Error(), "window closed")

	require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, s.game(id, prov, chal, chal).play(s.run).Outcome)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 1).Status)
	// A final checkpoint cannot be challenged.
	s.requireRejected(types.ErrNotChallengeable, func(ctx sdk.Context) error {
		_, err := s.msg.Challenge(ctx, challengeMsg(chal, s.lease.Id, 0))
		return err
	})
}

func TestChallengeRejections(t *testing.T) {
	s := newScenario(t, 16, 16)
	prov := s.honest(0, 16)
	s.submitCheckpoint(prov, s.lease.Id, 0)
	liar := s.liar(s.account("liar"), 0, 16, 3, false)
	challenge := func(m *types.MsgChallenge) func(sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.msg.Challenge(ctx, m); return err }
	}
	tamper := func(change func(m *types.MsgChallenge)) *types.MsgChallenge {
		m := challengeMsg(liar, s.lease.Id, 0)
		change(m)
		return m
	}
	poor := newParty(addr("poor"), liar.trace, nil)
	s.Fund(t, poor.addr, s.verifyParams().ChallengerBond.Amount.Int64()-1)
	selfish := newParty(s.prov, liar.trace, nil)
	agreeing := newParty(s.account("agreeing"), s.run.trace(0, 16), nil)

	outer := s.t
	for _, tc := range []struct {
		name string
		msg  *types.MsgChallenge
		want *errorsmod.Error
	}{
		{"self-challenge", challengeMsg(selfish, s.lease.Id, 0), types.ErrSelfChallenge},
		{"same final hash", challengeMsg(agreeing, s.lease.Id, 0), types.ErrNoDisagreement},
		{"unknown checkpoint", tamper(func(m *types.MsgChallenge) { m.CheckpointIndex = 1 }), types.ErrCheckpointNotFound},
		{"tampered proof", tamper(func(m *types.MsgChallenge) {
			m.FinalHashProof[0] = append([]byte(nil), m.FinalHashProof[0]...)
			m.FinalHashProof[0][0] ^= 0x80
		}), types.ErrInvalidProof},
		{"no proof", tamper(func(m *types.MsgChallenge) { m.FinalHashProof = nil }), types.ErrInvalidProof},
		{"final hash not in the trace", tamper(func(m *types.MsgChallenge) { m.FinalHash = s.run.hashes[2][:] }), types.ErrInvalidProof},
		{"short trace root", tamper(func(m *types.MsgChallenge) { m.TraceRoot = m.TraceRoot[:16] }), types.ErrInvalidHash},
		{"bad challenger address", tamper(func(m *types.MsgChallenge) { m.Challenger = "nobody" }), sdkerrors.ErrInvalidAddress},
		{"insufficient funds for the bond", challengeMsg(poor, s.lease.Id, 0), sdkerrors.ErrInsufficientFunds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			defer func() { s.t = outer }()
			s.requireRejected(tc.want, challenge(tc.msg))
		})
	}
}

func TestChallengeContainerWorkloadNotAdjudicable(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	job, lease := e.leaseJob(prov, containerSpec(16, 16))
	r := computeRun(t, job, 16)
	e.submitCheckpoint(newParty(prov, r.garbageFrom(0, 16, 0), nil), lease.Id, 0)
	chal := newParty(e.account("verifier"), r.trace(0, 16), nil)
	err := e.requireRejected(types.ErrNotAdjudicable, func(ctx sdk.Context) error {
		_, err := e.msg.Challenge(ctx, challengeMsg(chal, lease.Id, 0))
		return err
	})
	require.Contains(t, err.Error(), "only for the reference workload")
}

// A reference job that trains on a registered dataset cannot be refereed yet (the chain
// has no shard roots), so a challenge — which could never be won — is refused up front.
func TestChallengeDatasetJobNotAdjudicable(t *testing.T) {
	e := newEnv(t)
	prov := e.registerProvider("provider", 8)
	spec := referenceSpec(16, 16)
	spec.DatasetId = "ds-fineweb-10b"
	job, lease := e.leaseJob(prov, spec)
	jobNoData := job
	jobNoData.Spec.DatasetId = ""
	r := computeRun(t, jobNoData, 16)
	e.submitCheckpoint(newParty(prov, r.garbageFrom(0, 16, 1), nil), lease.Id, 0)
	chal := newParty(e.account("verifier"), r.trace(0, 16), nil)
	err := e.requireRejected(types.ErrNotAdjudicable, func(ctx sdk.Context) error {
		_, err := e.msg.Challenge(ctx, challengeMsg(chal, lease.Id, 0))
		return err
	})
	require.Contains(t, err.Error(), "dataset")
}

func TestMoveRejections(t *testing.T) {
	s := newScenario(t, 16, 16)
	liar := s.liar(s.prov, 0, 16, 6, true)
	s.submitCheckpoint(liar, s.lease.Id, 0)
	v := s.verifier("verifier", 0, 16)
	id := s.openChallenge(v, s.lease.Id, 0)
	g := s.game(id, liar, v, v)
	stranger := s.account("stranger")

	// Provider's turn at h_8.
	ch := s.challenge(id)
	require.Equal(t, types.GAME_TURN_PROVIDER, ch.Turn)
	require.Equal(t, uint64(8), ch.Mid)
	reveal := func(change func(m *types.MsgRevealHash)) func(sdk.Context) error {
		h, proof, err := liar.trace.Open(8)
		require.NoError(t, err)
		m := &types.MsgRevealHash{Provider: s.prov.String(), LeaseId: s.lease.Id, CheckpointIndex: 0, Step: 8, Hash: h[:], Proof: proof}
		change(m)
		return func(ctx sdk.Context) error { _, err := s.msg.RevealHash(ctx, m); return err }
	}
	s.requireRejected(types.ErrNotLeaseProvider, reveal(func(m *types.MsgRevealHash) { m.Provider = stranger.String() }))
	// Any step strictly inside the checkpoint may be revealed while a game is open (a
	// reveal costs one write, whatever games it serves); steps outside it may not.
	s.requireRejected(types.ErrNoGameWaiting, reveal(func(m *types.MsgRevealHash) { m.Step = 17 }))
	s.requireRejected(types.ErrAlreadyRevealed, reveal(func(m *types.MsgRevealHash) { m.Step = 0 }))
	s.requireRejected(types.ErrAlreadyRevealed, reveal(func(m *types.MsgRevealHash) { m.Step = 16 }))
	s.requireRejected(types.ErrInvalidProof, reveal(func(m *types.MsgRevealHash) { m.Hash = s.run.hashes[8][:] }))
	s.requireRejected(types.ErrInvalidProof, reveal(func(m *types.MsgRevealHash) { m.Proof = m.Proof[1:] }))
	s.requireRejected(types.ErrCheckpointNotFound, reveal(func(m *types.MsgRevealHash) { m.CheckpointIndex = 3 }))
	// The challenger cannot move, nor anyone run the referee, on the provider's turn.
	s.requireRejected(types.ErrNotYourTurn, func(ctx sdk.Context) error { _, err := s.msg.Respond(ctx, g.respondMsg(8)); return err })
	s.requireRejected(types.ErrNotYourTurn, func(ctx sdk.Context) error {
		_, err := s.msg.Step(ctx, stepMsg(s.run, v.addr, id, s.run.stateAt(t, 5), 5))
		return err
	})
	s.requireRejected(types.ErrChallengeNotFound, func(ctx sdk.Context) error {
		_, err := s.msg.Respond(ctx, &types.MsgRespond{Challenger: v.addr.String(), ChallengeId: 99})
		return err
	})

	require.True(t, g.move(s.run))
	require.ErrorIs(t, func() error { _, err := s.deliver(reveal(func(*types.MsgRevealHash) {})); return err }(), types.ErrAlreadyRevealed)
	// Challenger's turn.
	s.requireRejected(types.ErrNotYourTurn, func(ctx sdk.Context) error {
		m := g.respondMsg(8)
		m.Challenger = stranger.String()
		_, err := s.msg.Respond(ctx, m)
		return err
	})
	s.requireRejected(types.ErrInvalidProof, func(ctx sdk.Context) error {
		m := g.respondMsg(8)
		m.Hash = s.run.hashes[7][:]
		_, err := s.msg.Respond(ctx, m)
		return err
	})
	s.requireRejected(types.ErrInvalidProof, func(ctx sdk.Context) error {
		m := g.respondMsg(8)
		m.Proof = append(m.Proof, m.Proof[0])
		_, err := s.msg.Respond(ctx, m)
		return err
	})
	s.requireRejected(types.ErrInvalidHash, func(ctx sdk.Context) error {
		m := g.respondMsg(8)
		m.Hash = m.Hash[:8]
		_, err := s.msg.Respond(ctx, m)
		return err
	})

	// Play to the one-step phase: [5, 6].
	for s.challenge(id).Turn != types.GAME_TURN_ONE_STEP {
		require.True(t, g.move(s.run))
	}
	ch = s.challenge(id)
	require.Equal(t, uint64(5), ch.Lo)
	require.Equal(t, uint64(6), ch.Hi)
	require.ErrorIs(t, s.game(id, liar, v, nil).reveal(s.Ctx, 16), types.ErrAlreadyRevealed, "h_end is committed with the checkpoint")
	require.ErrorIs(t, s.game(id, liar, v, nil).reveal(s.Ctx, 6), types.ErrAlreadyRevealed)
	s.requireRejected(types.ErrNotYourTurn, func(ctx sdk.Context) error { _, err := s.msg.Respond(ctx, g.respondMsg(6)); return err })

	good := func() *types.MsgStep { return stepMsg(s.run, v.addr, id, s.run.stateAt(t, 5), 5) }
	step := func(m *types.MsgStep) func(sdk.Context) error {
		return func(ctx sdk.Context) error { _, err := s.msg.Step(ctx, m); return err }
	}
	require.Greater(t, len(good().Data), 1)
	unused := func(m *types.MsgStep) uint64 {
		used := map[uint64]bool{}
		for _, c := range m.Data {
			used[c.Index] = true
		}
		for i := uint64(0); ; i++ {
			if !used[i] {
				return i
			}
		}
	}
	outer := s.t
	for _, tc := range []struct {
		name   string
		change func(m *types.MsgStep)
		want   *errorsmod.Error
	}{
		{"pre-state of another step", func(m *types.MsgStep) { m.PreState = s.run.stateAt(t, 6).Encode() }, types.ErrInvalidPreState},
		{"pre-state of the step before", func(m *types.MsgStep) { m.PreState = s.run.stateAt(t, 4).Encode() }, types.ErrInvalidPreState},
		{"tampered pre-state", func(m *types.MsgStep) { m.PreState[len(m.PreState)-1] ^= 1 }, types.ErrInvalidPreState},
		{"empty pre-state", func(m *types.MsgStep) { m.PreState = nil }, types.ErrInvalidPreState},
		{"missing data chunk", func(m *types.MsgStep) { m.Data = m.Data[1:] }, types.ErrInvalidData},
		{"no data", func(m *types.MsgStep) { m.Data = nil }, types.ErrInvalidData},
		{"tampered chunk", func(m *types.MsgStep) {
			m.Data[0].Data = append([]byte(nil), m.Data[0].Data...)
			m.Data[0].Data[10] ^= 1
		}, types.ErrInvalidProof},
		{"chunk with the proof of another index", func(m *types.MsgStep) { m.Data[0].Proof = m.Data[1].Proof }, types.ErrInvalidProof},
		{"chunk under another index", func(m *types.MsgStep) { m.Data[0].Index = unused(m) }, types.ErrInvalidProof},
		{"chunk out of range", func(m *types.MsgStep) { m.Data[0].Index = 1 << 40 }, types.ErrInvalidData},
		{"chunk twice", func(m *types.MsgStep) { m.Data = append(m.Data, m.Data[0]) }, types.ErrInvalidData},
		{"short chunk proof", func(m *types.MsgStep) { m.Data[0].Proof = m.Data[0].Proof[1:] }, types.ErrInvalidProof},
		{"unknown challenge", func(m *types.MsgStep) { m.ChallengeId = 42 }, types.ErrChallengeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.t = t
			defer func() { s.t = outer }()
			m := good()
			tc.change(m)
			s.requireRejected(tc.want, step(m))
		})
	}
	// Extra (proven) chunks are harmless, and anyone may run the referee.
	m := good()
	all, err := types.StepData(s.run.data, s.run.cfg, s.run.seed, 1000)
	require.NoError(t, err)
	for _, c := range all {
		if c.Index == unused(m) {
			m.Data = append(m.Data, c)
			break
		}
	}
	m.Sender = stranger.String()
	res, err := s.msg.Step(s.Ctx, m)
	require.NoError(t, err)
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, res.Outcome)
	// The game is over.
	s.requireRejected(types.ErrNotYourTurn, step(good()))
}

// Exhaustively over every step where a liar's trace can first go wrong, for ranges that
// are and are not powers of two: the game ends at [k-1, k], in between floor(log2 n) and
// ceil(log2 n) rounds (exactly log2 n for powers of two). All the games run at once on
// one checkpoint, so the provider answers each midpoint once for all of them.
func TestBisectionFindsFirstDisagreement(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 5, 7, 8, 12, 33} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			s := newScenario(t, n+10, n+10)
			prov := s.honest(0, n)
			cp := s.submitCheckpoint(prov, s.lease.Id, 0)
			var games []*game
			for k := uint64(1); k <= n; k++ {
				liar := s.liar(s.account(fmt.Sprintf("liar-%d", k)), 0, n, k, k%2 == 0)
				games = append(games, s.game(s.openChallenge(liar, s.lease.Id, 0), prov, liar, liar))
			}
			for moved := true; moved; {
				moved = false
				for _, g := range games {
					if s.challenge(g.id).Turn != types.GAME_TURN_ONE_STEP && g.move(s.run) {
						moved = true
					}
				}
			}
			for i, g := range games {
				k := uint64(i + 1)
				ch := s.challenge(g.id)
				require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
				require.Equal(t, k-1, ch.Lo, "liar from step %d", k)
				require.Equal(t, k, ch.Hi)
				require.LessOrEqual(t, ch.Rounds, ceilLog2(n))
				require.GreaterOrEqual(t, ch.Rounds, uint32(bits.Len64(n)-1))
				if n&(n-1) == 0 {
					require.Equal(t, ceilLog2(n), ch.Rounds)
				}
				require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, g.play(s.run).Outcome)
			}
			for step, c := range prov.reveals {
				require.Equal(t, 1, c, "h_%d revealed %d times", step, c)
			}
			require.LessOrEqual(t, uint64(len(prov.reveals)), n-1)
			s.advanceTo(cp.ChallengeDeadline + 1)
			require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
		})
	}
}

// The referee also refuses pre-states that hash to the agreed h_lo but are not the job's
// model at step lo: both parties can agree on a wrong hash (here the challenger colludes),
// and the referee must not run whatever that hash opens to.
func TestStepForgedPreStates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forge func(s *exact.State) []byte
		want  string
	}{
		{"state at the wrong step", func(s *exact.State) []byte {
			s.Step++
			return s.Encode()
		}, "at step 7, want 6"},
		{"another learning rate", func(s *exact.State) []byte {
			s.Config.Train.LR *= 2
			return s.Encode()
		}, "model config"},
		{"another weight decay", func(s *exact.State) []byte {
			s.Config.Train.WeightDecay = 0.5
			return s.Encode()
		}, "model config"},
		{"not a state at all", func(*exact.State) []byte { return []byte("definitely not a model") }, "invalid state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, 16, 16)
			forged := tc.forge(s.run.stateAt(t, 6))
			hs := append([]merkle.Hash(nil), s.run.hashes[:17]...)
			hs[6] = exact.StateRoot(forged)
			provHashes, chalHashes := append([]merkle.Hash(nil), hs...), append([]merkle.Hash(nil), hs...)
			for i := 7; i <= 16; i++ {
				provHashes[i] = sha256.Sum256([]byte{'p', byte(i)})
				chalHashes[i] = sha256.Sum256([]byte{'c', byte(i)})
			}
			prov := newParty(s.prov, trace.New(0, provHashes), nil)
			chal := newParty(s.account("colluder"), trace.New(0, chalHashes), nil)
			s.submitCheckpoint(prov, s.lease.Id, 0)
			id := s.openChallenge(chal, s.lease.Id, 0)
			ch := s.game(id, prov, chal, nil).play(s.run)
			require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
			require.Equal(t, uint64(6), ch.Lo)
			m := stepMsg(s.run, chal.addr, id, s.run.stateAt(t, 6), 6)
			m.PreState = forged
			err := s.requireRejected(types.ErrInvalidPreState, func(ctx sdk.Context) error { _, err := s.msg.Step(ctx, m); return err })
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// A game that ends in a transaction of the window's last block does not finalize the
// checkpoint there: a challenge later in that block is still in time.
func TestGameEndsInLastBlockOfWindow(t *testing.T) {
	for _, another := range []bool{false, true} {
		t.Run(fmt.Sprintf("another challenge=%v", another), func(t *testing.T) {
			s := newScenario(t, 16, 16)
			prov := s.honest(0, 16)
			cp := s.submitCheckpoint(prov, s.lease.Id, 0)
			s.advanceTo(cp.ChallengeDeadline - 20)
			a := s.liar(s.account("liar-a"), 0, 16, 11, false)
			ga := s.game(s.openChallenge(a, s.lease.Id, 0), prov, a, nil)
			require.Equal(t, types.GAME_TURN_ONE_STEP, ga.play(s.run).Turn)

			s.advanceTo(cp.ChallengeDeadline)
			ga.stepper = a
			require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, ga.play(s.run).Outcome)
			require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)
			if !another {
				s.nextBlock()
				require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
				return
			}
			b := s.liar(s.account("liar-b"), 0, 16, 3, false)
			gb := s.game(s.openChallenge(b, s.lease.Id, 0), prov, b, b)
			s.nextBlock()
			require.Equal(t, types.CHECKPOINT_STATUS_PENDING, s.checkpoint(s.lease.Id, 0).Status)
			require.Equal(t, types.CHALLENGE_OUTCOME_PROVIDER_WON, gb.play(s.run).Outcome)
			require.Equal(t, types.CHECKPOINT_STATUS_FINAL, s.checkpoint(s.lease.Id, 0).Status)
		})
	}
}
