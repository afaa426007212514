package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// barrierJobYAML is roundsJobYAML at a realistic round length: two rounds of 24 steps,
// which BenchmarkRoundBarrier slows to about a second each, so that a round trains for
// tens of seconds as DiLoCo's every = 100–500 real steps do. Its commit window (300
// blocks of 0.5 s) outlasts the slow worker's round.
var barrierJobYAML = strings.NewReplacer("every: 8", "every: 24", "commit_blocks: 200", "commit_blocks: 300",
	"total_steps: 16", "total_steps: 48", "checkpoint_every: 8", "checkpoint_every: 24").Replace(roundsJobYAML)

// Step times of BenchmarkRoundBarrier's workers: the slow one takes 1.5× as long a step,
// as an older GPU generation among newer ones does.
const (
	barrierFastStep = time.Second
	barrierSlowStep = 1500 * time.Millisecond
)

// BenchmarkRoundBarrier is the round barrier's cost in the three-sidecar run (real node,
// 0.5 s blocks, three custody holders) of a job whose rounds train for tens of seconds:
// 24 steps a round, each slowed to 1 s on w1 and w2 and to 1.5 s on w3, the deliberately
// slow worker (the reference model's own step takes milliseconds; the delay stands for a
// GPU's step time, during which the host is idle as it is here).
//
// It reports, for the fast and the slow workers, the share of their wall-clock from round
// 0's opening to the last global's commit spent
//
//   - training (the sidecar's train seconds);
//   - waiting for the slow worker: from the worker's own commit to the round's last one;
//   - after the last commit: the holders fetching and proving the pseudo-gradients'
//     pieces, aggregation and the global's commit — the latency the chain and custody add
//     to every round, whoever is slow;
//   - committing: from the round's opening to the worker's commit, less training (the
//     global's check, writing the custody pieces, the commit transaction's block);
//
// all from the chain's block times of the rounds' openings, commits and globals. The
// sidecars' own barrier share (/v1/leases wait ÷ train + wait, the round barrier metric
// a provider sees) is reported as %wait.
func BenchmarkRoundBarrier(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	b.Cleanup(cancel)
	fast, slow := barrierFastStep.String(), barrierSlowStep.String()
	r := startRoundsJob(ctx, b, barrierJobYAML, map[string][]string{
		"w1": {"--slow-round-steps", fast}, "w2": {"--slow-round-steps", fast}, "w3": {"--slow-round-steps", slow}}, nil)
	for b.Loop() {
		r.c.waitFor(ctx, b, "round 1's global (G_2) is committed", 10*time.Minute, func() bool {
			rd, ok := r.round(ctx, 1)
			return ok && len(rd.NextGlobalRoot) > 0
		})
	}
	r.checkSimulate(ctx, b, nil, nil)
	shares := r.barrierShares(ctx, b, 2)
	for _, group := range []struct {
		name    string
		workers []string
	}{{"fast", []string{"w1", "w2"}}, {"slow", []string{"w3"}}} {
		var s barrierShare
		for _, w := range group.workers {
			s = s.add(shares[w])
		}
		span := s.span
		b.ReportMetric(100*s.train/span, "%train-"+group.name)
		b.ReportMetric(100*s.waitSlow/span, "%waiting-slow-worker-"+group.name)
		b.ReportMetric(100*s.afterLast/span, "%after-last-commit-"+group.name)
		b.ReportMetric(100*(span-s.train-s.waitSlow-s.afterLast)/span, "%committing-"+group.name)
		train, wait := r.roundTimes(ctx, b, group.workers...)
		b.ReportMetric(100*wait/(train+wait), "%wait-sidecar-"+group.name)
		b.ReportMetric(s.train/float64(len(group.workers))/2, "train-s/round-"+group.name)
	}
	b.ReportMetric(shares["w1"].span/2, "round-s")
	b.ReportMetric(shares["w1"].afterLast/2, "after-last-commit-s/round")
}

// barrierShare is one worker's seconds over a run of rounds (see BenchmarkRoundBarrier).
type barrierShare struct {
	span, train, waitSlow, afterLast float64
}

func (s barrierShare) add(o barrierShare) barrierShare {
	return barrierShare{s.span + o.span, s.train + o.train, s.waitSlow + o.waitSlow, s.afterLast + o.afterLast}
}

// barrierShares splits each trainer's wall-clock over rounds 0..rounds-1 by the chain's
// block times: a round runs from its opening to its global's commit (the next round opens
// in that block), a worker's commit is its MsgCommitRound's block.
func (r *roundsRun) barrierShares(ctx context.Context, t testing.TB, rounds uint64) map[string]barrierShare {
	t.Helper()
	params, err := r.market.Params(ctx, &markettypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]barrierShare{}
	for n := range rounds {
		rd, ok := r.round(ctx, n)
		if !ok || len(rd.NextGlobalRoot) == 0 {
			t.Fatalf("round %d has no committed global", n)
		}
		commits, err := r.market.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: r.jobID, Round: n})
		if err != nil {
			t.Fatal(err)
		}
		if len(commits.Commits) != len(rd.Workers) {
			t.Fatalf("round %d: %d commits of %d workers", n, len(commits.Commits), len(rd.Workers))
		}
		opened := r.blockTime(ctx, t, rd.OpenedHeight)
		// The global's commit set the challenge deadline round_challenge_blocks ahead.
		global := r.blockTime(ctx, t, rd.ChallengeDeadline-int64(params.Params.RoundChallengeBlocks))
		committed := map[string]time.Time{}
		var last time.Time
		for _, c := range commits.Commits {
			at := r.blockTime(ctx, t, c.CommittedHeight)
			committed[r.slots[c.Worker]] = at
			if at.After(last) {
				last = at
			}
		}
		for name, at := range committed {
			s := out[name]
			s.span += global.Sub(opened).Seconds()
			s.waitSlow += last.Sub(at).Seconds()
			s.afterLast += global.Sub(last).Seconds()
			out[name] = s
		}
		t.Logf("round %d: opened %s, commits %v after it, global %s after the last commit", n,
			opened.Format(time.TimeOnly), sinceEach(committed, opened), global.Sub(last).Round(100*time.Millisecond))
	}
	for name, s := range out {
		s.train, _ = r.roundTimes(ctx, t, name)
		out[name] = s
	}
	return out
}

func sinceEach(at map[string]time.Time, from time.Time) map[string]string {
	out := map[string]string{}
	for k, v := range at {
		out[k] = v.Sub(from).Round(100 * time.Millisecond).String()
	}
	return out
}

// blockTime is the header time of the block at height.
func (r *roundsRun) blockTime(ctx context.Context, t testing.TB, height int64) time.Time {
	t.Helper()
	body, err := r.c.node.REST(ctx, fmt.Sprintf("/cosmos/base/tendermint/v1beta1/blocks/%d", height))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Block struct {
			Header struct {
				Time time.Time `json:"time"`
			} `json:"header"`
		} `json:"block"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Block.Header.Time.IsZero() {
		t.Fatalf("block %d: no header time (%v): %.200s", height, err, body)
	}
	return res.Block.Header.Time
}
