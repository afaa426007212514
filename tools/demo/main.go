// Command demo starts a single-node depinchain in ./.demo/ and tells the story of
// one verified training job as it happens: the owner registers Debian's fortunes
// as a dataset that a storage provider's sidecar holds; a GPU provider registers
// the inventory its sidecar reports and grants the sidecar's hot key; the owner
// submits a kind: transformer job on the dataset; the sidecar bids, the auction
// closes at its deadline, the sidecar fetches its data pieces from the holder and
// trains the exact transformer (pkg/exact) on the Go trainer, committing
// Merkle-rooted checkpoints. The demo downloads each checkpoint's state from the
// sidecar, checks it against the state_root on chain and prints the loss in its
// header; each checkpoint becomes final after its challenge window and the payment
// it releases is withdrawn; at the end the final state, checked against the chain,
// generates a sample of text. `make demo` runs it; `make demo KEEP=1` (-keep)
// leaves the chain and the sidecars running until Ctrl-C.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sdkmath "cosmossdk.io/math"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const (
	chainID   = "depin-demo"
	blockTime = time.Second
	denom     = "udepin"

	// The provider: one host with eight H100s (simulated: go-nvml's DGX H100 mock),
	// bonding 100 DEPIN and asking 1.5 DEPIN per GPU-hour.
	gpuModel     = "H100-SXM5-80GB"
	providerBond = "100000000udepin"
	price        = 1_500_000

	deposit = "50000000udepin" // 50 DEPIN escrowed by the owner

	// challengeWindow is how many blocks a checkpoint can be challenged (short for the demo).
	challengeWindow = "8"
)

// jobYAML is the spec the owner submits: a small byte-level transformer, kind
// transformer, trained on the fortunes dataset. Its step (3·B·C·(L·(4D² + 2C·D +
// 2D·F) + V·D) multiply-accumulates) fits x/verify's default max_step_macs, so the
// chain's one-step referee can re-execute any step of it in a dispute.
const jobYAML = `# A small language model trained on Debian's fortunes, on one 8-GPU node.
name: fortunes-lm
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
  kind: transformer
  model: {layers: 1, d_model: 64, heads: 4, d_ff: 128, context: 32, vocab: 256}
  train: {batch: 8, optimizer: adamw, lr: 0.003, warmup_steps: 20, weight_decay: 0.01}
dataset: ` + datasetID + `
total_steps: 800
checkpoint_every: 100
max_price_per_gpu_hour: 2000000udepin
max_duration: 24h
bidding_window_blocks: 6
`

func main() {
	keep := flag.Bool("keep", false, "leave the chain running after the story, until Ctrl-C")
	fraud := flag.Bool("fraud", false, "tell the fraud story (`make demo-fraud`) instead of the training job's")
	together := flag.Bool("together", false, "tell three providers training one job together, in rounds (`make demo-together`)")
	flag.Parse()
	sc := trainingStory
	switch {
	case *fraud && *together:
		fmt.Fprintln(os.Stderr, "demo: -fraud and -together are two stories; pick one")
		os.Exit(2)
	case *fraud:
		sc = fraudStory
	case *together:
		sc = togetherStory
	}
	os.Exit(run(*keep, sc))
}

// scenario is one story the demo can tell.
type scenario struct {
	title    string
	accounts map[string]int64
	genesis  func(appState map[string]any) error
	// outputs are further folders of .demo listed at the end: label, path.
	outputs [][2]string
	// tell narrates the story on a started node and returns the sidecars it
	// started (the first is the one -keep leaves running for exploring).
	tell func(ctx context.Context, s *story, n *localnet.Node, demoDir string) ([]*sidecar.Provider, error)
}

