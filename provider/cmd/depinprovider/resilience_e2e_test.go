package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// testTrainerDigest is the digest the process-runtime tests' jobs pin; the
// sidecar maps it to the test trainer binary.
var testTrainerDigest = "sha256:" + strings.Repeat("7e", 32)

// buildTestTrainer builds the runtime tests' contract-honouring trainer as a
// static binary.
func buildTestTrainer(t *testing.T) string {
	t.Helper()
	root, err := localnet.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "trainer")
	cmd := exec.Command("go", "build", "-o", bin, "./provider/runtime/testdata/trainer")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test trainer: %v\n%s", err, out)
	}
	return bin
}

// processTrainer turns on the process runtime with argv mapped to testTrainerDigest.
func processTrainer(argv ...string) map[string]string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return map[string]string{
		"runtimes.process":  "true",
		"runtimes.trainers": fmt.Sprintf("[{digest = %q, command = [%s]}]", testTrainerDigest, strings.Join(quoted, ", ")),
	}
}

func processJobYAML(steps, every uint64) string {
	return fmt.Sprintf(`name: process-job
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: container
  image: example.com/trainer:1
  digest: %s
  # the operator's installed trainer serves it, which the owner must allow
  allow_operator_trainer: true
total_steps: %d
checkpoint_every: %d
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 4
`, testTrainerDigest, steps, every)
}

// TestSidecarKilledMidTrainingResumes kills the sidecar and its trainer with
// SIGKILL (as a host crash, or a service manager stopping the unit's
// processes, would) while the lease is halfway through, and starts the
// sidecar again: it resumes training from its newest local checkpoint,
// submits what the chain lacks, replays the blocks it missed, and every
// checkpoint is finalized and paid.
//
// Nothing here waits on luck: the first sidecar stops right before it
// submits its second checkpoint (a test hook), and every trainer holds
// after step 120 until the test lets it go, so the kill finds one
// checkpoint on chain and the job unfinished.
func TestSidecarKilledMidTrainingResumes(t *testing.T) {
	trainerBin := buildTestTrainer(t)
	dir := t.TempDir()
	hold, pidFile := filepath.Join(dir, "go-on"), filepath.Join(dir, "trainer.pid")
	// A trainer left holding by a failed run must not outlive the test.
	t.Cleanup(func() {
		if t.Failed() {
			killTrainer(t, pidFile)
		}
	})
	w := newWorld(t, 6*time.Minute, sidecar.Options{Set: processTrainer(trainerBin, "--step-delay", "25ms",
		"--hold-after-step", "120", "--hold-file", hold, "--pid-file", pidFile)})
	if err := w.provider.StartWith(w.ctx, "--pause-before-checkpoint", "2"); err != nil {
		t.Fatal(err)
	}
	jobID := w.submitJob(processJobYAML(240, 30), "500000000udepin")

	if err := w.provider.WaitLog(w.ctx, daemon.PausedLogMsg); err != nil {
		t.Fatalf("waiting for the sidecar to pause before its second checkpoint: %v", err)
	}
	w.provider.Kill()
	killTrainer(t, pidFile)
	killedAt, err := w.node.Height(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease := w.leasesOf(jobID)[0]
	before, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil || len(before.Checkpoints) != 1 {
		t.Fatalf("checkpoints on chain when the sidecar paused before its second: %v %v, want 1", before, err)
	}
	// Blocks pass (and the first checkpoint finalizes) while it is down.
	if err := w.node.WaitBlocks(w.ctx, 8); err != nil {
		t.Fatal(err)
	}
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted sidecar resumes its trainer; then the trainer may go on.
	w.eventually("the restarted sidecar starting its trainer", time.Minute, func() bool {
		return w.provider.LogCount("training started") == 2
	})
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	leases := w.waitPaid(jobID)
	if len(leases) != 1 || leases[0].Id != lease.Id || leases[0].CloseReason != markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("leases %+v", leases)
	}
	cps, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil {
		t.Fatal(err)
	}
	claimed := sdkInt(0)
	for _, cp := range cps.Checkpoints {
		if cp.Status != verifytypes.CHECKPOINT_STATUS_FINAL {
			t.Fatalf("checkpoint %d is %s", cp.Index, cp.Status)
		}
		claimed = claimed.Add(cp.Claim.Amount)
	}
	if len(cps.Checkpoints) != 8 || !leases[0].Withdrawn.Amount.Equal(claimed) {
		t.Fatalf("%d checkpoints claiming %s; withdrawn %s", len(cps.Checkpoints), claimed, leases[0].Withdrawn)
	}
	log, _ := os.ReadFile(w.provider.LogPath())
	starts := resumedFrom.FindAllStringSubmatch(string(log), -1)
	if len(starts) != 2 || starts[0][1] != "0" || starts[1][1] == "0" {
		t.Fatalf("want a first run from step 0 and one resumed from a later checkpoint:\n%s", grepLines(string(log), "training started"))
	}
	// The restarted sidecar saw every event of the blocks it missed: its
	// records say every checkpoint became final.
	var cj checkpointsJSON
	if err := w.provider.REST(w.ctx, fmt.Sprintf("/v1/leases/%d/checkpoints", lease.Id), &cj); err != nil {
		t.Fatal(err)
	}
	for _, c := range cj.Checkpoints {
		if c.Status != "finalized" {
			t.Fatalf("the sidecar has checkpoint %s as %s after the restart (killed at height %d)", c.Index, c.Status, killedAt)
		}
	}
	if len(cj.Checkpoints) != 8 {
		t.Fatalf("the sidecar knows %d checkpoints, want 8", len(cj.Checkpoints))
	}
}

