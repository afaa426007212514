package keeper

import (
	"context"
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

type msgServer struct {
	Keeper
}

var _ types.MsgServer = msgServer{}

// NewMsgServerImpl returns the x/shardregistry Msg service.
func NewMsgServerImpl(k Keeper) types.MsgServer { return msgServer{Keeper: k} }

// Every handler validates everything before its first write, so a rejected message
// leaves state and balances exactly as they were.

func (m msgServer) RegisterDataset(ctx context.Context, msg *types.MsgRegisterDataset) (*types.MsgRegisterDatasetResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	if _, err := m.addressCodec.StringToBytes(msg.Owner); err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidAddress, "owner: %q", msg.Owner)
	}
	if err := types.ValidateDatasetID(msg.DatasetId); err != nil {
		return nil, err
	}
	if err := types.ValidateName(msg.Name); err != nil {
		return nil, err
	}
	exists, err := m.Datasets.Has(ctx, msg.DatasetId)
	if err != nil {
		return nil, err
	}
	if exists {
		return nil, errorsmod.Wrapf(types.ErrDatasetExists, "dataset %q is already registered; choose another id", msg.DatasetId)
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	// Validate a copy: validation fills in chunk counts, and the message stays as sent.
	shards := make([]types.Shard, len(msg.Shards))
	for i, s := range msg.Shards {
		s.Pieces = append([]types.Piece(nil), s.Pieces...)
		shards[i] = s
	}
	stats, err := types.ValidateManifest(params, msg.DatasetId, msg.Encoding, msg.ChunkSize, msg.TotalSize, shards, msg.ManifestRoot)
	if err != nil {
		return nil, err
	}
	for i := range shards {
		shards[i].DatasetId = msg.DatasetId
	}
	// Recomputing the manifest root hashes every leaf once and about as many nodes.
	sdkCtx.GasMeter().ConsumeGas(params.GasPerHash*2*stats.Leaves+params.GasPerByte*stats.Bytes, "manifest root")

	d := types.Dataset{
		Id: msg.DatasetId, Owner: msg.Owner, Name: msg.Name, ManifestRoot: msg.ManifestRoot, Encoding: msg.Encoding,
		ChunkSize: msg.ChunkSize, TotalSize: msg.TotalSize, ShardCount: uint32(len(shards)), SampleCount: stats.SampleCount,
		CreatedHeight: sdkCtx.BlockHeight(),
	}
	if err := m.Datasets.Set(ctx, d.Id, d); err != nil {
		return nil, err
	}
	for _, s := range shards {
		if err := m.Shards.Set(ctx, collections.Join(d.Id, s.Index), s); err != nil {
			return nil, err
		}
		// Every piece starts with an open slot and every shard under its target.
		for _, pc := range s.Pieces {
			if err := m.OpenSlots.Set(ctx, collections.Join3(d.Id, s.Index, pc.Index)); err != nil {
				return nil, err
			}
		}
		if err := m.UnderReplicated.Set(ctx, collections.Join(d.Id, s.Index)); err != nil {
			return nil, err
		}
	}
	if err := emit(ctx, &types.EventDatasetRegistered{
		DatasetId: d.Id, Owner: d.Owner, Name: d.Name, ManifestRoot: d.ManifestRoot, Encoding: d.Encoding,
		ChunkSize: d.ChunkSize, TotalSize: d.TotalSize, ShardCount: d.ShardCount, SampleCount: d.SampleCount,
	}); err != nil {
		return nil, err
	}
	return &types.MsgRegisterDatasetResponse{DatasetId: d.Id}, nil
}

