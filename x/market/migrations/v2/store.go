// Package v2 migrates x/market's state from consensus version 1 to 2.
//
// Version 2 indexes leases by state, so that listing every active lease (what
// a verifier sidecar watches) reads the active ones only instead of every
// lease the chain ever had. Version 1 state has leases but no such index;
// MigrateStore back-fills it. It runs once, inside the "v2" upgrade handler
// (app/upgrades.go), through x/upgrade's RunMigrations.
package v2

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	"cosmossdk.io/core/store"

	"github.com/cosmos/cosmos-sdk/codec"

	"github.com/depinchain/depinchain/x/market/types"
)

// The state layout this migration reads and writes. It is copied here rather
// than taken from types, so that the migration keeps doing what it did when a
// later version moves things.
var (
	// LeasesKey is where leases are stored, keyed by id (unchanged since v1).
	LeasesKey = collections.NewPrefix(5)
	// LeasesByStateKey is the index v2 adds: (state, lease id) with no value.
	LeasesByStateKey = collections.NewPrefix(15)
)

// MigrateStore writes a (state, lease id) entry of the leases-by-state index
// for every lease. Any entry already under the index's prefix is removed
// first, so the index ends up exactly as the v2 keeper would have written it.
func MigrateStore(ctx context.Context, storeService store.KVStoreService, cdc codec.BinaryCodec) error {
	sb := collections.NewSchemaBuilder(storeService)
	leases := collections.NewMap(sb, LeasesKey, "leases", collections.Uint64Key, codec.CollValue[types.Lease](cdc))
	byState := collections.NewKeySet(sb, LeasesByStateKey, "leases_by_state",
		collections.PairKeyCodec(collections.Int32Key, collections.Uint64Key))
	if _, err := sb.Build(); err != nil {
		return err
	}

	if err := byState.Clear(ctx, nil); err != nil {
		return fmt.Errorf("clearing the leases-by-state index: %w", err)
	}
	// Read everything first and write afterwards: no store write happens while
	// an iterator over the same store is open.
	var entries []collections.Pair[int32, uint64]
	if err := leases.Walk(ctx, nil, func(id uint64, lease types.Lease) (bool, error) {
		if lease.Id != id {
			return true, fmt.Errorf("lease stored under id %d says it is lease %d", id, lease.Id)
		}
		entries = append(entries, collections.Join(int32(lease.State), id))
		return false, nil
	}); err != nil {
		return fmt.Errorf("reading leases: %w", err)
	}
	for _, entry := range entries {
		if err := byState.Set(ctx, entry); err != nil {
			return fmt.Errorf("indexing lease %d: %w", entry.K2(), err)
		}
	}
	return nil
}
