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
)

// TestRoundCompletesWithoutAKilledWorker: the trainer of one slot is paused before its
// first round commit and killed with SIGKILL. Round 0 closes at its commit deadline
// with the other two (a quorum), they aggregate without it; after max_missed_rounds the
// dead lease closes, the slot is leased again (w4 starts now) and the new lease joins at
// a later round from the global state in custody, with WorkerStart(nil). Every committed
// global is diloco.Simulate's with the slot dropped out of the rounds it missed, bit for
// bit (the slot never entered before, so its carry is nil in both).
func TestRoundCompletesWithoutAKilledWorker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	job := strings.Replace(roundsJobYAML, "commit_blocks: 200", "commit_blocks: 30", 1)
	job = strings.Replace(job, "total_steps: 16", "total_steps: 48", 1)
	r := startRoundsJob(ctx, t, job, map[string][]string{"w3": {"--pause-before-checkpoint", "1"}}, "w4")
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
	r.c.startSidecars(ctx, t, "w4")
	r.c.waitFor(ctx, t, "round 0's global (G_1) is committed without the dead slot", 5*time.Minute, func() bool {
		rd, ok := r.round(ctx, 0)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	if rd, _ := r.round(ctx, 0); !slices.Equal(rd.Missed, []uint32{dead}) {
		t.Fatalf("round 0 missed %v, want the dead slot %d", rd.Missed, dead)
	}
	r.c.waitFor(ctx, t, "the last round's global (G_6) is committed", 12*time.Minute, func() bool {
		rd, ok := r.round(ctx, 5)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	dropouts := map[uint64][]int{}
	joined := uint64(0)
	for n := range uint64(6) {
		rd, _ := r.round(ctx, n)
		if !slices.Contains(rd.Entered, dead) {
			dropouts[n] = []int{int(dead)}
		} else if joined == 0 {
			joined = n
		}
	}
	if joined == 0 {
		t.Fatalf("slot %d never entered a round again (dropouts %v)", dead, dropouts)
	}
	r.checkSimulate(ctx, t, dropouts)
	leases, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("slot %d re-leased (%d leases in all) and entered from round %d", dead, len(leases.Leases), joined)
	train, wait := r.roundTimes(ctx, t, "w1", "w2")
	t.Logf("with a dead worker the others trained %.1fs and waited %.1fs on the round barrier (%.0f%% of their time)", train, wait, 100*wait/(train+wait))
}
