package main_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/daemon"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// TestVerifierConvictsARoundWorkerTrainedOnAnotherSlotsShards: trainer w3 runs with
// --cheat-train-on-slot 0: it trains its rounds on slot 0's shards instead of its own and
// commits, honestly, what it trained (its start state and pseudo-gradient agree with its
// round-end checkpoint, so the other workers' checks pass it). A bonded verifier sidecar
// (v1) re-executes every round checkpoint on its worker's own shards of the round from
// its round start state, finds the cheater's round-0 trace wrong at its first step and
// challenges it. The verifier is paused before its second move until round 0's global
// G_1, which counts the cheater, is committed and round 1 opened on it (so the game
// outlasts the round, whatever the machine's speed), then killed and started again: it
// picks the game up and wins it at the first step's batch. The chain excludes the
// cheater's commit from round 0, tombstones it and slashes exactly fraud_slash_fraction of
// its bond, voids G_1 and deletes round 1 with the round-1 checkpoints already submitted
// (EventCheckpointsDiscarded); the honest workers aggregate round 0 again without the
// cheater and redo round 1 from the new G_1. Both globals end up diloco.Simulate's with
// the cheater's slot out of both rounds, and the verifier matched every honest checkpoint
// the chain kept, the redone ones included.
func TestVerifierConvictsARoundWorkerTrainedOnAnotherSlotsShards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and seven real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	const cheater, verifier, trainsOn = "w3", "v1", 0
	// Half the others' committed speed makes the cheater's bid the dearest per step: it
	// wins the last slot, never slot 0, whose shards it trains on.
	r := newRoundsCluster(ctx, t, map[string][]string{cheater: {"--cheat-train-on-slot", fmt.Sprint(trainsOn)}}, nil,
		map[string]map[string]string{cheater: {"throughput.go_trainer_macs_per_second": "1e8"}}, nil, verifier)
	c := r.c
	c.startSidecars(ctx, t, slices.Concat(roundsTrainers, roundsHolders)...)
	if err := c.sidecars[verifier].StartWith(ctx, "--pause-before-move", "2"); err != nil {
		t.Fatal(err)
	}
	r.submitJob(ctx, t, roundsJobYAML)
	slot := -1
	for s, name := range r.slots {
		if name == cheater {
			slot = int(s)
		}
	}
	if slot < 0 || slot == trainsOn {
		t.Fatalf("%s leased slot %d (%v); it must hold another slot than the one whose shards it trains on (%d)", cheater, slot, r.slots, trainsOn)
	}
	staking := stakingexttypes.NewQueryClient(c.conn)
	verify := verifytypes.NewQueryClient(c.conn)
	provider := func(name string) stakingexttypes.Provider {
		res, err := staking.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: c.sidecars[name].Operator})
		if err != nil {
			t.Fatal(err)
		}
		return res.Provider
	}
	before := provider(cheater).Bond.Amount
	vp, err := verify.Params(ctx, &verifytypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	leaseOf := map[uint32]uint64{}
	for _, l := range leases.Leases {
		leaseOf[l.Worker] = l.Id
	}

	// The verifier challenged the cheater's round-0 checkpoint and paused; round 1 opens
	// on a G_1 that counts the cheater.
	if err := c.sidecars[verifier].WaitLog(ctx, daemon.PausedLogMsg); err != nil {
		t.Fatalf("waiting for the verifier to pause before its second move: %v", err)
	}
	c.waitFor(ctx, t, "round 1 opens on a G_1 the cheater entered", 4*time.Minute, func() bool {
		rd0, ok0 := r.round(ctx, 0)
		rd1, ok1 := r.round(ctx, 1)
		return ok0 && ok1 && slices.Contains(rd0.Entered, uint32(slot)) && len(rd0.NextGlobalRoot) > 0 && rd1.State == markettypes.ROUND_STATE_OPEN
	})
	if res, err := verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1}); err != nil ||
		res.Challenge.Turn != verifytypes.GAME_TURN_CHALLENGER || res.Challenge.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
		t.Fatalf("the verifier paused with challenge 1 at %v (%v), want the game waiting on it", res, err)
	}
	c.sidecars[verifier].Kill()
	if err := c.sidecars[verifier].Start(ctx); err != nil {
		t.Fatal(err)
	}

	// The verifier's challenge, decided, and the transaction that decided it.
	var resolved txSearchResult
	c.waitFor(ctx, t, "a challenge is decided", 8*time.Minute, func() bool {
		var out struct {
			Txs []txSearchResult `json:"txs"`
		}
		if err := c.node.Query(ctx, &out, "txs", "--query", "depinchain.verify.v1.EventChallengeResolved.challenge_id EXISTS", "--node", c.node.RPC); err != nil {
			return false
		}
		for _, tx := range out.Txs {
			if tx.Code == 0 {
				resolved = tx
				return true
			}
		}
		return false
	})
	chRes, err := verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
	if err != nil {
		t.Fatal(err)
	}
	ch := chRes.Challenge
	t.Logf("challenge 1: %s at [%d, %d]: %s", ch.Outcome, ch.Lo, ch.Hi, ch.OutcomeReason)
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON || ch.Challenger != c.sidecars[verifier].Operator || ch.Provider != c.sidecars[cheater].Operator ||
		ch.LeaseId != leaseOf[uint32(slot)] || ch.CheckpointIndex != 0 {
		t.Fatalf("challenge 1 %+v: want the verifier to win on the cheater's round-0 checkpoint (lease %d, index 0)", ch, leaseOf[uint32(slot)])
	}
	// Its first step already trained on other data: the game ends at the batch of step 0.
	if ch.Lo != 0 || ch.Hi != 1 {
		t.Fatalf("the game converged on [%d, %d], want the first step [0, 1]", ch.Lo, ch.Hi)
	}
	ev := resolved.event(t, "depinchain.verify.v1.EventChallengeResolved")
	excluded := resolved.event(t, "depinchain.market.v1.EventRoundWorkerExcluded")
	if ev["challenge_id"] != "1" || ev["outcome"] != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON.String() ||
		excluded["worker"] != fmt.Sprint(slot) || excluded["round"] != "0" {
		t.Fatalf("EventChallengeResolved %v, EventRoundWorkerExcluded %v", ev, excluded)
	}
	after := provider(cheater)
	slash := vp.Params.FraudSlashFraction.MulInt(before).TruncateInt()
	if after.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED || !after.Bond.Amount.Equal(before.Sub(slash)) || !coinAmount(t, ev["slashed"]).Equal(slash) {
		t.Fatalf("the cheater %s with bond %s → %s (event: %s), want tombstoned and %s less", after.Status, before, after.Bond.Amount, ev["slashed"], slash)
	}
	r.requireOnlyExcluded(ctx, t, 0, uint32(slot))

	// The conviction voided the G_1 round 1 had opened on.
	rejected := resolved.event(t, "depinchain.market.v1.EventGlobalRejected")
	if rejected["round"] != "0" {
		t.Fatalf("EventGlobalRejected %v, want round 0's global (G_1)", rejected)
	}
	c.waitFor(ctx, t, "round 1's global (G_2) is committed over the honest slots", 6*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0 && !slices.Contains(rd.Entered, uint32(slot))
	})
	r.checkSimulate(ctx, t, map[uint64][]int{0: {slot}, 1: {slot}}, nil)

	// The honest leases' checkpoints: a round-1 one discarded with its round when the
	// global it started from was voided, then the redone one; the verifier matched every
	// checkpoint it kept.
	for w, lease := range leaseOf {
		if int(w) == slot {
			continue
		}
		var kept []verifytypes.Checkpoint
		discarded := 0
		c.waitFor(ctx, t, fmt.Sprintf("slot %d's round checkpoints are in", w), 2*time.Minute, func() bool {
			cps, err := verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease})
			if err != nil {
				return false
			}
			kept, discarded = nil, 0
			for _, cp := range cps.Checkpoints {
				if cp.Status == verifytypes.CHECKPOINT_STATUS_REJECTED {
					discarded++
					continue
				}
				kept = append(kept, cp)
			}
			return len(kept) == 2
		})
		if kept[0].StartStep != 0 || kept[1].StartStep != 8 || kept[1].EndStep != 16 {
			t.Fatalf("slot %d keeps checkpoints %v, want rounds 0 and 1", w, kept)
		}
		// Its round-1 checkpoint, if it came before the conviction, was discarded.
		if discarded > 1 || kept[1].Index != uint64(1+discarded) {
			t.Fatalf("slot %d: %d discarded checkpoints, the redo of round 1 is index %d", w, discarded, kept[1].Index)
		}
		t.Logf("slot %d redid round 1 (%d round-1 checkpoint discarded)", w, discarded)
		r.waitVerified(ctx, t, verifier, kept)
	}
}