var resumedFrom = regexp.MustCompile(`msg="training started" lease=1 job=1 runtime=process from_step=(\d+)`)

func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// killTrainer kills the process group of the trainer whose id is in
// pidFile (the process runtime starts each trainer in its own group); a
// group that is gone already is no error.
func killTrainer(t *testing.T, pidFile string) {
	t.Helper()
	raw, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) && t.Failed() {
		return
	}
	if err != nil {
		t.Errorf("the trainer wrote no pid file: %v", err)
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Error(err)
		return
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("killing the trainer: %v", err)
	}
}

// proxy forwards TCP connections to a target until cut, when it drops
// every connection and refuses new ones, like a network outage.
type proxy struct {
	target string
	ln     net.Listener
	addr   string

	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, ln: ln, addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }() //nolint:errcheck // ends with either side
		go func() { io.Copy(c, up); c.Close() }()  //nolint:errcheck // same
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// TestSidecarReplaysBlocksAfterWebsocketDrop cuts the sidecar off the node's
// RPC (websocket and block results) for several blocks while a job is
// created: once the link is back it replays every missed block from its
// cursor, sees the job's creation event at its real height and bids.
func TestSidecarReplaysBlocksAfterWebsocketDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and a real sidecar")
	}
	var rpcProxy *proxy
	w := newWorldWith(t, 5*time.Minute, func(n *localnet.Node) sidecar.Options {
		rpcProxy = startProxy(t, strings.TrimPrefix(n.RPC, "tcp://"))
		return sidecar.Options{RPC: "tcp://" + rpcProxy.addr}
	})
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	var status statusJSON
	w.eventually("the websocket subscription", time.Minute, func() bool {
		var s map[string]any
		return w.provider.REST(w.ctx, "/v1/status", &s) == nil && s["websocket_connected"] == true
	})
	rpcProxy.cut()
	jobYAML := strings.Replace(referenceJobYAML, "bidding_window_blocks: 8", "bidding_window_blocks: 30", 1)
	jobID := w.submitJob(jobYAML, "500000000udepin")
	created := w.job(jobID).CreatedHeight
	if err := w.node.WaitBlocks(w.ctx, 8); err != nil {
		t.Fatal(err)
	}
	if res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: jobID}); err != nil || len(res.Bids) != 0 {
		t.Fatalf("a bid while cut off: %v %v", res, err)
	}
	rpcProxy.restore()

	w.eventually("the sidecar's bid after the outage", time.Minute, func() bool {
		res, err := w.market.Bids(w.ctx, &markettypes.QueryBidsRequest{JobId: jobID})
		return err == nil && len(res.Bids) == 1
	})
	var jobs jobsJSON
	if err := w.provider.REST(w.ctx, "/v1/jobs", &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].SeenHeight != fmt.Sprint(created) {
		t.Fatalf("the sidecar's job records %+v: want job %d seen at its creation height %d (replayed, not reconciled)", jobs, jobID, created)
	}
	w.eventually("the cursor catching up", time.Minute, func() bool {
		h, _ := w.node.Height(w.ctx)
		return w.provider.REST(w.ctx, "/v1/status", &status) == nil && status.CursorHeight >= h-2
	})
	w.waitPaid(jobID)
}

