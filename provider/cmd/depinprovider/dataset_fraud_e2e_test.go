package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// TestVerifierCatchesADatasetCheater is the fraud story on a dataset job, on a
// datasetWorld: the trainer fabricates its trace from step 40 (cheatStep, inside
// checkpoint 2 of four); a verifier sidecar that holds no piece fetches the worker's
// data pieces from the three holders once, re-executes every checkpoint on them,
// matches checkpoints 0 and 1, challenges checkpoint 2 and wins the game at the
// fabricated step with a one-step proof that carries the dataset's chunks the step
// reads. The cheater is tombstoned. About 40 seconds.
func TestVerifierCatchesADatasetCheater(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and five real sidecars")
	}
	d := newDatasetWorld(t, 6*time.Minute, sidecar.Options{StartArgs: []string{"--cheat-fabricate-from-step", "40"}})
	w, ctx := d.world, d.ctx
	opts := sidecar.Options{Home: filepath.Join(d.dir, "verifier"), Operator: "verifier", HotKey: "verifier", SkipGrants: true,
		Prices: map[string]uint64{}, Set: verifierConfig}
	if testing.Verbose() {
		opts.Log = prefixWriter{os.Stderr, "    verifier| "}
	}
	verifier, err := sidecar.Setup(ctx, d.node, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(verifier.Stop)
	// Providers serve checkpoint states only to the bonded.
	if res, err := d.node.Tx(ctx, "verifier", "stakingext", "register-verifier", "100000000udepin"); err != nil || res.Code != 0 {
		t.Fatalf("register-verifier: %v %s", err, res.RawLog)
	}
	if err := verifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	d.startAll("operator")

	jobID := w.submitJob(fortunesJobYAML, "500000000udepin")
	var ch verifytypes.Challenge
	w.eventually("the verifier's challenge being decided", 4*time.Minute, func() bool {
		res, err := w.verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
		if err != nil {
			return false
		}
		ch = res.Challenge
		return ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED
	})
	t.Logf("challenge decided at %s", d.since())
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON || ch.Challenger != verifier.Operator || ch.Provider != w.provider.Operator {
		t.Fatalf("challenge %+v: want the verifier to win against the cheater", ch)
	}
	if ch.Lo != cheatStep-1 || ch.Hi != cheatStep || ch.CheckpointIndex != 2 {
		t.Fatalf("the game on checkpoint %d converged on [%d, %d], want checkpoint 2's first fabricated step [%d, %d]",
			ch.CheckpointIndex, ch.Lo, ch.Hi, cheatStep-1, cheatStep)
	}
	if leases := w.leasesOf(jobID); len(leases) != 1 || leases[0].CloseReason == markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("leases %+v: want the cheater's, closed by its conviction", leases)
	}

	var vs struct {
		Verifications []struct {
			Index  string `json:"index"`
			Result string `json:"result"`
			Detail string `json:"detail"`
		} `json:"verifications"`
	}
	if err := verifier.REST(ctx, "/v1/verifications", &vs); err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, v := range vs.Verifications {
		results[v.Index] = v.Result + " " + v.Detail
	}
	if !strings.HasPrefix(results["0"], "matched") || !strings.HasPrefix(results["1"], "matched") || !strings.HasPrefix(results["2"], "mismatched") {
		t.Fatalf("verifier results by checkpoint index: %v", results)
	}
	// The pieces were fetched once, into one shard set's folder.
	sets, err := filepath.Glob(filepath.Join(verifier.Home, "work", "datasets", fortunesDatasetID, "shards-*"))
	if err != nil || len(sets) != 1 {
		t.Fatalf("the verifier's dataset folders: %v (%v), want one shard set", sets, err)
	}
	if n := verifier.LogCount("training data fetched"); n != 1 {
		t.Fatalf("the verifier fetched the training data %d times, want once", n)
	}
	t.Logf("done at %s", d.since())
}
