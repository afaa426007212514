package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/localnet"
)

// The network tests run four validators as separate depinchaind processes
// (testutil/localnet's StartNetwork, as `make localnet` does) and stop,
// restart and kill them: the chain must keep going with three, halt without
// losing anything with two, and every node that comes back must reach the
// same app hash as the others.

// startNetwork starts four validators for a test and stops them when it ends,
// printing the tail of each node's log if the test failed.
func startNetwork(t *testing.T, ctx context.Context, opts localnet.NetworkOptions) *localnet.Network {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "net")
	}
	start := time.Now()
	net, err := localnet.StartNetwork(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d validators committed block 2 after %s", len(net.Validators), time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		net.Stop()
		if t.Failed() {
			for _, v := range net.Validators {
				t.Logf("val%d log tail:\n%s", v.Index, fileTail(v.LogPath(), 25))
			}
		}
	})
	return net
}

func fileTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// slashingGenesis makes downtime jailing quick: a validator missing more than
// 6 of the last 12 blocks is jailed, for a minute (the least x/slashing
// accepts).
func slashingGenesis(app map[string]any) error {
	params := app["slashing"].(map[string]any)["params"].(map[string]any)
	params["signed_blocks_window"] = "12"
	params["min_signed_per_window"] = "0.500000000000000000"
	params["downtime_jail_duration"] = "60s"
	return nil
}

// networkJobYAML is a job any H100 provider can serve, whose auction closes
// 6 blocks after it is submitted.
const networkJobYAML = `name: net-job
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: 100
checkpoint_every: 50
max_price_per_gpu_hour: 2000000udepin
max_duration: 2h
bidding_window_blocks: 6
`

type stakingValidator struct {
	Validator struct {
		Jailed bool   `json:"jailed"`
		Status string `json:"status"`
		Tokens string `json:"tokens"`
	} `json:"validator"`
}

