package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// roundsJobYAML is a reference-transformer job trained by three workers together:
// two rounds of 8 steps, pseudo-gradients and globals held 2+1 in custody.
const roundsJobYAML = `name: rounds-lm
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
  commit_blocks: 200
total_steps: 16
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

// TestThreeSidecarsTrainInRounds: three GPU providers (w1..w3) win the three worker
// slots of a sync job and train it in rounds on real processes, three storage providers
// (h1..h3) hold every round file in custody. Each round every worker trains 8 exact
// steps on its own shards from G_r, commits its pseudo-gradient with its round-end
// checkpoint, fetches the others' from the holders and aggregates; the lowest slot
// commits G_{r+1}, the others agree. The chain's global roots are diloco.Simulate's for
// the job's seed bit for bit, the workers' data were disjoint in every round, the held
// out loss of the global model fell, and nobody saw a global it disagrees with.
func TestThreeSidecarsTrainInRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	r := startRoundsJob(ctx, t, roundsJobYAML, nil, nil)
	c := r.c
	started := time.Now()
	c.waitFor(ctx, t, "round 1's global (G_2) is committed", 8*time.Minute, func() bool {
		rd, ok := r.round(ctx, 1)
		return ok && len(rd.NextGlobalRoot) > 0
	})
	trainedFor := time.Since(started)
	want, job := r.checkSimulate(ctx, t, nil, nil)
	for rn := uint64(0); rn < 2; rn++ {
		// The workers' data in the round are disjoint: Assign gives every shard to one slot.
		a, err := diloco.Assign(job.Seed, rn, diloco.CorpusShards(uint64(len(traindata.BuiltinCorpus())), diloco.DefaultShardBytes), 3)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, shards := range a {
			if len(shards) == 0 {
				t.Fatalf("round %d: a slot has no data", rn)
			}
			for _, s := range shards {
				if seen[s] {
					t.Fatalf("round %d: shard %d is assigned twice", rn, s)
				}
				seen[s] = true
			}
		}
	}

	r.checkHeldOutLossFell(ctx, t, want)
	// An earlier global by its round; G_0 (the seed's, never trained) is refused by name.
	node, out := c.node, filepath.Join(r.dir, "fetched-g1")
	fetchRound := func(n string) (string, error) {
		return node.Exec(ctx, "job", "fetch", fmt.Sprint(r.jobID), "--round", n, "--out", out, "--from", "owner", "--keyring-backend", "test", "--grpc-addr", node.GRPC)
	}
	if _, err := fetchRound("1"); err != nil {
		t.Fatalf("job fetch --round 1: %v", err)
	}
	if raw, err := os.ReadFile(filepath.Join(out, "global")); err != nil || merkle.RootOfBytes(raw, diloco.ChunkSize) != want[1].Root() {
		t.Fatalf("job fetch --round 1 wrote a file (%v) that is not G_1 %s", err, want[1].Root())
	}
	if _, err := fetchRound("0"); err == nil || !strings.Contains(err.Error(), "G_0 is the job's initial state") {
		t.Fatalf("job fetch --round 0: %v, want the refusal naming G_0", err)
	}
	r.checkOwnersView(ctx, t, 2)
	train, wait := r.roundTimes(ctx, t, "w1", "w2", "w3")
	t.Logf("2 rounds of 3 workers in %s: training %.1fs, waiting on the round barrier %.1fs (%.0f%% of the workers' time)",
		trainedFor.Round(time.Second), train, wait, 100*wait/(train+wait))
}

// roundsRun is a sync job submitted to a cluster of three trainers and three holders,
// its three slots leased.
type roundsRun struct {
	c      *cluster
	dir    string
	market markettypes.QueryClient
	jobID  uint64
	// slots maps each slot to the trainer that leased it.
	slots map[uint32]string
	// stream and shards are the job's data as diloco.Simulate takes it; nil: the
	// built-in corpus.
	stream []byte
	shards []diloco.Shard
}

// roundsTrainers and roundsHolders are the sidecars of a roundsRun.
var (
	roundsTrainers = []string{"w1", "w2", "w3"}
	roundsHolders  = []string{"h1", "h2", "h3"}
)

// startRoundsJob starts the cluster (trainers w1..w3 with extra start arguments,
// holders h1..h3; late trainers set up but not started; x/market params overridden by
// marketParams), submits jobYAML and waits until its three slots are leased.
func startRoundsJob(ctx context.Context, t testing.TB, jobYAML string, startArgs map[string][]string, marketParams map[string]string, late ...string) *roundsRun {
	t.Helper()
	return startRoundsJobWith(ctx, t, jobYAML, startArgs, marketParams, nil, late...)
}

// startRoundsJobWith is startRoundsJob with config.toml fields set per trainer (added to
// sidecar.Options.Set of the named trainers).
func startRoundsJobWith(ctx context.Context, t testing.TB, jobYAML string, startArgs map[string][]string, marketParams map[string]string,
	set map[string]map[string]string, late ...string) *roundsRun {
	t.Helper()
	r := newRoundsCluster(ctx, t, startArgs, marketParams, set, nil, late...)
	r.c.startSidecars(ctx, t, append(slices.Clone(roundsTrainers), roundsHolders...)...)
	r.submitJob(ctx, t, jobYAML)
	return r
}

// newRoundsCluster sets up startRoundsJob's cluster without starting it; trainerSet adds
// configuration settings per trainer (by name), holderSet to every holder's. A late name
// v… is a verifier of every checkpoint, bonded like the others as a provider that prices
// no GPU.
func newRoundsCluster(ctx context.Context, t testing.TB, startArgs map[string][]string, marketParams map[string]string,
	trainerSet map[string]map[string]string, holderSet map[string]string, late ...string) *roundsRun {
	t.Helper()
	dir := t.TempDir()
	names := append(slices.Clone(roundsTrainers), roundsHolders...)
	// Late trainers are set up too, not started: the test starts them for a joiner.
	c := startCluster(ctx, t, dir, append(slices.Clone(names), late...), func(state map[string]any) error {
		shortStorageProofs(state)
		m := state["market"].(map[string]any)["params"].(map[string]any)
		m["round_aggregate_blocks"], m["round_challenge_blocks"] = "200", "10"
		for k, v := range marketParams {
			m[k] = v
		}
		// A round's global is final only once its workers' round checkpoints are, each
		// after x/verify's challenge window (default 300 blocks, 2.5 minutes here).
		// Nobody challenges a checkpoint in these tests (no auditors; faults are proven
		// against the round's commitments while the round is not final): with 40 blocks
		// the round's own round_challenge_blocks decide when it is final.
		state["verify"].(map[string]any)["params"].(map[string]any)["challenge_window"] = "40"
		return nil
	}, func(name string) sidecar.Options {
		if strings.HasPrefix(name, "v") {
			return sidecar.Options{Prices: map[string]uint64{}, Set: map[string]string{"verifier.enabled": "true", "verifier.policy": `"all"`}}
		}
		if strings.HasPrefix(name, "w") {
			opts := sidecar.Options{Prices: map[string]uint64{"H100-SXM5-80GB": 1_000_000}, StartArgs: startArgs[name],
				Set: map[string]string{"throughput.go_trainer_macs_per_second": "2e8"}}
			maps.Copy(opts.Set, trainerSet[name])
			return opts
		}
		o := holderOptions()
		maps.Copy(o.Set, holderSet)
		return o
	})
	return &roundsRun{c: c, dir: dir, market: markettypes.NewQueryClient(c.conn), slots: map[uint32]string{}}
}

// submitJob submits jobYAML as the owner and waits until its three slots are leased.
func (r *roundsRun) submitJob(ctx context.Context, t testing.TB, jobYAML string) {
	t.Helper()
	c, dir := r.c, r.dir
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(jobYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := c.node.Tx(ctx, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "500000000udepin")
	if err != nil || res.Code != 0 {
		t.Fatalf("submit-job: %v %s", err, res.RawLog)
	}
	idAttr, _ := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	fmt.Sscan(strings.Trim(idAttr, `"`), &r.jobID)
	c.waitFor(ctx, t, "three workers lease the job's slots", 3*time.Minute, func() bool {
		res, err := r.market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: r.jobID})
		if err != nil || len(res.Leases) != 3 {
			return false
		}
		for _, l := range res.Leases {
			for name, p := range c.sidecars {
				if p.Operator == l.Provider {
					r.slots[l.Worker] = name
				}
			}
		}
		return true
	})
}

