package app

import (
	"context"
	"cosmossdk.io/math"
	"fmt"
	"strconv"
	"strings"

	"cosmossdk.io/collections"

	"github.com/cosmos/cosmos-sdk/baseapp"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/module"
	authtypes "github.com/cosmos/cosmos-sdk/x/auth/types"

	marketkeeper "github.com/depinchain/depinchain/x/market/keeper"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrykeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifykeeper "github.com/depinchain/depinchain/x/verify/keeper"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// randomGenesisAccounts gives every simulated account a plain base account. The chain
// has no vesting module, so the SDK's generator, which makes some accounts vesting ones,
// would produce a genesis the app cannot decode.
func randomGenesisAccounts(simState *module.SimulationState) authtypes.GenesisAccounts {
	accounts := make(authtypes.GenesisAccounts, len(simState.Accounts))
	for i, acc := range simState.Accounts {
		accounts[i] = authtypes.NewBaseAccountWithAddress(acc.Address)
	}
	return accounts
}

// GetBaseApp returns the app's BaseApp, which the SDK's simulation framework drives.
func (app *App) GetBaseApp() *baseapp.BaseApp { return app.BaseApp }

// NamedInvariant is one module invariant: a property of the state that must hold after
// every block. Check returns a description and whether the property is broken.
type NamedInvariant struct {
	Module string
	Check  sdk.Invariant
}

// Invariants lists the invariants of the project's modules: token conservation of
// every module account that holds coins, collateral locks and the derived indexes.
// x/crisis is deprecated in v0.53 and the module manager no longer collects invariants,
// so the app lists them here; the simulation checks all of them after every block.
func (app *App) Invariants() []NamedInvariant {
	return []NamedInvariant{
		{stakingexttypes.ModuleName, stakingextkeeper.AllInvariants(app.StakingExtKeeper)},
		{markettypes.ModuleName, onSDKContext(marketkeeper.AllInvariants(app.MarketKeeper))},
		{verifytypes.ModuleName, onSDKContext(verifykeeper.AllInvariants(app.VerifyKeeper))},
		{shardregistrytypes.ModuleName, onSDKContext(shardregistrykeeper.AllInvariants(app.ShardKeeper,
			shardregistrykeeper.StakingExtLocks(app.StakingExtKeeper.Locks)))},
		{"app", app.collateralLocksInvariant},
		{"app", app.auditFeesInvariant},
	}
}

// auditFeesInvariant checks the audit fees across x/market and x/verify, which no single
// module's invariants can: what every job's escrow spent on audits (job.audit_fees, net of
// fees given back) equals what x/verify holds for unsettled assignments plus what it paid
// auditors for settled ones.
func (app *App) auditFeesInvariant(ctx sdk.Context) (string, bool) {
	spent := math.ZeroInt()
	if err := app.MarketKeeper.Jobs.Walk(ctx, nil, func(_ uint64, j markettypes.Job) (bool, error) {
		if !j.AuditFees.Amount.IsNil() {
			spent = spent.Add(j.AuditFees.Amount)
		}
		return false, nil
	}); err != nil {
		return err.Error(), true
	}
	accounted := math.ZeroInt()
	if err := app.VerifyKeeper.Assignments.Walk(ctx, nil, func(_ verifykeeper.AuditKey, a verifytypes.Audit) (bool, error) {
		if a.Settled {
			accounted = accounted.Add(a.Paid.Amount)
		} else {
			accounted = accounted.Add(a.Fee.Amount)
		}
		return false, nil
	}); err != nil {
		return err.Error(), true
	}
	if !spent.Equal(accounted) {
		return fmt.Sprintf("audit fees: the escrows spent %s, x/verify holds and paid %s", spent, accounted), true
	}
	return "", false
}

// collateralLocksInvariant checks x/stakingext's collateral locks against the modules
// that own them, which no single module's invariants can: every lock names a live
// obligation of its operator (an active lease of x/market or an active replica of
// x/shardregistry) and holds exactly that obligation's collateral, and every active
// lease holds its lock. A leaked lock would freeze part of a bond for good.
func (app *App) collateralLocksInvariant(ctx sdk.Context) (string, bool) {
	var msg string
	fail := func(format string, args ...any) (bool, error) {
		msg = fmt.Sprintf("collateral locks: "+format, args...)
		return true, nil
	}
	err := app.StakingExtKeeper.Locks.Walk(ctx, nil, func(key collections.Pair[sdk.AccAddress, string], lock stakingexttypes.CollateralLock) (bool, error) {
		ref := key.K2()
		switch {
		case strings.HasPrefix(ref, "market/lease/"):
			id, err := strconv.ParseUint(strings.TrimPrefix(ref, "market/lease/"), 10, 64)
			if err != nil || markettypes.LeaseCollateralRef(id) != ref {
				return fail("lock %q of %s names no lease", ref, lock.Operator)
			}
			lease, err := app.MarketKeeper.Leases.Get(ctx, id)
			switch {
			case err != nil:
				return fail("lock %q of %s: lease %d: %v", ref, lock.Operator, id, err)
			case lease.State != markettypes.LEASE_STATE_ACTIVE:
				return fail("lock %q of %s outlives lease %d, closed (%s)", ref, lock.Operator, id, lease.CloseReason)
			case lease.Provider != lock.Operator || !lease.Collateral.Equal(lock.Amount):
				return fail("lock %q of %s for %s, but lease %d is %s's with collateral %s", ref, lock.Operator, lock.Amount, id, lease.Provider, lease.Collateral)
			}
		case strings.HasPrefix(ref, shardregistrytypes.ModuleName+"/replica/"):
			id, err := strconv.ParseUint(strings.TrimPrefix(ref, shardregistrytypes.ModuleName+"/replica/"), 10, 64)
			if err != nil || shardregistrytypes.ReplicaCollateralRef(id) != ref {
				return fail("lock %q of %s names no replica", ref, lock.Operator)
			}
			replica, err := app.ShardKeeper.Replicas.Get(ctx, id)
			switch {
			case err != nil:
				return fail("lock %q of %s: replica %d: %v", ref, lock.Operator, id, err)
			case replica.Status != shardregistrytypes.REPLICA_STATUS_ACTIVE:
				return fail("lock %q of %s outlives replica %d, %s", ref, lock.Operator, id, replica.Status)
			case replica.Holder != lock.Operator || !replica.Collateral.Equal(lock.Amount):
				return fail("lock %q of %s for %s, but replica %d is %s's with collateral %s", ref, lock.Operator, lock.Amount, id, replica.Holder, replica.Collateral)
			}
		default:
			return fail("lock %q of %s belongs to no module", ref, lock.Operator)
		}
		return false, nil
	})
	if err == nil && msg == "" {
		err = app.MarketKeeper.Leases.Walk(ctx, nil, func(id uint64, lease markettypes.Lease) (bool, error) {
			if lease.State != markettypes.LEASE_STATE_ACTIVE {
				return false, nil
			}
			operator, err := app.AccountKeeper.AddressCodec().StringToBytes(lease.Provider)
			if err != nil {
				return fail("lease %d: provider %q: %v", id, lease.Provider, err)
			}
			has, err := app.StakingExtKeeper.Locks.Has(ctx, collections.Join(sdk.AccAddress(operator), markettypes.LeaseCollateralRef(id)))
			if err != nil {
				return true, err
			}
			if !has {
				return fail("active lease %d of %s holds no collateral lock", id, lease.Provider)
			}
			return false, nil
		})
	}
	if err != nil {
		return err.Error(), true
	}
	return msg, msg != ""
}

// onSDKContext adapts a module invariant written against context.Context.
func onSDKContext[F ~func(context.Context) (string, bool)](f F) sdk.Invariant {
	return func(ctx sdk.Context) (string, bool) { return f(ctx) }
}
