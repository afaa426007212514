package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sdkmath "cosmossdk.io/math"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// togetherJobYAML is kind reference trained by three workers together
// (docs/training-together.md): three rounds of 8 steps, compressed pseudo-gradients,
// every round file held 2+1 in custody by the storage providers.
const togetherJobYAML = `# A reference-workload model trained by three GPU providers together, in rounds.
name: together-lm
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workers: 3
workload:
  kind: reference
sync:
  every: 8
  outer_lr: 0.7
  outer_momentum: 0.9
  top_k: 64
  commit_blocks: 200
total_steps: 24
checkpoint_every: 8
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 8
checkpoint_deadline_blocks: 400
audit:
  auditors: 0
custody:
  data_pieces: 2
  parity_pieces: 1
  retain_checkpoints: 720h
`

var (
	togetherTrainers = []string{"w1", "w2", "w3"}
	togetherHolders  = []string{"h1", "h2", "h3"}
)

var togetherStory = scenario{
	title: "three GPU providers training one model together, in rounds",
	accounts: map[string]int64{"owner": 1_000_000_000, "w1": 200_000_000, "w2": 200_000_000, "w3": 200_000_000,
		"h1": 200_000_000, "h2": 200_000_000, "h3": 200_000_000},
	genesis: func(app map[string]any) error {
		// Storage proofs every 16 blocks, so the holders prove the round files within the story.
		sr := app["shardregistry"].(map[string]any)["params"].(map[string]any)
		sr["period_blocks"], sr["proof_window_blocks"] = "16", "8"
		m := app["market"].(map[string]any)["params"].(map[string]any)
		m["round_aggregate_blocks"], m["round_challenge_blocks"] = "200", "10"
		// A round's global is final once its workers' round checkpoints are, after
		// x/verify's challenge window: 20 blocks instead of 300.
		app["verify"].(map[string]any)["params"].(map[string]any)["challenge_window"] = "20"
		return nil
	},
	outputs: [][2]string{{"global model", "global"}},
	tell:    tellTogether,
}