var trainingStory = scenario{
	title:    "one GPU training job on a local chain, told as it happens",
	accounts: map[string]int64{"owner": 1_000_000_000, "provider": 1_000_000_000, "sidecar": 1_000_000, storageLabel: 100_000_000},
	// localnet turns x/market's default custody off: the demo's one storage provider holds
	// the dataset's pieces, not checkpoint states (it runs without storage_role.custody,
	// and a holder may not be the trainer), so custody checkpoints would never be final.
	genesis: func(app map[string]any) error {
		app["verify"].(map[string]any)["params"].(map[string]any)["challenge_window"] = challengeWindow
		return nil
	},
	outputs: [][2]string{{"dataset", "fortunes"}, {"states", "states"}},
	tell: func(ctx context.Context, s *story, n *localnet.Node, demoDir string) ([]*sidecar.Provider, error) {
		return tell(ctx, s, n, demoDir)
	},
}

// sidecarHolds describes what a sidecar's home holds beside its config and store.
func (sc scenario) sidecarHolds(p *sidecar.Provider) string {
	switch name := filepath.Base(p.Home); {
	case name == storageLabel:
		return "the dataset's pieces"
	case slices.Contains(togetherHolders, name):
		return "custody pieces of the rounds' files"
	}
	return "lease folders and checkpoints"
}