// newWorldWith is newWorld with provider options that depend on the node.
func newWorldWith(t *testing.T, timeout time.Duration, opts func(*localnet.Node) sidecar.Options) *world {
	t.Helper()
	return newWorldOpts(t, timeout, opts)
}

// TestSidecarFlagsABrokenTrainer runs a trainer that crashes at once: the
// lease is flagged with the trainer's own error, retried a bounded number of
// times, and no payment leaves the job's escrow.
func TestSidecarFlagsABrokenTrainer(t *testing.T) {
	trainerBin := buildTestTrainer(t)
	w := newWorld(t, 5*time.Minute, sidecar.Options{Set: processTrainer(trainerBin, "--mode", "crash")})
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	jobID := w.submitJob(processJobYAML(60, 30), "500000000udepin")
	var ls leasesJSON
	w.eventually("the lease being flagged", 2*time.Minute, func() bool {
		return w.provider.REST(w.ctx, "/v1/leases", &ls) == nil && len(ls.Leases) == 1 && len(ls.Leases[0].Problems) > 0
	})
	if p := strings.Join(ls.Leases[0].Problems, "\n"); !strings.Contains(p, "exit status 3") || !strings.Contains(p, "illegal memory access") {
		t.Fatalf("lease problems %q: want the trainer's exit status and its stderr", p)
	}
	leases := w.leasesOf(jobID)
	cps, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases[0].Id})
	if err != nil || len(cps.Checkpoints) != 0 || !leases[0].Withdrawn.IsZero() || !leases[0].Withdrawable.IsZero() {
		t.Fatalf("a crashing trainer got paid: %+v checkpoints %v", leases[0], cps)
	}
}

