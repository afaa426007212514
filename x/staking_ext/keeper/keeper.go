// Package keeper holds x/stakingext's state and the API other modules use to
// check, lock and slash provider bonds.
package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	collcodec "cosmossdk.io/collections/codec"
	"cosmossdk.io/collections/indexes"
	"cosmossdk.io/core/address"
	"cosmossdk.io/core/store"

	"github.com/cosmos/cosmos-sdk/codec"
	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/staking_ext/types"
)

// Keeper owns the provider registry, bonds, collateral locks and the
// unbonding queue. All bonded tokens sit in the module account; the records
// say whose they are.
type Keeper struct {
	addressCodec  address.Codec
	accountKeeper types.AccountKeeper
	bankKeeper    types.BankKeeper
	distrKeeper   types.DistributionKeeper
	// authority may change params (the gov module account).
	authority     string
	moduleAddress sdk.AccAddress

	Schema          collections.Schema
	Params          collections.Item[types.Params]
	Providers       *collections.IndexedMap[sdk.AccAddress, types.Provider, ProviderIndexes]
	Locks           collections.Map[collections.Pair[sdk.AccAddress, string], types.CollateralLock]
	Unbondings      *collections.IndexedMap[uint64, types.Unbonding, UnbondingIndexes]
	NextUnbondingID collections.Sequence

	// Verifiers are the registered auditors. The active ones form the audit set, kept
	// as positions 0..size−1 (AuditSet, with the reverse AuditSetPositions) so that a
	// draw samples it by position without reading the rest.
	Verifiers         collections.Map[sdk.AccAddress, types.Verifier]
	AuditSet          collections.Map[uint64, sdk.AccAddress]
	AuditSetPositions collections.Map[sdk.AccAddress, uint64]
	AuditSetSize      collections.Item[uint64]

	// slashWindow is shared by every copy of the keeper: the app fills it in once
	// x/verify exists (SetSlashWindow).
	slashWindow *slashWindowHolder

	// providersByStatusPages and unbondingsByOperatorPages read the keys of
	// the status and operator indexes as plain key sets, because
	// query.CollectionPaginate needs raw iteration that indexes.Multi does not
	// offer. They are read-only views on the same prefixes and codecs, kept
	// out of Schema so that each prefix is registered once.
	providersByStatusPages    collections.KeySet[collections.Pair[int32, sdk.AccAddress]]
	unbondingsByOperatorPages collections.KeySet[collections.Pair[sdk.AccAddress, uint64]]
}

// ProviderIndexes indexes providers by status, so that queries and other
// modules can list e.g. the jailed ones without reading every provider.
type ProviderIndexes struct {
	Status *indexes.Multi[int32, sdk.AccAddress, types.Provider]
}

// IndexesList implements collections.Indexes.
func (i ProviderIndexes) IndexesList() []collections.Index[sdk.AccAddress, types.Provider] {
	return []collections.Index[sdk.AccAddress, types.Provider]{i.Status}
}

// UnbondingIndexes order the unbonding queue by completion time (what
// EndBlock pays out) and group it by operator (entry limits and queries).
type UnbondingIndexes struct {
	CompletionTime *indexes.Multi[int64, uint64, types.Unbonding]
	Operator       *indexes.Multi[sdk.AccAddress, uint64, types.Unbonding]
}

// IndexesList implements collections.Indexes.
func (i UnbondingIndexes) IndexesList() []collections.Index[uint64, types.Unbonding] {
	return []collections.Index[uint64, types.Unbonding]{i.CompletionTime, i.Operator}
}

const (
	providersByStatusIndexName    = "providers_by_status"
	unbondingsByOperatorIndexName = "unbondings_by_operator"
)