func tellTogether(ctx context.Context, s *story, n *localnet.Node, demoDir string) ([]*sidecar.Provider, error) {
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	mq := markettypes.NewQueryClient(conn)

	s.section("1. Three GPU providers and three storage providers join")
	s.say("Each bonds 100 DEPIN and starts depinprovider; the GPU providers' sidecars read simulated")
	s.detail("H100s (go-nvml's mock) and train on the Go trainer of pkg/exact; the storage providers'")
	s.detail("run [storage_role] with custody: they hold the rounds' files (states, pseudo-gradients,")
	s.detail("globals) erasure-coded, and prove them to the chain every 16 blocks.")
	sidecars, err := setupTogether(ctx, n, demoDir)
	if err != nil {
		return sidecars, err
	}
	for _, p := range sidecars {
		role := "GPU provider, 1 GPU-hour at 1 DEPIN"
		if slices.Contains(togetherHolders, filepath.Base(p.Home)) {
			role = "storage provider, custody holder"
		}
		s.detail("%s  %s  %s", filepath.Base(p.Home), p.Operator, role)
	}
	var wg sync.WaitGroup
	startErrs := make([]error, len(sidecars))
	for i, p := range sidecars {
		wg.Add(1)
		go func() { defer wg.Done(); startErrs[i] = p.Start(ctx) }()
	}
	wg.Wait()
	if err := errors.Join(startErrs...); err != nil {
		return sidecars, err
	}
	s.say("All six sidecars follow the chain.")

	s.section("2. The owner submits a job for three workers")
	specPath := filepath.Join(demoDir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(togetherJobYAML), 0o644); err != nil {
		return sidecars, err
	}
	s.block(togetherJobYAML)
	s.detail("workers: 3 makes three slots; every 8 steps the workers' pseudo-gradients (each compressed")
	s.detail("to the 64 largest of every 1024 values) are averaged into the next global model.")
	res, err := s.tx(ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "500000000"+denom)
	if err != nil {
		return sidecars, err
	}
	jobIDText, _ := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	jobID := uint64(mustInt(strings.Trim(jobIDText, `"`)))
	names := map[string]string{}
	for _, p := range sidecars {
		names[p.Operator] = filepath.Base(p.Home)
	}
	slots := map[uint32]string{}
	var stepsPerHour uint64
	if err := poll(ctx, "three leases on the job's slots", 3*time.Minute, func() (bool, error) {
		ls, err := mq.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
		if err != nil || len(ls.Leases) < 3 {
			return false, err
		}
		for _, l := range ls.Leases {
			slots[l.Worker] = names[l.Provider]
			stepsPerHour = l.StepsPerHour
		}
		return true, nil
	}); err != nil {
		return sidecars, err
	}
	jr, err := mq.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
	if err != nil {
		return sidecars, err
	}
	job := jr.Job
	s.say("Job %d: the three GPU providers won its slots: slot 0 %s, slot 1 %s, slot 2 %s (seed %x...).",
		jobID, slots[0], slots[1], slots[2], job.Seed[:8])
	s.detail("Each bid 1 DEPIN per GPU-hour at %d steps an hour (its Go trainer's rate): a round's 8 steps", stepsPerHour)
	s.detail("are a few seconds of one GPU, and pay that much.")

	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		return sidecars, err
	}
	jobSync := job.Spec.Sync.Diloco()
	rounds := int(job.Spec.Rounds())
	s.say("While they train, the demo runs the whole job in one process (diloco.Simulate), to check the chain's roots:")
	want, err := diloco.Simulate(diloco.SimOptions{Config: cfg, Sync: jobSync.Spec(),
		Seed: job.Seed, Workers: int(job.Spec.Workers), Rounds: rounds})
	if err != nil {
		return sidecars, err
	}
	s.detail("%d rounds, %d workers: G_0 %x... -> G_%d %x...", rounds, job.Spec.Workers, rootPrefix(want[0]), rounds, rootPrefix(want[rounds]))

	s.section("3. The rounds, as the chain records them")
	dense := int64(diloco.NewLayout(cfg).DenseFileChunks()) * diloco.ChunkSize
	shards := diloco.CorpusShards(uint64(len(traindata.BuiltinCorpus())), diloco.DefaultShardBytes)
	told := map[string]bool{}
	once := func(key string) bool {
		if told[key] {
			return false
		}
		told[key] = true
		return true
	}
	claims := map[string]sdk.Coin{} // by round and slot
	pay := map[uint32]sdkmath.Int{}
	var last markettypes.Round
	if err := poll(ctx, fmt.Sprintf("round %d becoming final", rounds-1), 10*time.Minute, func() (bool, error) {
		for r := uint64(0); r < uint64(rounds); r++ {
			rr, err := mq.Round(ctx, &markettypes.QueryRoundRequest{JobId: jobID, Round: r})
			if err != nil {
				return false, nil // not opened yet
			}
			rd := rr.Round
			if once(fmt.Sprint("open", r)) {
				s.say("Round %d opens at block %d from G_%d (root %x..., %s); commits due by block %d.",
					r, rd.OpenedHeight, r, rd.GlobalRoot[:8], mib(int64(rd.GlobalSize)), rd.Deadline)
				if !slices.Equal(rd.GlobalRoot, rootBytes(want[r])) {
					return false, fmt.Errorf("round %d starts from %x, diloco.Simulate's G_%d is %x", r, rd.GlobalRoot, r, rootBytes(want[r]))
				}
				if err := tellAssignment(s, job.Seed, r, shards, slots); err != nil {
					return false, err
				}
			}
			cr, err := mq.RoundCommits(ctx, &markettypes.QueryRoundCommitsRequest{JobId: jobID, Round: r})
			if err != nil {
				return false, err
			}
			for _, c := range cr.Commits {
				if once(fmt.Sprint("commit", r, c.Worker)) {
					// The chain zeroes a commit's claim when it pays it, so it is read here.
					claims[fmt.Sprint(r, c.Worker)] = c.Claim
					s.say("Block %d: %s (slot %d) commits its round %d: pseudo-gradient %x..., %s (dense: %s, %.1f%%),",
						c.CommittedHeight, slots[c.Worker], c.Worker, r, c.PseudoGradientRoot[:8], mib(int64(c.PseudoGradientSize)), mib(dense),
						100*float64(c.PseudoGradientSize)/float64(dense))
					s.detail("with its round-end checkpoint, claiming %s for its 8 steps.", depin(c.Claim.String()))
				}
			}
			if len(rd.NextGlobalRoot) > 0 && once(fmt.Sprint("global", r)) {
				s.say("The aggregator, %s (the lowest entered slot's worker), averages the entered pseudo-gradients %v and commits", names[rd.Aggregator], rd.Entered)
				s.detail("G_%d = %x... (%s); the other workers recompute it and agree.", r+1, rd.NextGlobalRoot[:8], mib(int64(rd.NextGlobalSize)))
				if !slices.Equal(rd.NextGlobalRoot, rootBytes(want[r+1])) {
					return false, fmt.Errorf("round %d's global on chain is %x, diloco.Simulate's G_%d is %x", r, rd.NextGlobalRoot, r+1, rootBytes(want[r+1]))
				}
				s.detail("diloco.Simulate's G_%d has the same root, bit for bit.", r+1)
			}
			if rd.State == markettypes.ROUND_STATE_FINAL && once(fmt.Sprint("final", r)) {
				var paid []string
				for _, w := range rd.Entered {
					claim := claims[fmt.Sprint(r, w)]
					paid = append(paid, fmt.Sprintf("%s %s", slots[w], depin(claim.String())))
					if _, ok := pay[w]; !ok {
						pay[w] = sdkmath.ZeroInt()
					}
					pay[w] = pay[w].Add(claim.Amount)
				}
				s.say("Round %d is final (G_%d unchallenged past its window): the chain released each entered", r, r+1)
				s.detail("worker's claim: %s.", strings.Join(paid, ", "))
			}
			if r == uint64(rounds-1) {
				last = rd
			}
		}
		return last.State == markettypes.ROUND_STATE_FINAL && told[fmt.Sprint("final", rounds-1)], nil
	}); err != nil {
		return sidecars, err
	}
	var totals []string
	for w := uint32(0); w < job.Spec.Workers; w++ {
		if p, ok := pay[w]; ok {
			totals = append(totals, fmt.Sprintf("%s %s", slots[w], depin(p.String()+denom)))
		}
	}
	s.say("Over %d rounds the workers earned: %s.", rounds, strings.Join(totals, ", "))

	s.section("4. The owner fetches the global model")
	out := filepath.Join(demoDir, "global")
	s.detail("$ depinchaind job fetch %d --out %s --from owner --keyring-backend test --grpc-addr %s", jobID, s.rel(out), n.GRPC)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := n.Exec(fctx, "job", "fetch", fmt.Sprint(jobID), "--out", out, "--from", "owner", "--keyring-backend", "test", "--grpc-addr", n.GRPC); err != nil {
		return sidecars, fmt.Errorf("job fetch of the global model: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "global"))
	if err != nil {
		return sidecars, err
	}
	g, err := diloco.DecodeGlobal(raw)
	if err != nil {
		return sidecars, fmt.Errorf("the fetched global %s: %w", filepath.Join(out, "global"), err)
	}
	if g.Root() != want[rounds].Root() || !slices.Equal(last.NextGlobalRoot, rootBytes(g)) {
		return sidecars, fmt.Errorf("job fetch wrote G_%d with root %s; the chain's is %x, diloco.Simulate's %s", g.Round, g.Root(), last.NextGlobalRoot, want[rounds].Root())
	}
	s.say("The custody holders served G_%d (%s in %s); its root %x... is the chain's and", g.Round, mib(int64(len(raw))), s.rel(out), rootPrefix(g))
	s.detail("diloco.Simulate's for the job's seed: bit-identical to one machine training alone.")
	heldOut, err := heldOutFortunes()
	if err != nil {
		return sidecars, err
	}
	before, err := diloco.HeldOutBitsPerByte(want[0].Model(), heldOut, heldOutWindowCount)
	if err != nil {
		return sidecars, err
	}
	after, err := diloco.HeldOutBitsPerByte(g.Model(), heldOut, heldOutWindowCount)
	if err != nil {
		return sidecars, err
	}
	s.say("Held-out bits per byte (Debian's fortunes, which the job never trained on): G_0 %.3f -> G_%d %.3f.", before, g.Round, after)
	s.detail("The exact forward pass continues a prompt from the fetched state:")
	text, err := sample(ctx, s, n, filepath.Join(out, "state"), specPath)
	if err != nil {
		return sidecars, err
	}
	s.block(wrap(text, 96))
	s.demoJob = jobID
	s.detail("After %d steps the tiny model has learnt which bytes are common (spaces, e, t), not yet words;", rounds*int(jobSync.Every))
	s.detail("`make demo` trains one provider's model for 800 steps.")
	return sidecars, nil
}

// setupTogether registers, bonds and configures the six sidecars in parallel, the GPU
// providers first (-keep leaves w1 running for exploring).
func setupTogether(ctx context.Context, n *localnet.Node, demoDir string) ([]*sidecar.Provider, error) {
	names := append(slices.Clone(togetherTrainers), togetherHolders...)
	out := make([]*sidecar.Provider, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		// The operator key signs for the sidecar too: no hot key grants to wait for.
		opts := sidecar.Options{Home: filepath.Join(demoDir, name), Operator: name, HotKey: name, SkipGrants: true, Bond: "100000000" + denom}
		if slices.Contains(togetherTrainers, name) {
			opts.Prices = map[string]uint64{gpuModel: 1_000_000}
			// The rate it bids (steps per hour) without measuring the Go trainer first.
			opts.Set = map[string]string{"throughput.go_trainer_macs_per_second": "2e8"}
		} else {
			opts.Set = map[string]string{"storage_role.enabled": "true", "storage_role.custody": "true", "storage_role.check_interval": `"2s"`}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = sidecar.Setup(ctx, n, opts)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("setting up %s: %w", name, errs[i])
			}
		}()
	}
	wg.Wait()
	var set []*sidecar.Provider
	for _, p := range out {
		if p != nil {
			set = append(set, p)
		}
	}
	return set, errors.Join(errs...)
}