// TestSidecarRefusesBadSetups checks that each way a sidecar can be set up
// wrong stops it at start with a message naming the problem, and costs
// nothing.
func TestSidecarRefusesBadSetups(t *testing.T) {
	w := newWorld(t, 4*time.Minute, sidecar.Options{SkipGrants: true})
	balances := func() string {
		out, err := w.node.Exec(w.ctx, "query", "bank", "balances", w.provider.Operator, "--node", w.node.RPC, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		hot, err := w.node.Exec(w.ctx, "query", "bank", "balances", w.provider.HotKey, "--node", w.node.RPC, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		return out + hot
	}
	before := balances()
	start := func(configText string) string {
		t.Helper()
		home := filepath.Join(t.TempDir(), "bad")
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if configText != "" {
			if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(configText), 0o600); err != nil {
				t.Fatal(err)
			}
		} else {
			home = w.provider.Home
		}
		ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, w.provider.Binary, "start", "--home", home).CombinedOutput()
		if err == nil {
			t.Fatalf("depinprovider start succeeded:\n%s", out)
		}
		return string(out)
	}

	// No authz grants: every missing message is named.
	out := start("")
	for _, msg := range chain.RequiredGrants {
		if !strings.Contains(out, msg) {
			t.Errorf("missing-grant error does not name %s:\n%s", msg, out)
		}
	}
	if !strings.Contains(out, "has not granted hot key "+w.provider.HotKey) {
		t.Errorf("missing-grant error: %s", out)
	}

	good, err := os.ReadFile(filepath.Join(w.provider.Home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// A misspelt field is named with its line.
	out = start(strings.Replace(string(good), "gas_adjustment", "gas_adjustmnt", 1))
	if !strings.Contains(out, `unknown field "chain.gas_adjustmnt"`) {
		t.Errorf("misspelt field: %s", out)
	}
	// An endpoint nothing answers on is named.
	closed := closedPort(t)
	out = start(strings.Replace(string(good), w.node.RPC, "tcp://"+closed, 1))
	if !strings.Contains(out, "chain.rpc tcp://"+closed+" does not answer") {
		t.Errorf("unreachable RPC: %s", out)
	}
	// The wrong chain is named.
	out = start(strings.Replace(string(good), `chain_id = "`+w.node.ChainID+`"`, `chain_id = "other-chain"`, 1))
	if !strings.Contains(out, `runs chain "`+w.node.ChainID+`", but chain.chain_id is "other-chain"`) {
		t.Errorf("wrong chain: %s", out)
	}
	if after := balances(); after != before {
		t.Fatalf("balances changed:\nbefore %s\nafter  %s", before, after)
	}
}

// closedPort is a loopback address nothing listens on: a port
// localnet.FreePorts reserved for this test process, so no other test or
// node on the machine binds it meanwhile.
func closedPort(t *testing.T) string {
	t.Helper()
	ports, err := localnet.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// buildTrainerImage builds a FROM-scratch image of the test trainer (see
// buildTestTrainer) run with args, and returns its tag and image ID. The
// image is removed when the test ends.
func buildTrainerImage(t *testing.T, args ...string) (tag, id string) {
	t.Helper()
	trainerBin := buildTestTrainer(t)
	ctxDir := t.TempDir()
	if err := os.Rename(trainerBin, filepath.Join(ctxDir, "trainer")); err != nil {
		t.Fatal(err)
	}
	entrypoint, err := json.Marshal(append([]string{"/trainer"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM scratch\nCOPY trainer /trainer\nENTRYPOINT " + string(entrypoint) + "\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	tag = fmt.Sprintf("depinchain-e2e-trainer:%d", time.Now().UnixNano())
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, ctxDir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", tag).Output()
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", id).Run() }) //nolint:errcheck // best effort
	return tag, id
}

// TestSidecarTrainsInAContainer serves a container job on the real Docker
// Engine: the job pins a locally built FROM-scratch training image by
// digest, the sidecar runs it with the trainer contract's mounts, and its
// checkpoints are committed, finalized and paid like any other.
func TestSidecarTrainsInAContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node, a real sidecar and a container")
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Skipf("TestSidecarTrainsInAContainer skipped: no Docker Engine answers here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	tag, digest := buildTrainerImage(t, "--step-delay", "5ms")

	// The build machines' Docker daemon cannot raise memlock (no CAP_SYS_RESOURCE):
	// the sidecar's PyTorch default of memlock=-1 is turned off here.
	w := newWorld(t, 5*time.Minute, sidecar.Options{Set: map[string]string{"runtimes.container": "true", "runtimes.memlock_unlimited": "false"}})
	if err := w.provider.Start(w.ctx); err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer("example.com/trainer:1", tag, testTrainerDigest, digest,
		"  allow_operator_trainer: true\n", "").Replace(processJobYAML(60, 20))
	jobID := w.submitJob(yaml, "500000000udepin")
	leases := w.waitPaid(jobID)
	var ls leasesJSON
	if err := w.provider.REST(w.ctx, "/v1/leases", &ls); err != nil {
		t.Fatal(err)
	}
	if len(ls.Leases) != 1 || ls.Leases[0].Runtime != "container" {
		t.Fatalf("leases %+v: want one served by the container runtime", ls)
	}
	if leases[0].Runtime != "container" {
		t.Fatalf("the chain's lease records runtime %q, want container", leases[0].Runtime)
	}
	cps, err := w.verify.Checkpoints(w.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases[0].Id})
	if err != nil || len(cps.Checkpoints) != 3 {
		t.Fatalf("checkpoints %v %v, want 3", cps, err)
	}
}
