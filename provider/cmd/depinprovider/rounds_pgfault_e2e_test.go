package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkmath "cosmossdk.io/math"
	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// testSidecarsProveAFabricatedPseudoGradient runs TestSidecarsProveAFabricatedPseudoGradient
// on jobYAML with the cheater started with cheatFlag, and returns the accepted proof and
// the exclusion event of the cheater's commit.
func testSidecarsProveAFabricatedPseudoGradient(t *testing.T, jobYAML, cheatFlag string) (*roundsRun, txSearchResult, map[string]string) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	// 60 blocks (30 s) of challenge window: if the cheater is slot 0 it may commit a global
	// over its own pseudo-gradient before the proof lands, which the proof then voids.
	// Round 1 closes at its commit deadline without the convicted slot.
	job := strings.Replace(jobYAML, "commit_blocks: 200", "commit_blocks: 60", 1)
	r := startRoundsJob(ctx, t, job, map[string][]string{"w3": {cheatFlag}}, map[string]string{"round_challenge_blocks": "60"})
	c := r.c
	const cheater = "w3"
	slot := -1
	for s, name := range r.slots {
		if name == cheater {
			slot = int(s)
		}
	}
	if slot < 0 {
		t.Fatalf("%s leased no slot (%v)", cheater, r.slots)
	}
	proof, ev := r.waitForRoundFaultProof(ctx, t, "an honest trainer proves the fabricated pseudo-gradient", 6*time.Minute,
		cheater, verifytypes.ROUND_FAULT_PSEUDO_GRADIENT, 0)
	excluded := proof.event(t, "depinchain.market.v1.EventRoundWorkerExcluded")
	if ev["worker"] != fmt.Sprint(slot) ||
		excluded["worker"] != fmt.Sprint(slot) || excluded["round"] != "0" {
		t.Fatalf("EventRoundFaultProven %v, EventRoundWorkerExcluded %v", ev, excluded)
	}
	r.requireOnlyExcluded(ctx, t, 0, uint32(slot))

	c.waitFor(ctx, t, "round 1's global (G_2) is committed and round 0's is final", 6*time.Minute, func() bool {
		rd0, ok0 := r.round(ctx, 0)
		rd1, ok1 := r.round(ctx, 1)
		return ok0 && ok1 && rd0.State == markettypes.ROUND_STATE_FINAL && len(rd1.NextGlobalRoot) > 0
	})
	r.checkSimulate(ctx, t, map[uint64][]int{0: {slot}, 1: {slot}}, nil)
	// Round 0 paid the honest workers' leases and not the cheater's.
	leases, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		paid := sdkmath.ZeroInt()
		for _, coin := range []sdk.Coin{l.Withdrawable, l.Withdrawn} {
			if !coin.Amount.IsNil() {
				paid = paid.Add(coin.Amount)
			}
		}
		if (l.Worker == uint32(slot)) != paid.IsZero() {
			t.Fatalf("slot %d's lease %d was paid %s; the cheater is slot %d", l.Worker, l.Id, paid, slot)
		}
	}
	return r, proof, excluded
}
