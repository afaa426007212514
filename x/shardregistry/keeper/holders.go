package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// What holders do with replicas: claim an open slot with the first proof, prove every
// period, release in good standing, or declare the data lost.

// claimReplica gives holder an open slot of a piece: it checks that holder is an active
// provider that holds nothing else of the shard and can lock the replica's collateral,
// verifies the proof of the current period's challenge, locks the collateral and
// schedules the next proof (MsgClaimReplica). It returns the replica and the piece's live
// holders now.
func (k Keeper) claimReplica(ctx sdk.Context, holder sdk.AccAddress, msg *types.MsgClaimReplica) (types.Replica, types.Dataset, types.Piece, uint32, error) {
	fail := func(err error) (types.Replica, types.Dataset, types.Piece, uint32, error) {
		return types.Replica{}, types.Dataset{}, types.Piece{}, 0, err
	}
	d, err := k.GetDataset(ctx, msg.DatasetId)
	if err != nil {
		return fail(err)
	}
	shard, err := k.GetShard(ctx, msg.DatasetId, msg.Shard)
	if err != nil {
		return fail(err)
	}
	if msg.Piece >= uint32(len(shard.Pieces)) {
		return fail(errorsmod.Wrapf(types.ErrPieceNotFound, "shard %d of %q has pieces 0..%d, not %d", msg.Shard, msg.DatasetId, len(shard.Pieces)-1, msg.Piece))
	}
	piece := shard.Pieces[msg.Piece]
	params, err := k.Params.Get(ctx)
	if err != nil {
		return fail(err)
	}
	provider, err := k.providerKeeper.GetProvider(ctx, holder)
	if err != nil {
		if !keeperutil.IsNotFound(err) {
			return fail(err)
		}
		return fail(keeperutil.WrapCause(types.ErrProviderIneligible, err, "%s is not a stakingext provider", msg.Holder))
	}
	if provider.Status != stakingexttypes.PROVIDER_STATUS_ACTIVE {
		return fail(errorsmod.Wrapf(types.ErrProviderIneligible, "provider %s is %s, not active", msg.Holder, provider.Status))
	}
	if d.Custody != nil && d.Custody.Trainer == msg.Holder {
		// The trainer already has the state; custody is only worth something if the state
		// outlives its host, and finality counts holders other than it.
		return fail(errorsmod.Wrapf(types.ErrNotCustodian, "%s trained checkpoint %d of lease %d; its pieces must be held by other providers",
			msg.Holder, d.Custody.CheckpointIndex, d.Custody.LeaseId))
	}
	holds, err := k.ShardHolders.Has(ctx, collections.Join3(d.Id, shard.Index, []byte(holder)))
	if err != nil {
		return fail(err)
	}
	if holds {
		return fail(errorsmod.Wrapf(types.ErrAlreadyHolder,
			"%s already holds a piece of shard %d of %q; one failure must not take two pieces of a shard", msg.Holder, shard.Index, d.Id))
	}
	holders, err := k.pieceHolders(ctx, d.Id, shard.Index, msg.Piece)
	if err != nil {
		return fail(err)
	}
	if required := d.Encoding.HoldersPerPiece(); holders >= required {
		return fail(errorsmod.Wrapf(types.ErrNoOpenSlot, "piece %d of shard %d of %q already has %d of %d holders", msg.Piece, shard.Index, d.Id, holders, required))
	}
	collateral := params.ReplicaCollateral(piece.SizeBytes)
	if free := provider.FreeBond(); free.Denom != collateral.Denom || free.IsLT(collateral) {
		return fail(errorsmod.Wrapf(types.ErrProviderIneligible, "provider %s has free bond %s but a replica of this %d-byte piece locks %s",
			msg.Holder, free, piece.SizeBytes, collateral))
	}

	// The first proof: the current period's challenge, seeded by the block hash stored at
	// the period's start and the replica key, which the claimant knows before claiming.
	height := ctx.BlockHeight()
	current := types.PeriodOf(height, params.PeriodBlocks)
	if msg.Period != current {
		return fail(errorsmod.Wrapf(types.ErrWrongPeriod, "the claim proves period %d but the current period is %d; recompute the challenge (query claim-challenge)", msg.Period, current))
	}
	if len(msg.Proofs) == 0 {
		return fail(errorsmod.Wrap(types.ErrInvalidProof, "a claim must carry the proof of the current period's challenge"))
	}
	key := types.ReplicaKey(d.Id, shard.Index, msg.Piece, holder)
	seedHeight := types.PeriodStart(current, params.PeriodBlocks)
	indices, err := k.challengeIndices(ctx, params, key, current, seedHeight, piece.ChunkCount, true)
	if err != nil {
		return fail(err)
	}
	if err := verifyChunkProofs(ctx, params, piece, d.ChunkSize, indices, msg.Proofs); err != nil {
		return fail(err)
	}

	id, err := k.NextReplicaID.Next(ctx)
	if err != nil {
		return fail(err)
	}
	if err := k.providerKeeper.LockCollateral(ctx, holder, types.ReplicaCollateralRef(id), collateral); err != nil {
		if !keeperutil.IsRefusal(err) {
			return fail(err)
		}
		return fail(keeperutil.WrapCause(types.ErrProviderIneligible, err, "locking collateral"))
	}
	r := types.Replica{
		Id: id, DatasetId: d.Id, Shard: shard.Index, Piece: msg.Piece, Holder: msg.Holder,
		Status: types.REPLICA_STATUS_ACTIVE, ClaimedHeight: height, LastProvenPeriod: current,
		Collateral: collateral, ProofsAccepted: 1,
	}
	if err := k.schedule(ctx, &r, types.NextSchedule(key, params, height, seedHeight)); err != nil {
		return fail(err)
	}
	if err := k.Replicas.Set(ctx, id, r); err != nil {
		return fail(err)
	}
	holders, err = k.addHolder(ctx, d, shard.Index, msg.Piece, holder)
	if err != nil {
		return fail(err)
	}
	return r, d, piece, holders, nil
}

