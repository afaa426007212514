//go:build long

package main_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/daemon"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// TestRoundCompletesWithoutAKilledWorker: the trainer of one slot is paused before its
// first round commit and killed with SIGKILL. Round 0 closes at its commit deadline
// with the other two (a quorum), they aggregate without it, and round 1 — which the
// dead slot's lease still belongs to — closes the same way; both globals are
// diloco.Simulate's with that slot dropped out of both rounds, bit for bit.
func TestRoundCompletesWithoutAKilledWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	t.Cleanup(cancel)
	job := strings.Replace(roundsJobYAML, "commit_blocks: 200", "commit_blocks: 30", 1)
	r := startRoundsJob(ctx, t, job, map[string][]string{"w3": {"--pause-before-checkpoint", "1"}}, nil)
	var dead uint32
	for slot, name := range r.slots {
		if name == "w3" {
			dead = slot
		}
	}
	if err := r.c.sidecars["w3"].WaitLog(ctx, daemon.PausedLogMsg); err != nil {
		t.Fatal(err)
	}
	r.c.sidecars["w3"].Kill()
	t.Logf("w3 (slot %d) killed before its round 0 commit at %s", dead, r.c.since())
	r.c.waitFor(ctx, t, "round 1's global (G_2) is committed without the dead slot", 10*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	r.checkSimulate(ctx, t, map[uint64][]int{0: {int(dead)}, 1: {int(dead)}}, nil)
	for n := range uint64(2) {
		if rd, _ := r.round(ctx, n); len(rd.Missed) != 1 || rd.Missed[0] != dead {
			t.Fatalf("round %d missed %v, want the dead slot %d", n, rd.Missed, dead)
		}
	}
	var alive []string
	for _, name := range r.slots {
		if name != "w3" {
			alive = append(alive, name)
		}
	}
	train, wait := r.roundTimes(ctx, t, alive...)
	t.Logf("with a dead worker the others trained %.1fs and waited %.1fs on the round barrier (%.0f%% of their time)", train, wait, 100*wait/(train+wait))
}

