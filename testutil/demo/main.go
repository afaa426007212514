// Command demo starts a single-node depinchain in ./.demo/ and tells the story of one
// GPU training job as it happens: a provider registers and bonds, an owner submits a
// job from YAML, the provider bids, the auction closes at its deadline, payment accrues
// block by block into the lease, the same lease is read over REST and gRPC, and the
// owner cancels and is refunded. `make demo` runs it; `make demo KEEP=1` (-keep) leaves
// the chain running until Ctrl-C.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

const (
	chainID   = "depin-demo"
	blockTime = time.Second
	denom     = "udepin"

	// The provider: one host with eight H100s, bonding 100 DEPIN.
	moniker      = "gpu-farm-1"
	endpoint     = "https://gpu1.example.com:8443"
	region       = "eu-west"
	gpuModel     = "H100-SXM5-80GB"
	gpuVRAMMiB   = 81920
	gpuCount     = 8
	providerBond = "100000000udepin"

	deposit  = "50000000udepin" // 50 DEPIN escrowed by the owner
	bidPrice = "1500000udepin"  // 1.5 DEPIN per GPU-hour

	accrualBlocks = 6
)

// jobYAML is the spec the owner submits. The reference workload is the deterministic
// trainer the chain can re-execute one step of, so its checkpoints can be disputed.
const jobYAML = `# A small pre-training run on one 8-GPU node.
name: tiny-lm-pretrain
gpu:
  models: [H100-SXM5-80GB, H100-NVL-94GB]
  min_vram_gib: 80
  per_worker: 8
workers: 1
resources:
  cpu: 32
  memory_gib: 512
  disk_gib: 2000
workload:
  kind: reference
total_steps: 10000
checkpoint_every: 500
max_price_per_gpu_hour: 2000000udepin
max_duration: 24h
bidding_window_blocks: 12
`

func main() {
	keep := flag.Bool("keep", false, "leave the chain running after the story, until Ctrl-C")
	flag.Parse()
	os.Exit(run(*keep))
}

func run(keep bool) int {
	root, err := localnet.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	// The binary path may be relative to where `make` or `go run` was started.
	if bin := os.Getenv("DEPINCHAIND_BINARY"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			return 1
		}
		if _, err := os.Stat(abs); err != nil {
			fmt.Fprintf(os.Stderr, "demo: DEPINCHAIND_BINARY=%s: %v (run `make build` first)\n", bin, err)
			return 1
		}
		os.Setenv("DEPINCHAIND_BINARY", abs)
	}
	demoDir := filepath.Join(root, ".demo")
	if err := os.RemoveAll(demoDir); err != nil {
		fmt.Fprintln(os.Stderr, "demo: clearing .demo:", err)
		return 1
	}
	if err := os.MkdirAll(demoDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	storyLog, err := os.Create(filepath.Join(demoDir, "demo.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer storyLog.Close()
	s := &story{out: io.MultiWriter(os.Stdout, storyLog), root: root}

	// Ctrl-C (or SIGTERM) cancels the story; the node is stopped on every way out.
	// Signals stay caught until the node is down, so a second Ctrl-C cannot orphan it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		first := true
		for range sigs {
			if first {
				fmt.Fprintln(os.Stdout)
				s.say("Interrupted: stopping.")
				cancel()
				first = false
			} else {
				s.say("Still stopping the node, one moment...")
			}
		}
	}()

	fmt.Fprintln(s.out, "depinchain demo: one GPU training job on a local chain, told as it happens")
	home := filepath.Join(demoDir, "node")
	s.say("Starting a fresh single-node chain %q in %s (%s blocks)...", chainID, s.rel(home), blockTime)
	node, err := localnet.Start(ctx, localnet.Options{
		Home:      home,
		ChainID:   chainID,
		Accounts:  map[string]int64{"owner": 1_000_000_000, "provider": 1_000_000_000},
		BlockTime: blockTime,
	})
	if err != nil {
		return s.fail(ctx, err, home)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			s.say("Stopping the node...")
			node.Stop()
			s.say("Node stopped.")
		}
	}
	defer stop()

	if err := tell(ctx, s, node); err != nil {
		return s.fail(ctx, err, home)
	}

	if keep {
		s.keepRunning(ctx, node)
	}
	stop()
	s.blank()
	s.say("Everything is left in %s for you to look at:", s.rel(demoDir))
	s.detail("node log      %s", s.rel(filepath.Join(home, "node.log")))
	s.detail("this story    %s", s.rel(filepath.Join(demoDir, "demo.log")))
	s.detail("job spec      %s", s.rel(filepath.Join(demoDir, "job.yaml")))
	s.detail("chain home    %s (config, data, test keyring)", s.rel(home))
	s.say("The next run of the demo starts from scratch and replaces it.")
	return 0
}

