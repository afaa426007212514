package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExportReimports stops a chain with market state in it, exports the state at the
// last height, resets the node's data and starts it from the exported genesis: providers,
// jobs and escrows must come back exactly as they were.
func TestExportReimports(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	n := startChain(t, ctx)
	mustTx(t, ctx, n, "provider", "stakingext", "register-provider", "gpu-farm-1", "https://gpu1.example.com:8443", "eu-west",
		"100000000000udepin", "--gpus", `{"model":"H100-SXM5-80GB","vram_mib":81920,"count":8}`)
	specPath := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(specPath, []byte(jobSpecYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	mustTx(t, ctx, n, "owner", "market", "submit-job", "--spec", specPath, "--deposit", "50000000udepin")
	mustTx(t, ctx, n, "provider", "market", "place-bid", "1", "1500000udepin", "--steps-per-hour", "1000")

	state := func() string {
		var b strings.Builder
		for _, path := range []string{"/depinchain/market/v1/jobs/1", "/depinchain/market/v1/jobs/1/bids", "/depinchain/stakingext/v1/providers"} {
			body, err := n.REST(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(body)
		}
		return b.String()
	}
	before := state()
	height, err := n.Height(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.Stop()

	exported := filepath.Join(t.TempDir(), "exported.json")
	if _, err := n.Exec(ctx, "export", "--output-document", exported); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Exec(ctx, "genesis", "validate", exported); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Exec(ctx, "comet", "unsafe-reset-all"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(exported)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.Home, "config", "genesis.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ctx, height); err != nil {
		t.Fatal(err)
	}
	if after := state(); after != before {
		t.Fatalf("state changed across export/import:\nbefore: %s\nafter:  %s", before, after)
	}
}
