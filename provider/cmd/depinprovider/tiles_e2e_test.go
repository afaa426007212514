package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// tileStep is the step a liar of the tile tests computes wrong: inside the
// job's one checkpoint (steps 0..16), so phase 1 narrows to [9, 10].
const tileStep = 9

// tileJobYAML is a 16-step reference job with one checkpoint.
var tileJobYAML = strings.NewReplacer("total_steps: 64", "total_steps: 16", "checkpoint_every: 16", "checkpoint_every: 16").Replace(referenceJobYAML)

// tileCase is one dispute of the tile tests: a party wrong in exactly one
// place of step tileStep, with the sidecar on both sides.
type tileCase struct {
	name string
	// tensor is the operator output the liar computes one element of wrong
	// (--cheat-tamper), or "window": one token of its batch.
	tensor string
	// challengerLies: the verifier is the liar and the provider honest;
	// otherwise the provider cheats and an honest verifier catches it.
	challengerLies bool
	// lieAboutRecords: the lying challenger also commits a record root that
	// is not its records' (--cheat-commit-records): it cannot open it and
	// loses in phase 2.
	lieAboutRecords bool
	// pauseBeforeMove kills the liar's sidecar right before its Nth move
	// and starts it again (0: no restart).
	pauseBeforeMove int
}

// tileCases are the disputes of the table: a cheating provider wrong
// in a forward matmul, the attention softmax, a normalisation, a backward
// matmul, the optimizer update and the data batch, and lying challengers
// that lose at the tile level and at the operator records.
var tileCases = []tileCase{
	// The provider's 6th move is its second record-descent reveal: 4 reveals
	// of phase 1 (16 → 1 steps), then its records.
	{name: "softmax", tensor: "mb0.l0.probs", pauseBeforeMove: 6},
	{name: "forward matmul", tensor: "mb0.l0.qkv"},
	{name: "normalisation", tensor: "mb0.l0.ln1"},
	{name: "backward matmul", tensor: "mb0.g.l0.mlp_in.dW"},
	{name: "optimizer update", tensor: "next.l0.mlp_in.w"},
	{name: "data batch", tensor: "window"},
	{name: "lying challenger, tile", tensor: "mb0.l0.ln1", challengerLies: true},
	{name: "lying challenger, records", tensor: "mb0.l0.qkv", challengerLies: true, lieAboutRecords: true},
	{name: "lying challenger, data", tensor: "window", challengerLies: true},
}

func tileCaseNamed(t *testing.T, name string) tileCase {
	for _, c := range tileCases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no tile case %q", name)
	return tileCase{}
}

// TestTileDisputeCatchesACheater: a provider wrong in one element of the
// attention softmax of one step, on a chain whose one-step referee cannot
// re-execute the step (max_step_macs below it): the verifier's sidecar
// challenges, both sidecars play phase 1, the operator records and the
// tiles to that element — the provider's sidecar killed mid-phase 2 and
// started again — and the referee convicts the cheater. The other kinds of
// the table run under `make test-long` (TestTileDisputeEveryKind).
func TestTileDisputeCatchesACheater(t *testing.T) {
	runTileCase(t, tileCaseNamed(t, "softmax"))
}

// TestTileDisputeLyingChallengerLoses: a verifier wrong in one element of a
// normalisation challenges an honest provider, plays to the tile and loses:
// the referee recomputes the element and finds the provider's.
func TestTileDisputeLyingChallengerLoses(t *testing.T) {
	runTileCase(t, tileCaseNamed(t, "lying challenger, tile"))
}

