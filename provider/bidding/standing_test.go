package bidding

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/gpu"
	"github.com/depinchain/depinchain/provider/internal/roletest"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// withStanding gives the harness's role a provider record in the given status, bonded
// well above the minimum for its 8 GPUs, and a log the test reads.
func (h *harness) withStanding(status stakingexttypes.ProviderStatus) (*fakeBond, *bytes.Buffer) {
	fake := &fakeBond{provider: stakingexttypes.Provider{Operator: operator, Status: status,
		Gpus: []stakingexttypes.GPUInventory{{Model: "H100", VramMib: 81920, Count: 8}},
		Bond: sdk.NewInt64Coin("udepin", 100_000_000), Locked: sdk.NewInt64Coin("udepin", 0)}}
	var logs bytes.Buffer
	h.role.opts.Bond = fake
	h.role.log = slog.New(slog.NewTextHandler(&logs, nil))
	return fake, &logs
}

// considerAll decides on the given open jobs, as the worker would one after another.
func (h *harness) considerAll(t *testing.T, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		h.openJob(id, 1)
		if err := h.role.considerJob(context.Background(), id); err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
	}
}

// A tombstoned provider places no bid, on a new job or a reopened one, says so once at
// ERROR and in its status, and reads its record once, not once per job.
func TestTombstonedProviderPlacesNoBid(t *testing.T) {
	h := newHarness(t, false)
	fake, logs := h.withStanding(stakingexttypes.PROVIDER_STATUS_TOMBSTONED)
	h.considerAll(t, 1, 2)
	h.handle(t, chain.Event{Height: 12, Message: &markettypes.EventJobReopened{JobId: 1, BiddingDeadline: 30}})
	h.considerAll(t, 1)

	if sent := h.chain.Sent(); len(sent) != 0 {
		t.Fatalf("sent %v, want nothing", sent)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "is tombstoned and can never bid") {
		t.Fatalf("%d errors logged, want one saying the provider is tombstoned:\n%s", n, logs)
	}
	if st := h.role.Status(); !strings.Contains(st.Refused, "is tombstoned and can never bid") {
		t.Fatalf("status %+v does not say the provider is tombstoned", st)
	}
	if fake.reads != 1 {
		t.Fatalf("read the provider %d times for three decisions, want once", fake.reads)
	}
}

// An active provider bids as before; jailed, it stops once the jailing event arrives,
// and it bids again once it is unjailed. Another provider's events read nothing.
func TestJailedProviderBidsAgainOnceUnjailed(t *testing.T) {
	h := newHarness(t, false)
	// A GPU for each of the three bids.
	h.host.gpus = append(h.host.gpus, gpu.GPU{UUID: "g2", Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920})
	fake, logs := h.withStanding(stakingexttypes.PROVIDER_STATUS_ACTIVE)
	h.considerAll(t, 1)
	if bids := roletest.SentOf[*markettypes.MsgPlaceBid](h.chain); len(bids) != 1 || bids[0].JobId != 1 {
		t.Fatalf("active provider sent %v, want a bid on job 1", h.chain.Sent())
	}
	if st := h.role.Status(); st.Refused != "" {
		t.Fatalf("active provider refused: %q", st.Refused)
	}

	h.handle(t, chain.Event{Height: 13, Message: &stakingexttypes.EventProviderJailed{Operator: "depin1other"}})
	h.considerAll(t, 2)
	if fake.reads != 1 || len(h.chain.Sent()) != 2 {
		t.Fatalf("after another provider's jailing: %d reads, sent %v; want one read and two bids", fake.reads, h.chain.Sent())
	}

	fake.provider.Status, fake.provider.JailedUntil = stakingexttypes.PROVIDER_STATUS_JAILED, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	h.handle(t, chain.Event{Height: 14, Message: &stakingexttypes.EventProviderJailed{Operator: operator}})
	h.considerAll(t, 3, 4)
	if len(h.chain.Sent()) != 2 {
		t.Fatalf("jailed provider sent %v", h.chain.Sent()[2:])
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "must unjail before bidding") {
		t.Fatalf("%d errors logged, want one saying the provider must unjail:\n%s", n, logs)
	}

	fake.provider.Status = stakingexttypes.PROVIDER_STATUS_ACTIVE
	h.handle(t, chain.Event{Height: 15, Message: &stakingexttypes.EventProviderUnjailed{Operator: operator}})
	h.considerAll(t, 5)
	if bids := roletest.SentOf[*markettypes.MsgPlaceBid](h.chain); len(bids) != 3 || bids[2].JobId != 5 {
		t.Fatalf("unjailed provider sent %v, want a third bid, on job 5", h.chain.Sent())
	}
	if st := h.role.Status(); st.Refused != "" || fake.reads != 3 {
		t.Fatalf("unjailed: refused %q after %d reads, want none after 3", st.Refused, fake.reads)
	}
}

// Below min_bond_per_gpu × GPUs the chain refuses every bid, and so does the sidecar; a
// free bond too small for one job's collateral is that job's matter, not a refusal.
func TestBondBelowMinimumPlacesNoBid(t *testing.T) {
	h := newHarness(t, false)
	fake, _ := h.withStanding(stakingexttypes.PROVIDER_STATUS_ACTIVE)
	fake.provider.Bond = sdk.NewInt64Coin("udepin", 7_000_000) // 8 GPUs need 8,000,000
	h.considerAll(t, 1)
	if st := h.role.Status(); len(h.chain.Sent()) != 0 || !strings.Contains(st.Refused, "bond 1000000udepin more") {
		t.Fatalf("under the minimum bond: sent %v, refused %q", h.chain.Sent(), st.Refused)
	}
}
