package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

const jobYAML = `name: health
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: 64
checkpoint_every: 16
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: BLOCKS
`

// TestGPUFailureStopsBidsAndFlagsTheLease runs the daemon in process on a
// simulated DGX H100 against a real node and breaks GPUs under it: an XID on
// a GPU serving a lease flags that lease, and a double-bit ECC error on a
// GPU an open bid reserved withdraws the bid on chain, since the provider
// could no longer serve what it offered.
func TestGPUFailureStopsBidsAndFlagsTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node, err := localnet.Start(ctx, localnet.Options{
		Home:     filepath.Join(t.TempDir(), "chain"),
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "operator": 1_000_000_000_000, "hot": 1_000_000_000},
		Genesis: func(app map[string]any) error {
			app["verify"].(map[string]any)["params"].(map[string]any)["challenge_window"] = "40"
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	p, err := sidecar.Setup(ctx, node, sidecar.Options{
		Home: filepath.Join(t.TempDir(), "provider"), Operator: "operator", HotKey: "hot", Bond: "100000000000udepin",
		Prices: map[string]uint64{"H100-SXM5-80GB": 2_000_000},
		Set:    map[string]string{"gpus.refresh_interval": `"200ms"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(p.Home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	host := gpu.NewSimulatedDGXH100()
	d, err := daemon.New(ctx, daemon.Options{Config: cfg, GPULibrary: host})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	readyBy := time.After(time.Minute)
	for ready, _ := p.Ready(ctx); !ready; ready, _ = p.Ready(ctx) {
		select {
		case err := <-done:
			done <- err // for the deferred stop
			t.Fatalf("the daemon stopped before it was ready: %v", err)
		case <-readyBy:
			t.Fatal("the daemon was not ready within a minute of Run")
		case <-ctx.Done():
			t.Fatalf("the daemon was not ready in time: %v", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	conn, err := grpc.NewClient(node.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	market := markettypes.NewQueryClient(conn)
	submit := func(window string) uint64 {
		path := filepath.Join(t.TempDir(), "job.yaml")
		if err := os.WriteFile(path, []byte(strings.Replace(jobYAML, "BLOCKS", window, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := node.Tx(ctx, "owner", "market", "submit-job", "--spec", path, "--deposit", "500000000udepin")
		if err != nil || res.Code != 0 {
			t.Fatalf("submit-job: %v %s", err, res.RawLog)
		}
		id, _ := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
		jobID, err := strconv.ParseUint(strings.Trim(id, `"`), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return jobID
	}
	type leasesJSON struct {
		Leases []struct {
			GPUs     []string `json:"gpu_uuids"`
			Problems []string `json:"problems"`
		} `json:"leases"`
	}
	// waitFor polls cond once a block for at most within, then fails saying
	// what did not happen.
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		for !cond() {
			if err := node.WaitBlocks(wctx, 1); err != nil {
				t.Fatalf("%s did not happen within %s: %v", what, within, err)
			}
		}
	}

	// A GPU serving a lease fails: the lease is flagged with the reason.
	submit("4")
	var ls leasesJSON
	waitFor("the lease", time.Minute, func() bool {
		return p.REST(ctx, "/v1/leases", &ls) == nil && len(ls.Leases) == 1
	})
	leased := ls.Leases[0].GPUs[0]
	index := -1
	for i := range 8 {
		if host.UUID(i) == leased {
			index = i
		}
	}
	host.InjectXID(index, 79) // "GPU has fallen off the bus"
	waitFor("the lease being flagged", 30*time.Second, func() bool {
		return p.REST(ctx, "/v1/leases", &ls) == nil && len(ls.Leases[0].Problems) > 0
	})
	if got := ls.Leases[0].Problems[0]; !strings.Contains(got, leased) || !strings.Contains(got, "79") {
		t.Fatalf("lease problem %q: want the GPU and its XID", got)
	}

	// The GPUs an open bid reserved fail: the bid is withdrawn on chain.
	second := submit("40")
	waitFor("the second bid", time.Minute, func() bool {
		res, err := market.Bids(ctx, &markettypes.QueryBidsRequest{JobId: second})
		return err == nil && len(res.Bids) == 1
	})
	for i := range 8 {
		if host.UUID(i) != leased {
			host.InjectDoubleBitECC(i)
		}
	}
	waitFor("the bid's withdrawal", 30*time.Second, func() bool {
		res, err := market.Bids(ctx, &markettypes.QueryBidsRequest{JobId: second})
		return err == nil && len(res.Bids) == 0
	})
	decision := func() string {
		var jobs struct {
			Jobs []struct {
				JobID    string `json:"job_id"`
				Decision string `json:"decision"`
			} `json:"jobs"`
		}
		if err := p.REST(ctx, "/v1/jobs", &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs.Jobs {
			if j.JobID == strconv.FormatUint(second, 10) {
				return j.Decision
			}
		}
		return ""
	}
	waitFor("the sidecar recording the withdrawal", 30*time.Second, func() bool { return strings.HasPrefix(decision(), "bid withdrawn: GPU ") })
	// With every GPU broken, a new job gets no bid.
	third := submit("4")
	waitFor("the third job's auction closing", time.Minute, func() bool {
		res, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: third})
		return err == nil && res.Job.State != markettypes.JOB_STATE_OPEN || err == nil && res.Job.BiddingDeadline < mustHeight(t, ctx, node)
	})
	if res, err := market.Bids(ctx, &markettypes.QueryBidsRequest{JobId: third}); err != nil || len(res.Bids) != 0 {
		t.Fatalf("bids with every GPU broken: %v %v", res, err)
	}
}

func mustHeight(t *testing.T, ctx context.Context, n *localnet.Node) int64 {
	t.Helper()
	h, err := n.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
