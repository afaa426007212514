package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
)

// The partition tests run four validators as containers of a FROM-scratch
// image with a static depinchaind, one Docker network per validator pair,
// and cut links with `docker network disconnect` (testutil/localnet's
// Docker mode).

// startDockerNetwork skips the test when no Docker Engine answers, and
// otherwise starts four validators in containers.
func startDockerNetwork(t *testing.T, ctx context.Context, opts localnet.NetworkOptions) *localnet.Network {
	t.Helper()
	if testing.Short() {
		t.Skip("starts four validators in containers")
	}
	if err := localnet.DockerAvailable(ctx); err != nil {
		t.Skipf("%s skipped: it runs validators as Docker containers, and %v", t.Name(), err)
	}
	start := time.Now()
	bin, err := localnet.StaticBinary()
	if err != nil {
		t.Fatal(err)
	}
	image, err := localnet.BuildImage(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s ready after %s", image, time.Since(start).Round(100*time.Millisecond))
	opts.Docker = &localnet.DockerOptions{Image: image}
	return startNetwork(t, ctx, opts)
}

// checkNoFork checks that validators agree on every block up to the lowest
// of their heights and returns their heights.
func checkNoFork(t *testing.T, ctx context.Context, net *localnet.Network, from int64) []int64 {
	t.Helper()
	hs := net.Heights(ctx)
	low := hs[0]
	for _, h := range hs {
		low = min(low, h)
	}
	for h := from; h <= low; h++ {
		if _, err := net.SameHeader(ctx, h, 0, 1, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	return hs
}

// TestPartitions cuts a four-validator network on Docker: a 3|1 split keeps
// the three going while the one stands still; a 2|2 split halts both sides
// without a fork; healing brings every node back to one chain and one app
// hash. Then a provider sidecar on the host, following one validator's
// published RPC and gRPC ports, is cut off from its node while a job is
// created; once reconnected it replays the blocks it missed, sees the job at
// its creation height and bids.
func TestPartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	net := startDockerNetwork(t, ctx, localnet.NetworkOptions{
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "operator": 1_000_000_000_000, "hot": 1_000_000_000},
	})
	v0, v3 := net.Validators[0], net.Validators[3]

	t.Run("3|1 keeps going on the 3 side", func(t *testing.T) {
		if err := net.Partition(ctx, []int{0, 1, 2}, []int{3}); err != nil {
			t.Fatal(err)
		}
		cutAt, err := v3.Height(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h0, _ := v0.Height(ctx)
		if err := v0.WaitHeight(ctx, h0+6); err != nil {
			t.Fatalf("the three made no blocks: %v", err)
		}
		if got, _ := v3.Height(ctx); got > cutAt+1 {
			t.Fatalf("the isolated validator went from %d to %d alone", cutAt, got)
		}
		if err := net.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		target, _ := v0.Height(ctx)
		hd, err := net.WaitSynced(ctx, target+1)
		if err != nil {
			t.Fatal(err)
		}
		checkNoFork(t, ctx, net, cutAt)
		t.Logf("isolated at %d while the others went on; healed, all agree at %d", cutAt, hd.Height)
	})

	t.Run("2|2 halts both sides without a fork", func(t *testing.T) {
		if err := net.Partition(ctx, []int{0, 1}, []int{2, 3}); err != nil {
			t.Fatal(err)
		}
		from, _ := v0.Height(ctx)
		left := waitStill(t, ctx, net.Validators[0], 2*time.Second, 20*time.Second)
		right := waitStill(t, ctx, net.Validators[2], 2*time.Second, 20*time.Second)
		time.Sleep(5 * time.Second)
		hs := checkNoFork(t, ctx, net, from)
		if hs[0] != left || hs[2] != right {
			t.Fatalf("heights %v: a side of two made blocks (left stood at %d, right at %d)", hs, left, right)
		}
		for _, h := range hs {
			if h < min(left, right) || h > max(left, right) {
				t.Fatalf("heights %v: sides more than one block apart", hs)
			}
		}
		if err := net.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if err := v0.WaitHeight(ctx, max(left, right)+2); err != nil {
			t.Fatalf("no blocks after healing the 2|2 split: %v", err)
		}
		target, _ := v0.Height(ctx)
		hd, err := net.WaitSynced(ctx, target+1)
		if err != nil {
			t.Fatal(err)
		}
		checkNoFork(t, ctx, net, from)
		t.Logf("halted at %v; healed, all agree at %d: app hash %s", hs, hd.Height, hd.AppHash)
	})

	t.Run("sidecar cut off from its node misses no event", func(t *testing.T) {
		v1 := net.Validators[1]
		opts := sidecar.Options{
			Home: filepath.Join(t.TempDir(), "provider"), Operator: "operator", HotKey: "hot", Bond: "100000000000udepin",
			Prices: map[string]uint64{"H100-SXM5-80GB": 2_000_000},
		}
		p, err := sidecar.Setup(ctx, v1.Node, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Stop()
			if t.Failed() {
				t.Logf("sidecar log tail:\n%s", fileTail(p.LogPath(), 40))
			}
		})
		for i := 0; ; i++ {
			var s map[string]any
			if p.REST(ctx, "/v1/status", &s) == nil && s["websocket_connected"] == true {
				break
			}
			if i == 100 {
				t.Fatal("the sidecar never subscribed")
			}
			time.Sleep(200 * time.Millisecond)
		}

		if err := net.CutHost(ctx, 1); err != nil {
			t.Fatal(err)
		}
		spec := filepath.Join(t.TempDir(), "job.yaml")
		// The sidecar notices a silent websocket after 30 s: the auction must
		// still be open by the time it is back.
		yaml := strings.Replace(networkJobYAML, "bidding_window_blocks: 6", "bidding_window_blocks: 1000", 1)
		if err := os.WriteFile(spec, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		res := mustTx(t, ctx, v0.Node, "owner", "market", "submit-job", "--spec", spec, "--deposit", "500000000udepin")
		id, _ := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
		jobID := strings.Trim(id, `"`)
		if err := v0.WaitHeight(ctx, res.Height+8); err != nil {
			t.Fatal(err)
		}
		bids := func() string {
			body, err := v0.REST(ctx, "/depinchain/market/v1/jobs/"+jobID+"/bids")
			if err != nil {
				t.Fatal(err)
			}
			return string(body)
		}
		if b := bids(); strings.Contains(b, p.Operator) {
			t.Fatalf("a bid while the sidecar's node was cut off: %s", b)
		}
		if err := net.RestoreHost(ctx, 1); err != nil {
			t.Fatal(err)
		}
		restoredAt, _ := v0.Height(ctx)
		restored := time.Now()

		// The sidecar retries a failed height with backoff capped at 30 s, so
		// it may take that long to notice its node is back.
		for !strings.Contains(bids(), p.Operator) {
			if time.Since(restored) > 2*time.Minute {
				var status, jobs string
				p.REST(ctx, "/v1/status", &status) //nolint:errcheck // for the message only
				p.REST(ctx, "/v1/jobs", &jobs)     //nolint:errcheck // same
				t.Fatalf("no bid from the sidecar 2 minutes after it was reconnected\nstatus: %s\njobs: %s", status, jobs)
			}
			if err := v0.WaitBlocks(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		bidAfter := time.Since(restored)
		var jobs struct {
			Jobs []struct {
				JobID      string `json:"job_id"`
				SeenHeight string `json:"seen_height"`
			} `json:"jobs"`
		}
		if err := p.REST(ctx, "/v1/jobs", &jobs); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != jobID || jobs.Jobs[0].SeenHeight != fmt.Sprint(res.Height) {
			t.Fatalf("the sidecar's jobs %+v: want job %s seen at its creation height %d (replayed, not reconciled)", jobs, jobID, res.Height)
		}
		var status struct {
			CursorHeight int64 `json:"cursor_height,string"`
		}
		for {
			h, _ := v1.Height(ctx)
			if p.REST(ctx, "/v1/status", &status) == nil && status.CursorHeight >= h-2 {
				break
			}
			if time.Since(restored) > 2*time.Minute {
				t.Fatalf("the sidecar's cursor %d lags its node's height %d", status.CursorHeight, h)
			}
			if err := v1.WaitBlocks(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("job %s created at %d while cut off; reconnected at %d; bid %s later; cursor at %d",
			jobID, res.Height, restoredAt, bidAfter.Round(100*time.Millisecond), status.CursorHeight)
	})
}