// tellAssignment prints each slot's data shards of round r (diloco.Assign over the
// built-in corpus) and checks that they are disjoint.
func tellAssignment(s *story, seed []byte, r uint64, shards []diloco.Shard, slots map[uint32]string) error {
	a, err := diloco.Assign(seed, r, shards, len(slots))
	if err != nil {
		return err
	}
	held := map[int]bool{}
	for w, idx := range a {
		var bytes uint64
		for _, i := range idx {
			if held[i] {
				return fmt.Errorf("round %d: shard %s is assigned twice", r, shards[i].ID)
			}
			held[i] = true
			bytes += shards[i].End - shards[i].Start
		}
		first := "none"
		if len(idx) > 0 {
			first = shards[idx[0]].ID + ", ..."
		}
		s.detail("slot %d (%s) trains on %d shards of the corpus, %d bytes (%s)", w, slots[uint32(w)], len(idx), bytes, first)
	}
	s.detail("disjoint: each of the %d shards goes to one slot (diloco.Assign, from the seed and the round)", len(shards))
	return nil
}

// heldOutFortunes is text the reference workload never trains on (its data is the
// built-in corpus): Debian's fortunes, installed by `make deps`.
func heldOutFortunes() ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(fortunesDir, "fortunes"))
	if err != nil {
		return nil, fmt.Errorf("Debian's fortunes are not installed (`make deps` installs them): %w", err)
	}
	return raw, nil
}

func rootBytes(g *diloco.GlobalState) []byte {
	r := g.Root()
	return r[:]
}

func rootPrefix(g *diloco.GlobalState) []byte { return rootBytes(g)[:8] }
