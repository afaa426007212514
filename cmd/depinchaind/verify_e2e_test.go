package main_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sdk "github.com/cosmos/cosmos-sdk/types"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const verifyJobYAML = `name: verified-tiny-lm
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: 16
checkpoint_every: 16
max_price_per_gpu_hour: 3600000000udepin
max_duration: 2h
bidding_window_blocks: 25
`

// referenceRun is what an honest party computes: the states and per-step hashes of the
// reference workload for a job, with the same package the chain's referee uses.
type referenceRun struct {
	states []*exact.State
	hashes []string
}

func runReference(t *testing.T, seed []byte, steps uint64) referenceRun {
	t.Helper()
	s, err := exact.Init(exact.ReferenceConfig(), seed)
	if err != nil {
		t.Fatal(err)
	}
	data, err := verifytypes.JobTrainingData(markettypes.Job{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Root()
	run := referenceRun{states: []*exact.State{s}, hashes: []string{hex.EncodeToString(h[:])}}
	cur := s
	for i := uint64(0); i < steps; i++ {
		next, err := exact.Run(cur, data.Bytes, seed, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		cur = next
		h := cur.Root()
		run.states = append(run.states, cur)
		run.hashes = append(run.hashes, hex.EncodeToString(h[:]))
	}
	return run
}

func writeTrace(t *testing.T, hashes []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "trace.txt")
	if err := os.WriteFile(p, []byte(strings.Join(hashes, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifiedTrainingEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	n, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(t.TempDir(), "home"),
		Accounts: map[string]int64{
			"owner": 1_000_000_000_000, "cheater": 1_000_000_000_000, "honest": 1_000_000_000_000, "challenger": 1_000_000_000_000,
		},
		Genesis: func(app map[string]any) error {
			params := app["verify"].(map[string]any)["params"].(map[string]any)
			params["challenge_window"] = "15"
			params["move_timeout"] = "60"
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	conn, err := grpc.NewClient(n.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	market, verify, providers, bank := markettypes.NewQueryClient(conn), verifytypes.NewQueryClient(conn),
		stakingexttypes.NewQueryClient(conn), banktypes.NewQueryClient(conn)
	addr := func(key string) string { return mustAddr(t, ctx, n, key) }
	bal := func(key string) sdk.Coin {
		res, err := bank.Balance(ctx, &banktypes.QueryBalanceRequest{Address: addr(key), Denom: "udepin"})
		if err != nil {
			t.Fatal(err)
		}
		return *res.Balance
	}

	for _, p := range []string{"cheater", "honest"} {
		mustTx(t, ctx, n, p, "stakingext", "register-provider", p, "https://"+p+".example.com", "eu-west",
			"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
	}
	specPath := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(specPath, []byte(verifyJobYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTx(t, ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "5000000000udepin")
	mustTx(t, ctx, n, "cheater", "market", "place-bid", "1", "3000000000udepin", "--steps-per-hour", "1000")
	waitLease := func(leaseID uint64) markettypes.Lease {
		var lease markettypes.Lease
		waitFor(t, ctx, fmt.Sprintf("lease %d to exist", leaseID), func() bool {
			res, err := market.Lease(ctx, &markettypes.QueryLeaseRequest{LeaseId: leaseID})
			if err != nil {
				return false
			}
			lease = res.Lease
			return true
		})
		return lease
	}
	lease := waitLease(1)
	if lease.Provider != addr("cheater") {
		t.Fatalf("lease 1 went to %s", lease.Provider)
	}
	jobRes, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: 1})
	if err != nil {
		t.Fatal(err)
	}
	honestRun := runReference(t, jobRes.Job.Seed, 16)

	// The cheater skips work from step 9 on and fabricates the rest of its trace; the
	// chain requires its last hash to be the root of the state it commits, so it makes up
	// a state too (the honest one with a weight changed) and ends its trace with its root.
	fake := honestRun.states[16].Clone()
	fake.Tensors[0].Data[0] += 7
	fakeState := fake.Encode()
	statePath := filepath.Join(t.TempDir(), "ckpt.bin")
	if err := os.WriteFile(statePath, fakeState, 0o644); err != nil {
		t.Fatal(err)
	}
	cheat := append([]string(nil), honestRun.hashes...)
	for i := 9; i < len(cheat); i++ {
		cheat[i] = fmt.Sprintf("%064x", i)
	}
	fakeRoot := exact.StateRoot(fakeState)
	cheat[len(cheat)-1] = hex.EncodeToString(fakeRoot[:])
	cheatTrace, honestTrace := writeTrace(t, cheat), writeTrace(t, honestRun.hashes)
	mustTx(t, ctx, n, "cheater", "verify", "submit-checkpoint", "1", "0", "0", "--trace", cheatTrace,
		"--state", statePath, "--uri", "https://cheater.example.com/ckpt/1/0", "--metric", "loss=2.1")

	cheaterBondBefore := mustProvider(t, ctx, providers, addr("cheater")).Bond
	challengerBefore := bal("challenger")
	res := mustTx(t, ctx, n, "challenger", "verify", "challenge", "1", "0", "--trace", honestTrace)
	if _, ok := res.Attr("depinchain.verify.v1.EventChallengeOpened", "challenge_id"); !ok {
		t.Fatalf("no EventChallengeOpened: %+v", res.Events)
	}

	// Play the bisection through the CLI until the referee decides: over 16
	// steps that is 4 rounds of two moves and the one-step proof, so a game
	// still going after 20 moves is stuck.
	rounds := 0
	for moves := 0; ; moves++ {
		if moves > 20 {
			t.Fatalf("the game did not end after %d moves (%d rounds)", moves, rounds)
		}
		ch, err := verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
		if err != nil {
			t.Fatal(err)
		}
		c := ch.Challenge
		switch c.Turn {
		case verifytypes.GAME_TURN_PROVIDER:
			mustTx(t, ctx, n, "cheater", "verify", "reveal", "1", "0", fmt.Sprint(c.Mid), "--trace", cheatTrace)
			continue
		case verifytypes.GAME_TURN_CHALLENGER:
			rounds++
			mustTx(t, ctx, n, "challenger", "verify", "respond", "1", "--trace", honestTrace)
			continue
		case verifytypes.GAME_TURN_ONE_STEP:
			if c.Lo != 8 || c.Hi != 9 {
				t.Fatalf("bisection converged on [%d, %d], want [8, 9]", c.Lo, c.Hi)
			}
			pre := filepath.Join(t.TempDir(), "pre.bin")
			if err := os.WriteFile(pre, honestRun.states[c.Lo].Encode(), 0o644); err != nil {
				t.Fatal(err)
			}
			mustTx(t, ctx, n, "challenger", "verify", "step", "1", "--state", pre)
			continue
		}
		if c.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON {
			t.Fatalf("game ended %s (%s)", c.Outcome, c.OutcomeReason)
		}
		break
	}
	if rounds != 4 {
		t.Fatalf("played %d rounds over 16 steps, want ceil(log2 16) = 4", rounds)
	}

	// The cheater is slashed and tombstoned, the challenger rewarded, the owner refunded.
	cheater := mustProvider(t, ctx, providers, addr("cheater"))
	if cheater.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED {
		t.Fatalf("cheater status %s", cheater.Status)
	}
	slashed := cheaterBondBefore.Sub(cheater.Bond)
	if !slashed.Amount.Equal(cheaterBondBefore.Amount.QuoRaw(2)) {
		t.Fatalf("slashed %s of %s, want half", slashed, cheaterBondBefore)
	}
	reward := bal("challenger").Sub(challengerBefore)
	if !reward.Amount.Equal(slashed.Amount.QuoRaw(2)) {
		t.Fatalf("challenger gained %s, want half the slash %s", reward, slashed)
	}
	escrow, err := market.Escrow(ctx, &markettypes.QueryEscrowRequest{JobId: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !escrow.Withdrawable.IsZero() || !escrow.Withdrawn.IsZero() {
		t.Fatalf("the cheater was paid: %+v", escrow)
	}
	cp, err := verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: 1, Index: 0})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Checkpoint.Status != verifytypes.CHECKPOINT_STATUS_REJECTED {
		t.Fatalf("fraudulent checkpoint is %s", cp.Checkpoint.Status)
	}
	job, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: 1})
	if err != nil {
		t.Fatal(err)
	}
	if job.Job.State != markettypes.JOB_STATE_OPEN {
		t.Fatalf("job after fraud is %s, want it back at auction", job.Job.State)
	}

	// An honest provider takes over, commits the real trace, and is paid after the window.
	mustTx(t, ctx, n, "honest", "market", "place-bid", "1", "3000000000udepin", "--steps-per-hour", "1000")
	lease = waitLease(2)
	if lease.Provider != addr("honest") || lease.ResumeStep != 0 {
		t.Fatalf("lease 2: %+v", lease)
	}
	honestState := filepath.Join(t.TempDir(), "ckpt.bin")
	if err := os.WriteFile(honestState, honestRun.states[16].Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTx(t, ctx, n, "honest", "verify", "submit-checkpoint", "2", "0", "0", "--trace", honestTrace,
		"--state", honestState, "--uri", "https://honest.example.com/ckpt/2/0", "--metric", "loss=2.1")
	waitFor(t, ctx, "the honest checkpoint (lease 2, index 0) to become final after its 15-block window", func() bool {
		cp, err := verify.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: 2, Index: 0})
		if err != nil {
			t.Fatal(err)
		}
		return cp.Checkpoint.Status == verifytypes.CHECKPOINT_STATUS_FINAL
	})
	lease = waitLease(2)
	if !lease.Withdrawable.IsPositive() {
		t.Fatalf("final checkpoint released nothing: %+v", lease)
	}
	honestBefore := bal("honest")
	mustTx(t, ctx, n, "honest", "market", "withdraw-earnings")
	if got := bal("honest").Sub(honestBefore); !got.Equal(lease.Withdrawable) {
		t.Fatalf("honest provider received %s, want %s", got, lease.Withdrawable)
	}
	job, err = market.Job(ctx, &markettypes.QueryJobRequest{JobId: 1})
	if err != nil {
		t.Fatal(err)
	}
	if job.Job.State != markettypes.JOB_STATE_COMPLETED {
		t.Fatalf("job after the last final checkpoint is %s", job.Job.State)
	}
}

func mustProvider(t *testing.T, ctx context.Context, q stakingexttypes.QueryClient, operator string) stakingexttypes.Provider {
	t.Helper()
	res, err := q.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: operator})
	if err != nil {
		t.Fatal(err)
	}
	return res.Provider
}
