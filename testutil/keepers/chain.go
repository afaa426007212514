package keepers

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// What the modules' scenarios do on the chain, the same way in every module's tests.

// Addr derives a deterministic 20-byte account address from a label.
func Addr(label string) sdk.AccAddress { return sdk.AccAddress(fmt.Sprintf("%-20.20s", label)) }

// Coin is amount of the test denom.
func Coin(amount int64) sdk.Coin { return sdk.NewInt64Coin(Denom, amount) }

// Value reads a collection item that must be set, such as a module's params.
func Value[V any](t testing.TB, f *Fixture, item collections.Item[V]) V {
	t.Helper()
	v, err := item.Get(f.Ctx)
	require.NoError(t, err)
	return v
}

// RegisterProvider funds Addr(label) with funds and registers it through x/stakingext's
// message server with bond and gpus (none for a storage-only provider); its moniker,
// endpoint and region come from label.
func (f *Fixture) RegisterProvider(t testing.TB, label string, funds, bond int64, gpus ...stakingexttypes.GPUInventory) sdk.AccAddress {
	t.Helper()
	op := Addr(label)
	f.Fund(t, op, funds)
	_, err := stakingextkeeper.NewMsgServerImpl(f.StakingExt).RegisterProvider(f.Ctx, &stakingexttypes.MsgRegisterProvider{
		Operator: op.String(),
		Moniker:  label,
		Endpoint: "https://" + label + ".example.com:8443",
		Region:   "eu-west",
		Gpus:     gpus,
		Bond:     Coin(bond),
	})
	require.NoError(t, err)
	return op
}

// RequireInvariants fails t when any of the given invariants (a module's AllInvariants)
// or x/stakingext's, which every module's scenarios move bonds through, is broken now.
func (f *Fixture) RequireInvariants(t testing.TB, invariants ...func(context.Context) (string, bool)) {
	t.Helper()
	for _, inv := range invariants {
		msg, broken := inv(f.Ctx)
		require.False(t, broken, msg)
	}
	msg, broken := stakingextkeeper.AllInvariants(f.StakingExt)(f.Ctx)
	require.False(t, broken, msg)
}

// RequireInvariantsAtEnd runs check when t ends, unless t has failed already (a broken
// invariant would only hide the first failure). t must be a *testing.T to have an end;
// for benchmarks and fuzz targets it does nothing.
func RequireInvariantsAtEnd(t testing.TB, check func()) {
	if tt, ok := t.(*testing.T); ok {
		tt.Cleanup(func() {
			if !tt.Failed() {
				check()
			}
		})
	}
}

// Provider is the provider op registered.
func (f *Fixture) Provider(t testing.TB, op sdk.AccAddress) stakingexttypes.Provider {
	t.Helper()
	p, err := f.StakingExt.GetProvider(f.Ctx, op)
	require.NoError(t, err)
	return p
}

// Job is the market job id.
func (f *Fixture) Job(t testing.TB, id uint64) markettypes.Job {
	t.Helper()
	j, err := f.Market.GetJob(f.Ctx, id)
	require.NoError(t, err)
	return j
}

// Lease is the market lease id.
func (f *Fixture) Lease(t testing.TB, id uint64) markettypes.Lease {
	t.Helper()
	l, err := f.Market.GetLease(f.Ctx, id)
	require.NoError(t, err)
	return l
}

// LeasesOfJob returns every lease of a job, oldest first.
func (f *Fixture) LeasesOfJob(t testing.TB, jobID uint64) []markettypes.Lease {
	t.Helper()
	iter, err := f.Market.Leases.Indexes.Job.MatchExact(f.Ctx, jobID)
	require.NoError(t, err)
	ids, err := iter.PrimaryKeys()
	require.NoError(t, err)
	leases := make([]markettypes.Lease, 0, len(ids))
	for _, id := range ids {
		leases = append(leases, f.Lease(t, id))
	}
	return leases
}

// ActiveLeasesOfJob returns a job's active leases, oldest first.
func (f *Fixture) ActiveLeasesOfJob(t testing.TB, jobID uint64) []markettypes.Lease {
	t.Helper()
	var active []markettypes.Lease
	for _, l := range f.LeasesOfJob(t, jobID) {
		if l.State == markettypes.LEASE_STATE_ACTIVE {
			active = append(active, l)
		}
	}
	return active
}
