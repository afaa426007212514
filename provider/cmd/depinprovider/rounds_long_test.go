//go:build long

package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/daemon"
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
	r := startRoundsJob(ctx, t, job, "10", map[string][]string{"w3": {"--pause-before-checkpoint", "1"}})
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
	r.checkSimulate(ctx, t, map[uint64][]int{0: {int(dead)}, 1: {int(dead)}})
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
