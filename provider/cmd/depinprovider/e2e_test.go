package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdkmath "cosmossdk.io/math"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// world is a local chain with a job owner and one provider whose sidecar
// runs as a real depinprovider process.
type world struct {
	t        testing.TB
	ctx      context.Context
	node     *localnet.Node
	provider *sidecar.Provider
	market   markettypes.QueryClient
	verify   verifytypes.QueryClient
}

const h100Price = 2_000_000 // udepin per GPU-hour

// challengeWindow is x/verify's challenge window in the tests' chains; the
// lying-challenger test widens it to have time to lie.
var challengeWindow = "6"

// rateCheckInterval, when set, is x/market's rate_check_interval in the tests'
// chains (the pay-for-work test checks rates within seconds, not hours).
var rateCheckInterval = ""

func newWorld(t testing.TB, timeout time.Duration, opts sidecar.Options) *world {
	t.Helper()
	return newWorldOpts(t, timeout, func(*localnet.Node) sidecar.Options { return opts })
}

func newWorldOpts(t testing.TB, timeout time.Duration, providerOpts func(*localnet.Node) sidecar.Options) *world {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real node and a real sidecar")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	node, err := localnet.Start(ctx, localnet.Options{
		Home:     filepath.Join(t.TempDir(), "chain"),
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "operator": 1_000_000_000_000, "hot": 1_000_000_000, "liar": 1_000_000_000_000},
		Genesis: func(app map[string]any) error {
			params := app["verify"].(map[string]any)["params"].(map[string]any)
			params["challenge_window"] = challengeWindow
			params["move_timeout"] = "20"
			if rateCheckInterval != "" {
				market := app["market"].(map[string]any)["params"].(map[string]any)
				market["rate_check_interval"] = rateCheckInterval
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	opts := providerOpts(node)
	opts.Home = filepath.Join(t.TempDir(), "provider")
	opts.Operator, opts.HotKey, opts.Bond = "operator", "hot", "100000000000udepin"
	if opts.Prices == nil {
		opts.Prices = map[string]uint64{"H100-SXM5-80GB": h100Price}
	}
	if testing.Verbose() {
		opts.Log = prefixWriter{os.Stderr, "    sidecar| "}
	}
	provider, err := sidecar.Setup(ctx, node, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(provider.Stop)
	conn, err := grpc.NewClient(node.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &world{t: t, ctx: ctx, node: node, provider: provider,
		market: markettypes.NewQueryClient(conn), verify: verifytypes.NewQueryClient(conn)}
}

type prefixWriter struct {
	w      *os.File
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(string(b), "\n")
	var out strings.Builder
	for _, l := range lines {
		if l != "" {
			out.WriteString(p.prefix + l)
		}
	}
	_, err := p.w.WriteString(out.String())
	return len(b), err
}

// submitJob submits a job from YAML and returns its id.
func (w *world) submitJob(yaml, deposit string) uint64 {
	w.t.Helper()
	path := filepath.Join(w.t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		w.t.Fatal(err)
	}
	res, err := w.node.Tx(w.ctx, "owner", "market", "submit-job", "--spec", path, "--deposit", deposit)
	if err != nil || res.Code != 0 {
		w.t.Fatalf("submit-job: %v %s", err, res.RawLog)
	}
	id, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	if !ok {
		w.t.Fatalf("no EventJobCreated in %+v", res.Events)
	}
	var jobID uint64
	fmt.Sscan(strings.Trim(id, `"`), &jobID)
	return jobID
}

// eventually polls cond once a block until it holds, for at most within
// (and never past the test's own deadline); then it fails, saying what did
// not happen, with the tail of the sidecar's log.
func (w *world) eventually(what string, within time.Duration, cond func() bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, within)
	defer cancel()
	start := time.Now()
	for !cond() {
		if err := w.node.WaitBlocks(ctx, 1); err != nil {
			w.t.Fatalf("%s did not happen within %s (waited %s: %v)\nsidecar log:\n%s",
				what, within, time.Since(start).Round(time.Second), err, readTail(w.provider.LogPath()))
		}
	}
}

func (w *world) job(id uint64) markettypes.Job {
	w.t.Helper()
	res, err := w.market.Job(w.ctx, &markettypes.QueryJobRequest{JobId: id})
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Job
}

func (w *world) leasesOf(jobID uint64) []markettypes.Lease {
	w.t.Helper()
	res, err := w.market.Leases(w.ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Leases
}

// waitPaid waits until the job completed and every checkpoint is final and
// withdrawn by the sidecar, and returns the job's leases.
func (w *world) waitPaid(jobID uint64) []markettypes.Lease {
	w.t.Helper()
	return w.waitPaidTo(jobID, "")
}

// waitPaidTo is waitPaid for the leases of one provider (every lease when
// provider is empty).
func (w *world) waitPaidTo(jobID uint64, provider string) []markettypes.Lease {
	w.t.Helper()
	w.eventually(fmt.Sprintf("job %d completing and its earnings being withdrawn", jobID), 4*time.Minute, func() bool {
		if w.job(jobID).State != markettypes.JOB_STATE_COMPLETED {
			return false
		}
		for _, l := range w.leasesOf(jobID) {
			if provider != "" && l.Provider != provider {
				continue
			}
			if !l.Withdrawable.IsZero() || !l.Pending.IsZero() || l.Withdrawn.IsZero() {
				return false
			}
		}
		return true
	})
	return w.leasesOf(jobID)
}

func readTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

const referenceJobYAML = `name: tiny-lm
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
bidding_window_blocks: 8
`

// A job nobody's inventory can serve: the simulated host has only H100s.
const b200JobYAML = `name: needs-b200
gpu:
  models: [B200-192GB]
  min_vram_gib: 180
  per_worker: 1
workload:
  kind: reference
total_steps: 16
checkpoint_every: 16
max_price_per_gpu_hour: 3000000udepin
max_duration: 1h
bidding_window_blocks: 4
`

type statusJSON struct {
	CursorHeight int64 `json:"cursor_height,string"`
	Ready        bool  `json:"ready"`
}

type leasesJSON struct {
	Leases []struct {
		LeaseID     string   `json:"lease_id"`
		Status      string   `json:"status"`
		CloseReason string   `json:"close_reason"`
		Runtime     string   `json:"runtime"`
		Problems    []string `json:"problems"`
	} `json:"leases"`
}

type checkpointsJSON struct {
	Checkpoints []struct {
		Index  string `json:"index"`
		Status string `json:"status"`
	} `json:"checkpoints"`
}

type jobsJSON struct {
	Jobs []struct {
		JobID      string `json:"job_id"`
		SeenHeight string `json:"seen_height"`
		Decision   string `json:"decision"`
	} `json:"jobs"`
}

// TestSidecarTrainsAndGetsPaid is the whole happy path with real processes:
// a job submitted from YAML gets the sidecar's bid within a block or two,
// the lease is trained on the reference runtime, every checkpoint is
// committed, finalized and paid, and the earnings are withdrawn — while a
// job the inventory cannot serve gets no bid, and says why.
func TestSidecarTrainsAndGetsPaid(t *testing.T) {
	w := newWorld(t, 6*time.Minute, sidecar.Options{})
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	b200 := w.submitJob(b200JobYAML, "100000000udepin")
	jobID := w.submitJob(referenceJobYAML, "500000000udepin")
	created := w.job(jobID).CreatedHeight

	var bidHeight int64
	w.eventually("the sidecar's bid", time.Minute, func() bool {
		res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: jobID})
		if err == nil && len(res.Bids) == 1 {
			bidHeight = res.Bids[0].CreatedHeight
			if res.Bids[0].Provider != w.provider.Operator || !res.Bids[0].PricePerGpuHour.Amount.Equal(sdkInt(h100Price)) {
				t.Fatalf("bid %+v, want the operator's at the table price", res.Bids[0])
			}
			return true
		}
		if w.job(jobID).State != markettypes.JOB_STATE_OPEN {
			t.Fatalf("job %d left the auction with no bid seen", jobID)
		}
		return false
	})
	if bidHeight == 0 || bidHeight-created > 3 {
		t.Fatalf("job created at %d, bid at %d: want a bid within a few blocks", created, bidHeight)
	}
	t.Logf("job %d created at height %d, bid landed at %d", jobID, created, bidHeight)

	leases := w.waitPaid(jobID)
	if len(leases) != 1 || leases[0].Provider != w.provider.Operator {
		t.Fatalf("leases %+v", leases)
	}
	lease := leases[0]
	if lease.CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("lease closed %s", lease.CloseReason)
	}
	cps, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil {
		t.Fatal(err)
	}
	if len(cps.Checkpoints) != 4 {
		t.Fatalf("%d checkpoints on chain, want 4 (64 steps every 16)", len(cps.Checkpoints))
	}
	claimed := sdkInt(0)
	for _, cp := range cps.Checkpoints {
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL || !strings.HasPrefix(cp.Uri, w.provider.Public+"/checkpoints/") {
			t.Fatalf("checkpoint %d: %s at %s", cp.Index, cp.Status, cp.Uri)
		}
		claimed = claimed.Add(cp.Claim.Amount)
	}
	// Every udepin the final checkpoints released reached the operator.
	if !lease.Withdrawn.Amount.Equal(claimed) || !claimed.IsPositive() {
		t.Fatalf("withdrawn %s, final checkpoints claimed %s", lease.Withdrawn, claimed)
	}

	// The owner gets the model (no custody: from the trainer's server, which serves
	// states only to signed requests of the job's owner and the bonded).
	model := filepath.Join(t.TempDir(), "model")
	if _, err := w.node.Exec(w.ctx, "job", "fetch", fmt.Sprint(jobID), "--out", model, "--from", "owner", "--keyring-backend", "test", "--grpc-addr", w.node.GRPC); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(model, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if root, last := exact.StateRoot(state), cps.Checkpoints[len(cps.Checkpoints)-1]; !bytes.Equal(root[:], last.StateRoot) {
		t.Fatalf("the fetched state is not the final checkpoint's (root %x)", last.StateRoot)
	}

	// The unservable job got no bid, and the sidecar says why.
	if res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: b200}); err != nil || len(res.Bids) != 0 {
		t.Fatalf("bids on the B200 job: %v %v", res, err)
	}
	var jobs jobsJSON
	if err := w.provider.REST(w.ctx, "/v1/jobs", &jobs); err != nil {
		t.Fatal(err)
	}
	decisions := map[string]string{}
	for _, j := range jobs.Jobs {
		decisions[j.JobID] = j.Decision
	}
	if d := decisions[fmt.Sprint(b200)]; !strings.HasPrefix(d, "skip: no 1 free healthy GPUs of models [B200-192GB]") {
		t.Fatalf("decision on the B200 job: %q", d)
	}
	if d := decisions[fmt.Sprint(jobID)]; !strings.HasPrefix(d, "bid 2000000udepin") {
		t.Fatalf("decision on job %d: %q", jobID, d)
	}

	// The status API and metrics tell the same story.
	var ls leasesJSON
	if err := w.provider.REST(w.ctx, "/v1/leases", &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Leases) != 1 || ls.Leases[0].Status != "closed" || ls.Leases[0].CloseReason != "LEASE_CLOSE_REASON_COMPLETED" || ls.Leases[0].Runtime != "reference" {
		t.Fatalf("leases over REST: %+v", ls)
	}
	var cj checkpointsJSON
	if err := w.provider.REST(w.ctx, fmt.Sprintf("/v1/leases/%d/checkpoints", lease.Id), &cj); err != nil {
		t.Fatal(err)
	}
	if len(cj.Checkpoints) != 4 {
		t.Fatalf("checkpoints over REST: %+v", cj)
	}
	for _, c := range cj.Checkpoints {
		if c.Status != "finalized" {
			t.Fatalf("checkpoint %s is %s in the sidecar", c.Index, c.Status)
		}
	}
	var metrics string
	if err := w.provider.REST(w.ctx, "/metrics", &metrics); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`DCGM_FI_DEV_GPU_TEMP{`, `depinprovider_checkpoints_total{status="finalized"} 4`,
		`depinprovider_bids_total{result="placed"} 1`, `depinprovider_bids_total{result="skipped"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	out, err := w.provider.Exec(w.ctx, "status")
	if err != nil || !strings.Contains(out, "ready") || !strings.Contains(out, "H100-SXM5-80GB") {
		t.Fatalf("depinprovider status: %v\n%s", err, out)
	}
}

func sdkInt(v uint64) sdkmath.Int { return sdkmath.NewIntFromUint64(v) }

func (w *world) balanceOf(addr string) int64 {
	w.t.Helper()
	var out struct {
		Balance struct {
			Amount string `json:"amount"`
		} `json:"balance"`
	}
	if err := w.node.Query(w.ctx, &out, "bank", "balance", addr, "udepin"); err != nil {
		w.t.Fatal(err)
	}
	v, _ := strconv.ParseInt(out.Balance.Amount, 10, 64)
	return v
}
