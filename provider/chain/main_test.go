package chain

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/testutil/localnet"
)

// One real single-node chain serves every test of the package; each test
// uses its own accounts and jobs so they do not see each other's state.
var (
	node *localnet.Node
	enc  chainparams.EncodingConfig
	conn *grpc.ClientConn
)

// Keys created and funded at genesis.
const (
	keyOwner     = "owner"     // submits jobs
	keyWatched   = "watched"   // provider the follower test registers
	keyOperator  = "operator"  // provider operator of the submitter test
	keyHot       = "hot"       // hot key the operator grants to
	keyUngranted = "ungranted" // a hot key nobody granted anything
	keyLeaser    = "leaser"    // provider that wins a lease in the reconcile test
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	chainparams.SetAddressPrefixes()
	dir, err := os.MkdirTemp("", "provider-chain-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	accounts := map[string]int64{}
	for _, k := range []string{keyOwner, keyWatched, keyOperator, keyHot, keyUngranted, keyLeaser} {
		accounts[k] = 1_000_000_000_000
	}
	node, err = localnet.Start(ctx, localnet.Options{Home: filepath.Join(dir, "node"), Accounts: accounts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting localnet:", err)
		return 1
	}
	defer node.Stop()

	enc = NewEncodingConfig()
	conn, err = DialGRPC(node.GRPC, enc.InterfaceRegistry)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()

	code := m.Run()
	if code != 0 {
		if log, err := os.ReadFile(filepath.Join(node.Home, "node.log")); err == nil {
			lines := strings.Split(string(log), "\n")
			fmt.Fprintf(os.Stderr, "node log tail:\n%s\n", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
	return code
}

// needChain skips tests that need the chain under -short.
func needChain(t *testing.T) context.Context {
	t.Helper()
	if node == nil {
		t.Skip("starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustAddr(t *testing.T, ctx context.Context, key string) string {
	t.Helper()
	addr, err := node.Address(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func mustTx(t *testing.T, ctx context.Context, from string, args ...string) localnet.TxResult {
	t.Helper()
	res, err := node.Tx(ctx, from, args...)
	if err != nil {
		t.Fatalf("tx %v: %v", args, err)
	}
	if res.Code != 0 {
		t.Fatalf("tx %v failed with code %d: %s", args, res.Code, res.RawLog)
	}
	return res
}

// registerProvider bonds key as a provider of eight H100s.
func registerProvider(t *testing.T, ctx context.Context, key string) localnet.TxResult {
	t.Helper()
	return mustTx(t, ctx, key, "stakingext", "register-provider", key+"-farm", "https://"+key+".example.com:8443", "eu-west",
		"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
}

// submitJob submits a one-worker job with the given bidding window and
// returns the transaction and the job id.
func submitJob(t *testing.T, ctx context.Context, biddingWindow int) (localnet.TxResult, uint64) {
	t.Helper()
	spec := fmt.Sprintf(`name: follower-test
gpu:
  models: [H100-SXM5-80GB]
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
bidding_window_blocks: %d
`, biddingWindow)
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustTx(t, ctx, keyOwner, "market", "submit-job", "--spec", path, "--deposit", "50000000udepin")
	raw, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	if !ok {
		t.Fatalf("no EventJobCreated in %+v", res.Events)
	}
	id, err := strconv.ParseUint(strings.Trim(raw, `"`), 10, 64)
	if err != nil {
		t.Fatalf("job_id %q: %v", raw, err)
	}
	return res, id
}

func openStore(t *testing.T) *db.DB {
	t.Helper()
	st, err := db.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// eventually polls cond every 100ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