// tell runs the scenario against a started node, narrating every step.
func tell(ctx context.Context, s *story, n *localnet.Node) error {
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	mq := markettypes.NewQueryClient(conn)
	owner, err := n.Address(ctx, "owner")
	if err != nil {
		return err
	}
	provider, err := n.Address(ctx, "provider")
	if err != nil {
		return err
	}
	h, err := n.Height(ctx)
	if err != nil {
		return err
	}
	s.say("The chain is producing blocks (height %d). Genesis funded two accounts with 1,000 DEPIN each:", h)
	s.detail("owner     %s  (submits and pays for the job)", owner)
	s.detail("provider  %s  (runs the GPUs)", provider)
	s.detail("1 DEPIN = 1,000,000 udepin; this local chain charges no fees")

	// 1. The provider registers.
	s.section("1. A GPU provider joins")
	gpus := fmt.Sprintf(`{"model":"%s","vram_mib":%d,"count":%d}`, gpuModel, gpuVRAMMiB, gpuCount)
	s.say("%q in %s registers %d x %s (%d GiB each) and bonds %s.", moniker, region, gpuCount, gpuModel, gpuVRAMMiB/1024, depin(providerBond))
	if _, err := s.tx(ctx, n, "provider", "stakingext", "register-provider", moniker, endpoint, region, providerBond, "--gpus", gpus); err != nil {
		return err
	}
	prov, err := queryProvider(ctx, n, provider)
	if err != nil {
		return err
	}
	s.say("The provider record on chain:")
	s.detail("status      %s", strings.TrimPrefix(prov.Status, "PROVIDER_STATUS_"))
	for _, g := range prov.GPUs {
		s.detail("GPUs        %s x %s, %s MiB VRAM each", or0(string(g.Count)), g.Model, or0(g.VRAMMiB))
	}
	s.detail("endpoint    %s (where challengers will fetch checkpoints and proofs)", prov.Endpoint)
	s.detail("bond        %s, of which %s locked as collateral", depinCoin(prov.Bond), depinCoin(prov.Locked))
	s.detail("reputation  %s leases completed, %s failed, %s slashes", or0(prov.Reputation.Completed), or0(prov.Reputation.Failed), or0(prov.Reputation.Slashes))

	// 2. The owner submits a job.
	s.section("2. A job owner submits a training job")
	specPath := filepath.Join(s.root, ".demo", "job.yaml")
	if err := os.WriteFile(specPath, []byte(jobYAML), 0o644); err != nil {
		return err
	}
	s.say("The owner describes the job in %s:", s.rel(specPath))
	s.block(jobYAML)
	s.say("...and submits it, escrowing %s:", depin(deposit))
	res, err := s.tx(ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", deposit)
	if err != nil {
		return err
	}
	jobID, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	if !ok {
		return fmt.Errorf("submit-job: no EventJobCreated in the transaction's events")
	}
	jobID = strings.Trim(jobID, `"`)
	s.say("EventJobCreated announces job %s to every provider sidecar.", jobID)
	job, err := queryJob(ctx, n, jobID)
	if err != nil {
		return err
	}
	deadline := mustInt(job.BiddingDeadline)
	s.say("Job %s on chain:", jobID)
	s.detail("state             %s", strings.TrimPrefix(job.State, "JOB_STATE_"))
	s.detail("escrow            %s (deposited %s)", depinCoin(job.Escrow), depinCoin(job.Deposited))
	s.detail("bidding deadline  end of block %d (submitted in block %d + %s-block window)", deadline, res.Height, job.Spec.BiddingWindowBlocks)
	s.detail("job seed          %s... (SHA-256 over the including block's hash: fixes data order)", seedHex(job.Seed))
	// The same parser the CLI uses, and the chain's params, give the collateral a winner locks.
	spec, err := markettypes.ParseJobSpecYAML([]byte(jobYAML))
	if err != nil {
		return err
	}
	params, err := mq.Params(ctx, &markettypes.QueryParamsRequest{})
	if err != nil {
		return err
	}
	s.detail("collateral        a winner locks %s of its bond: collateral_ratio %s of the", depin(spec.RequiredCollateral(params.Params).String()), strings.TrimRight(params.Params.CollateralRatio.String(), "0"))
	s.detail("                  lease's maximum value (max price x %d GPUs x %s = %s)", spec.Gpu.PerWorker, shortDuration(spec.MaxDuration), depin(spec.MaxLeaseValue().String()))

	// 3. The provider bids.
	s.section("3. The provider bids")
	s.say("The provider's GPUs satisfy the spec; it offers %s per GPU-hour (the ceiling is %s).", depin(bidPrice), depinCoin(job.Spec.MaxPrice))
	if _, err := s.tx(ctx, n, "provider", "market", "place-bid", jobID, bidPrice); err != nil {
		return err
	}
	var bids struct {
		Bids []struct {
			Provider      string `json:"provider"`
			Price         coin   `json:"price_per_gpu_hour"`
			CreatedHeight string `json:"created_height"`
			Sequence      string `json:"sequence"`
		} `json:"bids"`
	}
	if err := n.Query(ctx, &bids, "market", "bids", jobID); err != nil {
		return err
	}
	s.say("Bids on job %s:", jobID)
	for _, b := range bids.Bids {
		name := b.Provider
		if b.Provider == provider {
			name = moniker
		}
		s.detail("%-12s %s per GPU-hour  (placed in block %s, bid #%s)", name, depinCoin(b.Price), b.CreatedHeight, b.Sequence)
	}

	// 4. The auction closes at the deadline, in EndBlock.
	s.section("4. The auction closes at the bidding deadline")
	s.say("No transaction closes the auction: EndBlock of block %d does, from the deadline index.", deadline)
	last := int64(0)
	for {
		h, err := fastHeight(ctx, n)
		if err != nil {
			return err
		}
		if h != last {
			last = h
			if h >= deadline {
				s.say("  block %d committed: bidding is over.", h)
				break
			}
			s.say("  block %d committed, %d to go", h, deadline-h)
		}
		if err := sleep(ctx, 150*time.Millisecond); err != nil {
			return err
		}
	}
	var leases struct {
		Leases []lease `json:"leases"`
	}
	if err := n.Query(ctx, &leases, "market", "leases", "--job-id", jobID); err != nil {
		return err
	}
	if len(leases.Leases) == 0 {
		return fmt.Errorf("the auction of job %s created no lease", jobID)
	}
	l := leases.Leases[0]
	if job, err = queryJob(ctx, n, jobID); err != nil {
		return err
	}
	if prov, err = queryProvider(ctx, n, provider); err != nil {
		return err
	}
	rate := new(big.Int).Mul(bigInt(l.Price.Amount), big.NewInt(mustInt(string(l.GPUs))))
	s.say("The cheapest eligible bid won. Lease %s:", l.ID)
	s.detail("job / worker      job %s, worker %s; the job is now %s", l.JobID, or0(string(l.Worker)), strings.TrimPrefix(job.State, "JOB_STATE_"))
	s.detail("provider          %s (%s)", moniker, l.Provider)
	s.detail("price             %s per GPU-hour x %s GPUs = %s per hour", depinCoin(l.Price), l.GPUs, depin(rate.String()+denom))
	s.detail("collateral        %s locked from the bond (bond %s, locked %s)", depinCoin(l.Collateral), depinCoin(prov.Bond), depinCoin(prov.Locked))
	s.detail("started           block %s at %s", l.StartHeight, clock(l.StartTime))
	s.detail("next checkpoint   due by the end of block %s", l.CheckpointDeadline)
	if t, err := time.Parse(time.RFC3339Nano, job.TimeDeadline); err == nil && t.Year() > 1970 {
		s.detail("escrow runs dry   at %s (in %s at this rate): that one moment is in the", clock(job.TimeDeadline), shortDuration(time.Until(t)))
		s.detail("                  time-deadline index; no block touches the lease before then")
	}

	// 5. Payment accrues, settled lazily.
	s.section("5. Payment accrues block by block")
	s.say("Nothing is written per block: a lease keeps its rate and start time, and every read")
	s.detail("settles it up to the latest block time. Lease %s and the job's escrow, read over gRPC", l.ID)
	s.detail("after each block (amounts in DEPIN):")
	leaseID := uint64(mustInt(l.ID))
	jobNum := uint64(mustInt(jobID))
	s.detail("%-7s %-14s %-24s %s", "block", "block time", "pending (+this block)", "escrow left")
	last = 0
	var prevPending *big.Int
	for i := 0; i < accrualBlocks; {
		h, err := fastHeight(ctx, n)
		if err != nil {
			return err
		}
		if h == last {
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		var md metadata.MD
		lr, err := mq.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: leaseID}, grpc.Header(&md))
		if err != nil {
			return err
		}
		er, err := mq.Escrow(ctx, &markettypes.QueryEscrowRequest{JobId: jobNum})
		if err != nil {
			return err
		}
		at := h
		if v := md.Get("x-cosmos-block-height"); len(v) > 0 {
			fmt.Sscan(v[0], &at)
		}
		if at == last {
			continue
		}
		last = at
		pending := lr.Lease.Pending.Amount.BigInt()
		delta := ""
		if prevPending != nil {
			delta = "(+" + fixed6(new(big.Int).Sub(pending, prevPending)) + ")"
		}
		prevPending = pending
		s.detail("%-7d %-14s %-24s %s", at, lr.Lease.SettledAt.Local().Format("15:04:05.000"),
			fixed6(pending)+" "+delta, fixed6(er.Unspent.Amount.BigInt()))
		i++
	}
	s.say("Pending is earned but not yet payable: it becomes withdrawable only once a final")
	s.detail("checkpoint covers it (committed 0, withdrawable 0 so far).")

	// 6. The same lease over REST and gRPC.
	s.section("6. The same lease over REST and gRPC")
	path := "/depinchain/market/v1/leases/" + l.ID
	body, err := n.REST(ctx, path)
	if err != nil {
		return err
	}
	s.say("REST (grpc-gateway): GET %s%s", n.API, path)
	excerpt, err := leaseExcerpt(body)
	if err != nil {
		return err
	}
	s.block(excerpt)
	s.say("gRPC: the same query is depinchain.market.v1.Query/Lease at %s (section 5 used it).", n.GRPC)
	s.detail("Every query of every module is on gRPC, and on REST under /depinchain/<module>/v1/...")

	// 7. The owner cancels.
	s.section("7. The owner cancels the job")
	before, err := balance(ctx, n, owner)
	if err != nil {
		return err
	}
	s.say("The owner's balance is %s. The owner cancels job %s:", depin(before.String()+denom), jobID)
	res, err = s.tx(ctx, n, "owner", "market", "cancel-job", jobID)
	if err != nil {
		return err
	}
	after, err := balance(ctx, n, owner)
	if err != nil {
		return err
	}
	var closedLease, closedJob struct {
		Refunded coin `json:"refunded"`
	}
	if v, ok := res.Attr("depinchain.market.v1.EventLeaseClosed", "refunded"); ok {
		_ = json.Unmarshal([]byte(v), &closedLease.Refunded)
	}
	if v, ok := res.Attr("depinchain.market.v1.EventJobClosed", "refunded"); ok {
		_ = json.Unmarshal([]byte(v), &closedJob.Refunded)
	}
	if job, err = queryJob(ctx, n, jobID); err != nil {
		return err
	}
	var lr struct {
		Lease lease `json:"lease"`
	}
	if err := n.Query(ctx, &lr, "market", "lease", l.ID); err != nil {
		return err
	}
	if prov, err = queryProvider(ctx, n, provider); err != nil {
		return err
	}
	s.say("The lease was settled one last time and closed. No checkpoint had claimed its pending")
	s.detail("%s, so that went back to the escrow, and the whole escrow to the owner:", depinCoin(closedLease.Refunded))
	s.detail("job %s        %s (%s)", jobID, strings.TrimPrefix(job.State, "JOB_STATE_"), job.CloseReason)
	s.detail("lease %s      %s, reason %s", l.ID, strings.TrimPrefix(lr.Lease.State, "LEASE_STATE_"), strings.TrimPrefix(lr.Lease.CloseReason, "LEASE_CLOSE_REASON_"))
	s.detail("refunded     %s (EventJobClosed)", depinCoin(closedJob.Refunded))
	s.detail("owner        %s -> %s (+%s)", depin(before.String()+denom), depin(after.String()+denom), depin(new(big.Int).Sub(after, before).String()+denom))
	s.detail("provider     collateral released: bond %s, locked %s", depinCoin(prov.Bond), depinCoin(prov.Locked))
	s.blank()
	s.say("Next (not in this demo): the provider posts Merkle-rooted checkpoints to x/verify; once one is final after its challenge window, the pending payment it covers is released.")
	return nil
}