// waitVerified waits until the verifier named has matched every checkpoint of cps,
// failing at any other result.
func (r *roundsRun) waitVerified(ctx context.Context, t testing.TB, verifier string, cps []verifytypes.Checkpoint) {
	t.Helper()
	r.c.waitFor(ctx, t, fmt.Sprintf("%s matched lease %d's %d checkpoints", verifier, cps[0].LeaseId, len(cps)), 2*time.Minute, func() bool {
		var vs struct {
			Verifications []struct {
				LeaseID any    `json:"lease_id"`
				Index   any    `json:"index"`
				Result  string `json:"result"`
				Detail  string `json:"detail"`
			} `json:"verifications"`
		}
		if err := r.c.sidecars[verifier].REST(ctx, "/v1/verifications", &vs); err != nil {
			return false
		}
		matched := 0
		for _, cp := range cps {
			for _, v := range vs.Verifications {
				if fmt.Sprint(v.LeaseID) != fmt.Sprint(cp.LeaseId) || fmt.Sprint(v.Index) != fmt.Sprint(cp.Index) {
					continue
				}
				if v.Result != "matched" {
					t.Fatalf("%s's verification of checkpoint %d/%d: %s (%s)", verifier, cp.LeaseId, cp.Index, v.Result, v.Detail)
				}
				matched++
			}
		}
		return matched == len(cps)
	})
}
