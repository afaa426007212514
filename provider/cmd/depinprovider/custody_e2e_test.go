package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sdkmath "cosmossdk.io/math"
	"github.com/cosmos/cosmos-sdk/crypto/keys/secp256k1"
	"github.com/cosmos/cosmos-sdk/types/bech32"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/reqauth"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/testutil/browser"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// custodyJobYAML is a reference job whose checkpoint states are kept in custody, 2+1.
const custodyJobYAML = `name: custody-lm
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
bidding_window_blocks: 6
checkpoint_deadline_blocks: 40
audit:
  auditors: 0
custody:
  data_pieces: 2
  parity_pieces: 1
  retain_checkpoints: 720h
`

// TestTrainerHostDestroyedResumesFromCustody is the promise "the job reopens from its
// last final checkpoint" with the trainer's host gone for good, on real processes. Two
// GPU providers (t1 bids alone and wins; t2 starts after) and three storage providers (h1..h3,
// storage_role.custody on, no GPUs priced) hold checkpoint pieces. t1 trains, commits
// its first checkpoint with the roots of its 2+1 custody pieces; the holders fetch the
// pieces from t1's public server, check them and claim them, and only then is the
// checkpoint final. t1 is paused before its second submission, then its sidecar is
// killed with SIGKILL and its whole home (work folder, pieces, database) deleted; it
// never comes back. At its checkpoint deadline the lease closes for non-performance, the
// job reopens, t2 wins it, rebuilds the start state from the holders' pieces (t1 cannot
// serve anything), resumes at step 16 and completes the job, every checkpoint in custody.
// The owner fetches the final state with `depinchaind job fetch`, which verifies it
// against the chain's roots; a fetch by another key is refused. Nobody but t1 lost bond.
func TestTrainerHostDestroyedResumesFromCustody(t *testing.T) {
	n := newCustodyNet(t, 9*time.Minute, custodyNetConfig{t1Args: pauseBeforeSecondCheckpoint})
	ctx, node, market, shards, sidecars := n.ctx, n.node, n.market, n.shards, n.sidecars
	since, waitFor, names := n.since, n.waitFor, custodyNetNames
	bond := func(name string) sdkmath.Int { return n.provider(name).Bond.Amount }
	bondsBefore := n.bonds()

	jobID := n.submitJob(custodyJobYAML, "500000000udepin")

	// The owner's dashboard, open on the job's page from before its first checkpoint:
	// every custody row below appears and changes live, without a reload.
	page := browser.Open(ctx, t)
	page.Navigate(browser.StartDashboard(ctx, t, node, 500*time.Millisecond) + fmt.Sprintf("#/job/%d", jobID))
	page.WaitFor("the job page loads", `document.getElementById('job-state') !== null`, 30*time.Second)
	page.MarkLoad()

	leases := func() []markettypes.Lease { return n.leases(jobID) }
	checkpoints := n.checkpoints
	// Checkpoint 0: committed with its custody roots, held by two of h1..h3 (never t1),
	// final only then.
	first, cp0 := n.firstCheckpointInCustody(jobID, 3*time.Minute)
	if cp0.CustodyId != shardtypes.CustodyDatasetID(first.Id, 0) {
		t.Fatalf("checkpoint 0 custody id %q", cp0.CustodyId)
	}
	sh, err := shards.Shard(ctx, &shardtypes.QueryShardRequest{DatasetId: cp0.CustodyId, Index: 0})
	if err != nil {
		t.Fatal(err)
	}
	if sh.Shard.Live < sh.Shard.MinLive {
		t.Fatalf("final checkpoint with %d live pieces of the %d it needs", sh.Shard.Live, sh.Shard.MinLive)
	}
	for _, r := range sh.Replicas {
		if r.Holder == sidecars["t1"].Operator {
			t.Fatal("the trainer holds a piece of its own state")
		}
	}
	t.Logf("checkpoint 0 (steps %d..%d) final with %d of %d pieces held", cp0.StartStep, cp0.EndStep, sh.Shard.Live, sh.Shard.Target)

	// The page's custody of checkpoint 0 is the chain's: final, k+m = 3, each proven
	// piece's holder listed.
	cp0Row := fmt.Sprintf(`document.querySelector('#custody tr[data-custody="%d/0"]')`, first.Id)
	page.WaitFor("the page shows checkpoint 0 final in custody", fmt.Sprintf(
		`(r => r && r.dataset.final === "true" && r.dataset.pieces === "3" && r.dataset.needed === "2" && +r.dataset.proven >= 2 && r.querySelectorAll('.holders a').length === +r.dataset.proven)(%s)`, cp0Row), 30*time.Second)
	page.Shot("custody-checkpoint-0-final")
	// chainCustody and pageCustody list each checkpoint in custody as the chain and as
	// the page have it: proven/k+m, final, active holders (the page: holder links).
	chainCustody := func() string {
		var rows []string
		for _, l := range leases() {
			for _, cp := range checkpoints(l.Id) {
				if cp.CustodyId == "" {
					continue
				}
				sh, err := shards.Shard(ctx, &shardtypes.QueryShardRequest{DatasetId: cp.CustodyId, Index: 0})
				if err != nil {
					t.Fatal(err)
				}
				active := 0
				for _, r := range sh.Replicas {
					if r.Status == shardtypes.REPLICA_STATUS_ACTIVE {
						active++
					}
				}
				rows = append(rows, fmt.Sprintf("%d/%d:%d/%d:%t:%d", cp.LeaseId, cp.Index, sh.Shard.Live, sh.Shard.Target,
					cp.Status == verifytypes.CHECKPOINT_STATUS_FINAL, active))
			}
		}
		slices.Sort(rows)
		return strings.Join(rows, " ")
	}
	pageCustody := func() string {
		rows := strings.Fields(browser.Eval[string](page, `[...document.querySelectorAll('#custody tr[data-custody]')].map(r =>
			r.dataset.custody + ":" + r.dataset.proven + "/" + r.dataset.pieces + ":" + r.dataset.final + ":" + r.querySelectorAll('.holders a').length).join(" ")`))
		slices.Sort(rows)
		return strings.Join(rows, " ")
	}
	waitFor("the page's custody matches the chain's at checkpoint 0", 30*time.Second, func() bool {
		return chainCustody() == pageCustody()
	})
	if page.Reloaded() {
		t.Fatal("the job page was reloaded; custody must be drawn live")
	}

	// A holder serves its piece only to a signed request of someone allowed to read it.
	held := sh.Replicas[0]
	var holderName string
	for _, n := range []string{"h1", "h2", "h3"} {
		if sidecars[n].Operator == held.Holder {
			holderName = n
		}
	}
	pieceURL := fmt.Sprintf("%s/pieces/%s/0/%d", sidecars[holderName].Public, cp0.CustodyId, held.Piece)
	if code, body := signedGet(t, ctx, pieceURL, nil); code != http.StatusUnauthorized || !strings.Contains(body, "not signed") {
		t.Fatalf("an unsigned request for a custody piece: %d %s", code, body)
	}
	if code, body := signedGet(t, ctx, pieceURL, strangerSigner(node.ChainID)); code != http.StatusForbidden || !strings.Contains(body, "neither the job's owner nor bonded") {
		t.Fatalf("a request signed by an unbonded key: %d %s", code, body)
	}

	// The host is destroyed: SIGKILL, its whole home deleted, never restarted.
	n.destroyTrainer(90 * time.Second)
	second := n.secondLease(jobID, first.Id, 3*time.Minute)
	if second.Provider != sidecars["t2"].Operator || second.ResumeStep != cp0.EndStep || !bytes.Equal(second.ResumeHash, cp0.StateRoot) {
		t.Fatalf("second lease %+v, want t2's resuming at step %d", second, cp0.EndStep)
	}
	res1, err := market.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: first.Id})
	if err != nil {
		t.Fatal(err)
	}
	if res1.Lease.CloseReason != markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE {
		t.Fatalf("t1's lease closed %s", res1.Lease.CloseReason)
	}
	waitFor("t2 rebuilt its start state from custody", time.Minute, func() bool {
		return sidecars["t2"].Logged("resume checkpoint rebuilt from custody")
	})
	waitFor("the job completes", 5*time.Minute, func() bool {
		j, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
		if err != nil {
			t.Fatal(err)
		}
		return j.Job.State == markettypes.JOB_STATE_COMPLETED
	})
	cps := checkpoints(second.Id)
	last := cps[len(cps)-1]
	if last.EndStep != 64 || last.Status != verifytypes.CHECKPOINT_STATUS_FINAL || last.CustodyId == "" {
		t.Fatalf("last checkpoint %+v", last)
	}

	// The owner fetches the final model from the holders; it verifies against the chain.
	out := filepath.Join(t.TempDir(), "model")
	fetchArgs := []string{"job", "fetch", fmt.Sprint(jobID), "--out", out, "--keyring-backend", "test", "--grpc-addr", node.GRPC}
	if _, err := node.Exec(ctx, append(fetchArgs, "--from", "outsider")...); err == nil || !strings.Contains(err.Error(), "only the job's owner may fetch") {
		t.Fatalf("a fetch by another key: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused fetch left %s behind: %v", out, err)
	}
	if _, err := node.Exec(ctx, append(fetchArgs, "--from", "owner")...); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(out, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if root := exact.StateRoot(state); !bytes.Equal(root[:], last.StateRoot) {
		t.Fatalf("fetched state root %x, the final checkpoint's %x", root[:], last.StateRoot)
	}
	if st, err := exact.Decode(state); err != nil || st.Step != 64 {
		t.Fatalf("fetched state does not decode as the step-64 state: %v", err)
	}
	var info struct {
		EndStep uint64 `json:"end_step"`
	}
	data, err := os.ReadFile(filepath.Join(out, "checkpoint.json"))
	if err != nil || json.Unmarshal(data, &info) != nil || info.EndStep != 64 {
		t.Fatalf("checkpoint.json: %v %s", err, data)
	}

	// job status shows each checkpoint's custody: pieces proven of k+m, and holders.
	statusOut, err := node.Exec(ctx, "job", "status", fmt.Sprint(jobID), "-o", "json", "--grpc-addr", node.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Custody []struct {
			LeaseID uint64   `json:"lease_id"`
			Proven  uint32   `json:"proven"`
			Pieces  uint32   `json:"pieces"`
			Needed  uint32   `json:"needed"`
			Holders []string `json:"holders"`
		} `json:"custody"`
		Money struct {
			StoragePaid     string `json:"storage_paid"`
			StorageEscrowed string `json:"storage_escrowed"`
		} `json:"money"`
	}
	if err := json.Unmarshal([]byte(statusOut), &status); err != nil {
		t.Fatalf("job status: %v\n%s", err, statusOut)
	}
	// The holders were paid per proven period from the job's storage escrow, the budget
	// reserved at submit: 3 pieces × ceil(720h / 16 blocks of ≥ 1 s) × 1udepin.
	storagePaid, _ := strconv.ParseUint(status.Money.StoragePaid, 10, 64)
	storageLeft, _ := strconv.ParseUint(status.Money.StorageEscrowed, 10, 64)
	if budget := uint64(3 * ((720*3600 + 15) / 16)); storagePaid == 0 || storagePaid+storageLeft != budget {
		t.Fatalf("storage paid %d + escrowed %d, want a positive payment out of the budget %d", storagePaid, storageLeft, budget)
	}
	if len(status.Custody) < 1+len(cps) {
		t.Fatalf("job status lists custody of %d checkpoints, want at least %d:\n%s", len(status.Custody), 1+len(cps), statusOut)
	}
	for _, c := range status.Custody {
		if c.LeaseID == second.Id && (c.Proven < c.Needed || c.Pieces != 3 || len(c.Holders) != int(c.Proven)) {
			t.Fatalf("custody in job status: %+v", c)
		}
	}

	// The page, never reloaded, lists every checkpoint in custody across both leases,
	// each as the chain has it.
	var want, got string
	waitFor("the page's custody matches the chain's", 30*time.Second, func() bool {
		want, got = chainCustody(), pageCustody()
		return want == got
	})
	if n := len(strings.Fields(got)); n < 1+len(cps) {
		t.Fatalf("the page shows custody of %d checkpoints, want at least %d: %s", n, 1+len(cps), got)
	}
	if page.Reloaded() {
		t.Fatal("the job page was reloaded; custody must be drawn live")
	}
	page.Shot("custody-job-completed")
	t.Logf("page custody: %s", got)

	// Nobody innocent lost bond.
	for _, name := range names[1:] {
		if got := bond(name); !got.Equal(bondsBefore[name]) {
			t.Errorf("%s's bond went from %s to %s", name, bondsBefore[name], got)
		}
	}
	t.Logf("done at %s; t1's bond %s → %s", since(), bondsBefore["t1"], bond("t1"))
}