// keepRunning prints how to reach the chain and waits for Ctrl-C or the node's end.
func (s *story) keepRunning(ctx context.Context, n *localnet.Node) {
	bin := n.Binary
	if rel, err := filepath.Rel(s.root, bin); err == nil && !strings.HasPrefix(rel, "..") {
		bin = rel
	}
	home := s.rel(n.Home)
	s.section("The chain keeps running")
	s.detail("RPC    %s", n.RPC)
	s.detail("REST   %s", n.API)
	s.detail("gRPC   %s", n.GRPC)
	s.detail("home   %s (keys owner, provider and validator in its test keyring)", home)
	s.say("Try, from the repository root:")
	s.detail("%s status --home %s", bin, home)
	s.detail("%s query market jobs --home %s", bin, home)
	s.detail("%s query market lease 1 --home %s", bin, home)
	s.detail("%s query stakingext providers --home %s", bin, home)
	s.detail("%s tx market submit-job --spec .demo/job.yaml --deposit %s --from owner --gas auto --home %s -y", bin, deposit, home)
	s.detail("%s tx market place-bid 2 %s --from provider --gas auto --home %s -y", bin, bidPrice, home)
	s.detail("curl %s/depinchain/market/v1/jobs", n.API)
	s.say("Press Ctrl-C to stop the chain.")
	select {
	case <-ctx.Done():
	case <-n.Exited():
		s.say("The node exited on its own; see %s.", s.rel(filepath.Join(n.Home, "node.log")))
	}
}

