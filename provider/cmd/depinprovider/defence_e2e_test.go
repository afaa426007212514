package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// TestHonestProviderBeatsALyingChallenger: someone challenges an honest
// checkpoint with a made-up trace and plays the game to the end through the
// CLI. The provider's sidecar defends on its own — killed right before its
// second move (a test hook pauses it there) and restarted, it still moves in
// time — and wins: the checkpoint becomes final and is paid, and the liar
// loses its bond.
func TestHonestProviderBeatsALyingChallenger(t *testing.T) {
	challengeWindow = "40"
	t.Cleanup(func() { challengeWindow = "6" })
	w := newWorld(t, 6*time.Minute, sidecar.Options{})
	// The first run stops right before its second dispute move: the first
	// reveal is made, at least four of a 32-step game's five remain.
	if err := w.provider.StartWith(w.ctx, "--pause-before-move", "2"); err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer("total_steps: 64", "total_steps: 32", "checkpoint_every: 16", "checkpoint_every: 32").Replace(referenceJobYAML)
	jobID := w.submitJob(yaml, "500000000udepin")
	var cp verifytypes.Checkpoint
	w.eventually("the provider's checkpoint", 2*time.Minute, func() bool {
		for _, l := range w.leasesOf(jobID) {
			res, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: l.Id})
			if err == nil && len(res.Checkpoints) == 1 {
				cp = res.Checkpoints[0]
				return true
			}
		}
		return false
	})

	// The liar computes the honest run and alters it from step 20.
	job := w.job(jobID)
	start, err := disputes.InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	honest, err := disputes.Reexecute(job, verifytypes.BuiltinData(), start, 0, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(honest.Trace.Hashes))
	for i, h := range honest.Trace.Hashes {
		lines[i] = h.String()
		if i >= 20 {
			lines[i] = strings.Repeat("ab", 32)
		}
	}
	tracePath := filepath.Join(t.TempDir(), "lie.txt")
	if err := os.WriteFile(tracePath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	liar, err := w.node.Address(w.ctx, "liar")
	if err != nil {
		t.Fatal(err)
	}
	liarBefore := w.balanceOf(liar)
	// The game is played to its end within gameTime and maxLiarMoves of the
	// liar's: a 32-step game takes five bisection rounds and one step, the
	// rest is room for moves refused because the game moved on meanwhile.
	const gameTime, maxLiarMoves = 3 * time.Minute, 16
	gameCtx, cancel := context.WithTimeout(w.ctx, gameTime)
	defer cancel()
	liarMoves := 0
	tx := func(args ...string) {
		t.Helper()
		res, err := w.node.Tx(w.ctx, "liar", args...)
		if err != nil || res.Code != 0 {
			t.Logf("liar's %v: %v %s", args[:2], err, res.RawLog) // the game may have moved on
		}
	}
	tx("verify", "challenge", strconv.FormatUint(cp.LeaseId, 10), "0", "--trace", tracePath)

	killed := false
	var ch verifytypes.Challenge
	for {
		res, err := w.verify.Challenge(w.ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
		if err != nil {
			t.Fatal(err)
		}
		ch = res.Challenge
		if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			break
		}
		if liarMoves > maxLiarMoves {
			t.Fatalf("the game did not end after %d moves of the liar (at %s, round %d, defender killed: %v)\nsidecar log:\n%s",
				liarMoves, ch.Turn, ch.Rounds, killed, readTail(w.provider.LogPath()))
		}
		switch {
		case !killed && w.provider.Logged(daemon.PausedLogMsg):
			// The defender stopped right before its second move and dies
			// there; it comes back within the move timeout.
			if ch.Turn != verifytypes.GAME_TURN_PROVIDER || ch.Rounds != 1 {
				t.Fatalf("the defender paused before its second move with the game at %s, round %d", ch.Turn, ch.Rounds)
			}
			w.provider.Kill()
			killed = true
			if err := w.node.WaitBlocks(w.ctx, 3); err != nil {
				t.Fatal(err)
			}
			if err := w.provider.Start(w.ctx); err != nil {
				t.Fatal(err)
			}
		case ch.Turn == verifytypes.GAME_TURN_CHALLENGER:
			liarMoves++
			tx("verify", "respond", "1", "--trace", tracePath)
		case ch.Turn == verifytypes.GAME_TURN_ONE_STEP:
			pre, err := honest.StateAt(ch.Lo)
			if err != nil {
				t.Fatal(err)
			}
			prePath := filepath.Join(t.TempDir(), "pre.bin")
			if err := os.WriteFile(prePath, pre, 0o644); err != nil {
				t.Fatal(err)
			}
			liarMoves++
			tx("verify", "step", "1", "--state", prePath)
		default:
			if err := w.node.WaitBlocks(gameCtx, 1); err != nil {
				t.Fatalf("the game did not end within %s (at %s, round %d, defender killed: %v): %v\nsidecar log:\n%s",
					gameTime, ch.Turn, ch.Rounds, killed, err, readTail(w.provider.LogPath()))
			}
		}
	}
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON || !killed {
		t.Fatalf("challenge ended %s (%s), defender killed: %v", ch.Outcome, ch.OutcomeReason, killed)
	}
	leases := w.waitPaid(jobID)
	if leases[0].CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("lease closed %s", leases[0].CloseReason)
	}
	if after := w.balanceOf(liar); after >= liarBefore {
		t.Fatalf("the liar's balance went %d → %d: want its bond lost", liarBefore, after)
	}
	var metrics string
	if err := w.provider.REST(w.ctx, "/metrics", &metrics); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `depinprovider_dispute_moves_total{role="defender"}`) {
		t.Fatal("no defender moves in the restarted sidecar's metrics")
	}
}