// activeReplicaOf loads a replica and checks that sender holds it and that it is active.
func (k Keeper) activeReplicaOf(ctx context.Context, sender string, id uint64) (types.Replica, error) {
	r, err := k.GetReplica(ctx, id)
	if err != nil {
		return r, err
	}
	if r.Holder != sender {
		return r, errorsmod.Wrapf(types.ErrNotHolder, "replica %d is held by %s, not %s", id, r.Holder, sender)
	}
	if r.Status != types.REPLICA_STATUS_ACTIVE {
		return r, errorsmod.Wrapf(types.ErrReplicaNotActive, "replica %d is %s", id, r.Status)
	}
	return r, nil
}

// releaseReplica ends a replica its holder no longer wants, in good standing only: it
// unlocks the collateral, drops the replica and reopens its slot (MsgReleaseReplica).
// EventReplicaReleased comes before the events of the reopened slot, so it is emitted
// here.
func (k Keeper) releaseReplica(ctx sdk.Context, msg *types.MsgReleaseReplica) (sdk.Coin, error) {
	r, err := k.activeReplicaOf(ctx, msg.Holder, msg.ReplicaId)
	if err != nil {
		return sdk.Coin{}, err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return sdk.Coin{}, err
	}
	// Only in good standing: a holder that owes the current period's proof could
	// otherwise release to dodge the miss it is about to get.
	if current := types.PeriodOf(ctx.BlockHeight(), params.PeriodBlocks); r.NextPeriod <= current || r.ConsecutiveMisses > 0 {
		return sdk.Coin{}, errorsmod.Wrapf(types.ErrProofOwed,
			"replica %d owes the proof for period %d (deadline %d, %d misses in a row); submit it first, or declare a fault",
			r.Id, r.NextPeriod, r.NextDeadline, r.ConsecutiveMisses)
	}
	holder, err := k.addressCodec.StringToBytes(r.Holder)
	if err != nil {
		return sdk.Coin{}, err
	}
	d, err := k.GetDataset(ctx, r.DatasetId)
	if err != nil {
		return sdk.Coin{}, err
	}
	shard, err := k.GetShard(ctx, r.DatasetId, r.Shard)
	if err != nil {
		return sdk.Coin{}, err
	}

	unlocked, err := k.providerKeeper.UnlockCollateral(ctx, holder, types.ReplicaCollateralRef(r.Id))
	if err != nil {
		return sdk.Coin{}, err
	}
	if err := k.Deadlines.Remove(ctx, collections.Join(r.NextDeadline, r.Id)); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.Replicas.Remove(ctx, r.Id); err != nil {
		return sdk.Coin{}, err
	}
	if err := keeperutil.Emit(ctx, &types.EventReplicaReleased{
		ReplicaId: r.Id, DatasetId: r.DatasetId, Shard: r.Shard, Piece: r.Piece, Holder: r.Holder, CollateralUnlocked: unlocked,
	}); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.removeHolder(ctx, d, shard, r.Piece, holder); err != nil {
		return sdk.Coin{}, err
	}
	return unlocked, nil
}

