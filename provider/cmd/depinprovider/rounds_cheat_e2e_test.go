package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/diloco"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// TestSidecarsProveAWrongAggregation: slot 0's trainer is restarted as a lying
// aggregator (--cheat-aggregate) right after the leases; it commits round 0's global
// with one weight off. The other two find the first differing chunk against their own
// aggregate and prove it (MsgProveRoundFault, AGGREGATION) inside the global's challenge
// window: the chain rejects the global (EventGlobalRejected), the cheater is tombstoned
// and slashed by exactly fraud_slash_fraction, the prover paid exactly
// whistleblower_share of the slash, slot 1 commits the honest global, and round 1
// closes without the convicted slot; both globals are diloco.Simulate's with slot 0 out
// of round 1.
func TestSidecarsProveAWrongAggregation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	runLyingAggregator(ctx, t, roundsJobYAML)
}

// runLyingAggregator runs jobYAML (its commit window shortened to 60 blocks) with slot
// 0's trainer restarted as a lying aggregator and checks what
// TestSidecarsProveAWrongAggregation says, up to round 1's global; it returns the run
// and Simulate's globals (slot 0 out of round 1).
func runLyingAggregator(ctx context.Context, t *testing.T, jobYAML string) (*roundsRun, []*diloco.GlobalState) {
	t.Helper()
	// 60 blocks (30 s) of challenge window: the provers fetch the committed global from
	// its holders first. Round 1 closes 30 blocks after it opens without the cheater.
	job := strings.Replace(jobYAML, "commit_blocks: 200", "commit_blocks: 60", 1)
	r := startRoundsJob(ctx, t, job, nil, map[string]string{"round_challenge_blocks": "60"})
	c := r.c
	cheater := r.slots[0]
	c.sidecars[cheater].Stop()
	if err := c.sidecars[cheater].StartWith(ctx, "--cheat-aggregate"); err != nil {
		t.Fatal(err)
	}
	staking := stakingexttypes.NewQueryClient(c.conn)
	bond := func(name string) stakingexttypes.Provider {
		res, err := staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: c.sidecars[name].Operator})
		if err != nil {
			t.Fatal(err)
		}
		return res.Provider
	}
	before := bond(cheater).Bond.Amount
	vp, err := verifytypes.NewQueryClient(c.conn).Params(ctx, &verifytypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var proof txSearchResult
	c.waitFor(ctx, t, "an honest trainer proves the aggregation wrong", 8*time.Minute, func() bool {
		var out struct {
			Txs []txSearchResult `json:"txs"`
		}
		if err := c.node.Query(ctx, &out, "txs", "--query", "message.action='/depinchain.verify.v1.MsgProveRoundFault'", "--node", c.node.RPC); err != nil {
			return false
		}
		for _, tx := range out.Txs {
			if tx.Code == 0 {
				proof = tx
				return true
			}
		}
		return false
	})
	ev := proof.event(t, "depinchain.verify.v1.EventRoundFaultProven")
	rejected := proof.event(t, "depinchain.market.v1.EventGlobalRejected")
	if ev["convicted"] != c.sidecars[cheater].Operator || ev["kind"] != verifytypes.ROUND_FAULT_AGGREGATION.String() || ev["round"] != "0" ||
		rejected["aggregator"] != c.sidecars[cheater].Operator || rejected["round"] != "0" {
		t.Fatalf("EventRoundFaultProven %v, EventGlobalRejected %v", ev, rejected)
	}
	if ev["prover"] == c.sidecars[cheater].Operator || (ev["prover"] != c.sidecars[r.slots[1]].Operator && ev["prover"] != c.sidecars[r.slots[2]].Operator) {
		t.Fatalf("the prover %s is not an honest trainer", ev["prover"])
	}
	after := bond(cheater)
	slash := vp.Params.FraudSlashFraction.MulInt(before).TruncateInt()
	if after.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED || !after.Bond.Amount.Equal(before.Sub(slash)) || !coinAmount(t, ev["slashed"]).Equal(slash) {
		t.Fatalf("the cheater %s with bond %s → %s (event: %s), want tombstoned and %s less", after.Status, before, after.Bond.Amount, ev["slashed"], slash)
	}
	if reward := vp.Params.WhistleblowerShare.MulInt(slash).TruncateInt(); !reward.IsPositive() || !coinAmount(t, ev["reward"]).Equal(reward) {
		t.Fatalf("the prover's reward %s, want %s", ev["reward"], reward)
	}

	c.waitFor(ctx, t, "round 1's global (G_2) is committed without the convicted slot", 6*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	want, _ := r.checkSimulate(ctx, t, map[uint64][]int{1: {0}}, nil)
	if rd, _ := r.round(ctx, 0); rd.Aggregator != c.sidecars[r.slots[1]].Operator {
		t.Fatalf("round 0 re-aggregated by %s, want slot 1's %s", rd.Aggregator, r.slots[1])
	}
	return r, want
}
