package main_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/storage"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const fortunesDatasetID = "fortunes-e2e"

const fortunesJobYAML = `name: fortunes-lm
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: transformer
  model: {layers: 2, d_model: 32, heads: 2, d_ff: 64, context: 32, vocab: 256}
  train: {batch: 4, optimizer: adamw, lr: 0.003, warmup_steps: 8, weight_decay: 0.1}
dataset: ` + fortunesDatasetID + `
total_steps: 64
checkpoint_every: 16
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 6
`

// datasetWorld is a chain on which the owner registered a dataset of
// Debian's fortunes (built by scripts/fortunes-dataset.sh: 192 KB of text,
// 32 KiB shards of 2 data and 1 parity piece), held by three storage
// providers s1, s2 and s3 (real depinprovider sidecars with [storage_role]
// and claim_local) that hold piece 0, 1 and 2 of every shard and have
// claimed them; w.provider is a fourth sidecar, "operator", set up to train
// but not started. A funded "verifier" key is there for a verifier sidecar.
type datasetWorld struct {
	*world
	registry shardtypes.QueryClient
	sidecars map[string]*sidecar.Provider
	// manifest is the dataset as built; built is the folder of its pieces.
	manifest *manifest.Manifest
	built    string
	dir      string
	since    func() time.Duration
}

