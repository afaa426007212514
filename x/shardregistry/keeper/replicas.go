package keeper

import (
	"fmt"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// schedule moves r's due challenge to s and keeps the deadline index in step.
func (k Keeper) schedule(ctx sdk.Context, r *types.Replica, s types.Schedule) error {
	if r.NextDeadline != 0 {
		if err := k.Deadlines.Remove(ctx, collections.Join(r.NextDeadline, r.Id)); err != nil {
			return err
		}
	}
	r.NextPeriod, r.NextSeedHeight, r.NextDeadline = s.Period, s.SeedHeight, s.Deadline
	return k.Deadlines.Set(ctx, collections.Join(s.Deadline, r.Id))
}

// slashReplica slashes fraction of r's collateral from the holder's stakingext bond
// (stakingext.Slash takes a fraction of the bond, so the fraction is converted, rounded
// up so that the slash is floor(fraction × collateral)). The slash goes to the community pool. A holder whose
// provider record is gone or whose bond is empty is not slashed; the miss still counts.
func (k Keeper) slashReplica(ctx sdk.Context, r types.Replica, fraction math.LegacyDec, reason string) (sdk.Coin, error) {
	zero := sdk.NewCoin(r.Collateral.Denom, math.ZeroInt())
	if !fraction.IsPositive() || !r.Collateral.IsPositive() {
		return zero, nil
	}
	holder, err := k.addressCodec.StringToBytes(r.Holder)
	if err != nil {
		return zero, err
	}
	provider, err := k.providerKeeper.GetProvider(ctx, holder)
	if err != nil {
		k.Logger(ctx).Error("cannot slash replica holder", "replica", r.Id, "holder", r.Holder, "err", err)
		return zero, nil
	}
	if !provider.Bond.IsPositive() {
		return sdk.NewCoin(provider.Bond.Denom, math.ZeroInt()), nil
	}
	// Rounded up so that floor(bondFraction × bond), what Slash takes, reaches the target.
	bondFraction := fraction.MulInt(r.Collateral.Amount).QuoRoundUp(math.LegacyNewDecFromInt(provider.Bond.Amount))
	if bondFraction.GT(math.LegacyOneDec()) {
		bondFraction = math.LegacyOneDec()
	}
	if !bondFraction.IsPositive() {
		return sdk.NewCoin(provider.Bond.Denom, math.ZeroInt()), nil
	}
	return k.providerKeeper.Slash(ctx, holder, bondFraction, reason, nil, math.LegacyZeroDec())
}

// terminate ends an active replica after its slash: its collateral is unlocked, its
// deadline dropped, and its piece's slot reopens.
func (k Keeper) terminate(ctx sdk.Context, r *types.Replica, reason types.TerminationReason) error {
	holder, err := k.addressCodec.StringToBytes(r.Holder)
	if err != nil {
		return err
	}
	d, err := k.GetDataset(ctx, r.DatasetId)
	if err != nil {
		return err
	}
	shard, err := k.GetShard(ctx, r.DatasetId, r.Shard)
	if err != nil {
		return err
	}
	unlocked, err := k.providerKeeper.UnlockCollateral(ctx, holder, types.ReplicaCollateralRef(r.Id))
	if err != nil {
		// Nothing to release is no reason to keep a replica that lost its piece alive.
		k.Logger(ctx).Error("unlocking replica collateral", "replica", r.Id, "err", err)
		unlocked = sdk.NewCoin(r.Collateral.Denom, math.ZeroInt())
	}
	if r.NextDeadline != 0 {
		if err := k.Deadlines.Remove(ctx, collections.Join(r.NextDeadline, r.Id)); err != nil {
			return err
		}
	}
	r.Status = types.REPLICA_STATUS_TERMINATED
	r.TerminationReason = reason
	r.TerminatedHeight = ctx.BlockHeight()
	r.NextPeriod, r.NextSeedHeight, r.NextDeadline = 0, 0, 0
	if err := k.Replicas.Set(ctx, r.Id, *r); err != nil {
		return err
	}
	if err := keeperutil.Emit(ctx, &types.EventReplicaTerminated{
		ReplicaId: r.Id, DatasetId: r.DatasetId, Shard: r.Shard, Piece: r.Piece, Holder: r.Holder,
		Reason: reason, CollateralUnlocked: unlocked,
	}); err != nil {
		return err
	}
	return k.removeHolder(ctx, d, shard, r.Piece, holder)
}

// processDeadline handles a deadline entry EndBlock took off the index: no proof came for
// the replica's due period. The holder is slashed miss_slash_fraction of the collateral;
// after max_consecutive_misses in a row the replica is terminated, otherwise its next
// challenge is scheduled.
func (k Keeper) processDeadline(ctx sdk.Context, params types.Params, id uint64, deadline int64) error {
	r, err := k.GetReplica(ctx, id)
	if err != nil {
		return err
	}
	if r.Status != types.REPLICA_STATUS_ACTIVE || r.NextDeadline != deadline {
		return nil // a stale entry: nothing is due
	}
	missed := r.NextPeriod
	slashed, err := k.slashReplica(ctx, r, params.MissSlashFraction,
		fmt.Sprintf("shardregistry: replica %d missed its storage-proof deadline %d for period %d", r.Id, deadline, missed))
	if err != nil {
		return err
	}
	r.ConsecutiveMisses++
	r.TotalMisses++
	event := &types.EventDeadlineMissed{
		ReplicaId: r.Id, Holder: r.Holder, Period: missed, Deadline: deadline,
		ConsecutiveMisses: r.ConsecutiveMisses, Slashed: slashed,
	}
	// The entry was removed by the caller.
	r.NextDeadline = 0
	if r.ConsecutiveMisses >= params.MaxConsecutiveMisses {
		if err := keeperutil.Emit(ctx, event); err != nil {
			return err
		}
		return k.terminate(ctx, &r, types.TERMINATION_REASON_MISSED_DEADLINES)
	}
	key, err := k.replicaKey(r)
	if err != nil {
		return err
	}
	if err := k.schedule(ctx, &r, types.NextSchedule(key, params, ctx.BlockHeight(), r.NextSeedHeight)); err != nil {
		return err
	}
	if err := k.Replicas.Set(ctx, r.Id, r); err != nil {
		return err
	}
	event.NextPeriod, event.NextDeadline = r.NextPeriod, r.NextDeadline
	return keeperutil.Emit(ctx, event)
}