func (m msgServer) ClaimReplica(ctx context.Context, msg *types.MsgClaimReplica) (*types.MsgClaimReplicaResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	holder, err := m.addressCodec.StringToBytes(msg.Holder)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidAddress, "holder: %q", msg.Holder)
	}
	d, err := m.GetDataset(ctx, msg.DatasetId)
	if err != nil {
		return nil, err
	}
	shard, err := m.GetShard(ctx, msg.DatasetId, msg.Shard)
	if err != nil {
		return nil, err
	}
	if msg.Piece >= uint32(len(shard.Pieces)) {
		return nil, errorsmod.Wrapf(types.ErrPieceNotFound, "shard %d of %q has pieces 0..%d, not %d", msg.Shard, msg.DatasetId, len(shard.Pieces)-1, msg.Piece)
	}
	piece := shard.Pieces[msg.Piece]
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	provider, err := m.providerKeeper.GetProvider(ctx, holder)
	if err != nil {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "%s is not a stakingext provider: %s", msg.Holder, err)
	}
	if provider.Status != stakingexttypes.PROVIDER_STATUS_ACTIVE {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "provider %s is %s, not active", msg.Holder, provider.Status)
	}
	holds, err := m.ShardHolders.Has(ctx, collections.Join3(d.Id, shard.Index, holder))
	if err != nil {
		return nil, err
	}
	if holds {
		return nil, errorsmod.Wrapf(types.ErrAlreadyHolder,
			"%s already holds a piece of shard %d of %q; one failure must not take two pieces of a shard", msg.Holder, shard.Index, d.Id)
	}
	holders, err := m.pieceHolders(ctx, d.Id, shard.Index, msg.Piece)
	if err != nil {
		return nil, err
	}
	if required := d.Encoding.HoldersPerPiece(); holders >= required {
		return nil, errorsmod.Wrapf(types.ErrNoOpenSlot, "piece %d of shard %d of %q already has %d of %d holders", msg.Piece, shard.Index, d.Id, holders, required)
	}
	collateral := params.ReplicaCollateral(piece.SizeBytes)
	if free := provider.FreeBond(); free.Denom != collateral.Denom || free.IsLT(collateral) {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "provider %s has free bond %s but a replica of this %d-byte piece locks %s",
			msg.Holder, free, piece.SizeBytes, collateral)
	}

	// The first proof: the current period's challenge, seeded by the block hash stored at
	// the period's start and the replica key, which the claimant knows before claiming.
	height := sdkCtx.BlockHeight()
	current := types.PeriodOf(height, params.PeriodBlocks)
	if msg.Period != current {
		return nil, errorsmod.Wrapf(types.ErrWrongPeriod, "the claim proves period %d but the current period is %d; recompute the challenge (query claim-challenge)", msg.Period, current)
	}
	if len(msg.Proofs) == 0 {
		return nil, errorsmod.Wrap(types.ErrInvalidProof, "a claim must carry the proof of the current period's challenge")
	}
	key := types.ReplicaKey(d.Id, shard.Index, msg.Piece, holder)
	seedHeight := types.PeriodStart(current, params.PeriodBlocks)
	indices, err := m.challengeIndices(ctx, params, key, current, seedHeight, piece.ChunkCount, true)
	if err != nil {
		return nil, err
	}
	if err := verifyChunkProofs(sdkCtx, params, piece, d.ChunkSize, indices, msg.Proofs); err != nil {
		return nil, err
	}

	id, err := m.NextReplicaID.Next(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.providerKeeper.LockCollateral(ctx, holder, types.ReplicaCollateralRef(id), collateral); err != nil {
		return nil, errorsmod.Wrapf(types.ErrProviderIneligible, "locking collateral: %s", err)
	}
	r := types.Replica{
		Id: id, DatasetId: d.Id, Shard: shard.Index, Piece: msg.Piece, Holder: msg.Holder,
		Status: types.REPLICA_STATUS_ACTIVE, ClaimedHeight: height, LastProvenPeriod: current,
		Collateral: collateral, ProofsAccepted: 1,
	}
	if err := m.schedule(sdkCtx, &r, types.NextSchedule(key, params, height, seedHeight)); err != nil {
		return nil, err
	}
	if err := m.Replicas.Set(ctx, id, r); err != nil {
		return nil, err
	}
	holders, err = m.addHolder(ctx, d, shard.Index, msg.Piece, holder)
	if err != nil {
		return nil, err
	}
	if err := emit(ctx, &types.EventReplicaClaimed{
		ReplicaId: id, DatasetId: d.Id, Shard: shard.Index, Piece: msg.Piece, Holder: msg.Holder,
		PieceCid: types.PieceCID(piece.Root), Collateral: collateral, LiveHolders: holders,
		RequiredHolders: d.Encoding.HoldersPerPiece(), NextPeriod: r.NextPeriod, NextDeadline: r.NextDeadline,
	}); err != nil {
		return nil, err
	}
	return &types.MsgClaimReplicaResponse{ReplicaId: id, NextDeadline: r.NextDeadline}, nil
}