// newDatasetWorld sets up a datasetWorld within timeout; trainer configures
// the operator's sidecar (Home, Operator, HotKey and Bond are filled in).
func newDatasetWorld(t *testing.T, timeout time.Duration, trainer sidecar.Options) *datasetWorld {
	t.Helper()
	if _, err := os.Stat("/usr/share/games/fortunes/fortunes"); err != nil {
		t.Fatalf("Debian's fortunes are not installed (scripts/deps.sh installs them): %v", err)
	}
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	dir := t.TempDir()

	node, err := localnet.Start(ctx, localnet.Options{
		Home:      filepath.Join(dir, "chain"),
		BlockTime: 500 * time.Millisecond,
		Accounts: map[string]int64{
			"owner": 1_000_000_000_000, "operator": 1_000_000_000_000,
			"s1": 1_000_000_000_000, "s2": 1_000_000_000_000, "s3": 1_000_000_000_000,
			"verifier": 1_000_000_000_000,
		},
		Genesis: func(state map[string]any) error {
			params := state["verify"].(map[string]any)["params"].(map[string]any)
			params["challenge_window"] = "6"
			// No storage challenge during the tests: a holder must still hold
			// its replica (damaged or not) when the trainer fetches it.
			sr := state["shardregistry"].(map[string]any)["params"].(map[string]any)
			sr["period_blocks"] = "100000"
			sr["proof_window_blocks"] = "1000"
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	conn, err := grpc.NewClient(node.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	d := &datasetWorld{
		world:    &world{t: t, ctx: ctx, node: node, market: markettypes.NewQueryClient(conn), verify: verifytypes.NewQueryClient(conn)},
		registry: shardtypes.NewQueryClient(conn), sidecars: map[string]*sidecar.Provider{}, dir: dir, since: since,
	}

	// Three storage providers and the trainer, set up side by side.
	names := []string{"s1", "s2", "s3", "operator"}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		setupErr []error
	)
	for _, name := range names {
		opts := sidecar.Options{Set: map[string]string{"storage_role.enabled": "true", "storage_role.claim_local": "true"}}
		if name == "operator" {
			opts = trainer
			if opts.Prices == nil {
				opts.Prices = map[string]uint64{"H100-SXM5-80GB": h100Price}
			}
		}
		opts.Home, opts.Operator, opts.HotKey, opts.SkipGrants, opts.Bond = filepath.Join(dir, name), name, name, true, "100000000000udepin"
		if testing.Verbose() {
			opts.Log = prefixWriter{os.Stderr, "    " + name + "| "}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sidecar.Setup(ctx, node, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				setupErr = append(setupErr, fmt.Errorf("%s: %w", name, err))
				return
			}
			d.sidecars[name] = p
		}()
	}

	// Meanwhile the dataset is built from the fortunes and registered, as an
	// operator would.
	d.manifest, d.built = registerFortunes(ctx, t, node, dir, fortunesDatasetID, "196608", "32KiB")
	if len(d.manifest.Shards) < 3 {
		t.Fatalf("the fortunes made %d shards, want several", len(d.manifest.Shards))
	}

	wg.Wait()
	if err := errors.Join(setupErr...); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.sidecars {
		t.Cleanup(p.Stop)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range names {
			t.Logf("%s's log tail:\n%s", name, readTail(d.sidecars[name].LogPath()))
		}
		t.Logf("node log tail:\n%s", readTail(filepath.Join(node.Home, "node.log")))
	})
	d.provider = d.sidecars["operator"]
	t.Logf("chain, %d-shard dataset and four providers set up at %s", len(d.manifest.Shards), since())

	// s1, s2 and s3 get piece 0, 1 and 2 of every shard and claim them at start.
	holders := []string{"s1", "s2", "s3"}
	holdPieces(t, dir, fortunesDatasetID, d.manifest, d.built, holders)
	d.startAll(holders...)
	d.eventually("every piece of the dataset claimed", time.Minute, allClaimed(ctx, d.registry, fortunesDatasetID, len(d.manifest.Shards)))
	t.Logf("every piece claimed at %s", since())
	return d
}

// registerFortunes builds the first maxBytes of Debian's fortunes (scripts/fortunes-dataset.sh)
// into a dataset of shardSize shards, Reed–Solomon 2+1 in 1 KiB chunks, under dir/fortunes,
// and registers it as id from the node's "owner"; it returns its manifest and the folder
// of its pieces.
func registerFortunes(ctx context.Context, t testing.TB, node *localnet.Node, dir, id, maxBytes, shardSize string) (*manifest.Manifest, string) {
	t.Helper()
	script := filepath.Join(moduleRoot(t), "scripts", "fortunes-dataset.sh")
	cmd := exec.CommandContext(ctx, script, "--out", filepath.Join(dir, "fortunes"), "--id", id,
		"--max-bytes", maxBytes, "--shard-size", shardSize, "--chunk-size", "1024", "--rs", "2+1",
		"--binary", node.Binary, "--home", node.Home, "--from", "owner", "--keyring-backend", "test",
		"--node", node.RPC, "--chain-id", node.ChainID)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("fortunes-dataset.sh: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	manifestPath := strings.TrimSpace(string(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:]))
	m, err := manifest.Load(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	return m, filepath.Dir(manifestPath)
}

// holdPieces puts piece i of every shard of dataset id (built in built) in the pieces
// folder of holders[i] (dir/<name>), which claims them when its storage role starts
// with claim_local.
func holdPieces(t testing.TB, dir, id string, m *manifest.Manifest, built string, holders []string) {
	t.Helper()
	for i, name := range holders {
		for shard := range m.Shards {
			path := storage.PiecePath(filepath.Join(dir, name, "pieces"), id, uint32(shard), uint32(i))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, readFile(t, filepath.Join(built, manifest.PieceFile(uint32(shard), uint32(i)))), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// allClaimed holds once each of the shards of dataset id has every piece claimed.
func allClaimed(ctx context.Context, registry shardtypes.QueryClient, id string, shards int) func() bool {
	return func() bool {
		res, err := registry.Shards(ctx, &shardtypes.QueryShardsRequest{DatasetId: id})
		if err != nil || len(res.Shards) != shards {
			return false
		}
		for _, sh := range res.Shards {
			if sh.Live < sh.Target {
				return false
			}
		}
		return true
	}
}

// builtPiece is the bytes of a piece as the dataset was built.
func (d *datasetWorld) builtPiece(shard, piece uint32) []byte {
	d.t.Helper()
	return readFile(d.t, filepath.Join(d.built, manifest.PieceFile(shard, piece)))
}

// startAll starts the named sidecars side by side.
func (d *datasetWorld) startAll(names ...string) {
	d.t.Helper()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.sidecars[name].Start(d.ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		d.t.Fatal(err)
	}
}

// TestDatasetJobTrainsOnFetchedPieces is a dataset-backed job end to end
// with real processes, on a datasetWorld. Then s1's copy of shard 0's piece
// 0 is damaged on disk. The fourth sidecar, with no pieces, bids on the
// job (its data is fetchable: every shard has k live pieces), wins the
// lease, downloads the worker's pieces from the holders' /pieces/ servers,
// refuses s1's damaged piece (logged with s1's address), rebuilds it from
// s2's data piece and s3's parity piece, writes the stream in x/verify's
// DatasetLayout order, trains the transformer the job specifies on it, and
// its four checkpoints become final and are paid; the final state is what
// pkg/exact computes from the seed on that stream. Before that, a job whose
// model is larger than the chain's params allow is refused at submit with
// the field named, and the owner's balance is untouched.
func TestDatasetJobTrainsOnFetchedPieces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and four real sidecars")
	}
	d := newDatasetWorld(t, 4*time.Minute, sidecar.Options{})
	w, node, ctx, dir, since, sidecars, registry, built := d.world, d.node, d.ctx, d.dir, d.since, d.sidecars, d.registry, d.built

	// s1's copy of shard 0's piece 0 goes bad on disk; its replica stays live.
	damaged := storage.PiecePath(filepath.Join(dir, "s1", "pieces"), fortunesDatasetID, 0, 0)
	b, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x20
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}

	d.startAll("operator")

	// A model above max_transformer_params is refused before anything is charged.
	owner, err := node.Address(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	ownerBefore := w.balanceOf(owner)
	tooBig := strings.Replace(fortunesJobYAML, "{layers: 2, d_model: 32, heads: 2, d_ff: 64,", "{layers: 32, d_model: 4096, heads: 32, d_ff: 16384,", 1) // 6.4 B parameters
	bigSpec := filepath.Join(dir, "too-big.yaml")
	if err := os.WriteFile(bigSpec, []byte(tooBig), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := node.Tx(ctx, "owner", "market", "submit-job", "--spec", bigSpec, "--deposit", "500000000udepin")
	if refusal := fmt.Sprint(err, res.RawLog); (err == nil && res.Code == 0) || !strings.Contains(refusal, "workload.model: parameter count is") {
		t.Fatalf("a model above max_transformer_params: %s", refusal)
	}
	if got := w.balanceOf(owner); got != ownerBefore {
		t.Fatalf("the refused job changed the owner's balance: %d, was %d", got, ownerBefore)
	}

	jobID := w.submitJob(fortunesJobYAML, "500000000udepin")
	w.eventually("the trainer's bid on the dataset-backed job", time.Minute, func() bool {
		res, err := w.market.Bids(ctx, &markettypes.QueryBidsRequest{JobId: jobID})
		if w.job(jobID).State != markettypes.JOB_STATE_OPEN && (err != nil || len(res.Bids) == 0) {
			t.Fatalf("job %d left the auction with no bid", jobID)
		}
		return err == nil && len(res.Bids) == 1 && res.Bids[0].Provider == w.provider.Operator
	})
	t.Logf("bid at %s", since())

	leases := w.waitPaid(jobID)
	t.Logf("job completed and paid at %s", since())
	if len(leases) != 1 || leases[0].CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("leases %+v", leases)
	}
	cps, err := w.verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases[0].Id})
	if err != nil {
		t.Fatal(err)
	}
	if len(cps.Checkpoints) != 4 {
		t.Fatalf("%d checkpoints on chain, want 4", len(cps.Checkpoints))
	}
	for _, cp := range cps.Checkpoints {
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL {
			t.Fatalf("checkpoint %d is %s", cp.Index, cp.Status)
		}
	}

	// The damaged piece was refused, naming s1, and rebuilt from parity.
	logged, err := os.ReadFile(w.provider.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, line := range strings.Split(string(logged), "\n") {
		if strings.Contains(line, `msg="piece refused: the bytes a holder served do not match the registered root"`) {
			refused = append(refused, line)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "holder="+sidecars["s1"].Operator) || !strings.Contains(refused[0], "shard=0 piece=0") {
		t.Fatalf("refusals logged: %q, want one of s1's shard 0 piece 0", refused)
	}
	if n := w.provider.LogCount("data piece rebuilt from other pieces of its shard"); n != 1 {
		t.Fatalf("%d pieces rebuilt, want 1", n)
	}

	// The data folder the trainer read is the worker's layout as x/verify knows it.
	dataDir := findDataDir(t, w.provider.Home)
	stream, err := exact.ReadStreamDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traindata.NewStream(chainLayout(t, ctx, registry, jobID, leases[0].Worker), stream); err != nil {
		t.Fatalf("the data folder is not the worker's committed stream: %v", err)
	}
	// The last checkpoint's state is the job's model trained on that stream, bit for bit.
	job := w.job(jobID)
	initial, err := verifytypes.InitialState(job)
	if err != nil {
		t.Fatal(err)
	}
	final, err := exact.Run(initial, stream, job.Seed, job.Spec.TotalSteps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, got := final.Root(), cps.Checkpoints[len(cps.Checkpoints)-1].StateRoot; string(want[:]) != string(got) {
		t.Fatalf("final state_root %x, pkg/exact computes %x", got, want)
	}
	// Its files are the pieces as built, the damaged one included.
	if first, err := os.ReadFile(filepath.Join(dataDir, "000000-shard0-piece0")); err != nil || string(first) != string(readFile(t, filepath.Join(built, manifest.PieceFile(0, 0)))) {
		t.Fatalf("the first data file is not shard 0's piece 0 as built: %v", err)
	}
	var jobs jobsJSON
	if err := w.provider.REST(ctx, "/v1/jobs", &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 || !strings.HasPrefix(jobs.Jobs[0].Decision, "bid 2000000udepin") {
		t.Fatalf("decisions %+v", jobs.Jobs)
	}
	t.Logf("done at %s", since())
}

// chainLayout is x/verify's layout of a worker's stream, from the chain's queries.
func chainLayout(t *testing.T, ctx context.Context, q shardtypes.QueryClient, jobID uint64, worker uint32) traindata.Layout {
	t.Helper()
	asg, err := q.Assignment(ctx, &shardtypes.QueryAssignmentRequest{JobId: jobID})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := q.Dataset(ctx, &shardtypes.QueryDatasetRequest{DatasetId: fortunesDatasetID})
	if err != nil {
		t.Fatal(err)
	}
	var shards []shardtypes.Shard
	for _, wa := range asg.Workers {
		if wa.Worker != worker {
			continue
		}
		for _, i := range wa.Shards {
			res, err := q.Shard(ctx, &shardtypes.QueryShardRequest{DatasetId: fortunesDatasetID, Index: i})
			if err != nil {
				t.Fatal(err)
			}
			sh := shardtypes.Shard{DatasetId: fortunesDatasetID, Index: i, SizeBytes: res.Shard.SizeBytes}
			for _, p := range res.Shard.Pieces {
				sh.Pieces = append(sh.Pieces, p.Piece)
			}
			shards = append(shards, sh)
		}
	}
	layout, err := verifytypes.DatasetLayout(ds.Dataset, shards)
	if err != nil {
		t.Fatal(err)
	}
	return layout
}

// findDataDir finds the one lease data folder under a sidecar's home.
func findDataDir(t *testing.T, home string) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "data" {
			if _, err := os.Stat(filepath.Join(path, "000000-shard0-piece0")); err == nil {
				found = append(found, path)
			}
		}
		return nil
	})
	if err != nil || len(found) != 1 {
		t.Fatalf("lease data folders under %s: %v %v", home, found, err)
	}
	return found[0]
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := localnet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
