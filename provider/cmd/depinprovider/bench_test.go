package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
			waitFor(b, w.ctx, time.Minute, fmt.Sprintf("the sidecar's bid on job %d", jobID), func() (bool, error) {
				res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: jobID})
				if err != nil || len(res.Bids) == 0 {
					return false, err
				}
				blocks += res.Bids[0].CreatedHeight - created
				return true, nil
			}, w.provider.LogPath())
		}
		b.ReportMetric(float64(blocks)/float64(b.N), "blocks/bid")
	})
}

// BenchmarkDispute1024Steps measures a whole dispute on the local chain,
// sidecar against sidecar: a provider fabricates its trace from step
// cheatStep of a 1,024-step checkpoint, the verifier catches it and the two
// play the bisection to the one-step proof. "block" is the block time
// measured in the same run, so the ratio is the dispute's length in blocks,
// from the job's submission to the challenge's outcome. Reported:
// transactions per dispute (challenge, moves, one-step proof) and
// deadline-used, the largest share of a move deadline a defender needed
// (1 would be a move in the deadline's last block).
//
// A dispute consumes its cheater (slashed and tombstoned, it can bid on no
// other job), so each iteration registers a fresh one, outside the timer.
func BenchmarkDispute1024Steps(b *testing.B) {
	f := newFraudNet(b, 30*time.Minute)
	if err := f.verifier.Start(f.ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("block", func(b *testing.B) {
		for b.Loop() {
			if err := f.node.WaitBlocks(f.ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	yaml := strings.NewReplacer("total_steps: 64", "total_steps: 1024", "checkpoint_every: 16", "checkpoint_every: 1024").Replace(fraudJobYAML)
	params, err := f.verify.Params(f.ctx, &verifytypes.QueryParamsRequest{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("dispute", func(b *testing.B) {
		var txs int
		var cheaters []*sidecar.Provider
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			cheater := freshCheater(b, f, i)
			cheaters = append(cheaters, cheater)
			b.StartTimer()

			logs := []string{cheater.LogPath(), f.verifier.LogPath()}
			jobID := f.submitJob(yaml, "500000000udepin")
			var lease markettypes.Lease
			waitFor(b, f.ctx, 3*time.Minute, fmt.Sprintf("a lease of job %d for the fresh cheater %s", jobID, cheater.Operator), func() (bool, error) {
				res, err := f.market.Leases(f.ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
				if err != nil {
					return false, err
				}
				for _, l := range res.Leases {
					if l.Provider == cheater.Operator {
						lease = l
						return true, nil
					}
				}
				return false, nil
			}, logs...)
			var ch verifytypes.Challenge
			waitFor(b, f.ctx, 5*time.Minute, fmt.Sprintf("the outcome of the verifier's challenge of lease %d (job %d)", lease.Id, jobID), func() (bool, error) {
				res, err := f.verify.Challenges(f.ctx, &verifytypes.QueryChallengesRequest{LeaseId: lease.Id})
				if err != nil || len(res.Challenges) == 0 {
					return false, err
				}
				ch = res.Challenges[0]
				return ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED, nil
			}, logs...)
			if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON {
				b.Fatalf("dispute %d (job %d) ended %s: %s", ch.Id, jobID, ch.Outcome, ch.OutcomeReason)
			}
			// A challenge, a reveal and a response per round, and the one-step proof.
			txs += 2 + 2*int(ch.Rounds)

			b.StopTimer()
			cheater.Stop() // tombstoned: it has nothing left to do
			b.StartTimer()
		}
		worst := 0.0
		for _, c := range cheaters {
			for _, spare := range defenderMargins(b, c.LogPath()) {
				worst = max(worst, 1-float64(spare)/float64(params.Params.MoveTimeout))
			}
		}
		b.ReportMetric(float64(txs)/float64(b.N), "txs/dispute")
		b.ReportMetric(worst, "deadline-used")
	})
}

// freshCheater registers and starts cheater number i: new operator and hot
// keys, funded by the owner, bonded and priced as fraudNet's cheater and
// cheating the same way.
func freshCheater(b *testing.B, f *fraudNet, i int) *sidecar.Provider {
	b.Helper()
	name := fmt.Sprintf("bench-cheater-%d", i)
	for key, amount := range map[string]string{name: "100001000000udepin", name + "-hot": "1000000000udepin"} {
		if _, err := f.node.Exec(f.ctx, "keys", "add", key, "--keyring-backend", "test"); err != nil {
			b.Fatal(err)
		}
		addr, err := f.node.Address(f.ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		res, err := f.node.Tx(f.ctx, "owner", "bank", "send", "owner", addr, amount)
		if err != nil || res.Code != 0 {
			b.Fatalf("funding %s with %s from owner: %v %s", key, amount, err, res.RawLog)
		}
	}
	opts := sidecar.Options{
		Home: filepath.Join(b.TempDir(), name), Operator: name, HotKey: name + "-hot",
		Bond: "100000000000udepin", Prices: map[string]uint64{"H100-SXM5-80GB": 1_000_000},
		StartArgs: []string{"--cheat-fabricate-from-step", strconv.Itoa(cheatStep)},
	}
	if testing.Verbose() {
		opts.Log = prefixWriter{os.Stderr, "    " + name + "| "}
	}
	p, err := sidecar.Setup(f.ctx, f.node, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	if err := p.Start(f.ctx); err != nil {
		b.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds. When timeout passes (or the
// benchmark's context ends) first, it fails the benchmark saying what did
// not happen, with cond's last error and the tails of the given logs.
func waitFor(b *testing.B, ctx context.Context, timeout time.Duration, what string, cond func() (bool, error), logs ...string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			var tails strings.Builder
			for _, l := range logs {
				fmt.Fprintf(&tails, "\n%s:\n%s", l, readTail(l))
			}
			b.Fatalf("%s: not seen within %s (%v; last query error: %v)%s", what, timeout, context.Cause(ctx), err, tails.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
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
