package main_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// BenchmarkBidLatency measures how soon the sidecar bids on a new job, against
// the chain's own block time measured in the same run: "block" waits for one
// block, "job-to-bid" submits a job and waits until the sidecar's bid is on
// chain. The ratio is the latency in blocks; blocks/bid counts them exactly
// (bid height − job height), where 1 is the best possible (the next block).
func BenchmarkBidLatency(b *testing.B) {
	w := newWorld(b, 10*time.Minute, sidecar.Options{})
	if err := w.provider.Start(w.ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("block", func(b *testing.B) {
		for b.Loop() {
			if err := w.node.WaitBlocks(w.ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("job-to-bid", func(b *testing.B) {
		var blocks int64
		for b.Loop() {
			jobID := w.submitJob(referenceJobYAML, "500000000udepin")
			created := w.job(jobID).CreatedHeight
			for {
				res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: jobID})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Bids) > 0 {
					blocks += res.Bids[0].CreatedHeight - created
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		b.ReportMetric(float64(blocks)/float64(b.N), "blocks/bid")
	})
}

// BenchmarkDispute1024Steps measures a whole dispute on the local chain,
// sidecar against sidecar: a provider fabricates the last 324 steps of a
// 1,024-step checkpoint, the verifier catches it and the two play the
// bisection to the one-step proof. "block" is the block time measured in
// the same run, so the ratio is the dispute's length in blocks. Reported:
// transactions per dispute (challenge, moves, one-step proof) and
// deadline-used, the largest share of a move deadline the defender needed
// (1 would be a move in the deadline's last block).
func BenchmarkDispute1024Steps(b *testing.B) {
	f := newFraudNet(b, 10*time.Minute)
	for _, p := range []*sidecar.Provider{f.verifier, f.cheater} {
		if err := p.Start(f.ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("block", func(b *testing.B) {
		for b.Loop() {
			if err := f.node.WaitBlocks(f.ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	yaml := strings.NewReplacer("total_steps: 64", "total_steps: 1024", "checkpoint_every: 16", "checkpoint_every: 1024").Replace(referenceJobYAML)
	b.Run("dispute", func(b *testing.B) {
		var txs, moves int
		worst := 0.0
		for i := 0; b.Loop(); i++ {
			id := uint64(i + 1)
			f.submitJob(yaml, "500000000udepin")
			var ch verifytypes.Challenge
			for {
				res, err := f.verify.Challenge(f.ctx, &verifytypes.QueryChallengeRequest{ChallengeId: id})
				if err == nil {
					ch = res.Challenge
					if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON {
				b.Fatalf("dispute %d ended %s: %s", id, ch.Outcome, ch.OutcomeReason)
			}
			// A challenge, a reveal and a response per round, and the one-step proof.
			txs += 2 + 2*int(ch.Rounds)
			moves += int(ch.Rounds)
		}
		params, err := f.verify.Params(f.ctx, &verifytypes.QueryParamsRequest{})
		if err != nil {
			b.Fatal(err)
		}
		for _, spare := range defenderMargins(b, f.cheater.LogPath()) {
			worst = max(worst, 1-float64(spare)/float64(params.Params.MoveTimeout))
		}
		b.ReportMetric(float64(txs)/float64(b.N), "txs/dispute")
		b.ReportMetric(worst, "deadline-used")
	})
}

// defenderMargins reads blocks_to_spare of every defender move in a sidecar log.
func defenderMargins(b *testing.B, logPath string) []int64 {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		b.Fatal(err)
	}
	var out []int64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.Contains(line, `msg="dispute move"`) || !strings.Contains(line, "role=defender") {
			continue
		}
		if _, after, ok := strings.Cut(line, "blocks_to_spare="); ok {
			v, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
			if err == nil {
				out = append(out, v)
			}
		}
	}
	if len(out) == 0 {
		b.Fatal("the defender made no moves")
	}
	return out
}