func (r *roundsRun) round(ctx context.Context, n uint64) (markettypes.Round, bool) {
	res, err := r.market.Round(ctx, &markettypes.QueryRoundRequest{JobId: r.jobID, Round: n})
	if err != nil {
		return markettypes.Round{}, false
	}
	return res.Round, true
}

// checkSimulate checks that every round's committed global roots are diloco.Simulate's
// for the job's seed and spec with dropouts and joiners, bit for bit, and that each
// round's entered slots are the ones that did not drop out; it returns Simulate's states
// and the job.
func (r *roundsRun) checkSimulate(ctx context.Context, t testing.TB, dropouts, joiners map[uint64][]int) ([]*diloco.GlobalState, markettypes.Job) {
	t.Helper()
	res, err := r.market.Job(ctx, &markettypes.QueryJobRequest{JobId: r.jobID})
	if err != nil {
		t.Fatal(err)
	}
	job := res.Job
	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		t.Fatal(err)
	}
	sync := job.Spec.Sync.Diloco()
	rounds := int(job.Spec.Rounds())
	want, err := diloco.Simulate(diloco.SimOptions{Config: cfg, Sync: sync.Spec(),
		Seed: job.Seed, Workers: int(job.Spec.Workers), Rounds: rounds, Dropouts: dropouts, Joiners: joiners, Stream: r.stream, Shards: r.shards})
	if err != nil {
		t.Fatal(err)
	}
	if want[0].Sync != sync {
		t.Fatalf("the simulation's sync %+v is not the job's %+v", want[0].Sync, sync)
	}
	for n := range uint64(rounds) {
		rd, _ := r.round(ctx, n)
		g0, g1 := want[n].Root(), want[n+1].Root()
		if !slices.Equal(rd.GlobalRoot, g0[:]) || !slices.Equal(rd.NextGlobalRoot, g1[:]) {
			t.Fatalf("round %d: chain %x → %x, Simulate %s → %s", n, rd.GlobalRoot, rd.NextGlobalRoot, g0, g1)
		}
		var entered []uint32
		for w := range job.Spec.Workers {
			if !slices.Contains(dropouts[n], int(w)) {
				entered = append(entered, w)
			}
		}
		if !slices.Equal(rd.Entered, entered) {
			t.Fatalf("round %d entered %v, want %v", n, rd.Entered, entered)
		}
	}
	t.Logf("the chain's global roots of %d rounds equal diloco.Simulate's (dropouts %v, joiners %v) at %s", rounds, dropouts, joiners, r.c.since())
	return want, job
}