// TestJoinerTakesAKilledWorkersSlot: with max_missed_rounds 1, the trainer of one slot
// enters round 0 and is killed before its round 1 commit; round 1 closes without it and
// its lease is closed, so the slot re-auctions. A fourth trainer (w4), started then, wins it, fetches
// the current global from custody, starts from WorkerStart(nil) of it and commits in
// every round from the next one on, checkpoints included. The chain's globals are
// diloco.Simulate's with the slot out of the rounds it had no lease in and a joiner —
// no carry — in the round it joined, bit for bit.
func TestJoinerTakesAKilledWorkersSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	t.Cleanup(cancel)
	job := strings.Replace(roundsJobYAML, "commit_blocks: 200", "commit_blocks: 30", 1)
	job = strings.Replace(job, "total_steps: 16", "total_steps: 32", 1)
	r := startRoundsJob(ctx, t, job, map[string][]string{"w3": {"--pause-before-checkpoint", "2"}},
		map[string]string{"max_missed_rounds": "1"}, "w4")
	var dead uint32
	for slot, name := range r.slots {
		if name == "w3" {
			dead = slot
		}
	}
	if err := r.c.sidecars["w3"].WaitLog(ctx, daemon.PausedLogMsg); err != nil {
		t.Fatal(err)
	}
	r.c.sidecars["w3"].Kill()
	r.c.startSidecars(ctx, t, "w4")
	t.Logf("w3 (slot %d) killed before its round 1 commit, w4 started at %s", dead, r.c.since())
	var joinerLease markettypes.Lease
	r.c.waitFor(ctx, t, "w4 leases the dead slot", 5*time.Minute, func() bool {
		res, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
		if err != nil {
			return false
		}
		for _, l := range res.Leases {
			if l.Provider == r.c.sidecars["w4"].Operator && l.State == markettypes.LEASE_STATE_ACTIVE {
				joinerLease = l
				return true
			}
		}
		return false
	})
	if joinerLease.Worker != dead {
		t.Fatalf("w4 leased slot %d, want the dead slot %d", joinerLease.Worker, dead)
	}
	t.Logf("w4 leased slot %d (lease %d) at %s", dead, joinerLease.Id, r.c.since())
	const rounds = 4
	r.c.waitFor(ctx, t, "the last round's global is committed", 10*time.Minute, func() bool {
		rd, ok := r.round(ctx, rounds-1)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	dropouts, joiners := map[uint64][]int{}, map[uint64][]int{}
	joined := uint64(0)
	for n := range uint64(rounds) {
		rd, _ := r.round(ctx, n)
		in := slices.Contains(rd.Entered, dead)
		switch {
		case n == 0:
			if !in {
				// Without a round 0 commit the slot has no carry, and a joiner's zero
				// carry would be no different from a returning worker's.
				t.Fatalf("the slot %d did not enter round 0: %v", dead, rd.Entered)
			}
		case !in && joined == 0:
			dropouts[n] = []int{int(dead)}
		case in && joined == 0:
			joined, joiners[n] = n, []int{int(dead)}
		case !in:
			t.Fatalf("the joiner entered round %d but not round %d", joined, n)
		}
	}
	if joined == 0 {
		t.Fatalf("the joiner entered no round (dropouts %v)", dropouts)
	}
	r.checkSimulate(ctx, t, dropouts, joiners)
	res, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Leases {
		if l.Provider == r.c.sidecars["w3"].Operator && l.State == markettypes.LEASE_STATE_ACTIVE {
			t.Fatalf("the dead worker's lease %d is still active", l.Id)
		}
	}
	// x/verify takes the joiner's first checkpoint at its round's start, not at step 0.
	every := uint64(8)
	verify := verifytypes.NewQueryClient(r.c.conn)
	r.c.waitFor(ctx, t, "x/verify holds the joiner's checkpoint of its first round", 2*time.Minute, func() bool {
		res, err := verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: joinerLease.Id})
		return err == nil && len(res.Checkpoints) > 0 && res.Checkpoints[0].Index == 0 &&
			res.Checkpoints[0].StartStep == joined*every && res.Checkpoints[0].EndStep == (joined+1)*every
	})
	t.Logf("w4 joined at round %d from the global in custody at %s", joined, r.c.since())
}

// The dense twins of TestSidecarsTrainCompressedAndProveAWrongAggregation and
// TestSidecarsProveAFabricatedCompressedPseudoGradient (same bodies, dense job) run here
// to keep `make test` within its time: the dense proofs are also covered by provider/rounds'
// unit tests, the e2e bodies by the compressed twins.

// TestSidecarsProveAWrongAggregation: slot 0's trainer is restarted as a lying
// aggregator (--cheat-aggregate) right after the leases; it commits round 0's global
// with one weight off. The other two find the first differing chunk against their own
// aggregate and prove it (MsgProveRoundFault, AGGREGATION) inside the global's challenge
// window: the chain rejects the global (EventGlobalRejected), the cheater is tombstoned
// and slashed by exactly fraud_slash_fraction, the prover paid exactly
// whistleblower_share of the slash, an honest slot (slot 1 first) commits the honest global, and round 1
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

// TestSidecarsProveAFabricatedPseudoGradient: trainer w3 runs with
// --cheat-pseudo-gradient: its committed round-0 pseudo-gradient has one element off
// while its round-end checkpoint is honest. Before aggregating, the honest trainers fetch
// its end state from checkpoint custody, find the chunk that is not G_0 − end state and
// prove it (MsgProveRoundFault, PSEUDO_GRADIENT) inside the round's window: the chain
// excludes the cheater's commit from round 0, tombstones it and slashes exactly
// fraud_slash_fraction of its bond, pays the prover exactly whistleblower_share of the
// slash, and pays the cheater nothing for the round; round 0 is aggregated without it, and
// both globals are diloco.Simulate's with the cheater's slot out of both rounds.
func TestSidecarsProveAFabricatedPseudoGradient(t *testing.T) {
	testSidecarsProveAFabricatedPseudoGradient(t, roundsJobYAML, "--cheat-pseudo-gradient")
}