// runTileCase plays c on a fresh chain with a provider and a verifier, each
// a real depinprovider process, and checks the game's outcome, the entry it
// was decided at and the slashing.
func runTileCase(t *testing.T, c tileCase) {
	if testing.Short() {
		t.Skip("starts a real node and two real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	ref := exact.ReferenceConfig()
	node, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(t.TempDir(), "chain"),
		Accounts: map[string]int64{
			"owner": 1_000_000_000_000, "provider": 1_000_000_000_000, "provider-hot": 1_000_000_000,
			"verifier": 1_000_000_000_000, "verifier-hot": 1_000_000_000,
		},
		Genesis: func(app map[string]any) error {
			params := app["verify"].(map[string]any)["params"].(map[string]any)
			// Time for the verifier to fetch and re-execute the checkpoint before it is
			// final, on a loaded 2-core machine (12 blocks, about 3 s, were missed in CI).
			params["challenge_window"] = "40"
			// Room for a killed sidecar to start again on a loaded machine.
			params["move_timeout"] = "100"
			// Below one reference step: every dispute goes through phases 2–3.
			params["max_step_macs"] = strconv.FormatInt(ref.MACsPerStep()-1, 10)
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
	w := &world{t: t, ctx: ctx, node: node, market: markettypes.NewQueryClient(conn), verify: verifytypes.NewQueryClient(conn)}
	providers, bank := stakingexttypes.NewQueryClient(conn), banktypes.NewQueryClient(conn)

	lie := []string{"--cheat-tamper", c.tensor + "@" + strconv.Itoa(tileStep)}
	if c.lieAboutRecords {
		lie = append(lie, "--cheat-commit-records")
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
	providerOpts := sidecar.Options{Bond: "100000000000udepin", Prices: map[string]uint64{"H100-SXM5-80GB": h100Price}}
	verifierOpts := sidecar.Options{Prices: map[string]uint64{}, Set: verifierConfig}
	if c.challengerLies {
		verifierOpts.StartArgs = lie
	} else {
		providerOpts.StartArgs = lie
	}
	provider, verifier := setup("provider", providerOpts), setup("verifier", verifierOpts)
	w.provider = provider
	liar, honest := provider, verifier
	if c.challengerLies {
		liar, honest = verifier, provider
	}
	if c.pauseBeforeMove > 0 {
		err = liar.StartWith(ctx, "--pause-before-move", strconv.Itoa(c.pauseBeforeMove))
	} else {
		err = liar.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := honest.Start(ctx); err != nil {
		t.Fatal(err)
	}
	balance := func(addr string) int64 {
		res, err := bank.Balance(ctx, &banktypes.QueryBalanceRequest{Address: addr, Denom: "udepin"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Balance.Amount.Int64()
	}
	winner := honest
	winnerBefore := balance(winner.Operator)
	w.submitJob(tileJobYAML, "500000000udepin")

	if c.pauseBeforeMove > 0 {
		// Killed with the game in phase 2 and waiting on it; started again, the
		// sidecar rebuilds its execution of the step from its checkpoint
		// folder and the chain, and plays on.
		if err := liar.WaitLog(ctx, daemon.PausedLogMsg); err != nil {
			t.Fatalf("waiting for the pause before move %d: %v", c.pauseBeforeMove, err)
		}
		res, err := w.verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
		if err != nil || res.TileGame == nil || res.Challenge.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			t.Fatalf("paused with challenge 1 at %v (%v), want it in phases 2–3", res, err)
		}
		liar.Kill()
		if err := node.WaitBlocks(ctx, 3); err != nil {
			t.Fatal(err)
		}
		if err := liar.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var res *verifytypes.QueryChallengeResponse
	w.eventually("challenge 1 being decided", 4*time.Minute, func() bool {
		r, err := w.verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: 1})
		if err != nil {
			return false
		}
		res = r
		return r.Challenge.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED
	})
	ch, tg := res.Challenge, res.TileGame
	if tg == nil {
		t.Fatalf("challenge 1 (%s: %s) was decided without phases 2–3", ch.Outcome, ch.OutcomeReason)
	}
	t.Logf("challenge 1: %s at [%d, %d]: %s; phase 2–3 ended at entry %d chunk %d after %d rounds",
		ch.Outcome, ch.Lo, ch.Hi, ch.OutcomeReason, tg.Entry, tg.Chunk, tg.Rounds)
	if ch.Lo != tileStep || ch.Hi != tileStep+1 {
		t.Fatalf("phase 1 converged on [%d, %d], want [%d, %d]", ch.Lo, ch.Hi, tileStep, tileStep+1)
	}
	want := verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON
	if c.challengerLies {
		want = verifytypes.CHALLENGE_OUTCOME_PROVIDER_WON
	}
	if ch.Outcome != want {
		t.Fatalf("outcome %s (%s), want %s", ch.Outcome, ch.OutcomeReason, want)
	}
	if c.lieAboutRecords {
		// Lost in phase 2: it could not open the record root it committed,
		// so it missed its move.
		if !strings.Contains(ch.OutcomeReason, "did not make its phase 2–3 move") || len(tg.ProviderOutputRoot) != 0 {
			t.Fatalf("a challenger with a made-up record root lost by %q (output roots opened: %v), want a missed move before the records open",
				ch.OutcomeReason, len(tg.ProviderOutputRoot) != 0)
		}
	} else {
		// Decided by the referee at the entry that writes the tensor the liar got wrong.
		step := tiles.NewStep(ref)
		en := step.Entries[tg.Entry]
		name := exact.TrainGraph(ref).Tensors[en.Tensor].Name
		wantName := c.tensor
		if wantName == "window" {
			wantName = "mb0.window"
		}
		if !strings.Contains(ch.OutcomeReason, "referee") || name != wantName {
			t.Fatalf("decided by %q at entry %d (%s, tensor %s), want the referee at the entry writing %s", ch.OutcomeReason, tg.Entry, en.Kind, name, wantName)
		}
	}
	if !c.challengerLies {
		prov, err := providers.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: liar.Operator})
		if err != nil {
			t.Fatal(err)
		}
		if prov.Provider.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED {
			t.Fatalf("the cheater is %s, want tombstoned", prov.Provider.Status)
		}
		// The verifier gets its challenge bond back plus a reward.
		if after := balance(winner.Operator); after <= winnerBefore {
			t.Fatalf("verifier balance %d → %d: want a reward", winnerBefore, after)
		}
	}
	var metrics string
	if err := liar.REST(ctx, "/metrics", &metrics); err != nil {
		t.Fatal(err)
	}
	role := `role="defender"`
	if c.challengerLies {
		role = `role="challenger"`
	}
	if !strings.Contains(metrics, "depinprovider_dispute_moves_total{"+role+"}") {
		t.Errorf("the liar's sidecar made no moves after its start")
	}
}
