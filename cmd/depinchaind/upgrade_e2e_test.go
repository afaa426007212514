package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
)

// TestSoftwareUpgradeV5 runs the "v5" software upgrade the way a real network
// does: a chain runs the previous release, governance schedules the upgrade,
// the old binary halts at the upgrade height, and this release's binary,
// started on the same home, applies it and carries on with the state intact.
//
// The previous release is this source built with `-tags prev_release`
// (internal/release): no "v5" handler, x/market and x/verify at consensus version 4
// (before rounds of sync jobs and file queries). The test switches binaries itself, as cosmovisor would
// (docs/upgrades.md).
func TestSoftwareUpgradeV5(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	newBinary, err := localnet.Binary()
	if err != nil {
		t.Fatal(err)
	}
	prevBinary, err := localnet.PrevBinary()
	if err != nil {
		t.Fatal(err)
	}

	n, err := localnet.Start(ctx, localnet.Options{
		Home:     filepath.Join(t.TempDir(), "home"),
		Binary:   prevBinary,
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "provider": 1_000_000_000_000},
		Genesis: func(appState map[string]any) error {
			// Governance decides in seconds rather than days.
			gov, ok := appState["gov"].(map[string]any)
			if !ok {
				return fmt.Errorf("no gov genesis")
			}
			params, ok := gov["params"].(map[string]any)
			if !ok {
				return fmt.Errorf("no gov params")
			}
			params["voting_period"] = "8s"
			params["expedited_voting_period"] = "4s"
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Stop()
		if t.Failed() {
			logTail(t, n)
		}
	})
	provider := mustAddr(t, ctx, n, "provider")
	for module, want := range map[string]int{"market": 4, "verify": 4, "stakingext": 2, "shardregistry": 2} {
		if v := moduleVersion(t, ctx, n, module); v != want {
			t.Fatalf("the previous release runs x/%s at consensus version %d, want %d", module, v, want)
		}
	}

	// State made by the previous release: a bonded provider, a job and the lease it won.
	mustTx(t, ctx, n, "provider", "stakingext", "register-provider", "gpu-farm-1", "https://gpu1.example.com:8443", "eu-west",
		"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
	specPath := filepath.Join(t.TempDir(), "job.yaml")
	// A short auction, long enough for the bid to land on a loaded machine.
	spec := strings.Replace(jobSpecYAML, "bidding_window_blocks: 60", "bidding_window_blocks: 12", 1)
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTx(t, ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "50000000udepin")
	mustTx(t, ctx, n, "provider", "market", "place-bid", "1", "1500000udepin", "--steps-per-hour", "100")
	waitFor(t, ctx, "the auction to lease job 1", func() bool {
		return activeLeaseIDs(t, ctx, n) == "1"
	})
	before := durableState(t, ctx, n, provider)

	// Governance schedules the upgrade: the validator submits the proposal with
	// its deposit and votes yes; it passes when the voting period ends.
	height, err := n.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 8 s of voting at 300 ms blocks is under 30 blocks; leave room for slow blocks.
	upgradeHeight := height + 45
	res := mustTx(t, ctx, n, "validator", "upgrade", "software-upgrade", "v5",
		"--upgrade-height", strconv.FormatInt(upgradeHeight, 10), "--no-validate",
		"--title", "Upgrade to v5", "--summary", "rounds of sync jobs", "--deposit", "10000000udepin")
	proposalID, ok := res.Attr("submit_proposal", "proposal_id")
	if !ok {
		t.Fatalf("no proposal id in %+v", res.Events)
	}
	mustTx(t, ctx, n, "validator", "gov", "vote", proposalID, "yes")
	waitFor(t, ctx, "proposal "+proposalID+" to pass", func() bool {
		var p struct{ Proposal struct{ Status string } }
		body, err := n.REST(ctx, "/cosmos/gov/v1/proposals/"+proposalID)
		if err == nil && json.Unmarshal(body, &p) == nil &&
			(p.Proposal.Status == "PROPOSAL_STATUS_REJECTED" || p.Proposal.Status == "PROPOSAL_STATUS_FAILED") {
			t.Fatalf("proposal did not pass: %s", body)
		}
		return err == nil && p.Proposal.Status == "PROPOSAL_STATUS_PASSED"
	})
	plan, err := n.REST(ctx, "/cosmos/upgrade/v1beta1/current_plan")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(plan), `"name":"v5"`) || !strings.Contains(string(plan), fmt.Sprintf(`"height":"%d"`, upgradeHeight)) {
		t.Fatalf("scheduled plan: %s", plan)
	}

	// The previous release does not know "v5": it stops at the upgrade height,
	// says why, and leaves data/upgrade-info.json for the next binary (and cosmovisor).
	needed := fmt.Sprintf(`UPGRADE "v5" NEEDED at height: %d`, upgradeHeight)
	waitFor(t, ctx, "the old binary to halt", func() bool {
		log, _ := os.ReadFile(filepath.Join(n.Home, "node.log"))
		return strings.Contains(string(log), needed)
	})
	// CometBFT has stored the block at the upgrade height but the app could not
	// execute it: the height stays there.
	halted, err := n.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if h, err := n.Height(ctx); err != nil || h != halted || h > upgradeHeight {
		t.Fatalf("chain at height %d, then %d (%v): want it stopped at the upgrade height %d", halted, h, err, upgradeHeight)
	}
	info, err := os.ReadFile(filepath.Join(n.Home, "data", "upgrade-info.json"))
	if err != nil || !strings.Contains(string(info), `"name":"v5"`) {
		t.Fatalf("upgrade-info.json: %s (%v)", info, err)
	}
	n.Stop()

	// This release on the same home applies the upgrade and the chain goes on.
	n.Binary = newBinary
	if err := n.Resume(ctx, upgradeHeight); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(n.Home, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), fmt.Sprintf(`applying upgrade "v5" at height: %d`, upgradeHeight)) {
		t.Fatal("the new binary did not log that it applied v5")
	}
	applied, err := n.REST(ctx, "/cosmos/upgrade/v1beta1/applied_plan/v5")
	if err != nil || !strings.Contains(string(applied), fmt.Sprintf(`"height":"%d"`, upgradeHeight)) {
		t.Fatalf("applied plan: %s (%v)", applied, err)
	}
	for module, want := range map[string]int{"market": 5, "verify": 5, "stakingext": 2, "shardregistry": 2} {
		if v := moduleVersion(t, ctx, n, module); v != want {
			t.Fatalf("x/%s is at consensus version %d after the upgrade, want %d", module, v, want)
		}
	}
	if after := durableState(t, ctx, n, provider); after != before {
		t.Fatalf("state changed across the upgrade:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := activeLeaseIDs(t, ctx, n); got != "1" {
		t.Fatalf("active leases after the upgrade: %q, want lease 1", got)
	}
	// x/market's migration filled in the round params.
	marketParams, err := n.REST(ctx, "/depinchain/market/v1/params")
	if err != nil || !strings.Contains(string(marketParams), `"round_quorum":"0.500000000000000000"`) ||
		!strings.Contains(string(marketParams), `"max_sync_workers":32`) || !strings.Contains(string(marketParams), `"max_missed_rounds":2`) {
		t.Fatalf("market params after the upgrade: %s (%v)", marketParams, err)
	}
	// x/verify's migration filled in the file query deposit.
	verifyParams, err := n.REST(ctx, "/depinchain/verify/v1/params")
	if err != nil || !strings.Contains(string(verifyParams), `"file_query_deposit":{"denom":"udepin","amount":"100000"}`) {
		t.Fatalf("verify params after the upgrade: %s (%v)", verifyParams, err)
	}

	// Blocks advance and transactions run on the migrated state: a sync job is taken,
	// leased, and its round 0 opens from the global the chain computed; cancelling the
	// jobs closes their leases.
	if err := n.WaitBlocks(ctx, 3); err != nil {
		t.Fatal(err)
	}
	syncSpec := strings.Replace(spec, "workers: 1\n", "workers: 1\nsync: {every: 100, outer_lr: 0.7, outer_momentum: 0.9}\n"+
		"custody: {data_pieces: 2, parity_pieces: 1, retain_checkpoints: 1h}\n", 1)
	syncPath := filepath.Join(t.TempDir(), "sync.yaml")
	if err := os.WriteFile(syncPath, []byte(syncSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTx(t, ctx, n, "owner", "market", "submit-job", "--spec", syncPath, "--deposit", "50000000udepin")
	mustTx(t, ctx, n, "provider", "market", "place-bid", "2", "1500000udepin", "--steps-per-hour", "100")
	waitFor(t, ctx, "round 0 of sync job 2 to open", func() bool {
		body, err := n.REST(ctx, "/depinchain/market/v1/jobs/2/rounds/0")
		return err == nil && strings.Contains(string(body), `"state":"ROUND_STATE_OPEN"`) && strings.Contains(string(body), `"workers":[0]`)
	})
	mustTx(t, ctx, n, "owner", "market", "cancel-job", "1")
	mustTx(t, ctx, n, "owner", "market", "cancel-job", "2")
	if got := activeLeaseIDs(t, ctx, n); got != "" {
		t.Fatalf("active leases after cancelling the jobs: %q, want none", got)
	}
	if err := n.WaitBlocks(ctx, 2); err != nil {
		t.Fatal(err)
	}
}

// durableState is what an upgrade must carry over unchanged: balances, the
// provider's record, and the job's and the lease's identity, terms and state.
// (What accrues with block time, such as a lease's pending payment, is left out.)
func durableState(t *testing.T, ctx context.Context, n *localnet.Node, addrs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString(a + "=" + balance(t, ctx, n, a) + "\n")
	}
	for _, q := range []struct {
		path, object string
		fields       []string
	}{
		{"/depinchain/stakingext/v1/providers", "providers", nil},
		{"/depinchain/market/v1/jobs/1", "job", []string{"id", "owner", "spec", "state", "created_height", "bidding_deadline",
			"seed", "deposited", "auction_round"}},
		{"/depinchain/market/v1/leases/1", "lease", []string{"id", "job_id", "provider", "price_per_gpu_hour", "gpus",
			"state", "start_height", "start_time", "collateral", "checkpoint_deadline"}},
	} {
		body, err := n.REST(ctx, q.path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		object := doc[q.object]
		if q.fields != nil {
			var all map[string]json.RawMessage
			if err := json.Unmarshal(object, &all); err != nil {
				t.Fatal(err)
			}
			kept := make(map[string]json.RawMessage, len(q.fields))
			for _, f := range q.fields {
				if _, ok := all[f]; !ok {
					t.Fatalf("%s has no field %q: %s", q.path, f, body)
				}
				kept[f] = all[f]
			}
			if object, err = json.Marshal(kept); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&b, "%s: %s\n", q.path, object)
	}
	return b.String()
}

// activeLeaseIDs lists the active leases over REST, comma-separated.
func activeLeaseIDs(t *testing.T, ctx context.Context, n *localnet.Node) string {
	t.Helper()
	body, err := n.REST(ctx, "/depinchain/market/v1/leases?active_only=true")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Leases []struct{ ID string } `json:"leases"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(res.Leases))
	for _, l := range res.Leases {
		ids = append(ids, l.ID)
	}
	return strings.Join(ids, ",")
}

// moduleVersion is a module's consensus version as x/upgrade records it.
func moduleVersion(t *testing.T, ctx context.Context, n *localnet.Node, module string) int {
	t.Helper()
	body, err := n.REST(ctx, "/cosmos/upgrade/v1beta1/module_versions?module_name="+module)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ModuleVersions []struct{ Name, Version string } `json:"module_versions"`
	}
	if err := json.Unmarshal(body, &res); err != nil || len(res.ModuleVersions) != 1 {
		t.Fatalf("module versions: %s (%v)", body, err)
	}
	v, err := strconv.Atoi(res.ModuleVersions[0].Version)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitFor polls cond every 300 ms until it holds, failing after a minute.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// logTail prints the end of the node's log.
func logTail(t *testing.T, n *localnet.Node) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(n.Home, "node.log"))
	if err != nil {
		return
	}
	lines := strings.Split(string(log), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("node log tail:\n%s", strings.Join(lines, "\n"))
}
