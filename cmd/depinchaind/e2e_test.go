package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// The market e2e test drives a real depinchaind (CometBFT + embedded database) through
// the real CLI, gRPC and REST, the way a job owner, a provider and an integrator would.

const jobSpecYAML = `name: tiny-lm
gpu:
  models: [H100-SXM5-80GB, A100-SXM4-80GB]
  min_vram_gib: 40
  per_worker: 2
workers: 1
resources:
  cpu: 8
  memory_gib: 64
  disk_gib: 200
workload:
  kind: reference
total_steps: 1000
checkpoint_every: 100
max_price_per_gpu_hour: 2000000udepin
max_duration: 24h
bidding_window_blocks: 60
`

func startChain(t *testing.T, ctx context.Context) *localnet.Node {
	t.Helper()
	node, err := localnet.Start(ctx, localnet.Options{
		Home:     filepath.Join(t.TempDir(), "home"),
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "provider": 1_000_000_000_000, "stranger": 1_000_000_000_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node.Stop()
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(node.Home, "node.log")); err == nil {
				lines := strings.Split(string(log), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				t.Logf("node log tail:\n%s", strings.Join(lines, "\n"))
			}
		}
	})
	return node
}

func mustAddr(t *testing.T, ctx context.Context, n *localnet.Node, key string) string {
	t.Helper()
	addr, err := n.Address(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func mustTx(t *testing.T, ctx context.Context, n *localnet.Node, from string, args ...string) localnet.TxResult {
	t.Helper()
	res, err := n.Tx(ctx, from, args...)
	if err != nil {
		t.Fatalf("tx %v: %v", args, err)
	}
	if res.Code != 0 {
		t.Fatalf("tx %v failed with code %d: %s", args, res.Code, res.RawLog)
	}
	return res
}

func balance(t *testing.T, ctx context.Context, n *localnet.Node, addr string) string {
	t.Helper()
	var out struct {
		Balance struct{ Amount string } `json:"balance"`
	}
	if err := n.Query(ctx, &out, "bank", "balance", addr, "udepin"); err != nil {
		t.Fatal(err)
	}
	return out.Balance.Amount
}

// snapshot is everything a rejected input must leave untouched.
func snapshot(t *testing.T, ctx context.Context, n *localnet.Node, addrs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString(a + "=" + balance(t, ctx, n, a) + "\n")
	}
	for _, path := range []string{"/depinchain/market/v1/jobs", "/depinchain/market/v1/leases", "/depinchain/stakingext/v1/providers"} {
		body, err := n.REST(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(body)
		b.WriteString("\n")
	}
	return b.String()
}

func TestMarketEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := startChain(t, ctx)
	owner, provider, stranger := mustAddr(t, ctx, n, "owner"), mustAddr(t, ctx, n, "provider"), mustAddr(t, ctx, n, "stranger")

	// A GPU host registers and bonds: 8 H100s need 8 × min_bond_per_gpu, plus room for collateral.
	mustTx(t, ctx, n, "provider", "stakingext", "register-provider", "gpu-farm-1", "https://gpu1.example.com:8443", "eu-west",
		"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
	provJSON, err := n.REST(ctx, "/depinchain/stakingext/v1/providers/"+provider)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(provJSON), `"PROVIDER_STATUS_ACTIVE"`) || !strings.Contains(string(provJSON), "H100-SXM5-80GB") {
		t.Fatalf("provider over REST: %s", provJSON)
	}

	// The owner submits a job from YAML.
	specPath := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(specPath, []byte(jobSpecYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustTx(t, ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "50000000udepin")
	if _, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id"); !ok {
		t.Fatalf("no EventJobCreated in %+v", res.Events)
	}

	var job struct {
		Job struct {
			ID              string `json:"id"`
			State           string `json:"state"`
			BiddingDeadline string `json:"bidding_deadline"`
			Escrow          struct{ Amount string }
		} `json:"job"`
	}
	if err := n.Query(ctx, &job, "market", "job", "1"); err != nil {
		t.Fatal(err)
	}
	if job.Job.State != "JOB_STATE_OPEN" || job.Job.Escrow.Amount != "50000000" {
		t.Fatalf("job after submit: %+v", job.Job)
	}

	// The provider bids under the ceiling.
	res = mustTx(t, ctx, n, "provider", "market", "place-bid", "1", "1500000udepin", "--steps-per-hour", "1000")
	if _, ok := res.Attr("depinchain.market.v1.EventBidPlaced", "provider"); !ok {
		t.Fatalf("no EventBidPlaced in %+v", res.Events)
	}
	bidsJSON, err := n.REST(ctx, "/depinchain/market/v1/jobs/1/bids")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(bidsJSON), provider) || !strings.Contains(string(bidsJSON), "1500000") {
		t.Fatalf("bids over REST: %s", bidsJSON)
	}

	t.Run("bad inputs are rejected with a clear message and change nothing", func(t *testing.T) {
		before := snapshot(t, ctx, n, owner, provider, stranger)
		cases := []struct {
			name string
			from string
			args []string
			file string
			want string
		}{
			{"malformed YAML", "owner", []string{"market", "submit-job", "--deposit", "1000000udepin"}, "name: [unclosed\n", "job spec"},
			{"unknown GPU model field", "owner", []string{"market", "submit-job", "--deposit", "1000000udepin"},
				strings.Replace(jobSpecYAML, "  models:", "  gpu_model: H100\n  models:", 1), `unknown field "gpu_model"`},
			{"missing field", "owner", []string{"market", "submit-job", "--deposit", "1000000udepin"},
				strings.Replace(jobSpecYAML, "total_steps: 1000\n", "", 1), "total_steps: required field is missing"},
			{"zero deposit", "owner", []string{"market", "submit-job", "--deposit", "0udepin"}, jobSpecYAML, "--deposit: must be positive"},
			{"bid above max price", "provider", []string{"market", "place-bid", "1", "2500000udepin", "--steps-per-hour", "1000"}, "", "above the job's maximum"},
			{"bid without a rate", "provider", []string{"market", "place-bid", "1", "1000000udepin"}, "", "steps_per_hour is 0"},
			{"bid whose rate cannot meet max_duration", "provider", []string{"market", "place-bid", "1", "1000000udepin", "--steps-per-hour", "41"}, "",
				"41 steps per hour complete 984 steps in max_duration 24h0m0s, and 1000 steps remain"},
			{"bid by an unbonded provider", "stranger", []string{"market", "place-bid", "1", "1000000udepin", "--steps-per-hour", "1000"}, "", "provider not found"},
			{"cancel by a stranger", "stranger", []string{"market", "cancel-job", "1"}, "", "not the job owner"},
		}
		for _, tc := range cases {
			args := tc.args
			if tc.file != "" {
				p := filepath.Join(t.TempDir(), "bad.yaml")
				if err := os.WriteFile(p, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--spec", p)
			}
			res, err := n.Tx(ctx, tc.from, args...)
			msg := ""
			if err != nil {
				msg = err.Error()
			} else if res.Code != 0 {
				msg = res.RawLog
			} else {
				t.Fatalf("%s: accepted, want rejection", tc.name)
			}
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("%s: error does not say %q:\n%s", tc.name, tc.want, msg)
			}
		}
		if after := snapshot(t, ctx, n, owner, provider, stranger); after != before {
			t.Fatalf("rejected inputs changed state:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})

	// The auction closes at the bidding deadline; the cheapest eligible bid wins.
	deadline := mustInt(t, job.Job.BiddingDeadline)
	if err := n.WaitHeight(ctx, deadline+1); err != nil {
		t.Fatal(err)
	}
	var lease struct {
		Lease struct {
			ID           string `json:"id"`
			State        string `json:"state"`
			Provider     string `json:"provider"`
			Pending      struct{ Amount string }
			StepsPerHour string `json:"steps_per_hour"`
			PricePerStep string `json:"price_per_step"`
		} `json:"lease"`
	}
	if err := n.Query(ctx, &lease, "market", "lease", "1"); err != nil {
		t.Fatal(err)
	}
	// The lease records the committed rate and its price per step: 1500000 × 2 GPUs ÷ 1000.
	if lease.Lease.State != "LEASE_STATE_ACTIVE" || lease.Lease.Provider != provider ||
		lease.Lease.StepsPerHour != "1000" || lease.Lease.PricePerStep != "3000.000000000000000000" {
		t.Fatalf("lease after auction: %+v", lease.Lease)
	}
	// Pay is for steps, not time: blocks pass without a checkpoint and nothing accrues.
	if err := n.WaitBlocks(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := n.Query(ctx, &lease, "market", "lease", "1"); err != nil {
		t.Fatal(err)
	}
	if lease.Lease.Pending.Amount != "0" {
		t.Fatalf("pending pay without a checkpoint: %+v", lease.Lease)
	}

	// The same objects over gRPC, as an integrator reads them.
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mq := markettypes.NewQueryClient(conn)
	gl, err := mq.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: 1})
	if err != nil {
		t.Fatal(err)
	}
	if gl.Lease.Provider != provider || gl.Lease.StepsPerHour != 1000 || !gl.Lease.Pending.IsZero() {
		t.Fatalf("lease over gRPC: %+v", gl.Lease)
	}
	gj, err := mq.Jobs(ctx, &markettypes.QueryJobsRequest{Owner: owner, State: markettypes.JOB_STATE_LEASED})
	if err != nil {
		t.Fatal(err)
	}
	if len(gj.Jobs) != 1 || gj.Jobs[0].Id != 1 {
		t.Fatalf("jobs over gRPC: %+v", gj.Jobs)
	}
	gp, err := stakingexttypes.NewQueryClient(conn).Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: provider})
	if err != nil {
		t.Fatal(err)
	}
	if !gp.Provider.Locked.IsPositive() {
		t.Fatalf("winner has no collateral locked: %+v", gp.Provider)
	}

	// And over REST.
	escrowJSON, err := n.REST(ctx, "/depinchain/market/v1/jobs/1/escrow")
	if err != nil {
		t.Fatal(err)
	}
	var escrow struct {
		Deposited, Unspent, Pending struct{ Amount string }
	}
	if err := json.Unmarshal(escrowJSON, &escrow); err != nil {
		t.Fatal(err)
	}
	if mustInt(t, escrow.Unspent.Amount)+mustInt(t, escrow.Pending.Amount) != mustInt(t, escrow.Deposited.Amount) {
		t.Fatalf("escrow does not add up: %s", escrowJSON)
	}
	if _, err := n.REST(ctx, "/depinchain/market/v1/leases?provider="+provider+"&active_only=true"); err != nil {
		t.Fatal(err)
	}

	// The owner cancels: unspent escrow comes back at once.
	ownerBefore := mustInt(t, balance(t, ctx, n, owner))
	res = mustTx(t, ctx, n, "owner", "market", "cancel-job", "1")
	if err := n.Query(ctx, &job, "market", "job", "1"); err != nil {
		t.Fatal(err)
	}
	if job.Job.State != "JOB_STATE_CANCELLED" {
		t.Fatalf("job after cancel: %+v", job.Job)
	}
	if got := mustInt(t, balance(t, ctx, n, owner)); got <= ownerBefore {
		t.Fatalf("owner balance %d did not grow from %d after cancel", got, ownerBefore)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not an integer: %q", s)
		}
		v = v*10 + int64(c-'0')
	}
	return v
}
