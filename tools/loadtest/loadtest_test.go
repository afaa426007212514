package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTinyLoad runs the whole tool against a node of its own with a small
// load and checks that the report accounts for every transaction and
// measured what it claims to.
func TestTinyLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and loads it for about a minute")
	}
	cfg := defaultConfig()
	cfg.duration, cfg.warmup = 8*time.Second, 2*time.Second
	cfg.concurrency = 4
	cfg.bankAccounts, cfg.owners, cfg.providers = 8, 8, 4
	// A loaded CI machine may be slow to send bids: give them time.
	cfg.biddingWindow = 8
	cfg.home = filepath.Join(t.TempDir(), "loadtest")
	var log bytes.Buffer
	cfg.log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())

	if len(rep.Phases) != 2 || rep.Phases[0].Name != "bank" || rep.Phases[1].Name != "market" {
		t.Fatalf("phases %+v", rep.Phases)
	}
	for _, p := range rep.Phases {
		if p.Sent == 0 || p.Included == 0 {
			t.Errorf("%s: sent %d, included %d", p.Name, p.Sent, p.Included)
		}
		if p.Included+p.Failed+p.Lost != p.Sent {
			t.Errorf("%s: %d sent but %d included + %d failed + %d lost", p.Name, p.Sent, p.Included, p.Failed, p.Lost)
		}
		// Every transaction the tool builds is valid and in time.
		if p.Failed != 0 || p.Lost != 0 || p.Rejected != 0 {
			t.Errorf("%s: %d failed %v, %d lost, %d refused %v", p.Name, p.Failed, p.Failures, p.Lost, p.Rejected, p.Rejections)
		}
		if p.IncludedMsgs != p.Included*cfg.msgsPerTx {
			t.Errorf("%s: %d messages in %d transactions", p.Name, p.IncludedMsgs, p.Included)
		}
		if p.NodeCores <= 0 || p.ToolCores <= 0 || p.TxPerNodeCPUSec <= 0 {
			t.Errorf("%s: CPU node %.2f, tool %.2f cores", p.Name, p.NodeCores, p.ToolCores)
		}
		if p.TxPerSec <= 0 || p.MsgPerSec <= 0 || p.Span <= 0 || p.LastHeight < p.FirstHeight {
			t.Errorf("%s: %.1f tx/s, %.1f msgs/s over %s, blocks %d-%d", p.Name, p.TxPerSec, p.MsgPerSec, p.Span, p.FirstHeight, p.LastHeight)
		}
		b := p.Blocks
		if b.Blocks != int(p.LastHeight-p.FirstHeight+1) || b.Mean <= 0 || b.P50 > b.P95 || b.P95 > b.Max || b.P50 < cfg.blockTime/2 {
			t.Errorf("%s: block times %+v", p.Name, b)
		}
	}
	if rep.Phases[0].FirstHeight <= 1 || rep.Phases[1].FirstHeight <= rep.Phases[0].LastHeight {
		t.Errorf("phases overlap: bank %d-%d, market %d-%d", rep.Phases[0].FirstHeight, rep.Phases[0].LastHeight,
			rep.Phases[1].FirstHeight, rep.Phases[1].LastHeight)
	}
	if rep.Ratio <= 0 || rep.MsgRatio <= 0 || rep.CPURatio <= 0 {
		t.Errorf("ratio %.2f (tx/s), %.2f (msgs/s), %.2f (per node CPU-second)", rep.Ratio, rep.MsgRatio, rep.CPURatio)
	}

	gas := map[string]GasReport{}
	for _, g := range rep.Gas {
		gas[g.Kind] = g
	}
	for _, k := range []msgKind{kindSend, kindSubmitJob, kindPlaceBid, kindCheckpoint, kindRegister} {
		g, ok := gas[string(k)]
		if !ok || g.Msgs == 0 || g.MeanPerMsg <= 0 || g.Min > g.Max || float64(g.Limit) < float64(g.Max) {
			t.Errorf("gas of %s: %+v", k, g)
		}
	}

	// The market went all the way: jobs, bids, leases to our providers and
	// their checkpoints, each counted where the chain said it happened.
	m := rep.Market
	if m.Jobs == 0 || m.Bids == 0 || m.OurLeases == 0 || m.Checkpoints == 0 {
		t.Errorf("market pipeline %+v", m)
	}
	if m.Checkpoints > m.OurLeases || m.OurLeases > m.Jobs || m.Bids > m.Jobs*cfg.bidsPerJob {
		t.Errorf("market pipeline does not add up: %+v", m)
	}
	if got := gas[string(kindCheckpoint)].Msgs; got != m.Checkpoints {
		t.Errorf("%d checkpoints in the gas table, %d counted", got, m.Checkpoints)
	}
	for _, want := range []string{"market/bank throughput ratio", "p95", string(kindCheckpoint)} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestBlockStats(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	s := blockStats(ms(500, 700, 600, 900, 500, 500, 600, 500, 1500, 600), 100, 30)
	want := BlockStats{Blocks: 10, Mean: 690 * time.Millisecond, P50: 600 * time.Millisecond, P95: 1500 * time.Millisecond,
		Max: 1500 * time.Millisecond, TxsPerBlock: 10, MaxTxsPerBlock: 30}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if s := blockStats(nil, 0, 0); s.Blocks != 0 || s.Mean != 0 {
		t.Fatalf("no blocks: %+v", s)
	}
	if p := percentile(ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 95); p != 19*time.Millisecond {
		t.Fatalf("p95 of 1..20 ms is %s, want 19ms (nearest rank)", p)
	}
}

func TestReasonClass(t *testing.T) {
	a := reasonClass("failed to execute message; message index: 0: job 245 closed bidding at height 31: bidding deadline has passed")
	b := reasonClass("failed to execute message; message index: 0: job 9 closed bidding at height 1031: bidding deadline has passed")
	if a != b || strings.ContainsAny(a, "0123456789") {
		t.Fatalf("%q and %q should be one class", a, b)
	}
	if got := reasonClass(strings.Repeat("x", 500)); len(got) > 170 {
		t.Fatalf("long log kept at %d bytes", len(got))
	}
}

func TestGenesisAccountsAreDeterministic(t *testing.T) {
	a, b := newAccounts("s", "bank", 3), newAccounts("s", "bank", 3)
	c := newAccounts("other", "bank", 1)
	for i := range a {
		if a[i].address != b[i].address || !strings.HasPrefix(a[i].address, "depin1") {
			t.Fatalf("account %d: %s vs %s", i, a[i].address, b[i].address)
		}
	}
	if a[0].address == a[1].address || a[0].address == c[0].address {
		t.Fatal("distinct roles, indices or seeds gave the same key")
	}
	state := map[string]any{
		"auth": map[string]any{"accounts": []any{}},
		"bank": map[string]any{"balances": []any{}, "supply": []any{map[string]any{"denom": denom, "amount": "10"}}},
	}
	if err := fundAtGenesis(a, 5)(state); err != nil {
		t.Fatal(err)
	}
	bank := state["bank"].(map[string]any)
	if n := len(bank["balances"].([]any)); n != 3 {
		t.Fatalf("%d balances", n)
	}
	if got := bank["supply"].([]any)[0].(map[string]any)["amount"]; got != "25" {
		t.Fatalf("supply %v, want 25", got)
	}
}
