package keeper_test

import (
	"fmt"
	"math"
	"testing"

	sdkmath "cosmossdk.io/math"
	storetypes "cosmossdk.io/store/types"

	sdk "github.com/cosmos/cosmos-sdk/types"

	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// wealth is everything an attacker owns: its accounts' balances, its provider and
// verifier bonds and its queued unbondings.
func (e *env) wealth(accounts ...sdk.AccAddress) sdkmath.Int {
	total := sdkmath.ZeroInt()
	for _, a := range accounts {
		total = total.Add(e.Balance(a))
		if p, err := e.StakingExt.GetProvider(e.Ctx, a); err == nil {
			total = total.Add(p.Bond.Amount)
		}
		if v, err := e.StakingExt.GetVerifier(e.Ctx, a); err == nil {
			total = total.Add(v.Bond.Amount)
		}
		iter, err := e.StakingExt.Unbondings.Indexes.Operator.MatchExact(e.Ctx, a)
		if err == nil {
			ids, _ := iter.PrimaryKeys()
			for _, id := range ids {
				if u, err := e.StakingExt.Unbondings.Get(e.Ctx, id); err == nil {
					total = total.Add(u.Amount.Amount)
				}
			}
		}
	}
	return total
}

// attack is one attack of issue 14 played at default params: it returns what the
// attacker's side (every account it controls) lost when caught, and what it stood to
// gain if nobody had caught it (the pay of the fabricated checkpoint, or the fee of an
// attestation it did not compute).
type attack struct {
	name string
	play func(b *testing.B) (cost, gain sdkmath.Int)
}

var attacks = []attack{
	{"cheat", func(b *testing.B) (sdkmath.Int, sdkmath.Int) {
		s := newScenario(b, 16, 16)
		s.advance(100)
		before := s.wealth(s.prov)
		cheater := s.liar(s.prov, 0, 16, 5, false)
		cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
		v := s.verifier("verifier", 0, 16)
		s.game(s.openChallenge(v, s.lease.Id, 0), cheater, v, v).play(s.run)
		return before.Sub(s.wealth(s.prov)), cp.Claim.Amount
	}},
	{"squat-8-moot", func(b *testing.B) (sdkmath.Int, sdkmath.Int) {
		s := newScenario(b, 16, 16)
		s.advance(100)
		cheater := s.liar(s.prov, 0, 16, 5, false)
		cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
		side := []sdk.AccAddress{s.prov}
		var shams []*party
		for i := 0; i < 8; i++ {
			sh := s.sham(fmt.Sprintf("sham-%d", i), cheater)
			shams = append(shams, sh)
			side = append(side, sh.addr)
		}
		before := s.wealth(side...)
		var ids []uint64
		for _, sh := range shams {
			ids = append(ids, s.openChallenge(sh, s.lease.Id, 0))
		}
		v := s.verifier("verifier", 0, 16)
		s.game(s.openChallenge(v, s.lease.Id, 0), cheater, v, v).play(s.run)
		for _, id := range ids {
			if _, err := s.msg.ClaimTimeout(s.Ctx, &types.MsgClaimTimeout{Sender: v.addr.String(), ChallengeId: id}); err != nil {
				b.Fatal(err)
			}
		}
		return before.Sub(s.wealth(side...)), cp.Claim.Amount
	}},
	{"squat-8-timeout", func(b *testing.B) (sdkmath.Int, sdkmath.Int) {
		s := newScenario(b, 16, 16)
		s.advance(100)
		cheater := s.liar(s.prov, 0, 16, 5, false)
		cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
		side := []sdk.AccAddress{s.prov}
		var shams []*party
		for i := 0; i < 8; i++ {
			sh := s.sham(fmt.Sprintf("sham-%d", i), cheater)
			shams = append(shams, sh)
			side = append(side, sh.addr)
		}
		before := s.wealth(side...)
		var first uint64
		for i, sh := range shams {
			id := s.openChallenge(sh, s.lease.Id, 0)
			if i == 0 {
				first = id
			}
		}
		// The shams never answer: their games time out, the provider "wins" them.
		s.game(first, cheater, shams[0], nil).move(s.run)
		s.advanceTo(s.challenge(first).Deadline + 1)
		v := s.verifier("verifier", 0, 16)
		s.game(s.openChallenge(v, s.lease.Id, 0), cheater, v, v).play(s.run)
		return before.Sub(s.wealth(side...)), cp.Claim.Amount
	}},
	{"unbond-then-cheat", func(b *testing.B) (sdkmath.Int, sdkmath.Int) {
		s := newScenario(b, 16, 16)
		s.advance(100)
		before := s.wealth(s.prov)
		cheater := s.liar(s.prov, 0, 16, 5, false)
		cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
		if _, err := s.sxMsg.Unbond(s.Ctx, &stakingexttypes.MsgUnbond{Operator: s.prov.String(), Amount: s.provider(s.prov).FreeBond()}); err != nil {
			b.Fatal(err)
		}
		v := s.verifier("verifier", 0, 16)
		s.game(s.openChallenge(v, s.lease.Id, 0), cheater, v, v).play(s.run)
		return before.Sub(s.wealth(s.prov)), cp.Claim.Amount
	}},
	{"lazy-auditor", func(b *testing.B) (sdkmath.Int, sdkmath.Int) {
		s, auditors := auditScenario(b, 16, 16, 1, 1)
		lazy := auditors[0]
		before := s.wealth(lazy)
		cheater := s.liar(s.prov, 0, 16, 5, false)
		cp := s.submitCheckpoint(cheater, s.lease.Id, 0)
		s.drawn(cp)
		if err := s.attest(lazy, s.lease.Id, 0, cp.TraceRoot); err != nil {
			b.Fatal(err)
		}
		v := s.verifier("verifier", 0, 16)
		s.game(s.openChallenge(v, s.lease.Id, 0), cheater, v, v).play(s.run)
		return before.Sub(s.wealth(lazy)), s.verifyParams().AuditFee(16).Amount
	}},
	{"withhold-state", func(b *testing.B) (sdkmath.Int, sdkmath.Int) {
		s, auditors := auditScenario(b, 32, 16, 1, 1)
		cp0 := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
		s.drawn(cp0)
		if err := s.attest(auditors[0], s.lease.Id, 0, cp0.TraceRoot); err != nil {
			b.Fatal(err)
		}
		s.advanceTo(cp0.ChallengeDeadline + 1)
		s.advance(100)
		before := s.wealth(s.prov)
		cp1 := s.submitCheckpoint(s.liar(s.prov, 16, 32, 20, false), s.lease.Id, 1)
		s.drawn(cp1)
		if err := s.report(auditors[0], s.lease.Id, 1); err != nil {
			b.Fatal(err)
		}
		s.advanceTo(cp1.ChallengeDeadline + 1)
		if s.checkpoint(s.lease.Id, 1).Status != types.CHECKPOINT_STATUS_WITHHELD {
			b.Fatal("not withheld")
		}
		return before.Sub(s.wealth(s.prov)), cp1.Claim.Amount
	}},
}

// BenchmarkAttackEconomics plays each attack at default params and reports what it
// costs the attacker when caught, what it would have gained uncaught, and its expected
// profit when a share s of the audit set is the attacker's own (k = 1 auditor, so it
// goes unaudited with probability s and is caught otherwise; every attack here is
// also caught by any other verifier or challenger). Every expected profit must be
// negative: cheating must not pay.
func BenchmarkAttackEconomics(b *testing.B) {
	for _, a := range attacks {
		b.Run(a.name, func(b *testing.B) {
			var cost, gain sdkmath.Int
			for i := 0; i < b.N; i++ {
				cost, gain = a.play(b)
			}
			if !cost.IsPositive() {
				b.Fatalf("%s cost the attacker %s", a.name, cost)
			}
			c, g := float64(cost.Int64()), float64(gain.Int64())
			b.ReportMetric(c, "cost-udepin")
			b.ReportMetric(g, "gain-udepin")
			for _, share := range []float64{0, 0.1, 0.5} {
				ev := share*g - (1-share)*c
				b.ReportMetric(ev, fmt.Sprintf("ev(s=%g)-udepin", share))
				if ev >= 0 && share < 0.5 {
					b.Errorf("%s pays at a %g share of the audit set: expected profit %.0f", a.name, share, ev)
				}
			}
			// The attacker's share of the audit set at which cheating would break even.
			b.ReportMetric(math.Round(100*c/(c+g))/100, "break-even-share")
		})
	}
}

// BenchmarkAuditOverhead is what k auditors add to one 16-step checkpoint: the gas of
// the draw, the k attestations and their settlement (the end blockers' work included),
// and the escrow it spends on fees, against the same checkpoint with no audit.
func BenchmarkAuditOverhead(b *testing.B) {
	run := func(b *testing.B, k uint32) (gas uint64, escrow sdkmath.Int) {
		s, auditors := auditScenario(b, 16, 16, k, int(max(k, 1)))
		s.Ctx = s.Ctx.WithGasMeter(storetypes.NewInfiniteGasMeter())
		start := s.Ctx.GasMeter().GasConsumed()
		feesBefore := s.getJob(s.job.Id).AuditFees.Amount
		cp := s.submitCheckpoint(s.honest(0, 16), s.lease.Id, 0)
		s.drawn(cp)
		for _, a := range auditors[:k] {
			if err := s.attest(a, s.lease.Id, 0, cp.TraceRoot); err != nil {
				b.Fatal(err)
			}
		}
		s.advanceTo(cp.ChallengeDeadline + 1)
		if s.checkpoint(s.lease.Id, 0).Status != types.CHECKPOINT_STATUS_FINAL {
			b.Fatal("not final")
		}
		paid := sdkmath.ZeroInt()
		for _, a := range s.audits(s.lease.Id, 0) {
			paid = paid.Add(a.Paid.Amount)
		}
		if spent := s.getJob(s.job.Id).AuditFees.Amount.Sub(feesBefore); !spent.Equal(paid) {
			b.Fatalf("the escrow spent %s on audits, the auditors were paid %s", spent, paid)
		}
		return s.Ctx.GasMeter().GasConsumed() - start + s.gas, paid
	}
	var base uint64
	for _, k := range []uint32{0, 1, 2, 3} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			var gas uint64
			var escrow sdkmath.Int
			for i := 0; i < b.N; i++ {
				gas, escrow = run(b, k)
			}
			if k == 0 {
				base = gas
			}
			b.ReportMetric(float64(gas-base), "extra-gas/checkpoint")
			b.ReportMetric(float64(escrow.Int64()), "escrow-udepin/checkpoint")
			if k > 0 && !escrow.Equal(types.DefaultParams().AuditFee(16).Amount.MulRaw(int64(k))) {
				b.Fatalf("k=%d: the auditors were paid %s", k, escrow)
			}
		})
	}
}
