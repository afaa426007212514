package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/provider/bidding"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// fraudNet is a chain with an honest provider, a cheating provider and a
// verifier, each a real depinprovider process.
type fraudNet struct {
	*world
	honest, cheater, verifier *sidecar.Provider
	providers                 stakingexttypes.QueryClient
	bank                      banktypes.QueryClient
}

// cheatStep is where the cheater stops training and fabricates hashes:
// inside its third checkpoint (steps 32..48) of a 64-step job.
const cheatStep = 40

func newFraudNet(t testing.TB, timeout time.Duration) *fraudNet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real node and three real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	node, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(t.TempDir(), "chain"),
		Accounts: map[string]int64{
			"owner": 1_000_000_000_000, "honest": 1_000_000_000_000, "honest-hot": 1_000_000_000,
			"cheater": 1_000_000_000_000, "cheater-hot": 1_000_000_000, "verifier": 1_000_000_000_000, "verifier-hot": 1_000_000_000,
		},
		Genesis: func(app map[string]any) error {
			params := app["verify"].(map[string]any)["params"].(map[string]any)
			params["challenge_window"] = "8"
			params["move_timeout"] = "20"
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
	f := &fraudNet{
		world:     &world{t: t, ctx: ctx, node: node, market: markettypes.NewQueryClient(conn), verify: verifytypes.NewQueryClient(conn)},
		providers: stakingexttypes.NewQueryClient(conn), bank: banktypes.NewQueryClient(conn),
	}
	setup := func(name string, opts sidecar.Options) *sidecar.Provider {
		opts.Home, opts.Operator, opts.HotKey = filepath.Join(t.TempDir(), name), name, name+"-hot"
		if testing.Verbose() {
			opts.Log = prefixWriter{os.Stderr, "    " + name + "| "}
		}
		p, err := sidecar.Setup(ctx, node, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	// The replacement lease may cost no more per step than the first auction
	// accepted (the job's cap), so the cheater and the honest provider ask the
	// same price and commit the same rate: one Go trainer speed, measured here,
	// not by each sidecar (two measurements differ). The cheater wins the first
	// auction because the honest provider starts only once it holds the lease.
	speed, err := bidding.MeasureGoTrainer()
	if err != nil {
		t.Fatal(err)
	}
	sameRate := map[string]string{"throughput.go_trainer_macs_per_second": fmt.Sprintf("%.1f", speed)}
	f.cheater = setup("cheater", sidecar.Options{Bond: "100000000000udepin", Prices: map[string]uint64{"H100-SXM5-80GB": 1_000_000},
		StartArgs: []string{"--cheat-fabricate-from-step", "40"}, Set: sameRate})
	f.honest = setup("honest", sidecar.Options{Bond: "100000000000udepin", Prices: map[string]uint64{"H100-SXM5-80GB": 1_000_000}, Set: sameRate})
	f.verifier = setup("verifier", sidecar.Options{Prices: map[string]uint64{}, Set: verifierConfig})
	// Providers serve checkpoint states only to the bonded: the verifier bonds as one
	// (x/stakingext) to get the start states it re-executes from.
	if res, err := node.Tx(ctx, "verifier", "stakingext", "register-verifier", "100000000udepin"); err != nil || res.Code != 0 {
		t.Fatalf("register-verifier: %v %s", err, res.RawLog)
	}
	f.provider = f.honest
	return f
}

func (f *fraudNet) balance(addr string) int64 {
	f.t.Helper()
	res, err := f.bank.Balance(f.ctx, &banktypes.QueryBalanceRequest{Address: addr, Denom: "udepin"})
	if err != nil {
		f.t.Fatal(err)
	}
	return res.Balance.Amount.Int64()
}

// TestVerifierCatchesACheater is the fraud story with real processes and
// nobody at the keyboard: a job lands on a provider that fabricates its
// trace from step 40; the verifier re-executes each checkpoint, challenges
// the earliest wrong one (and no later one of the lease: one game per lease)
// and plays the bisection to the one-step proof; the cheater,
// whose sidecar defends what it committed, loses: it is slashed and
// tombstoned, the verifier is rewarded, the owner refunded, and the job
// resumes on the honest provider from the last final checkpoint and is paid.
func TestVerifierCatchesACheater(t *testing.T) {
	f := newFraudNet(t, 8*time.Minute)
	// The verifier's first run stops right before its second move of the
	// game: it has challenged and answered once.
	if err := f.verifier.StartWith(f.ctx, "--pause-before-move", "2"); err != nil {
		t.Fatal(err)
	}
	if err := f.cheater.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	verifierBefore := f.balance(f.verifier.Operator)
	jobID := f.submitJob(fraudJobYAML, "500000000udepin")
	f.eventually("the cheater leasing the job", 2*time.Minute, func() bool {
		leases := f.leasesOf(jobID)
		return len(leases) == 1 && leases[0].Provider == f.cheater.Operator
	})
	if err := f.honest.Start(f.ctx); err != nil {
		t.Fatal(err)
	}

	// The verifier is killed there, with its game under way, and started
	// again: it picks the game up from the chain and finishes it.
	if err := f.verifier.WaitLog(f.ctx, daemon.PausedLogMsg); err != nil {
		t.Fatalf("waiting for the verifier to pause before its second move: %v", err)
	}
	if res, err := f.verify.Challenge(f.ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1}); err != nil ||
		res.Challenge.Turn != verifytypes.GAME_TURN_CHALLENGER || res.Challenge.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
		t.Fatalf("the verifier paused with challenge 1 at %v (%v), want the game waiting on it", res, err)
	}
	f.verifier.Kill()
	if err := f.node.WaitBlocks(f.ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.verifier.Start(f.ctx); err != nil {
		t.Fatal(err)
	}

	// The challenge the verifier opened, and its end.
	var ch verifytypes.Challenge
	f.eventually("the verifier's challenge being decided", 3*time.Minute, func() bool {
		res, err := f.verify.Challenge(f.ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
		if err != nil {
			return false
		}
		ch = res.Challenge
		return ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED
	})
	if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON || ch.Challenger != f.verifier.Operator || ch.Provider != f.cheater.Operator {
		t.Fatalf("challenge %+v: want the verifier to win against the cheater", ch)
	}
	if ch.Lo != cheatStep-1 || ch.Hi != cheatStep || ch.CheckpointIndex != 2 {
		t.Fatalf("the game on checkpoint %d converged on [%d, %d], want checkpoint 2's first fabricated step [%d, %d]",
			ch.CheckpointIndex, ch.Lo, ch.Hi, cheatStep-1, cheatStep)
	}
	prov, err := f.providers.Provider(f.ctx, &stakingexttypes.QueryProviderRequest{Operator: f.cheater.Operator})
	if err != nil {
		t.Fatal(err)
	}
	if prov.Provider.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED {
		t.Fatalf("cheater is %s, want tombstoned", prov.Provider.Status)
	}
	if after := f.balance(f.verifier.Operator); after <= verifierBefore {
		t.Fatalf("verifier balance %d → %d: want the bond back plus a reward", verifierBefore, after)
	}

	// The job resumes on the honest provider from the last final checkpoint.
	leases := f.waitPaidTo(jobID, f.honest.Operator)
	if len(leases) != 2 || leases[0].Provider != f.cheater.Operator || leases[1].Provider != f.honest.Operator {
		t.Fatalf("leases %+v: want the cheater's then the honest provider's", leases)
	}
	cheaterCps, err := f.verify.Checkpoints(f.ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases[0].Id})
	if err != nil {
		t.Fatal(err)
	}
	var lastFinal uint64
	for _, cp := range cheaterCps.Checkpoints {
		if cp.Status == verifytypes.CHECKPOINT_STATUS_FINAL {
			lastFinal = cp.EndStep
		}
		if cp.EndStep > cheatStep-1 && cp.Status != verifytypes.CHECKPOINT_STATUS_REJECTED {
			t.Fatalf("cheater's checkpoint %d (to step %d) is %s", cp.Index, cp.EndStep, cp.Status)
		}
	}
	if leases[1].ResumeStep != lastFinal || leases[0].CloseReason == markettypes.LEASE_CLOSE_REASON_COMPLETED {
		t.Fatalf("second lease resumes at %d (last final %d); first closed %s", leases[1].ResumeStep, lastFinal, leases[0].CloseReason)
	}
	if !leases[0].Withdrawable.IsZero() || !leases[0].Pending.IsZero() {
		t.Fatalf("the cheater's lease still holds %s / %s", leases[0].Pending, leases[0].Withdrawable)
	}

	// The verifier reports what it checked and found, and the game it won.
	var vs struct {
		Verifications []struct {
			Index       string `json:"index"`
			Result      string `json:"result"`
			ChallengeID string `json:"challenge_id"`
			Outcome     string `json:"outcome"`
			Detail      string `json:"detail"`
		} `json:"verifications"`
	}
	if err := f.verifier.REST(f.ctx, "/v1/verifications", &vs); err != nil {
		t.Fatal(err)
	}
	// The cheater's checkpoint 2 commits made-up weights (their root is its
	// final hash), and its trainer goes on from the honest state: checkpoint 3,
	// if the verifier reaches it before the lease closes, starts from the
	// made-up state on chain and mismatches too, but it is not challenged while
	// the game on checkpoint 2 is open: that conviction rejects it too.
	results := map[string]string{}
	for _, v := range vs.Verifications {
		results[v.Index] = v.Result
		first := v.Index == "2" && v.ChallengeID == "1" && v.Outcome == "CHALLENGE_OUTCOME_CHALLENGER_WON"
		waited := v.Index == "3" && (v.ChallengeID == "" || v.ChallengeID == "0") && strings.Contains(v.Detail, "not challenged while challenge 1 of checkpoint 2")
		if v.Result == "mismatched" && !first && !waited {
			t.Errorf("mismatch record %+v", v)
		}
	}
	if results["0"] != "matched" || results["1"] != "matched" || results["2"] != "mismatched" {
		t.Errorf("verifier results by checkpoint index of lease 1: %v", results)
	}
	var ds struct {
		Disputes []struct {
			Role    string `json:"role"`
			Lo      string `json:"lo"`
			Outcome string `json:"outcome"`
		} `json:"disputes"`
	}
	if err := f.verifier.REST(f.ctx, "/v1/disputes", &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Disputes) != 1 || ds.Disputes[0].Role != "challenger" || ds.Disputes[0].Outcome != "CHALLENGER_WON" {
		t.Errorf("verifier disputes %+v: want the one game it won", ds)
	}
	if res, err := f.verify.Challenge(f.ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 2}); err == nil {
		t.Errorf("a second challenge exists: %+v", res.Challenge)
	}
	var metrics string
	if err := f.verifier.REST(f.ctx, "/metrics", &metrics); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `depinprovider_dispute_moves_total{role="challenger"}`) {
		t.Errorf("the restarted verifier made no moves")
	}
	var cheaterMetrics string
	if err := f.cheater.REST(f.ctx, "/metrics", &cheaterMetrics); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cheaterMetrics, `depinprovider_dispute_moves_total{role="defender"}`) {
		t.Errorf("the cheater's sidecar made no defence moves")
	}
}

// fraudJobYAML is referenceJobYAML with no auditors: the verifier re-executes every
// checkpoint on its own; drawn as an auditor (it is a registered verifier) it would
// have to answer audits too.
const fraudJobYAML = referenceJobYAML + "audit:\n  auditors: 0\n"

// verifierConfig makes a sidecar a verifier of every checkpoint, with no GPUs.
var verifierConfig = map[string]string{"verifier.enabled": "true", "verifier.policy": `"all"`, "gpus.source": `"none"`}