// heldOutText is English the built-in corpus does not hold, fixed here so that the
// held-out loss the rounds tests log does not move when a document is edited (it was
// docs/training-together.md): 48 windows of the reference model's 33 bytes.
const heldOutText = `The harbour was quiet before dawn, and the fishing boats rocked gently against
their ropes while the gulls waited on the sea wall for the first catch of the day.
An old man walked along the quay with a lantern, checking each knot as he passed,
because a storm had been forecast for the evening and he trusted nobody else to do
it properly. His daughter ran the market stall now; she sold bread, cheese, and
whatever the boats brought in, and she kept her accounts in a small green notebook
that never left her apron pocket. Travellers who came through the village in
summer always asked about the lighthouse on the point. It had not been lit for
forty years, but the children still told stories about the keeper who was said to
walk the gallery on windy nights, counting the ships that never came home. The
school teacher, a patient woman from the city, used those stories to teach
arithmetic: if three ships left at noon and one returned at dusk, how many were
still at sea, and how long would the lamp have to burn to guide them back? By
late morning the wind had turned, the clouds were building over the hills to the
west, and the first drops of rain darkened the stones of the harbour steps. The
boats came in one after another, their engines coughing, and the men unloaded
crates of silver fish onto the wet planks while their wives argued about prices.
Nobody noticed the stranger who had arrived on the morning bus, a tall woman in a
grey coat carrying a leather case, until she asked at the inn for a room facing
the sea and paid for a whole month in advance, in cash, without asking the price.
`