func run(keep bool, sc scenario) int {
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
	if bin := os.Getenv("DEPINPROVIDER_BINARY"); bin != "" {
		if abs, err := filepath.Abs(bin); err == nil {
			os.Setenv("DEPINPROVIDER_BINARY", abs)
		}
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

	fmt.Fprintln(s.out, "depinchain demo: "+sc.title)
	home := filepath.Join(demoDir, "node")
	s.say("Starting a fresh single-node chain %q in %s (%s blocks)...", chainID, s.rel(home), blockTime)
	node, err := localnet.Start(ctx, localnet.Options{
		Home:      home,
		ChainID:   chainID,
		Accounts:  sc.accounts,
		BlockTime: blockTime,
		Genesis:   sc.genesis,
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

	sidecars, err := sc.tell(ctx, s, node, demoDir)
	stopSidecars := func() {
		for _, p := range sidecars {
			p.Stop()
		}
	}
	defer stopSidecars()
	if err != nil {
		return s.fail(ctx, err, home)
	}

	if keep {
		s.keepRunning(ctx, node, sidecars[0], slices.Sorted(maps.Keys(sc.accounts)))
	}
	s.say("Stopping the sidecars...")
	stopSidecars()
	stop()
	s.blank()
	s.say("Everything is left in %s for you to look at:", s.rel(demoDir))
	s.detail("node log      %s", s.rel(filepath.Join(home, "node.log")))
	for _, p := range sidecars {
		s.detail("sidecar       %s (config.toml, provider.log, its store, %s)", s.rel(p.Home), sc.sidecarHolds(p))
	}
	for _, extra := range sc.outputs {
		s.detail("%-13s %s", extra[0], s.rel(filepath.Join(demoDir, extra[1])))
	}
	s.detail("this story    %s", s.rel(filepath.Join(demoDir, "demo.log")))
	s.detail("job spec      %s", s.rel(filepath.Join(demoDir, "job.yaml")))
	s.detail("chain home    %s (config, data, test keyring)", s.rel(home))
	s.say("The next run of the demo starts from scratch and replaces it.")
	return 0
}

// tell runs the scenario against a started node, narrating every step. It returns
// the sidecars once started (the GPU provider's first), so the caller stops them
// on every way out.
func tell(ctx context.Context, s *story, n *localnet.Node, demoDir string) ([]*sidecar.Provider, error) {
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	mq, vq := markettypes.NewQueryClient(conn), verifytypes.NewQueryClient(conn)
	owner, err := n.Address(ctx, "owner")
	if err != nil {
		return nil, err
	}
	h, err := n.Height(ctx)
	if err != nil {
		return nil, err
	}
	s.say("The chain is producing blocks (height %d). Genesis funded four accounts:", h)
	s.detail("owner     %s  (registers the dataset, submits and pays for the job)", owner)
	s.detail("storage   a storage provider that holds the dataset's pieces")
	s.detail("provider  the GPU provider's operator key (cold: bonds, registers, grants)")
	s.detail("sidecar   the hot key the GPU provider's sidecar signs with, allowed only what it needs")
	s.detail("1 DEPIN = 1,000,000 udepin; this local chain charges no fees")

	// The GPU provider's registration and grants are a dozen transactions from its
	// own keys: they go on while the owner registers the data, and are told below.
	type setupResult struct {
		p   *sidecar.Provider
		err error
	}
	gpuSetup := make(chan setupResult, 1)
	go func() {
		p, err := sidecar.Setup(ctx, n, sidecar.Options{
			Home: filepath.Join(demoDir, "provider"), Operator: "provider", HotKey: "sidecar", Bond: providerBond,
			Prices: map[string]uint64{gpuModel: price},
		})
		gpuSetup <- setupResult{p, err}
	}()
	var sidecars []*sidecar.Provider

	// 1. The training data.
	s.section("1. The training data: Debian's fortunes, registered as a dataset")
	s.say("The owner builds the plain-text fortunes of %s into a dataset: shards of", fortunesDir)
	s.detail("%s, each piece Merkle-rooted in 1 KiB chunks, and registers the roots on chain", shardSize)
	s.detail("(x/shardregistry). The bytes stay off chain, with storage providers.")
	data, err := registerFortunes(ctx, s, n, demoDir)
	if err != nil {
		return sidecars, err
	}
	s.say("Dataset %q registered: %s of English text in %d shards (manifest %s).", datasetID,
		mib(data.bytes), len(data.manifest.Shards), s.rel(filepath.Join(data.built, "manifest.json")))
	s.say("A storage provider bonds %s and starts a sidecar with [storage_role]; its pieces folder", depin(storageBond))
	s.detail("gets the dataset's pieces, which it checks against the registered roots, proves and claims.")
	store, err := sidecar.Setup(ctx, n, sidecar.Options{
		Home: filepath.Join(demoDir, storageLabel), Operator: storageLabel, HotKey: storageLabel, SkipGrants: true, Bond: storageBond,
		Set: map[string]string{"storage_role.enabled": "true", "storage_role.claim_local": "true"},
	})
	if err != nil {
		return sidecars, err
	}
	sidecars = append(sidecars, store)
	pieces, err := holdPieces(data, store)
	if err != nil {
		return sidecars, err
	}
	if err := store.Start(ctx); err != nil {
		return sidecars, err
	}
	if err := waitClaimed(ctx, conn, len(data.manifest.Shards)); err != nil {
		return sidecars, err
	}
	s.say("Every shard is held: the storage provider claimed its %d pieces (log: %s) and serves", pieces, s.rel(store.LogPath()))
	s.detail("them to trainers at %s/pieces/; it answers the chain's storage challenges from now on.", store.Public)

	// 2. The GPU provider joins with its sidecar.
	s.section("2. A GPU provider joins and starts its sidecar")
	s.say("Meanwhile the GPU provider's operator wrote its sidecar's config (`depinprovider init`),")
	s.detail("registered the GPUs the sidecar reports (`depinprovider gpus`), bonded %s, and granted", depin(providerBond))
	s.detail("the sidecar's hot key, through x/authz, exactly the messages it sends: bids, checkpoints,")
	s.detail("dispute moves, withdrawals. This host has no NVIDIA GPU, so the sidecar reads a simulated")
	s.detail("DGX H100 (go-nvml's mock) and trains on the Go trainer of pkg/exact (its \"reference")
	s.detail("runtime\"), which needs none.")
	var setup setupResult
	select {
	case setup = <-gpuSetup:
	case <-ctx.Done():
		return sidecars, ctx.Err()
	case <-time.After(2 * time.Minute):
		return sidecars, fmt.Errorf("the GPU provider's registration and grants did not finish within 2m0s")
	}
	if setup.err != nil {
		return sidecars, fmt.Errorf("setting up the GPU provider: %w", setup.err)
	}
	p := setup.p
	sidecars = append([]*sidecar.Provider{p}, sidecars...)
	prov, err := queryProvider(ctx, n, p.Operator)
	if err != nil {
		return sidecars, err
	}
	s.say("The provider record on chain:")
	s.detail("status      %s", strings.TrimPrefix(prov.Status, "PROVIDER_STATUS_"))
	for _, g := range prov.GPUs {
		s.detail("GPUs        %s x %s, %s MiB VRAM each", or0(string(g.Count)), g.Model, or0(g.VRAMMiB))
	}
	s.detail("endpoint    %s (the sidecar's checkpoint server)", prov.Endpoint)
	s.detail("bond        %s", depinCoin(prov.Bond))
	s.say("Starting the sidecar (log: %s)...", s.rel(p.LogPath()))
	if err := p.Start(ctx); err != nil {
		return sidecars, err
	}
	s.say("The sidecar checked the grants, reconciled with the chain and follows it from block to")
	s.detail("block; its status API answers at http://%s/v1/status (gRPC on the same port).", p.API)

	// 3. The owner submits a job.
	s.section("3. The owner submits a training job on the dataset")
	specPath := filepath.Join(demoDir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(jobYAML), 0o644); err != nil {
		return sidecars, err
	}
	spec, err := markettypes.ParseJobSpecYAML([]byte(jobYAML))
	if err != nil {
		return sidecars, err
	}
	cfg, err := spec.ExactConfig()
	if err != nil {
		return sidecars, err
	}
	s.say("The owner describes the job in %s:", s.rel(specPath))
	s.block(jobYAML)
	s.detail("kind transformer: a byte-level GPT-style decoder in exact integer arithmetic (pkg/exact),")
	s.detail("%d parameters, %d multiply-accumulates a step: every machine computes the same bits,",
		cfg.ParamCount(), cfg.MACsPerStep())
	s.detail("so the chain can re-execute any step of it in a dispute. Initial weights and the order")
	s.detail("of the training windows come from the job seed the chain draws.")
	s.say("...and submits it, escrowing %s:", depin(deposit))
	ownerBefore, err := balance(ctx, n, owner)
	if err != nil {
		return sidecars, err
	}
	res, err := s.tx(ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", deposit)
	if err != nil {
		return sidecars, err
	}
	jobIDText, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	if !ok {
		return sidecars, fmt.Errorf("submit-job: no EventJobCreated in the transaction's events")
	}
	jobIDText = strings.Trim(jobIDText, `"`)
	jobID := uint64(mustInt(jobIDText))
	job, err := queryJob(ctx, n, jobIDText)
	if err != nil {
		return sidecars, err
	}
	deadline := mustInt(job.BiddingDeadline)
	s.say("EventJobCreated announces job %d to every provider sidecar. On chain:", jobID)
	s.detail("state             %s", strings.TrimPrefix(job.State, "JOB_STATE_"))
	s.detail("escrow            %s", depinCoin(job.Escrow))
	s.detail("bidding deadline  end of block %d (submitted in block %d + %s-block window)", deadline, res.Height, job.Spec.BiddingWindowBlocks)
	s.detail("job seed          %s... (SHA-256 over the including block's hash: fixes data and weights)", seedHex(job.Seed))

	// 4. The sidecar bids on its own.
	s.section("4. The sidecar bids")
	var bidHeight int64
	bidding := limit(fmt.Sprintf("the sidecar's bid on job %d", jobID), time.Minute)
	for bidHeight == 0 {
		bids, err := mq.Bids(ctx, &markettypes.QueryBidsRequest{JobId: jobID})
		if err != nil {
			return sidecars, err
		}
		for _, b := range bids.Bids {
			bidHeight = b.CreatedHeight
			s.say("Block %d: the sidecar bid %s per GPU-hour, %d block(s) after the job appeared.",
				b.CreatedHeight, depin(b.PricePerGpuHour.String()), b.CreatedHeight-res.Height)
		}
		if bidHeight != 0 {
			break
		}
		if err := bidding.check(); err != nil {
			return sidecars, err
		}
		if err := sleep(ctx, 150*time.Millisecond); err != nil {
			return sidecars, err
		}
	}
	var jobs struct {
		Jobs []struct {
			JobID    string `json:"job_id"`
			Decision string `json:"decision"`
		} `json:"jobs"`
	}
	if err := p.REST(ctx, "/v1/jobs", &jobs); err == nil {
		for _, j := range jobs.Jobs {
			if j.JobID == jobIDText {
				s.detail("the sidecar's reasoning (GET /v1/jobs): %s", j.Decision)
			}
		}
	}
	s.detail("it matched the spec against its free, healthy GPUs, checked that every shard of the")
	s.detail("dataset has a live holder, and priced the GPUs from its table; those GPUs stay reserved")
	s.detail("for this bid, so it never wins more than it can serve.")

	// 5. The auction closes at the deadline, in EndBlock.
	s.section("5. The auction closes at the bidding deadline")
	s.say("No transaction closes the auction: EndBlock of block %d does, from the deadline index.", deadline)
	var lease markettypes.Lease
	auction := limit(fmt.Sprintf("a lease on job %d after the auction at block %d", jobID, deadline), 2*time.Minute)
	for {
		leases, err := mq.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
		if err != nil {
			return sidecars, err
		}
		if len(leases.Leases) > 0 {
			lease = leases.Leases[0]
			break
		}
		if err := auction.check(); err != nil {
			return sidecars, err
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return sidecars, err
		}
	}
	s.say("Block %d: lease %d to the sidecar's operator, %d GPUs at %s per GPU-hour;", lease.StartHeight, lease.Id, lease.Gpus, depin(lease.PricePerGpuHour.String()))
	s.detail("%s of its bond locked as collateral; first checkpoint due by block %d.", depin(lease.Collateral.String()), lease.CheckpointDeadline)

	// 6. Training, checkpoints, finality and payment, as they happen.
	s.section("6. Training, verified checkpoints, finality and payment")
	heldOut := heldOutWindows(cfg)
	s.say("The sidecar saw EventLeaseCreated (emitted in EndBlock, so it reads block results, not")
	s.detail("just transactions). It downloads the pieces of the shards x/shardregistry assigns to its")
	s.detail("worker from their holder, checks each against its registered root, and trains on them.")
	s.detail("Each checkpoint's state (weights, Adam moments, step, loss) is hashed into a Merkle root")
	s.detail("over 4 KiB chunks, committed with MsgSubmitCheckpoint with a root over the per-step")
	s.detail("hashes, and served at its URI. The demo downloads every state from there and accepts it")
	s.detail("only if its root is the state_root on chain. The training loss printed is the one in the")
	s.detail("state's header, which the provider committed to (one step's batch of %d bytes, so it is", cfg.TokensPerStep())
	s.detail("noisy); the held-out loss is the verified weights' exact loss on %d bytes of English",
		int64(len(heldOut))*int64(cfg.Model.Context))
	s.detail("the job never trains on (pkg/traindata's built-in text), the same bytes every time.")
	s.say("Before training, a model that knows nothing scores ln 256 = %.2f nats a byte.", math.Log(256))
	statesDir := filepath.Join(demoDir, "states")
	asOwner, err := n.RequestSigner("owner")
	if err != nil {
		return sidecars, err
	}
	seen := map[uint64]verifytypes.CheckpointStatus{}
	var (
		lastStep   uint64
		dataTold   bool
		losses     []string
		heldLosses []string
		final      verifiedState
		finalCP    verifytypes.Checkpoint
		withdrawn  = sdkmath.ZeroInt()
	)
	training := limit(fmt.Sprintf("lease %d training to the end, every checkpoint final and its earnings withdrawn", lease.Id), 10*time.Minute)
	for {
		if f, ok := logLine(p, "training data fetched"); ok && !dataTold {
			dataTold = true
			s.say("The sidecar fetched its training data: %s pieces, %s bytes from the storage provider,", f["files"], f["bytes"])
			s.detail("each checked against its root on chain (%s refused, %s rebuilt), and starts training.", or0(f["refused"]), or0(f["rebuilt"]))
		}
		var ls struct {
			Leases []struct {
				LeaseID     string `json:"lease_id"`
				CurrentStep string `json:"current_step"`
				TotalSteps  string `json:"total_steps"`
			} `json:"leases"`
		}
		if err := p.REST(ctx, "/v1/leases", &ls); err == nil {
			for _, l := range ls.Leases {
				if step := uint64(mustInt(or0(l.CurrentStep))); l.LeaseID == fmt.Sprint(lease.Id) && step > lastStep {
					lastStep = step
				}
			}
		}
		cps, err := vq.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
		if err != nil {
			return sidecars, err
		}
		for _, cp := range cps.Checkpoints {
			prev, known := seen[cp.Index]
			switch {
			case !known:
				s.say("Block %d: checkpoint %d, steps %d..%d, claims %s of the pending payment.", cp.SubmittedHeight, cp.Index, cp.StartStep, cp.EndStep, depin(cp.Claim.String()))
				s.detail("state_root %x  trace_root %x; challengeable until block %d", cp.StateRoot[:8], cp.TraceRoot[:8], cp.ChallengeDeadline)
				vs, err := fetchVerifiedState(ctx, cp, cfg, filepath.Join(statesDir, fmt.Sprintf("step-%d", cp.EndStep)), asOwner)
				if err != nil {
					return sidecars, err
				}
				loss := exact.LossNats(vs.state.Loss)
				held, err := exact.MeanLoss(vs.state, heldOut, 0)
				if err != nil {
					return sidecars, fmt.Errorf("scoring checkpoint %d's state: %w", cp.Index, err)
				}
				losses = append(losses, fmt.Sprintf("%.3f", loss))
				heldLosses = append(heldLosses, fmt.Sprintf("%.3f", exact.LossNats(held)))
				s.say("  step %4d  training loss %.3f  held-out loss %.3f nats/byte", vs.state.Step, loss, exact.LossNats(held))
				s.detail("verified: the %s state from %s has the state_root on chain", mib(vs.size), cp.Uri)
				if cp.EndStep >= final.stateStep() {
					final, finalCP = vs, cp
				}
			case prev != cp.Status && cp.Status == verifytypes.CHECKPOINT_STATUS_FINAL:
				s.say("Checkpoint %d is final: nobody challenged it by block %d, so its claim is released.", cp.Index, cp.ChallengeDeadline)
			}
			seen[cp.Index] = cp.Status
		}
		lr, err := mq.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: lease.Id})
		if err != nil {
			return sidecars, err
		}
		if lr.Lease.Withdrawn.Amount.GT(withdrawn) {
			s.say("The sidecar withdrew %s of released earnings to the operator.", depin(sdk.NewCoin(denom, lr.Lease.Withdrawn.Amount.Sub(withdrawn)).String()))
			withdrawn = lr.Lease.Withdrawn.Amount
		}
		lease = lr.Lease
		if lease.State != markettypes.LEASE_STATE_ACTIVE && lease.Pending.IsZero() && lease.Withdrawable.IsZero() && len(seen) > 0 {
			allFinal := true
			for _, st := range seen {
				allFinal = allFinal && st == verifytypes.CHECKPOINT_STATUS_FINAL
			}
			if allFinal {
				break
			}
		}
		if err := training.check(); err != nil {
			if lastStep > 0 {
				err = fmt.Errorf("%w (the sidecar reported step %d of %d)", err, lastStep, spec.TotalSteps)
			}
			return sidecars, err
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return sidecars, err
		}
	}
	s.say("The losses at the checkpoints, from the verified states (nats/byte):")
	s.detail("training (state header)  %s", strings.Join(losses, " -> "))
	s.detail("held-out                 %s", strings.Join(heldLosses, " -> "))

	// 7. Done and paid.
	s.section("7. Done: verified checkpoints, paid")
	if job, err = queryJob(ctx, n, jobIDText); err != nil {
		return sidecars, err
	}
	ownerAfter, err := balance(ctx, n, owner)
	if err != nil {
		return sidecars, err
	}
	spent := new(big.Int).Sub(ownerBefore, ownerAfter)
	s.say("Job %d is %s (%s); lease %d closed %s.", jobID, strings.TrimPrefix(job.State, "JOB_STATE_"), job.CloseReason,
		lease.Id, strings.TrimPrefix(lease.CloseReason.String(), "LEASE_CLOSE_REASON_"))
	s.detail("accrued     %s while the lease ran; what no checkpoint claimed went back to the escrow", depin(lease.Accrued.String()))
	s.detail("paid out    %s, every udepin covered by a final checkpoint, withdrawn by the sidecar", depin(lease.Withdrawn.String()))
	s.detail("owner       spent %s of the %s deposit; the rest came back when the job completed", depin(spent.String()+denom), depin(deposit))
	if prov, err = queryProvider(ctx, n, p.Operator); err == nil {
		s.detail("provider    collateral released: bond %s, locked %s; reputation %s completed",
			depinCoin(prov.Bond), depinCoin(prov.Locked), or0(prov.Reputation.Completed))
	}
	path := fmt.Sprintf("/depinchain/market/v1/leases/%d", lease.Id)
	s.say("The same lease is on REST at %s%s and on gRPC at %s;", n.API, path, n.GRPC)
	s.detail("the sidecar's own view: `depinprovider status --home %s`:", s.rel(p.Home))
	if out, err := p.Exec(ctx, "status"); err == nil {
		s.block(out)
	}

	// 8. The model the owner paid for.
	s.section("8. The model")
	cps, err := vq.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: lease.Id, Index: finalCP.Index})
	if err != nil {
		return sidecars, err
	}
	root, err := rootOfFile(final.path)
	if err != nil {
		return sidecars, err
	}
	if !bytes.Equal(root[:], cps.Checkpoint.StateRoot) || cps.Checkpoint.Status != verifytypes.CHECKPOINT_STATUS_FINAL {
		return sidecars, fmt.Errorf("the final state %s has root %x; checkpoint %d on chain is %s with state_root %x",
			final.path, root[:8], finalCP.Index, cps.Checkpoint.Status, cps.Checkpoint.StateRoot[:8])
	}
	s.say("The final state (step %d, %s) in %s has Merkle root %x..., the state_root of", final.state.Step, mib(final.size), s.rel(final.path), root[:8])
	s.detail("checkpoint %d, which is final on chain: these are the weights the owner paid for. The", finalCP.Index)
	s.detail("exact forward pass continues a prompt from them (same text on every machine):")
	text, err := sample(ctx, s, n, final.path, specPath)
	if err != nil {
		return sidecars, err
	}
	s.block(wrap(text, 96))
	s.detail("A byte-level model trained for %d steps (%d bytes of text) has learnt the shape of words", final.state.Step,
		int64(final.state.Step)*cfg.TokensPerStep())
	s.detail("and spaces, not yet their sense. `depinchaind workload export` turns the state into")
	s.detail("safetensors for PyTorch; see docs/workloads.md.")
	s.say("A wrong checkpoint would have been challenged and bisected to one step the chain")
	s.detail("re-executes: `make demo-fraud` shows it, and x/verify/README.md explains it.")

	// 9. The loss curve the chain vouches for.
	s.section("9. The loss curve")
	curve := filepath.Join(s.root, ".demo", "loss-curve.png")
	v, err := writeLossCurve(ctx, n.GRPC, jobID, curve)
	if err != nil {
		return sidecars, fmt.Errorf("the loss curve: %w", err)
	}
	for _, l := range v.Loss {
		s.detail("step %3d  loss %.4f nats  %s", l.Step, l.Nats, l.Source)
	}
	s.say("Each point is the loss in the header of a checkpoint's state, read from the provider")
	s.detail("and Merkle-proven against the state_root on chain (\"verified\"); drawn in %s.", s.rel(curve))
	s.detail("The same view: %s job status %d --grpc-addr %s", s.rel(n.Binary), jobID, n.GRPC)
	s.demoJob = jobID
	return sidecars, nil
}

