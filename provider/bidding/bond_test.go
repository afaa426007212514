package bidding

import (
	"context"
	"errors"
	"testing"

	"cosmossdk.io/math"
	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"

	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// fakeBond is x/stakingext with one provider.
type fakeBond struct {
	provider stakingexttypes.Provider
	err      error
	// reads counts the Provider queries.
	reads int
}

func (f *fakeBond) Provider(_ context.Context, in *stakingexttypes.QueryProviderRequest, _ ...grpc.CallOption) (*stakingexttypes.QueryProviderResponse, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if in.Operator != f.provider.Operator {
		return nil, errors.New("not found")
	}
	return &stakingexttypes.QueryProviderResponse{Provider: f.provider}, nil
}

func (f *fakeBond) Params(context.Context, *stakingexttypes.QueryParamsRequest, ...grpc.CallOption) (*stakingexttypes.QueryParamsResponse, error) {
	p := stakingexttypes.DefaultParams()
	p.MinBondPerGpu = math.NewInt(1_000_000)
	return &stakingexttypes.QueryParamsResponse{Params: p}, nil
}

// gauge returns an unlabelled gauge of the harness's metrics.
func (h *harness) gauge(t *testing.T, name string) (float64, bool) {
	t.Helper()
	families, err := h.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// The bond metrics the low-free-bond alerts watch: bond, locked, free (never
// below 0, even when a slash left less bond than is locked) and the bond
// min_bond_per_gpu × GPUs requires; a failed read changes nothing.
func TestBondMetrics(t *testing.T) {
	h := newHarness(t, false)
	fake := &fakeBond{provider: stakingexttypes.Provider{Operator: operator,
		Gpus:   []stakingexttypes.GPUInventory{{Model: "H100", VramMib: 81920, Count: 8}},
		Bond:   sdk.NewInt64Coin("udepin", 100_000_000),
		Locked: sdk.NewInt64Coin("udepin", 30_000_000)}}
	h.role.opts.Bond = fake
	if err := h.role.refreshBond(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"depinprovider_bond_udepin": 100_000_000, "depinprovider_bond_locked_udepin": 30_000_000,
		"depinprovider_bond_free_udepin": 70_000_000, "depinprovider_bond_required_udepin": 8_000_000,
	}
	check := func() {
		t.Helper()
		for name, v := range want {
			if got, ok := h.gauge(t, name); !ok || got != v {
				t.Errorf("%s = %v (exported %v), want %v", name, got, ok, v)
			}
		}
	}
	check()

	fake.err = errors.New("node unreachable")
	if err := h.role.refreshBond(context.Background()); err == nil {
		t.Fatal("a failed read reported no error")
	}
	check()

	// Slashed below what is locked: no free bond, not a negative one.
	fake.err = nil
	fake.provider.Bond = sdk.NewInt64Coin("udepin", 20_000_000)
	if err := h.role.refreshBond(context.Background()); err != nil {
		t.Fatal(err)
	}
	want["depinprovider_bond_udepin"], want["depinprovider_bond_free_udepin"] = 20_000_000, 0
	check()
}