// checkHeldOutLossFell fetches the global model of the last round as the owner does
// (`depinchaind job fetch`, from its custody holders, once final), checks that it is
// the committed one (Simulate's root, want[R]) and that its held-out loss (text the
// corpus does not hold) fell from G_0's.
func (r *roundsRun) checkHeldOutLossFell(ctx context.Context, t testing.TB, want []*diloco.GlobalState) {
	t.Helper()
	last := uint64(len(want) - 1)
	r.c.waitFor(ctx, t, fmt.Sprintf("G_%d is final", last), 3*time.Minute, func() bool {
		rd, ok := r.round(ctx, last-1)
		return ok && rd.State == markettypes.ROUND_STATE_FINAL
	})
	out := filepath.Join(r.dir, "fetched")
	node := r.c.node
	if _, err := node.Exec(ctx, "job", "fetch", fmt.Sprint(r.jobID), "--out", out, "--from", "owner", "--keyring-backend", "test", "--grpc-addr", node.GRPC); err != nil {
		t.Fatalf("job fetch of the global model: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "global"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := diloco.DecodeGlobal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if g.Root() != want[last].Root() || g.Round != last {
		t.Fatalf("job fetch wrote G_%d with root %s, want G_%d %s", g.Round, g.Root(), last, want[last].Root())
	}
	state, err := os.ReadFile(filepath.Join(out, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if model := g.Model(); !bytes.Equal(state, model.Encode()) {
		t.Fatalf("job fetch's state is not G_%d's weights as a state (step %d)", last, model.Step)
	}
	heldOut := []byte(heldOutText)
	before, err := diloco.HeldOutBitsPerByte(want[0].Model(), heldOut, 64)
	if err != nil {
		t.Fatal(err)
	}
	after, err := diloco.HeldOutBitsPerByte(g.Model(), heldOut, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out bits per byte of the global model: G_0 %.3f, G_%d %.3f", before, last, after)
	if after >= before {
		t.Fatalf("held-out loss did not fall: %.3f → %.3f", before, after)
	}
}

// checkOwnersView reads the job as its owner does (`depinchaind job status -o json`): every
// one of the job's rounds is FINAL with all three slots entered, and each worker paid.
func (r *roundsRun) checkOwnersView(ctx context.Context, t testing.TB, rounds int) {
	t.Helper()
	node := r.c.node
	out, err := node.Exec(ctx, "job", "status", fmt.Sprint(r.jobID), "-o", "json", "--grpc-addr", node.GRPC)
	if err != nil {
		t.Fatalf("job status: %v", err)
	}
	var v jobview.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("job status -o json: %v\n%s", err, out)
	}
	if v.Sync == nil || v.Sync.TotalRounds != uint64(rounds) || len(v.Rounds) != rounds {
		t.Fatalf("job status shows sync %+v and %d rounds, want %d", v.Sync, len(v.Rounds), rounds)
	}
	for _, rd := range v.Rounds {
		if rd.State != "FINAL" || !slices.Equal(rd.Entered, []uint32{0, 1, 2}) || len(rd.Commits) != 3 {
			t.Fatalf("job status shows round %d %s, entered %v, %d commits; want FINAL with all three", rd.Round, rd.State, rd.Entered, len(rd.Commits))
		}
		for _, c := range rd.Commits {
			if c.Pay != jobview.PayPaid {
				t.Fatalf("job status shows round %d slot %d's pay %q, want %q", rd.Round, c.Worker, c.Pay, jobview.PayPaid)
			}
		}
	}
	t.Logf("job status: %d rounds FINAL, every slot entered and paid", rounds)
}

// roundTimes adds up the seconds the named trainers' sync leases trained and waited on
// round barriers (their /v1/leases), failing on any committed global one disagreed with.
func (r *roundsRun) roundTimes(ctx context.Context, t testing.TB, names ...string) (train, wait float64) {
	t.Helper()
	for _, name := range names {
		var ls struct {
			Leases []struct {
				JobID string `json:"job_id"`
				Round *struct {
					Phase          string  `json:"phase"`
					GlobalMismatch string  `json:"global_mismatch"`
					TrainSeconds   float64 `json:"train_seconds"`
					WaitSeconds    float64 `json:"wait_seconds"`
				} `json:"round"`
			} `json:"leases"`
		}
		if err := r.c.sidecars[name].REST(ctx, "/v1/leases", &ls); err != nil {
			t.Fatal(err)
		}
		for _, l := range ls.Leases {
			if l.JobID != fmt.Sprint(r.jobID) || l.Round == nil {
				continue
			}
			if l.Round.GlobalMismatch != "" {
				t.Fatalf("%s: %s", name, l.Round.GlobalMismatch)
			}
			train, wait = train+l.Round.TrainSeconds, wait+l.Round.WaitSeconds
		}
	}
	if train == 0 {
		t.Fatal("no worker reports its rounds in /v1/leases")
	}
	return train, wait
}
