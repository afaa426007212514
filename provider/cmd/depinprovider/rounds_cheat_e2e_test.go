package main_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/diloco"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// runLyingAggregator runs jobYAML (its commit window shortened to 60 blocks) with slot
// 0's trainer a lying aggregator and checks what TestSidecarsProveAWrongAggregation says,
// up to round 1's global; it returns the run and Simulate's globals (slot 0 out of round
// 1). Every trainer starts with --cheat-aggregate, which lies only for slot 0: which
// trainer gets slot 0 is the auction's, and restarting the winner after the auction raced
// its first round's commit.
func runLyingAggregator(ctx context.Context, t *testing.T, jobYAML string) (*roundsRun, []*diloco.GlobalState) {
	t.Helper()
	// 60 blocks (30 s) of challenge window: the provers fetch the committed global from
	// its holders first. Round 1 closes 30 blocks after it opens without the cheater.
	job := strings.Replace(jobYAML, "commit_blocks: 200", "commit_blocks: 60", 1)
	lie := map[string][]string{}
	for _, name := range roundsTrainers {
		lie[name] = []string{"--cheat-aggregate"}
	}
	r := startRoundsJob(ctx, t, job, lie, map[string]string{"round_challenge_blocks": "60"})
	c := r.c
	cheater := r.slots[0]
	proof, ev := r.waitForRoundFaultProof(ctx, t, "an honest trainer proves the aggregation wrong", 8*time.Minute,
		cheater, verifytypes.ROUND_FAULT_AGGREGATION, 0)
	if rejected := proof.event(t, "depinchain.market.v1.EventGlobalRejected"); rejected["aggregator"] != c.sidecars[cheater].Operator || rejected["round"] != "0" {
		t.Fatalf("EventRoundFaultProven %v, EventGlobalRejected %v", ev, rejected)
	}

	c.waitFor(ctx, t, "round 1's global (G_2) is committed without the convicted slot", 6*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	want, _ := r.checkSimulate(ctx, t, map[uint64][]int{1: {0}}, nil)
	// Slot 1's turn comes first after the rejection; slot 2 takes it a grace period later
	// if slot 1 is still proving or aggregating (a loaded machine), which is as correct.
	if rd, _ := r.round(ctx, 0); !isOperator(c, rd.Aggregator, r.slots[1], r.slots[2]) {
		t.Fatalf("round 0 re-aggregated by %s, want an honest slot's (%s or %s)", rd.Aggregator, r.slots[1], r.slots[2])
	}
	return r, want
}

// waitForRoundFaultProof reads the cheater's bond, waits (up to wait) for an accepted
// MsgProveRoundFault and checks what every proven round fault does: the proof convicts
// the cheater of kind in round, an honest trainer (another of roundsTrainers) proved it,
// the cheater is tombstoned and slashed exactly fraud_slash_fraction of its bond, and the
// prover is paid exactly whistleblower_share of the slash (positive). It returns the
// proof's transaction and its EventRoundFaultProven for the kind's own checks.
func (r *roundsRun) waitForRoundFaultProof(ctx context.Context, t *testing.T, what string, wait time.Duration,
	cheater string, kind verifytypes.RoundFault, round uint64) (txSearchResult, map[string]string) {
	t.Helper()
	c := r.c
	staking := stakingexttypes.NewQueryClient(c.conn)
	bond := func() stakingexttypes.Provider {
		res, err := staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: c.sidecars[cheater].Operator})
		if err != nil {
			t.Fatal(err)
		}
		return res.Provider
	}
	before := bond().Bond.Amount
	vp, err := verifytypes.NewQueryClient(c.conn).Params(ctx, &verifytypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var proof txSearchResult
	c.waitFor(ctx, t, what, wait, func() bool {
		var ok bool
		proof, ok = acceptedTx(ctx, c.node, "/depinchain.verify.v1.MsgProveRoundFault")
		return ok
	})
	ev := proof.event(t, "depinchain.verify.v1.EventRoundFaultProven")
	if ev["convicted"] != c.sidecars[cheater].Operator || ev["kind"] != kind.String() || ev["round"] != fmt.Sprint(round) {
		t.Fatalf("EventRoundFaultProven %v, want %s convicted of %s in round %d", ev, cheater, kind, round)
	}
	honest := slices.DeleteFunc(slices.Clone(roundsTrainers), func(name string) bool { return name == cheater })
	if !isOperator(c, ev["prover"], honest...) {
		t.Fatalf("the prover %s is not an honest trainer (%v)", ev["prover"], honest)
	}
	after := bond()
	slash := vp.Params.FraudSlashFraction.MulInt(before).TruncateInt()
	if after.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED || !after.Bond.Amount.Equal(before.Sub(slash)) || !coinAmount(t, ev["slashed"]).Equal(slash) {
		t.Fatalf("the cheater %s with bond %s → %s (event: %s), want tombstoned and %s less", after.Status, before, after.Bond.Amount, ev["slashed"], slash)
	}
	if reward := vp.Params.WhistleblowerShare.MulInt(slash).TruncateInt(); !reward.IsPositive() || !coinAmount(t, ev["reward"]).Equal(reward) {
		t.Fatalf("the prover's reward %s, want %s", ev["reward"], reward)
	}
	return proof, ev
}

// requireOnlyExcluded fails unless slot's commit is the only excluded one of round rn.
func (r *roundsRun) requireOnlyExcluded(ctx context.Context, t *testing.T, rn uint64, slot uint32) {
	t.Helper()
	commits, err := r.market.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: r.jobID, Round: rn})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range commits.Commits {
		if (cm.Worker == slot) != cm.Excluded {
			t.Fatalf("round %d: slot %d's commit excluded=%v (%s); the cheater is slot %d", rn, cm.Worker, cm.Excluded, cm.ExcludedReason, slot)
		}
	}
}

// isOperator reports whether addr is the operator of one of the named sidecars.
func isOperator(c *cluster, addr string, names ...string) bool {
	for _, n := range names {
		if c.sidecars[n].Operator == addr {
			return true
		}
	}
	return false
}
