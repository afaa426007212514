package keeper_test

import (
	"fmt"
	"testing"

	"github.com/depinchain/depinchain/x/verify/types"
)

// BenchmarkDispute runs a whole dispute against a provider whose n-step checkpoint goes
// wrong at step n/3+1: the challenge, every bisection round (reveal and answer with
// their Merkle proofs) and the referee's re-execution of the one disputed step. It
// reports the rounds (always ceil(log2 n)) and the gas of the dispute's messages.
//
// The honest computation is trained once per n and cached across iterations (16384 steps
// of the default model take a few seconds); states are kept every 128 steps beyond 1024.
func BenchmarkDispute(b *testing.B) {
	for _, n := range []uint64{64, 1024, 16384} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			var rounds uint32
			var gas uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := newScenario(b, n, n)
				k := n/3 + 1
				liar := s.liar(s.prov, 0, n, k, false)
				s.submitCheckpoint(liar, s.lease.Id, 0)
				v := s.verifier("verifier", 0, n)
				s.gas = 0
				b.StartTimer()

				id := s.openChallenge(v, s.lease.Id, 0)
				ch := s.game(id, liar, v, v).play(s.run)

				b.StopTimer()
				if ch.Outcome != types.CHALLENGE_OUTCOME_CHALLENGER_WON || ch.Lo != k-1 || ch.Hi != k {
					b.Fatalf("dispute over %d steps ended %s at [%d, %d], want CHALLENGER_WON at [%d, %d]", n, ch.Outcome, ch.Lo, ch.Hi, k-1, k)
				}
				if ch.Rounds != ceilLog2(n) {
					b.Fatalf("%d rounds over %d steps, want %d", ch.Rounds, n, ceilLog2(n))
				}
				s.requireInvariants()
				rounds, gas = ch.Rounds, s.gas
				b.StartTimer()
			}
			b.ReportMetric(float64(rounds), "rounds")
			b.ReportMetric(float64(gas), "gas")
		})
	}
}