// declareFault is a holder's admission that it lost a replica's data: a smaller slash
// than a missed proof, and the replica ends (MsgDeclareFault). EventFaultDeclared comes
// between the slash's events and the termination's, so it is emitted here.
func (k Keeper) declareFault(ctx sdk.Context, msg *types.MsgDeclareFault) (sdk.Coin, error) {
	r, err := k.activeReplicaOf(ctx, msg.Holder, msg.ReplicaId)
	if err != nil {
		return sdk.Coin{}, err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return sdk.Coin{}, err
	}
	slashed, err := k.slashReplica(ctx, r, params.DeclaredFaultSlashFraction,
		fmt.Sprintf("shardregistry: holder declared replica %d (piece %d of shard %d of %q) lost", r.Id, r.Piece, r.Shard, r.DatasetId))
	if err != nil {
		return sdk.Coin{}, err
	}
	if err := keeperutil.Emit(ctx, &types.EventFaultDeclared{ReplicaId: r.Id, Holder: r.Holder, Slashed: slashed}); err != nil {
		return sdk.Coin{}, err
	}
	if err := k.terminate(ctx, &r, types.TERMINATION_REASON_DECLARED_FAULT); err != nil {
		return sdk.Coin{}, err
	}
	return slashed, nil
}

// submitStorageProof answers a replica's due challenge before its deadline and schedules
// the next one (MsgSubmitStorageProof). It returns the replica and the period it proved.
func (k Keeper) submitStorageProof(ctx sdk.Context, msg *types.MsgSubmitStorageProof) (types.Replica, uint64, error) {
	r, err := k.activeReplicaOf(ctx, msg.Holder, msg.ReplicaId)
	if err != nil {
		return types.Replica{}, 0, err
	}
	if msg.Period != r.NextPeriod {
		return types.Replica{}, 0, errorsmod.Wrapf(types.ErrWrongPeriod, "replica %d is due for period %d (deadline %d), not %d", r.Id, r.NextPeriod, r.NextDeadline, msg.Period)
	}
	height := ctx.BlockHeight()
	if height > r.NextDeadline {
		return types.Replica{}, 0, errorsmod.Wrapf(types.ErrDeadlinePassed, "replica %d's deadline for period %d was height %d; it is now %d", r.Id, r.NextPeriod, r.NextDeadline, height)
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Replica{}, 0, err
	}
	shard, err := k.GetShard(ctx, r.DatasetId, r.Shard)
	if err != nil {
		return types.Replica{}, 0, err
	}
	d, err := k.GetDataset(ctx, r.DatasetId)
	if err != nil {
		return types.Replica{}, 0, err
	}
	key, err := k.replicaKey(r)
	if err != nil {
		return types.Replica{}, 0, err
	}
	piece := shard.Pieces[r.Piece]
	indices, err := k.challengeIndices(ctx, params, key, r.NextPeriod, r.NextSeedHeight, piece.ChunkCount, true)
	if err != nil {
		return types.Replica{}, 0, err
	}
	if err := verifyChunkProofs(ctx, params, piece, d.ChunkSize, indices, msg.Proofs); err != nil {
		return types.Replica{}, 0, err
	}

	proven := r.NextPeriod
	r.LastProvenPeriod = proven
	r.ConsecutiveMisses = 0
	r.ProofsAccepted++
	if err := k.schedule(ctx, &r, types.NextSchedule(key, params, height, r.NextSeedHeight)); err != nil {
		return types.Replica{}, 0, err
	}
	if err := k.Replicas.Set(ctx, r.Id, r); err != nil {
		return types.Replica{}, 0, err
	}
	if err := k.payCustodyHolder(ctx, params, d, r.Holder); err != nil {
		return types.Replica{}, 0, err
	}
	return r, proven, nil
}