// wrap breaks lines longer than width at spaces, for the sample's display.
func wrap(text string, width int) string {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		for len(line) > width {
			cut := strings.LastIndexByte(line[:width], ' ')
			if cut <= 0 {
				cut = width
			}
			out = append(out, line[:cut])
			line = line[cut:]
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// mib renders a byte count as "2.0 MiB" or "812 KiB".
func mib(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

// keepRunning prints how to reach the chain (keys: the story's accounts, in the node's
// test keyring) and waits for Ctrl-C or the node's end.
func (s *story) keepRunning(ctx context.Context, n *localnet.Node, p *sidecar.Provider, keys []string) {
	bin := n.Binary
	if rel, err := filepath.Rel(s.root, bin); err == nil && !strings.HasPrefix(rel, "..") {
		bin = rel
	}
	home := s.rel(n.Home)
	s.section("The chain keeps running")
	s.detail("RPC    %s", n.RPC)
	s.detail("REST   %s", n.API)
	s.detail("gRPC   %s", n.GRPC)
	s.detail("home   %s (keys %s and validator in its test keyring)", home, strings.Join(keys, ", "))
	s.detail("sidecar status API  http://%s/v1/status (also gRPC), metrics at /metrics", p.API)
	s.say("Try, from the repository root:")
	s.detail("%s status --home %s", bin, home)
	s.detail("%s query market jobs --home %s", bin, home)
	s.detail("%s job status %d --grpc-addr %s", bin, s.demoJob, n.GRPC)
	s.detail("%s query market lease 1 --home %s", bin, home)
	s.detail("%s query stakingext providers --home %s", bin, home)
	s.detail("%s tx market submit-job --spec .demo/job.yaml --deposit %s --from owner --gas auto --home %s -y", bin, deposit, home)
	s.detail("%s status --home %s", s.rel(p.Binary), s.rel(p.Home))
	s.detail("curl %s/depinchain/market/v1/jobs", n.API)
	if url, stop, err := startDashboard(ctx, n, s.demoJob); err != nil {
		s.say("The dashboard did not start: %v", err)
	} else {
		defer stop()
		s.say("The job owner's dashboard: %s", url)
		s.detail("(%s dashboard --grpc-addr %s --rest-addr %s)", bin, n.GRPC, n.API)
	}
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
	// demoJob is the job the story trained, for the dashboard's URL.
	demoJob uint64
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

// waitLimit bounds one of the demo's waits: only Ctrl-C would end it
// otherwise. Past its deadline check fails, saying what did not happen, and
// the demo ends with that message (and where the logs are).
type waitLimit struct {
	what   string
	within time.Duration
	end    time.Time
}

func limit(what string, within time.Duration) waitLimit {
	return waitLimit{what: what, within: within, end: time.Now().Add(within)}
}

func (l waitLimit) check() error {
	if time.Now().After(l.end) {
		return fmt.Errorf("%s did not happen within %s", l.what, l.within)
	}
	return nil
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
