package keeper

import (
	"context"
	"errors"
	"fmt"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"

	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// Invariant checks one property of the registry; it returns a description and whether
// the property is broken. Tests and simulation run them after every scenario (x/crisis
// is deprecated, so they are not registered with it).
type Invariant func(ctx context.Context) (string, bool)

// LockReader reads a stakingext collateral lock: x/shardregistry holds no coins itself,
// replica collateral lives in the holders' bonds as locks.
type LockReader interface {
	CollateralLock(ctx context.Context, operator sdk.AccAddress, ref string) (sdk.Coin, bool, error)
}

// StakingExtLocks reads locks straight from x/stakingext's lock collection
// (stakingext keeper's Locks field).
func StakingExtLocks(locks collections.Map[collections.Pair[sdk.AccAddress, string], stakingexttypes.CollateralLock]) LockReader {
	return lockMap{locks}
}

type lockMap struct {
	m collections.Map[collections.Pair[sdk.AccAddress, string], stakingexttypes.CollateralLock]
}

func (l lockMap) CollateralLock(ctx context.Context, operator sdk.AccAddress, ref string) (sdk.Coin, bool, error) {
	lock, err := l.m.Get(ctx, collections.Join(operator, ref))
	if errors.Is(err, collections.ErrNotFound) {
		return sdk.Coin{}, false, nil
	}
	if err != nil {
		return sdk.Coin{}, false, err
	}
	return lock.Amount, true, nil
}

// AllInvariants bundles every x/shardregistry invariant.
func AllInvariants(k Keeper, locks LockReader) Invariant {
	return func(ctx context.Context) (string, bool) {
		for _, inv := range []Invariant{CollateralInvariant(k, locks), DeadlineIndexInvariant(k), DurabilityInvariant(k), CustodyReleaseIndexInvariant(k), CustodyHeldInvariant(k)} {
			if msg, broken := inv(ctx); broken {
				return msg, true
			}
		}
		return "", false
	}
}

// CollateralInvariant: every active replica has its stakingext lock, of exactly its
// collateral, and no terminated replica still has one.
func CollateralInvariant(k Keeper, locks LockReader) Invariant {
	return func(ctx context.Context) (string, bool) {
		var msg string
		err := k.Replicas.Walk(ctx, nil, func(id uint64, r types.Replica) (bool, error) {
			holder, err := k.addressCodec.StringToBytes(r.Holder)
			if err != nil {
				return true, err
			}
			amount, found, err := locks.CollateralLock(ctx, holder, types.ReplicaCollateralRef(id))
			if err != nil {
				return true, err
			}
			switch {
			case r.Status == types.REPLICA_STATUS_ACTIVE && !found:
				msg = fmt.Sprintf("shardregistry: active replica %d has no collateral lock", id)
			case r.Status == types.REPLICA_STATUS_ACTIVE && !amount.Equal(r.Collateral):
				msg = fmt.Sprintf("shardregistry: replica %d locks %s, its collateral is %s", id, amount, r.Collateral)
			case r.Status != types.REPLICA_STATUS_ACTIVE && found:
				msg = fmt.Sprintf("shardregistry: %s replica %d still has a collateral lock of %s", r.Status, id, amount)
			}
			return msg != "", nil
		})
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}

// CustodyReleaseIndexInvariant: every custody release entry points to a custody object
// scheduled at that time, and every scheduled object has exactly its entry.
func CustodyReleaseIndexInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		var msg string
		entries := 0
		err := k.CustodyReleases.Walk(ctx, nil, func(key collections.Pair[int64, string]) (bool, error) {
			entries++
			d, err := k.GetDataset(ctx, key.K2())
			if err != nil || d.Custody == nil || d.Custody.ReleaseAtUnixNanos != key.K1() {
				msg = fmt.Sprintf("shardregistry: custody release entry (%d, %q) has no custody object scheduled then", key.K1(), key.K2())
				return true, nil
			}
			return false, nil
		})
		if err != nil {
			return err.Error(), true
		}
		if msg != "" {
			return msg, true
		}
		scheduled := 0
		if err := k.Datasets.Walk(ctx, nil, func(_ string, d types.Dataset) (bool, error) {
			if d.Custody != nil && d.Custody.ReleaseAtUnixNanos != 0 {
				scheduled++
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		if scheduled != entries {
			return fmt.Sprintf("shardregistry: %d custody objects are scheduled for release but the index has %d entries", scheduled, entries), true
		}
		return "", false
	}
}

// CustodyHeldInvariant: each job's count of custody objects held (x/market's
// custody_held, which decides when its storage escrow is refunded) is the number of its
// custody objects here, so no escrow is refunded while a holder can still be paid.
func CustodyHeldInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		held := map[uint64]uint32{}
		var jobs []uint64
		if err := k.Datasets.Walk(ctx, nil, func(_ string, d types.Dataset) (bool, error) {
			if d.Custody != nil {
				if held[d.Custody.JobId] == 0 {
					jobs = append(jobs, d.Custody.JobId)
				}
				held[d.Custody.JobId]++
			}
			return false, nil
		}); err != nil {
			return err.Error(), true
		}
		for _, id := range jobs {
			job, err := k.marketKeeper.GetJob(ctx, id)
			if err != nil {
				return err.Error(), true
			}
			if job.CustodyHeld != held[id] {
				return fmt.Sprintf("shardregistry: job %d has %d custody objects but x/market counts %d held", id, held[id], job.CustodyHeld), true
			}
		}
		return "", false
	}
}

// DeadlineIndexInvariant: every deadline entry points to an active replica due at that
// height, and every active replica has exactly that entry, so nothing due is missed.
func DeadlineIndexInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		var msg string
		entries := 0
		err := k.Deadlines.Walk(ctx, nil, func(key collections.Pair[int64, uint64]) (bool, error) {
			entries++
			r, err := k.Replicas.Get(ctx, key.K2())
			switch {
			case errors.Is(err, collections.ErrNotFound):
				msg = fmt.Sprintf("shardregistry: deadline %d points to missing replica %d", key.K1(), key.K2())
			case err != nil:
				return true, err
			case r.Status != types.REPLICA_STATUS_ACTIVE:
				msg = fmt.Sprintf("shardregistry: deadline %d points to %s replica %d", key.K1(), r.Status, r.Id)
			case r.NextDeadline != key.K1():
				msg = fmt.Sprintf("shardregistry: deadline entry %d of replica %d, whose next deadline is %d", key.K1(), r.Id, r.NextDeadline)
			}
			return msg != "", nil
		})
		if err == nil && msg == "" {
			active := 0
			err = k.Replicas.Walk(ctx, nil, func(id uint64, r types.Replica) (bool, error) {
				if r.Status == types.REPLICA_STATUS_ACTIVE {
					active++
					has, err := k.Deadlines.Has(ctx, collections.Join(r.NextDeadline, id))
					if err != nil {
						return true, err
					}
					if !has {
						msg = fmt.Sprintf("shardregistry: active replica %d has no deadline entry at %d", id, r.NextDeadline)
					}
				}
				return msg != "", nil
			})
			if err == nil && msg == "" && active != entries {
				msg = fmt.Sprintf("shardregistry: %d deadline entries for %d active replicas", entries, active)
			}
		}
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}