// story prints timestamped narrative lines and indented details.
type story struct {
	out  io.Writer
	root string
}

const indent = "           "

func (s *story) say(format string, args ...any) {
	fmt.Fprintf(s.out, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (s *story) detail(format string, args ...any) {
	fmt.Fprintf(s.out, "%s  %s\n", indent, fmt.Sprintf(format, args...))
}

func (s *story) block(text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(s.out, "%s  | %s\n", indent, line)
	}
}

func (s *story) section(title string) {
	fmt.Fprintf(s.out, "\n== %s ==\n", title)
}

func (s *story) blank() { fmt.Fprintln(s.out) }

// rel shortens a path under the repository root for display.
func (s *story) rel(path string) string {
	if rel, err := filepath.Rel(s.root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// tx shows the command, runs it and reports the block it landed in.
func (s *story) tx(ctx context.Context, n *localnet.Node, from string, args ...string) (localnet.TxResult, error) {
	shown := make([]string, 0, len(args))
	for _, a := range args {
		if strings.ContainsAny(a, ` "{}`) {
			a = "'" + a + "'"
		}
		if strings.HasPrefix(a, s.root+string(filepath.Separator)) {
			a = s.rel(a)
		}
		shown = append(shown, a)
	}
	s.detail("$ depinchaind tx %s --from %s", strings.Join(shown, " "), from)
	res, err := n.Tx(ctx, from, args...)
	if err != nil {
		return res, err
	}
	if res.Code != 0 {
		return res, fmt.Errorf("tx %s failed with code %d: %s", strings.Join(args, " "), res.Code, res.RawLog)
	}
	s.say("Included in block %d (tx %s...).", res.Height, res.Hash[:12])
	return res, nil
}

// fail reports an error (or the interruption) and where the node log is.
func (s *story) fail(ctx context.Context, err error, home string) int {
	if ctx.Err() != nil {
		s.say("Stopped before the story ended.")
		return 130
	}
	s.blank()
	s.say("The demo failed: %v", err)
	if _, statErr := os.Stat(filepath.Join(home, "node.log")); statErr == nil {
		s.say("The node's log is in %s.", s.rel(filepath.Join(home, "node.log")))
	}
	return 1
}

// Decoded CLI JSON (proto field names; 64-bit integers are strings).

type coin struct {
	Denom  string `json:"denom"`
	Amount string `json:"amount"`
}

type provider struct {
	Endpoint string `json:"endpoint"`
	GPUs     []struct {
		Model   string      `json:"model"`
		VRAMMiB string      `json:"vram_mib"`
		Count   json.Number `json:"count"`
	} `json:"gpus"`
	Bond       coin   `json:"bond"`
	Locked     coin   `json:"locked"`
	Status     string `json:"status"`
	Reputation struct {
		Completed string `json:"leases_completed"`
		Failed    string `json:"leases_failed"`
		Slashes   string `json:"slashes"`
	} `json:"reputation"`
}

type job struct {
	State           string `json:"state"`
	BiddingDeadline string `json:"bidding_deadline"`
	Seed            string `json:"seed"`
	Escrow          coin   `json:"escrow"`
	Deposited       coin   `json:"deposited"`
	TimeDeadline    string `json:"time_deadline"`
	CloseReason     string `json:"close_reason"`
	Spec            struct {
		MaxPrice            coin   `json:"max_price_per_gpu_hour"`
		BiddingWindowBlocks string `json:"bidding_window_blocks"`
	} `json:"spec"`
}

type lease struct {
	ID                 string      `json:"id"`
	JobID              string      `json:"job_id"`
	Worker             json.Number `json:"worker"`
	Provider           string      `json:"provider"`
	Price              coin        `json:"price_per_gpu_hour"`
	GPUs               json.Number `json:"gpus"`
	State              string      `json:"state"`
	CloseReason        string      `json:"close_reason"`
	StartHeight        string      `json:"start_height"`
	StartTime          string      `json:"start_time"`
	Collateral         coin        `json:"collateral"`
	CheckpointDeadline string      `json:"checkpoint_deadline"`
}

func queryProvider(ctx context.Context, n *localnet.Node, addr string) (provider, error) {
	var out struct {
		Provider provider `json:"provider"`
	}
	err := n.Query(ctx, &out, "stakingext", "provider", addr)
	return out.Provider, err
}

func queryJob(ctx context.Context, n *localnet.Node, id string) (job, error) {
	var out struct {
		Job job `json:"job"`
	}
	err := n.Query(ctx, &out, "market", "job", id)
	return out.Job, err
}

func balance(ctx context.Context, n *localnet.Node, addr string) (*big.Int, error) {
	var out struct {
		Balance coin `json:"balance"`
	}
	if err := n.Query(ctx, &out, "bank", "balance", addr, denom); err != nil {
		return nil, err
	}
	return bigInt(out.Balance.Amount), nil
}

// fastHeight reads the latest height from CometBFT's RPC directly (the CLI takes longer
// than a block to start).
func fastHeight(ctx context.Context, n *localnet.Node) (int64, error) {
	url := strings.Replace(n.RPC, "tcp://", "http://", 1) + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var status struct {
		Result struct {
			SyncInfo struct {
				LatestBlockHeight string `json:"latest_block_height"`
			} `json:"sync_info"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", url, err)
	}
	return mustInt(status.Result.SyncInfo.LatestBlockHeight), nil
}

// leaseExcerpt picks the interesting fields of the REST answer, in its own JSON.
func leaseExcerpt(body []byte) (string, error) {
	var doc struct {
		Lease map[string]json.RawMessage `json:"lease"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("decoding REST lease: %w", err)
	}
	var b strings.Builder
	b.WriteString("{\"lease\": {\n")
	keys := []string{"id", "job_id", "provider", "price_per_gpu_hour", "gpus", "state", "settled_at", "pending", "committed", "withdrawable", "collateral"}
	for _, k := range keys {
		fmt.Fprintf(&b, "  %q: %s,\n", k, doc.Lease[k])
	}
	b.WriteString("  ...\n}}")
	return b.String(), nil
}

func or0(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// shortDuration renders a duration to the minute: "4h10m", "24h", "45m".
func shortDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func bigInt(s string) *big.Int {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return new(big.Int)
	}
	return v
}

func mustInt(s string) int64 {
	var v int64
	fmt.Sscan(strings.Trim(s, `"`), &v)
	return v
}

// depin renders an amount like "38400000udepin" as "38.4 DEPIN".
func depin(c string) string {
	return trimDEPIN(bigInt(strings.TrimSuffix(c, denom))) + " DEPIN"
}

func depinCoin(c coin) string {
	if c.Denom != denom {
		return c.Amount + c.Denom
	}
	return depin(c.Amount)
}

func trimDEPIN(v *big.Int) string {
	s := fixed6(v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// fixed6 renders udepin as DEPIN with six decimals.
func fixed6(v *big.Int) string {
	neg := v.Sign() < 0
	a := new(big.Int).Abs(v)
	q, r := new(big.Int).QuoRem(a, big.NewInt(1_000_000), new(big.Int))
	s := fmt.Sprintf("%s.%06d", q, r.Int64())
	if neg {
		s = "-" + s
	}
	return s
}

func clock(rfc3339 string) string {
	t, err := time.Parse(time.RFC3339Nano, rfc3339)
	if err != nil {
		return rfc3339
	}
	return t.Local().Format("15:04:05")
}

func seedHex(b64 string) string {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) < 8 {
		return "?"
	}
	return fmt.Sprintf("%x", raw[:8])
}