// activeReplicaOf loads a replica and checks that sender holds it and that it is active.
func (m msgServer) activeReplicaOf(ctx context.Context, sender string, id uint64) (types.Replica, error) {
	r, err := m.GetReplica(ctx, id)
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

func (m msgServer) ReleaseReplica(ctx context.Context, msg *types.MsgReleaseReplica) (*types.MsgReleaseReplicaResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	r, err := m.activeReplicaOf(ctx, msg.Holder, msg.ReplicaId)
	if err != nil {
		return nil, err
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	// Only in good standing: a holder that owes the current period's proof could
	// otherwise release to dodge the miss it is about to get.
	if current := types.PeriodOf(sdkCtx.BlockHeight(), params.PeriodBlocks); r.NextPeriod <= current || r.ConsecutiveMisses > 0 {
		return nil, errorsmod.Wrapf(types.ErrProofOwed,
			"replica %d owes the proof for period %d (deadline %d, %d misses in a row); submit it first, or declare a fault",
			r.Id, r.NextPeriod, r.NextDeadline, r.ConsecutiveMisses)
	}
	holder, err := m.addressCodec.StringToBytes(r.Holder)
	if err != nil {
		return nil, err
	}
	d, err := m.GetDataset(ctx, r.DatasetId)
	if err != nil {
		return nil, err
	}
	shard, err := m.GetShard(ctx, r.DatasetId, r.Shard)
	if err != nil {
		return nil, err
	}

	unlocked, err := m.providerKeeper.UnlockCollateral(ctx, holder, types.ReplicaCollateralRef(r.Id))
	if err != nil {
		return nil, err
	}
	if err := m.Deadlines.Remove(ctx, collections.Join(r.NextDeadline, r.Id)); err != nil {
		return nil, err
	}
	if err := m.Replicas.Remove(ctx, r.Id); err != nil {
		return nil, err
	}
	if err := emit(ctx, &types.EventReplicaReleased{
		ReplicaId: r.Id, DatasetId: r.DatasetId, Shard: r.Shard, Piece: r.Piece, Holder: r.Holder, CollateralUnlocked: unlocked,
	}); err != nil {
		return nil, err
	}
	if err := m.removeHolder(ctx, d, shard, r.Piece, holder); err != nil {
		return nil, err
	}
	return &types.MsgReleaseReplicaResponse{CollateralUnlocked: unlocked}, nil
}

func (m msgServer) DeclareFault(ctx context.Context, msg *types.MsgDeclareFault) (*types.MsgDeclareFaultResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	r, err := m.activeReplicaOf(ctx, msg.Holder, msg.ReplicaId)
	if err != nil {
		return nil, err
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	slashed, err := m.slashReplica(sdkCtx, r, params.DeclaredFaultSlashFraction,
		fmt.Sprintf("shardregistry: holder declared replica %d (piece %d of shard %d of %q) lost", r.Id, r.Piece, r.Shard, r.DatasetId))
	if err != nil {
		return nil, err
	}
	if err := emit(ctx, &types.EventFaultDeclared{ReplicaId: r.Id, Holder: r.Holder, Slashed: slashed}); err != nil {
		return nil, err
	}
	if err := m.terminate(sdkCtx, &r, types.TERMINATION_REASON_DECLARED_FAULT); err != nil {
		return nil, err
	}
	return &types.MsgDeclareFaultResponse{Slashed: slashed}, nil
}

func (m msgServer) SubmitStorageProof(ctx context.Context, msg *types.MsgSubmitStorageProof) (*types.MsgSubmitStorageProofResponse, error) {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	r, err := m.activeReplicaOf(ctx, msg.Holder, msg.ReplicaId)
	if err != nil {
		return nil, err
	}
	if msg.Period != r.NextPeriod {
		return nil, errorsmod.Wrapf(types.ErrWrongPeriod, "replica %d is due for period %d (deadline %d), not %d", r.Id, r.NextPeriod, r.NextDeadline, msg.Period)
	}
	height := sdkCtx.BlockHeight()
	if height > r.NextDeadline {
		return nil, errorsmod.Wrapf(types.ErrDeadlinePassed, "replica %d's deadline for period %d was height %d; it is now %d", r.Id, r.NextPeriod, r.NextDeadline, height)
	}
	params, err := m.Params.Get(ctx)
	if err != nil {
		return nil, err
	}
	shard, err := m.GetShard(ctx, r.DatasetId, r.Shard)
	if err != nil {
		return nil, err
	}
	d, err := m.GetDataset(ctx, r.DatasetId)
	if err != nil {
		return nil, err
	}
	key, err := m.replicaKey(r)
	if err != nil {
		return nil, err
	}
	piece := shard.Pieces[r.Piece]
	indices, err := m.challengeIndices(ctx, params, key, r.NextPeriod, r.NextSeedHeight, piece.ChunkCount, true)
	if err != nil {
		return nil, err
	}
	if err := verifyChunkProofs(sdkCtx, params, piece, d.ChunkSize, indices, msg.Proofs); err != nil {
		return nil, err
	}

	proven := r.NextPeriod
	r.LastProvenPeriod = proven
	r.ConsecutiveMisses = 0
	r.ProofsAccepted++
	if err := m.schedule(sdkCtx, &r, types.NextSchedule(key, params, height, r.NextSeedHeight)); err != nil {
		return nil, err
	}
	if err := m.Replicas.Set(ctx, r.Id, r); err != nil {
		return nil, err
	}
	if err := emit(ctx, &types.EventStorageProofAccepted{
		ReplicaId: r.Id, Holder: r.Holder, Period: proven, NextPeriod: r.NextPeriod, NextDeadline: r.NextDeadline,
	}); err != nil {
		return nil, err
	}
	return &types.MsgSubmitStorageProofResponse{NextPeriod: r.NextPeriod, NextDeadline: r.NextDeadline}, nil
}

func (m msgServer) UpdateParams(ctx context.Context, msg *types.MsgUpdateParams) (*types.MsgUpdateParamsResponse, error) {
	if msg.Authority != m.authority {
		return nil, errorsmod.Wrapf(types.ErrInvalidAuthority, "expected %s, got %s", m.authority, msg.Authority)
	}
	if err := msg.Params.Validate(); err != nil {
		return nil, errorsmod.Wrapf(types.ErrInvalidParams, "%s", err)
	}
	if err := m.Params.Set(ctx, msg.Params); err != nil {
		return nil, err
	}
	if err := emit(ctx, &types.EventParamsUpdated{Params: msg.Params}); err != nil {
		return nil, err
	}
	return &types.MsgUpdateParamsResponse{}, nil
}