// NewKeeper builds the keeper and its collections. It panics when the module
// account is not configured, as every bond movement goes through it.
func NewKeeper(
	cdc codec.BinaryCodec,
	storeService store.KVStoreService,
	addressCodec address.Codec,
	ak types.AccountKeeper,
	bk types.BankKeeper,
	dk types.DistributionKeeper,
	authority string,
) Keeper {
	moduleAddress := ak.GetModuleAddress(types.ModuleName)
	if moduleAddress == nil {
		panic(fmt.Sprintf("the %s module account has not been set", types.ModuleName))
	}
	if _, err := addressCodec.StringToBytes(authority); err != nil {
		panic(fmt.Sprintf("invalid %s authority address %q: %s", types.ModuleName, authority, err))
	}

	sb := collections.NewSchemaBuilder(storeService)
	k := Keeper{
		addressCodec:  addressCodec,
		accountKeeper: ak,
		bankKeeper:    bk,
		distrKeeper:   dk,
		authority:     authority,
		moduleAddress: moduleAddress,

		Params: collections.NewItem(sb, types.ParamsKey, "params", codec.CollValue[types.Params](cdc)),
		Providers: collections.NewIndexedMap(sb, types.ProvidersKey, "providers", sdk.AccAddressKey,
			codec.CollValue[types.Provider](cdc),
			ProviderIndexes{
				Status: indexes.NewMulti(sb, types.ProvidersByStatusKey, providersByStatusIndexName,
					collections.Int32Key, sdk.AccAddressKey,
					func(_ sdk.AccAddress, provider types.Provider) (int32, error) {
						return int32(provider.Status), nil
					}),
			}),
		Locks: collections.NewMap(sb, types.LocksKey, "locks",
			collections.PairKeyCodec(sdk.AccAddressKey, collections.StringKey),
			codec.CollValue[types.CollateralLock](cdc)),
		Unbondings: collections.NewIndexedMap(sb, types.UnbondingsKey, "unbondings", collections.Uint64Key,
			codec.CollValue[types.Unbonding](cdc),
			UnbondingIndexes{
				CompletionTime: indexes.NewMulti(sb, types.UnbondingsByCompletionKey, "unbondings_by_completion",
					collections.Int64Key, collections.Uint64Key,
					func(_ uint64, unbonding types.Unbonding) (int64, error) {
						return types.CompletionTimeKey(unbonding.CompletionTime)
					}),
				Operator: indexes.NewMulti(sb, types.UnbondingsByOperatorKey, unbondingsByOperatorIndexName,
					sdk.AccAddressKey, collections.Uint64Key,
					func(_ uint64, unbonding types.Unbonding) (sdk.AccAddress, error) {
						return addressCodec.StringToBytes(unbonding.Operator)
					}),
			}),
		NextUnbondingID: collections.NewSequence(sb, types.NextUnbondingIDKey, "next_unbonding_id"),

		Verifiers:         collections.NewMap(sb, types.VerifiersKey, "verifiers", sdk.AccAddressKey, codec.CollValue[types.Verifier](cdc)),
		AuditSet:          collections.NewMap(sb, types.AuditSetKey, "audit_set", collections.Uint64Key, collcodec.KeyToValueCodec(sdk.AccAddressKey)),
		AuditSetPositions: collections.NewMap(sb, types.AuditSetPositionsKey, "audit_set_positions", sdk.AccAddressKey, collections.Uint64Value),
		AuditSetSize:      collections.NewItem(sb, types.AuditSetSizeKey, "audit_set_size", collections.Uint64Value),
		slashWindow:       &slashWindowHolder{},
	}
	schema, err := sb.Build()
	if err != nil {
		panic(err)
	}
	k.Schema = schema

	views := collections.NewSchemaBuilder(storeService)
	k.providersByStatusPages = collections.NewKeySet(views, types.ProvidersByStatusKey, providersByStatusIndexName,
		collections.PairKeyCodec(collections.Int32Key, sdk.AccAddressKey))
	k.unbondingsByOperatorPages = collections.NewKeySet(views, types.UnbondingsByOperatorKey, unbondingsByOperatorIndexName,
		collections.PairKeyCodec(sdk.AccAddressKey, collections.Uint64Key))
	return k
}

type slashWindowHolder struct{ source types.SlashWindow }

// SetSlashWindow gives the keeper (and every copy of it) x/verify's requirement on
// unbonding_blocks, which MsgUpdateParams checks. Until it is set, only the module's own
// rules are checked.
func (k Keeper) SetSlashWindow(source types.SlashWindow) { k.slashWindow.source = source }

// AddressCodec returns the codec operator addresses are written with.
func (k Keeper) AddressCodec() address.Codec { return k.addressCodec }

// GetParams returns the current params.
func (k Keeper) GetParams(ctx context.Context) (types.Params, error) {
	return k.Params.Get(ctx)
}

// GetProvider returns the provider registered by operator, or ErrProviderNotFound.
func (k Keeper) GetProvider(ctx context.Context, operator sdk.AccAddress) (types.Provider, error) {
	provider, err := k.Providers.Get(ctx, operator)
	if err != nil {
		return types.Provider{}, keeperutil.NotFound(err, types.ErrProviderNotFound, "no provider is registered by %s", k.formatAddress(operator))
	}
	return provider, nil
}

// AllProviders returns every registered provider in operator order, for the
// simulation's operations of the modules that pick providers.
func (k Keeper) AllProviders(ctx context.Context) ([]types.Provider, error) {
	iter, err := k.Providers.Iterate(ctx, nil)
	if err != nil {
		return nil, err
	}
	return iter.Values()
}

// formatAddress renders an address for error messages, falling back to hex
// so that a malformed address still shows up in the message.
func (k Keeper) formatAddress(addr sdk.AccAddress) string {
	text, err := k.addressCodec.BytesToString(addr)
	if err != nil {
		return fmt.Sprintf("%X", []byte(addr))
	}
	return text
}