// DurabilityInvariant: the holder counts, shard holders, open slots and under-replicated
// shards are exactly what the active replicas make them, and no piece has more holders
// than it needs.
func DurabilityInvariant(k Keeper) Invariant {
	return func(ctx context.Context) (string, bool) {
		msg, err := checkDurability(ctx, k)
		if err != nil {
			return err.Error(), true
		}
		return msg, msg != ""
	}
}

func checkDurability(ctx context.Context, k Keeper) (string, error) {
	// collections.Triple holds pointers, so maps are keyed by plain structs.
	type pieceRef struct {
		dataset      string
		shard, piece uint32
	}
	type shardHolder struct {
		dataset string
		shard   uint32
		holder  string
	}
	counts := map[pieceRef]uint32{}
	shardHolders := map[shardHolder]bool{}
	if err := k.Replicas.Walk(ctx, nil, func(_ uint64, r types.Replica) (bool, error) {
		if r.Status == types.REPLICA_STATUS_ACTIVE {
			counts[pieceRef{r.DatasetId, r.Shard, r.Piece}]++
			holder, err := k.addressCodec.StringToBytes(r.Holder)
			if err != nil {
				return true, err
			}
			shardHolders[shardHolder{r.DatasetId, r.Shard, string(holder)}] = true
		}
		return false, nil
	}); err != nil {
		return "", err
	}
	var msg string
	stored := 0
	if err := k.PieceHolders.Walk(ctx, nil, func(key collections.Triple[string, uint32, uint32], n uint32) (bool, error) {
		stored++
		if want := counts[pieceRef{key.K1(), key.K2(), key.K3()}]; want != n {
			msg = fmt.Sprintf("shardregistry: piece %d of shard %d of %q counts %d holders, has %d active replicas", key.K3(), key.K2(), key.K1(), n, want)
		}
		return msg != "", nil
	}); err != nil || msg != "" {
		return msg, err
	}
	if stored != len(counts) {
		return fmt.Sprintf("shardregistry: %d pieces have holder counts, %d have active replicas", stored, len(counts)), nil
	}
	stored = 0
	if err := k.ShardHolders.Walk(ctx, nil, func(key collections.Triple[string, uint32, []byte]) (bool, error) {
		stored++
		if !shardHolders[shardHolder{key.K1(), key.K2(), string(key.K3())}] {
			msg = fmt.Sprintf("shardregistry: shard %d of %q lists holder %x without an active replica", key.K2(), key.K1(), key.K3())
		}
		return msg != "", nil
	}); err != nil || msg != "" {
		return msg, err
	}
	if stored != len(shardHolders) {
		return fmt.Sprintf("shardregistry: %d shard holders recorded, %d (shard, holder) pairs have active replicas", stored, len(shardHolders)), nil
	}
	wantOpen, wantUnder := 0, 0
	err := k.Datasets.Walk(ctx, nil, func(id string, d types.Dataset) (bool, error) {
		for s := uint32(0); s < d.ShardCount && msg == ""; s++ {
			var live uint32
			for p := uint32(0); p < d.Encoding.PiecesPerShard(); p++ {
				key := collections.Join3(id, s, p)
				n := counts[pieceRef{id, s, p}]
				if n > d.Encoding.HoldersPerPiece() {
					msg = fmt.Sprintf("shardregistry: piece %d of shard %d of %q has %d holders, needs only %d", p, s, id, n, d.Encoding.HoldersPerPiece())
					break
				}
				open, err := k.OpenSlots.Has(ctx, key)
				if err != nil {
					return true, err
				}
				if n < d.Encoding.HoldersPerPiece() {
					wantOpen++
				}
				if open != (n < d.Encoding.HoldersPerPiece()) {
					msg = fmt.Sprintf("shardregistry: piece %d of shard %d of %q has %d of %d holders but open slot = %t", p, s, id, n, d.Encoding.HoldersPerPiece(), open)
					break
				}
				if d.Encoding.IsReedSolomon() {
					if n > 0 {
						live++
					}
				} else {
					live += n
				}
			}
			if msg != "" {
				break
			}
			under, err := k.UnderReplicated.Has(ctx, collections.Join(id, s))
			if err != nil {
				return true, err
			}
			if live < d.Encoding.Target() {
				wantUnder++
			}
			if under != (live < d.Encoding.Target()) {
				msg = fmt.Sprintf("shardregistry: shard %d of %q has live %d of target %d but under-replicated = %t", s, id, live, d.Encoding.Target(), under)
			}
		}
		return msg != "", nil
	})
	if err != nil || msg != "" {
		return msg, err
	}
	// No entries beyond those of existing pieces and shards.
	open, err := countKeys(ctx, k.OpenSlots)
	if err != nil {
		return "", err
	}
	under, err := countKeys(ctx, k.UnderReplicated)
	if err != nil {
		return "", err
	}
	if open != wantOpen || under != wantUnder {
		return fmt.Sprintf("shardregistry: %d open slots and %d under-replicated shards recorded, want %d and %d", open, under, wantOpen, wantUnder), nil
	}
	return "", nil
}

func countKeys[K any](ctx context.Context, set collections.KeySet[K]) (int, error) {
	n := 0
	err := set.Walk(ctx, nil, func(K) (bool, error) {
		n++
		return false, nil
	})
	return n, err
}