// signedGet GETs url, the request signed by authorize unless it is nil, and returns the
// answer's status and the start of its body.
func signedGet(tb testing.TB, ctx context.Context, url string, authorize func(*http.Request) error) (int, string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if authorize != nil {
		if err := authorize(req); err != nil {
			tb.Fatal(err)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode, string(body)
}

// strangerSigner signs requests (pkg/reqauth) with a fresh key that nothing on chain
// knows: neither a job's owner nor bonded.
func strangerSigner(chainID string) func(*http.Request) error {
	key := secp256k1.GenPrivKey()
	addr, _ := bech32.ConvertAndEncode("depin", key.PubKey().Address())
	return func(req *http.Request) error {
		return reqauth.Sign(req, chainID, addr, func(msg []byte) ([]byte, []byte, error) {
			sig, err := key.Sign(msg)
			return sig, key.PubKey().Bytes(), err
		}, time.Now())
	}
}

// custodyNetNames are custodyNet's sidecars: trainers t1 and t2, storage holders h1..h3.
var custodyNetNames = []string{"t1", "t2", "h1", "h2", "h3"}

// custodyNet is a chain (blocks of 500 ms, storage periods of 16 blocks) with two GPU
// providers and three storage providers, each a real depinprovider process: t1 and t2
// price H100s alike and commit the same configured rate (not one measured on a busy
// host, which the per-step auction would rank by), t1 started with the config's t1Args
// (test hooks); h1..h3 run the storage role with custody on and price no GPUs. Everyone
// but t2 is started: t2 is started once t1 has the job's lease (firstLease), so that t1
// bids alone and wins, and a reopened job (which takes no bid dearer per step than its
// leases') goes to t2.
type custodyNet struct {
	*world
	tb      testing.TB
	cluster *cluster
	shards  shardtypes.QueryClient
	staking stakingexttypes.QueryClient
	bank    banktypes.QueryClient
	// sidecars are the cluster's, by name.
	sidecars map[string]*sidecar.Provider
}

// custodyNetConfig is what custodyNet's users change: trainerSet is more config of t1
// and t2 (config key → TOML value), t1Args t1's start arguments (its test hooks),
// genesis more changes of the genesis.
type custodyNetConfig struct {
	trainerSet map[string]string
	t1Args     []string
	genesis    func(map[string]any)
}

// pauseBeforeSecondCheckpoint makes t1 pause before its second checkpoint submission,
// where destroyTrainer destroys it.
var pauseBeforeSecondCheckpoint = []string{"--pause-before-checkpoint", "2"}

// newCustodyNet starts a custodyNet within timeout.
func newCustodyNet(tb testing.TB, timeout time.Duration, cfg custodyNetConfig) *custodyNet {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a real node and five real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tb.Cleanup(cancel)
	genesis := func(state map[string]any) error {
		shortStorageProofs(state)
		v := state["verify"].(map[string]any)["params"].(map[string]any)
		v["challenge_window"], v["move_timeout"] = "10", "20"
		v["custody_grace_blocks"], v["custody_recheck_blocks"] = "120", "2"
		if cfg.genesis != nil {
			cfg.genesis(state)
		}
		return nil
	}
	options := func(name string) sidecar.Options {
		if name != "t1" && name != "t2" {
			return holderOptions()
		}
		trainer := map[string]string{"throughput.go_trainer_macs_per_second": "2e8"}
		for k, v := range cfg.trainerSet {
			trainer[k] = v
		}
		opts := sidecar.Options{Prices: map[string]uint64{"H100-SXM5-80GB": 1_000_000}, Set: trainer}
		if name == "t1" {
			opts.StartArgs = cfg.t1Args
		}
		return opts
	}
	c := startCluster(ctx, tb, tb.TempDir(), custodyNetNames, genesis, options)
	n := &custodyNet{tb: tb, cluster: c, sidecars: c.sidecars}
	n.world = &world{t: tb, ctx: ctx, node: c.node, market: markettypes.NewQueryClient(c.conn), verify: verifytypes.NewQueryClient(c.conn)}
	n.shards, n.staking, n.bank = shardtypes.NewQueryClient(c.conn), stakingexttypes.NewQueryClient(c.conn), banktypes.NewQueryClient(c.conn)
	c.startSidecars(ctx, tb, "t1", "h1", "h2", "h3")
	tb.Logf("node and five sidecars up at %s", n.since())
	return n
}

func (n *custodyNet) since() time.Duration { return n.cluster.since() }

// waitFor polls cond every 500 ms until it holds, failing after timeout.
func (n *custodyNet) waitFor(what string, timeout time.Duration, cond func() bool) {
	n.tb.Helper()
	n.cluster.waitFor(n.ctx, n.tb, what, timeout, cond)
}

func (n *custodyNet) leases(jobID uint64) []markettypes.Lease {
	res, err := n.market.Leases(n.ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil {
		n.tb.Fatal(err)
	}
	return res.Leases
}

func (n *custodyNet) checkpoints(lease uint64) []verifytypes.Checkpoint {
	res, err := n.verify.Checkpoints(n.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease})
	if err != nil {
		n.tb.Fatal(err)
	}
	return res.Checkpoints
}

// provider is the chain's record of sidecar name's provider.
func (n *custodyNet) provider(name string) stakingexttypes.Provider {
	res, err := n.staking.Provider(n.ctx, &stakingexttypes.QueryProviderRequest{Operator: n.sidecars[name].Operator})
	if err != nil {
		n.tb.Fatal(err)
	}
	return res.Provider
}

// bonds is every sidecar's provider bond, by name.
func (n *custodyNet) bonds() map[string]sdkmath.Int {
	out := map[string]sdkmath.Int{}
	for _, name := range custodyNetNames {
		out[name] = n.provider(name).Bond.Amount
	}
	return out
}

// firstCheckpointInCustody waits until t1 leases the job, starts t2 (firstLease), and
// waits until the lease's first checkpoint is final (its state held by k holders),
// within timeout.
func (n *custodyNet) firstCheckpointInCustody(jobID uint64, timeout time.Duration) (markettypes.Lease, verifytypes.Checkpoint) {
	n.tb.Helper()
	first := n.firstLease(jobID)
	var cp0 verifytypes.Checkpoint
	n.waitFor("t1's first checkpoint is final, its state in custody", timeout, func() bool {
		cps := n.checkpoints(first.Id)
		if len(cps) == 0 {
			return false
		}
		cp0 = cps[0]
		return cp0.Status == verifytypes.CHECKPOINT_STATUS_FINAL
	})
	return first, cp0
}

// firstLease waits until t1 (the only bidder) leases the job and starts t2.
func (n *custodyNet) firstLease(jobID uint64) markettypes.Lease {
	n.tb.Helper()
	var first markettypes.Lease
	n.waitFor("t1 leases the job", 2*time.Minute, func() bool {
		ls := n.leases(jobID)
		if len(ls) > 0 {
			first = ls[0]
		}
		return len(ls) > 0
	})
	if first.Provider != n.sidecars["t1"].Operator {
		n.tb.Fatalf("the first lease went to %s, want t1 (the only bidder)", first.Provider)
	}
	if err := n.sidecars["t2"].Start(n.ctx); err != nil {
		n.tb.Fatal(err)
	}
	return first
}

// destroyTrainer destroys t1's host once it paused before its second checkpoint (or
// after pause): SIGKILL, its whole home deleted, never restarted.
func (n *custodyNet) destroyTrainer(pause time.Duration) {
	n.tb.Helper()
	pauseCtx, stopWaiting := context.WithTimeout(n.ctx, pause)
	if err := n.sidecars["t1"].WaitLog(pauseCtx, daemon.PausedLogMsg); err != nil {
		n.tb.Logf("t1 did not pause before its second checkpoint: %v", err)
	}
	stopWaiting()
	n.sidecars["t1"].Kill()
	if err := os.RemoveAll(n.sidecars["t1"].Home); err != nil {
		n.tb.Fatal(err)
	}
	n.tb.Logf("t1's host destroyed at %s", n.since())
}

// secondLease waits until the job has a lease other than first, within timeout.
func (n *custodyNet) secondLease(jobID, first uint64, timeout time.Duration) markettypes.Lease {
	n.tb.Helper()
	var second markettypes.Lease
	n.waitFor("the job reopens and t2 leases it", timeout, func() bool {
		for _, l := range n.leases(jobID) {
			if l.Id != first {
				second = l
				return true
			}
		}
		return false
	})
	return second
}

// TestCustodyPiecesLostStillFetchableAndRepaired: a 2+2 job trained by t1 while five
// storage providers (custody on, repair off) hold its checkpoints' pieces. After the job
// completes, two holders of the final state lose their piece files: the owner still
// fetches and verifies the model from the two pieces left (the lost holders answer 404
// and are skipped), the two holders declare their faults, and providers without a piece
// of that state rebuild the two pieces from k others and claim them, restoring 4 of 4.
func TestCustodyPiecesLostStillFetchableAndRepaired(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and six real sidecars")
	}
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	holders := []string{"h1", "h2", "h3", "h4", "h5"}
	names := append([]string{"t1"}, holders...)
	accounts := map[string]int64{"owner": 1_000_000_000_000}
	for _, n := range names {
		accounts[n] = 1_000_000_000_000
	}
	node, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(dir, "chain"), BlockTime: 500 * time.Millisecond, Accounts: accounts,
		Genesis: func(state map[string]any) error {
			sr := state["shardregistry"].(map[string]any)["params"].(map[string]any)
			sr["period_blocks"], sr["proof_window_blocks"] = "16", "8"
			v := state["verify"].(map[string]any)["params"].(map[string]any)
			v["challenge_window"], v["move_timeout"] = "10", "20"
			v["custody_grace_blocks"], v["custody_recheck_blocks"] = "120", "2"
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
	market, verify, shards := markettypes.NewQueryClient(conn), verifytypes.NewQueryClient(conn), shardtypes.NewQueryClient(conn)

	sidecars := map[string]*sidecar.Provider{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var setupErr []error
	for _, name := range names {
		opts := sidecar.Options{Home: filepath.Join(dir, name), Operator: name, HotKey: name, SkipGrants: true, Bond: "100000000000udepin"}
		if name == "t1" {
			opts.Prices = map[string]uint64{"H100-SXM5-80GB": 1_000_000}
		} else {
			opts.Set = map[string]string{"storage_role.enabled": "true", "storage_role.custody": "true", "storage_role.check_interval": `"2s"`}
		}
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
			sidecars[name] = p
		}()
	}
	wg.Wait()
	if err := errors.Join(setupErr...); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Cleanup(sidecars[name].Stop)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range names {
				t.Logf("%s's log tail:\n%s", name, readTail(sidecars[name].LogPath()))
			}
		}
	})
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sidecars[name].Start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("timed out after %s waiting until %s", timeout, what)
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("%s at %s", what, since())
	}

	spec := strings.NewReplacer("total_steps: 64", "total_steps: 32", "parity_pieces: 1", "parity_pieces: 2").Replace(custodyJobYAML)
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := node.Tx(ctx, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "500000000udepin")
	if err != nil || res.Code != 0 {
		t.Fatalf("submit-job: %v %s", err, res.RawLog)
	}
	idAttr, _ := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	var jobID uint64
	fmt.Sscan(strings.Trim(idAttr, `"`), &jobID)
	waitFor("the job completes", 4*time.Minute, func() bool {
		j, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
		return err == nil && j.Job.State == markettypes.JOB_STATE_COMPLETED
	})
	ls, err := market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil {
		t.Fatal(err)
	}
	cps, err := verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: ls.Leases[0].Id})
	if err != nil {
		t.Fatal(err)
	}
	last := cps.Checkpoints[len(cps.Checkpoints)-1]
	shard := func() *shardtypes.QueryShardResponse {
		sh, err := shards.Shard(ctx, &shardtypes.QueryShardRequest{DatasetId: last.CustodyId, Index: 0})
		if err != nil {
			t.Fatal(err)
		}
		return sh
	}
	waitFor("all 4 pieces of the final state are held", time.Minute, func() bool { return shard().Shard.Live == 4 })

	// Two holders lose their piece files (their pieces folders stay).
	byOperator := map[string]string{}
	for _, n := range holders {
		byOperator[sidecars[n].Operator] = n
	}
	var lost []string
	for _, r := range shard().Replicas[:2] {
		name := byOperator[r.Holder]
		path := filepath.Join(sidecars[name].Home, "pieces", last.CustodyId, "pieces", fmt.Sprintf("s000000-p%03d.piece", r.Piece))
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		lost = append(lost, name)
	}
	t.Logf("%v lost their pieces of %s at %s", lost, last.CustodyId, since())

	// Still fetchable: any 2 of the 4 rebuild it, and every piece and the state verify.
	out := filepath.Join(t.TempDir(), "model")
	if _, err := node.Exec(ctx, "job", "fetch", fmt.Sprint(jobID), "--out", out, "--from", "owner", "--keyring-backend", "test", "--grpc-addr", node.GRPC); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(out, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if root := exact.StateRoot(state); !bytes.Equal(root[:], last.StateRoot) {
		t.Fatalf("fetched state root %x, the final checkpoint's %x", root[:], last.StateRoot)
	}

	// The losers declare their faults; others rebuild the pieces and restore the count.
	waitFor("both faults declared", time.Minute, func() bool {
		return sidecars[lost[0]].Logged("fault declared") && sidecars[lost[1]].Logged("fault declared")
	})
	waitFor("repair restores 4 of 4 pieces", 2*time.Minute, func() bool {
		sh := shard()
		active := 0
		for _, r := range sh.Replicas {
			if r.Status == shardtypes.REPLICA_STATUS_ACTIVE {
				active++
			}
		}
		return sh.Shard.Live == 4 && active == 4
	})
}