func validatorInfo(t *testing.T, ctx context.Context, via *localnet.Validator, operator string) stakingValidator {
	t.Helper()
	body, err := via.REST(ctx, "/cosmos/staking/v1beta1/validators/"+operator)
	if err != nil {
		t.Fatal(err)
	}
	var out stakingValidator
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitSigned waits until a block on via carries v's precommit.
func waitSigned(t *testing.T, ctx context.Context, via, v *localnet.Validator) int64 {
	t.Helper()
	st, err := v.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		h, err := via.Height(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if hd, err := via.Header(ctx, h); err == nil && hd.Signed(st.Address) {
			return h
		}
		if err := via.WaitHeight(ctx, h+1); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("val%d's precommit is in none of 40 blocks", v.Index)
	return 0
}

// TestOneOfFourValidatorsDown stops one validator of four: blocks continue
// and a whole market flow completes through the others (a job submitted, a
// provider's bid by CLI, the auction closing into a lease); the stopped
// validator is jailed for downtime by x/slashing as the genesis configures
// it; restarted, it catches up to the same block and app hash as the rest,
// (with -tags long, after the one-minute minimum jail time) unjails and
// signs blocks again.
func TestOneOfFourValidatorsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four real validators")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	net := startNetwork(t, ctx, localnet.NetworkOptions{
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "provider": 1_000_000_000_000},
		Genesis:  slashingGenesis,
	})
	v0, v1, v2, down := net.Validators[0], net.Validators[1], net.Validators[2], net.Validators[3]

	down.Stop()
	stoppedAt, err := v0.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := v0.WaitHeight(ctx, stoppedAt+3); err != nil {
		t.Fatalf("three of four validators made no blocks: %v", err)
	}

	// The market, through validator 1's RPC.
	mustTx(t, ctx, v1.Node, "provider", "stakingext", "register-provider", "gpu-farm", "https://gpu.example.com:8443", "eu-west",
		"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte(networkJobYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustTx(t, ctx, v1.Node, "owner", "market", "submit-job", "--spec", spec, "--deposit", "50000000udepin")
	id, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	if !ok {
		t.Fatalf("no EventJobCreated in %+v", res.Events)
	}
	jobID := strings.Trim(id, `"`)
	mustTx(t, ctx, v1.Node, "provider", "market", "place-bid", jobID, "1500000udepin", "--steps-per-hour", "1000")
	var job struct {
		Job struct {
			BiddingDeadline string `json:"bidding_deadline"`
		} `json:"job"`
	}
	if err := v2.Query(ctx, &job, "market", "job", jobID); err != nil {
		t.Fatal(err)
	}
	if err := v2.WaitHeight(ctx, mustInt(t, job.Job.BiddingDeadline)+1); err != nil {
		t.Fatal(err)
	}
	provider := mustAddr(t, ctx, v2.Node, "provider")
	leases := func(v *localnet.Validator) string {
		t.Helper()
		out, err := v.Exec(ctx, "query", "market", "leases", "--job-id", jobID, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	leaseJSON := leases(v2)
	if !strings.Contains(leaseJSON, provider) || !strings.Contains(leaseJSON, "LEASE_STATE_ACTIVE") {
		t.Fatalf("no active lease for the provider after the auction closed, with one validator down: %s", leaseJSON)
	}

	// Down long enough, it is jailed by x/slashing.
	var jailedAt int64
	for i := 0; ; i++ {
		if validatorInfo(t, ctx, v0, down.Operator).Validator.Jailed {
			jailedAt, _ = v0.Height(ctx)
			break
		}
		if i == 60 {
			t.Fatal("the stopped validator was not jailed within 60 blocks")
		}
		if err := v0.WaitBlocks(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("stopped at height %d, jailed by height %d", stoppedAt, jailedAt)

	// Restarted, it catches up to the others' block and app hash, and holds the same lease.
	if err := down.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	target, err := v0.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := net.WaitSynced(ctx, target+1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("all four agree at height %d: app hash %s", hd.Height, hd.AppHash)
	if got := leases(down); got != leaseJSON {
		// Settlement fields move with block time; the lease itself must be there.
		if !strings.Contains(got, provider) || !strings.Contains(got, "LEASE_STATE_ACTIVE") {
			t.Fatalf("the restarted validator's lease: %s", got)
		}
	}

	t.Run("unjailed after its jail time, it signs again", func(t *testing.T) {
		if !longTests {
			t.Skip("waits out x/slashing's one-minute minimum jail time; runs with -tags long (make test-long)")
		}
		unjail(t, ctx, net, down)
	})
}

// unjail waits until down's jail time is over, unjails it and checks that it
// is bonded again, was slashed for its downtime, and signs blocks.
func unjail(t *testing.T, ctx context.Context, net *localnet.Network, down *localnet.Validator) {
	t.Helper()
	var signing struct {
		ValSigningInfo struct {
			JailedUntil time.Time `json:"jailed_until"`
		} `json:"val_signing_info"`
	}
	consAddr, err := down.Exec(ctx, "comet", "show-address")
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Query(ctx, &signing, "slashing", "signing-info", strings.TrimSpace(consAddr)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(signing.ValSigningInfo.JailedUntil) + time.Second)
	mustTx(t, ctx, down.Node, down.Key, "slashing", "unjail")
	info := validatorInfo(t, ctx, down, down.Operator)
	if info.Validator.Jailed || info.Validator.Status != "BOND_STATUS_BONDED" {
		t.Fatalf("after unjail: %+v", info.Validator)
	}
	if info.Validator.Tokens == "100000000000" {
		t.Fatalf("downtime was not slashed: tokens %s", info.Validator.Tokens)
	}
	h := waitSigned(t, ctx, net.Validators[0], down)
	t.Logf("unjailed with %s udepin bonded; signs again at height %d", info.Validator.Tokens, h)
}

// broadcast sends a transaction to v's mempool without waiting for a block,
// returning its hash; CheckTx must accept it.
func broadcast(t *testing.T, ctx context.Context, v *localnet.Validator, from string, args ...string) string {
	t.Helper()
	full := append([]string{"tx"}, args...)
	full = append(full, "--from", from, "--keyring-backend", "test", "--chain-id", v.ChainID, "--node", v.RPC,
		"--yes", "--output", "json", "--gas", "200000", "--broadcast-mode", "sync")
	out, err := v.Exec(ctx, full...)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		TxHash string `json:"txhash"`
		Code   uint32 `json:"code"`
		RawLog string `json:"raw_log"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decoding %q: %v", out, err)
	}
	if res.Code != 0 {
		t.Fatalf("CheckTx refused %v: %d %s", args, res.Code, res.RawLog)
	}
	return res.TxHash
}

func bankBalance(t *testing.T, ctx context.Context, v *localnet.Validator, addr string) int64 {
	t.Helper()
	body, err := v.REST(ctx, "/cosmos/bank/v1beta1/balances/"+addr+"/by_denom?denom=udepin")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Balance struct{ Amount string } `json:"balance"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return mustInt(t, out.Balance.Amount)
}

// waitNext returns as soon as v commits a block above h, polling often so
// the caller knows where in the next block it is.
func waitNext(t *testing.T, ctx context.Context, v *localnet.Validator, h int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, err := v.Height(ctx); err == nil && got > h {
			return
		}
	}
	t.Fatalf("val%d made no block above %d in a minute", v.Index, h)
}

// waitStill waits until v's height has not moved for quiet and returns it.
func waitStill(t *testing.T, ctx context.Context, v *localnet.Validator, quiet, limit time.Duration) int64 {
	t.Helper()
	last, since, deadline := int64(-1), time.Now(), time.Now().Add(limit)
	for time.Now().Before(deadline) {
		h, err := v.Height(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h != last {
			last, since = h, time.Now()
		} else if time.Since(since) >= quiet {
			return h
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("val%d kept making blocks (at %d) for %s", v.Index, last, limit)
	return 0
}

// TestHaltAndCrashRecovery stops two validators of four: the other two make
// no block (a third of the power is missing), a transaction sent meanwhile
// waits in the mempool, and once one validator is back the chain resumes
// and commits it, and the last one catches up to the same app hash. Then a
// validator is killed with SIGKILL at different points of a block while
// transactions flow; each time it restarts, replays and catches up, and
// every node ends with the same balances and app hash.
func TestHaltAndCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four real validators")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	net := startNetwork(t, ctx, localnet.NetworkOptions{
		Accounts: map[string]int64{"alice": 1_000_000_000_000, "bob": 1_000_000},
	})
	v0, v1, v2, v3 := net.Validators[0], net.Validators[1], net.Validators[2], net.Validators[3]
	bob := mustAddr(t, ctx, v0.Node, "bob")
	mustTx(t, ctx, v0.Node, "alice", "bank", "send", "alice", bob, "1000udepin")
	before := bankBalance(t, ctx, v0, bob)

	t.Run("two of four down: halt, nothing lost", func(t *testing.T) {
		v2.Stop()
		v3.Stop()
		halted := waitStill(t, ctx, v0, 2*time.Second, 20*time.Second)
		hash := broadcast(t, ctx, v1, "alice", "bank", "send", "alice", bob, "7udepin")
		time.Sleep(5 * time.Second)
		if hs := net.Heights(ctx); hs[0] != halted || hs[1] != halted {
			t.Fatalf("heights %v: two of four validators made blocks after %d", hs, halted)
		}
		if _, err := net.SameHeader(ctx, halted, 0, 1); err != nil {
			t.Fatal(err)
		}
		t.Logf("halted at %d", halted)

		if err := v2.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if err := v0.WaitHeight(ctx, halted+2); err != nil {
			t.Fatalf("three validators again, but no blocks: %v", err)
		}
		tx, err := v0.WaitTx(ctx, hash)
		if err != nil || tx.Code != 0 {
			t.Fatalf("the transaction sent during the halt: %+v %v", tx, err)
		}
		if got := bankBalance(t, ctx, v0, bob); got != before+7 {
			t.Fatalf("bob has %d, want %d", got, before+7)
		}
		if err := v3.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		target, _ := v0.Height(ctx)
		hd, err := net.WaitSynced(ctx, target+1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := net.SameHeader(ctx, halted); err != nil {
			t.Fatal(err)
		}
		t.Logf("resumed; tx in block %d; all four agree at %d", tx.Height, hd.Height)
	})

	t.Run("SIGKILL mid-block", func(t *testing.T) {
		// Transactions keep flowing through validator 0 meanwhile, so the
		// killed node dies with blocks full of work half done.
		var sent int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if res, err := v0.Tx(ctx, "alice", "bank", "send", "alice", bob, "1udepin"); err == nil && res.Code == 0 {
					sent++
				}
			}
		}()
		victim := v2
		for _, offset := range []time.Duration{0, 150 * time.Millisecond, 300 * time.Millisecond, 450 * time.Millisecond} {
			h, err := victim.Height(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waitNext(t, ctx, victim, h)
			time.Sleep(offset)
			victim.Kill()
			killedAt, _ := v0.Height(ctx)
			if err := victim.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			hd, err := net.WaitSynced(ctx, killedAt+2)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("killed %s after block %d was committed; back in step at %d", offset, h+1, hd.Height)
		}
		close(stop)
		wg.Wait()
		waitSigned(t, ctx, v0, victim)
		if log, _ := os.ReadFile(victim.LogPath()); strings.Contains(string(log), "CONSENSUS FAILURE") || strings.Contains(string(log), "panic:") {
			t.Fatalf("the killed validator's log reports a failure:\n%s", fileTail(victim.LogPath(), 40))
		}
		// Every node holds the same balances.
		target, _ := v0.Height(ctx)
		if _, err := net.WaitSynced(ctx, target+1); err != nil {
			t.Fatal(err)
		}
		want := before + 7 + sent
		for _, v := range net.Validators {
			if got := bankBalance(t, ctx, v, bob); got != want {
				t.Fatalf("val%d says bob has %d, want %d (%d sends during the kills)", v.Index, got, want, sent)
			}
		}
		t.Logf("%d transfers committed across 4 kills", sent)
	})
}
