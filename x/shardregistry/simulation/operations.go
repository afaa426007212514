package simulation

import (
	"bytes"
	"context"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	"github.com/cosmos/cosmos-sdk/x/simulation"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/x/internal/simutil"
	"github.com/depinchain/depinchain/x/shardregistry/keeper"
	"github.com/depinchain/depinchain/x/shardregistry/simulation/simdata"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// Operation weights: the keys a simulation params file may set, and their defaults.
const (
	OpWeightMsgRegisterDataset    = "op_weight_msg_register_dataset"
	OpWeightMsgClaimReplica       = "op_weight_msg_claim_replica"
	OpWeightMsgSubmitStorageProof = "op_weight_msg_submit_storage_proof"
	OpWeightMsgReleaseReplica     = "op_weight_msg_release_replica"
	OpWeightMsgDeclareFault       = "op_weight_msg_declare_fault"

	DefaultWeightMsgRegisterDataset    = 8
	DefaultWeightMsgClaimReplica       = 40
	DefaultWeightMsgSubmitStorageProof = 120
	DefaultWeightMsgReleaseReplica     = 5
	DefaultWeightMsgDeclareFault       = 3
)

// ProviderKeeper is what the operations read of x/stakingext: the storage providers
// that may claim replicas.
type ProviderKeeper interface {
	GetProvider(ctx context.Context, operator sdk.AccAddress) (stakingexttypes.Provider, error)
	AllProviders(ctx context.Context) ([]stakingexttypes.Provider, error)
}

// Deps are what the operations sign with and read.
type Deps struct {
	simutil.Signer
	Keeper    keeper.Keeper
	Providers ProviderKeeper
}

// WeightedOperations returns an operation for every message of x/shardregistry except
// the authority-only MsgUpdateParams, which ProposalMsgs covers.
func WeightedOperations(appParams simtypes.AppParams, d Deps) simulation.WeightedOperations {
	d.Module = types.ModuleName
	return simutil.WeightedOperations(appParams,
		SimulateMsgRegisterDataset(d), SimulateMsgClaimReplica(d), SimulateMsgSubmitStorageProof(d), SimulateMsgReleaseReplica(d), SimulateMsgDeclareFault(d),
	)
}

// SimulateMsgRegisterDataset registers a new simulated dataset. One time in ten it sends
// a registration that must fail: an id that is taken, or a piece root edited without
// recomputing the manifest root.
func SimulateMsgRegisterDataset(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgRegisterDataset, DefaultWeightMsgRegisterDataset, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(&types.MsgRegisterDataset{}, "params: %s", err)
		}
		owner, _ := simtypes.RandomAcc(r, accs)
		id := RandomDatasetID(r)
		msg, err := NewDataset(r, params, owner.Address.String(), id)
		if err != nil {
			return o.NoOp(&types.MsgRegisterDataset{}, "building dataset: %s", err)
		}
		if simutil.Chance(r, 10) {
			iter, err := d.Keeper.Datasets.Iterate(ctx, nil)
			if err != nil {
				return o.NoOp(msg, "%s", err)
			}
			ids, err := iter.Keys()
			if err != nil {
				return o.NoOp(msg, "%s", err)
			}
			if taken, ok := simutil.Pick(r, ids); ok && r.Intn(2) == 0 {
				msg.DatasetId = taken
				return o.DeliverInvalid(owner, msg, types.ErrDatasetExists, "dataset id already registered")
			}
			root := msg.Shards[0].Pieces[0].Root
			root[r.Intn(len(root))] ^= 0x01
			return o.DeliverInvalid(owner, msg, types.ErrInvalidManifest, "piece root edited after the manifest root was computed")
		}
		if has, err := d.Keeper.Datasets.Has(ctx, id); err != nil || has {
			return o.NoOp(msg, "dataset id %s taken", id)
		}
		return o.Deliver(owner, msg, nil)
	})
}

// openSlot is a piece that needs another holder.
type openSlot struct {
	dataset types.Dataset
	shard   types.Shard
	piece   uint32
}

func openSlots(ctx sdk.Context, k keeper.Keeper) ([]collections.Triple[string, uint32, uint32], error) {
	iter, err := k.OpenSlots.Iterate(ctx, nil)
	if err != nil {
		return nil, err
	}
	return iter.Keys()
}

// SimulateMsgClaimReplica has an active provider with enough free bond claim an open
// slot, proving the current period's challenge from the piece's bytes. One time in ten
// the claim must fail: a proof with a flipped byte, or a claimant that is no provider.
func SimulateMsgClaimReplica(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgClaimReplica, DefaultWeightMsgClaimReplica, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgClaimReplica{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		slots, err := openSlots(ctx, d.Keeper)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		key, ok := simutil.Pick(r, slots)
		if !ok {
			return o.NoOp(msg, "no open slot")
		}
		ds, err := d.Keeper.GetDataset(ctx, key.K1())
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		shard, err := d.Keeper.GetShard(ctx, key.K1(), key.K2())
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		slot := openSlot{dataset: ds, shard: shard, piece: key.K3()}
		collateral := params.ReplicaCollateral(shard.Pieces[slot.piece].SizeBytes)

		if simutil.Chance(r, 5) {
			acc, _ := simtypes.RandomAcc(r, accs)
			if _, err := d.Providers.GetProvider(ctx, acc.Address); err != nil {
				msg, err := d.claimMsg(ctx, slot, acc, false)
				if err != nil {
					return o.NoOp(msg, "%s", err)
				}
				return o.DeliverInvalid(acc, msg, types.ErrProviderIneligible, "claimant is not a provider")
			}
		}
		all, err := d.Providers.AllProviders(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		var candidates []simtypes.Account
		for _, p := range all {
			if p.Status != stakingexttypes.PROVIDER_STATUS_ACTIVE {
				continue
			}
			free := p.FreeBond()
			if free.Denom != collateral.Denom || free.IsLT(collateral) {
				continue
			}
			acc, ok := o.Account(p.Operator)
			if !ok {
				continue
			}
			holds, err := d.Keeper.ShardHolders.Has(ctx, collections.Join3(ds.Id, shard.Index, []byte(acc.Address)))
			if err != nil || holds {
				continue
			}
			candidates = append(candidates, acc)
		}
		holder, ok := simutil.Pick(r, candidates)
		if !ok {
			return o.NoOp(msg, "no provider can claim piece %d of shard %d of %s", slot.piece, shard.Index, ds.Id)
		}
		corrupt := simutil.Chance(r, 5)
		msg, err = d.claimMsg(ctx, slot, holder, corrupt)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		if len(msg.Proofs) == 0 {
			return o.NoOp(msg, "claim challenge of period %d not open yet", msg.Period)
		}
		if corrupt {
			return o.DeliverInvalid(holder, msg, types.ErrInvalidProof, "claim proof with a flipped byte")
		}
		return o.Deliver(holder, msg, nil)
	})
}

// claimMsg proves the current period's claim challenge of slot for holder.
func (d Deps) claimMsg(ctx sdk.Context, slot openSlot, holder simtypes.Account, corrupt bool) (*types.MsgClaimReplica, error) {
	msg := &types.MsgClaimReplica{Holder: holder.Address.String(), DatasetId: slot.dataset.Id, Shard: slot.shard.Index, Piece: slot.piece}
	res, err := keeper.NewQueryServerImpl(d.Keeper).ClaimChallenge(ctx, &types.QueryClaimChallengeRequest{
		DatasetId: slot.dataset.Id, Shard: slot.shard.Index, Piece: slot.piece, Holder: msg.Holder,
	})
	if err != nil {
		return msg, err
	}
	msg.Period = res.Challenge.Period
	if !res.Challenge.Open {
		return msg, nil
	}
	msg.Proofs, err = prove(slot.dataset, slot.shard, slot.piece, res.Challenge.ChunkIndices, corrupt)
	return msg, err
}

// prove answers a challenge from the piece's bytes; corrupt flips a byte of one chunk.
func prove(ds types.Dataset, shard types.Shard, piece uint32, indices []uint64, corrupt bool) ([]types.ChunkProof, error) {
	data, err := simdata.PieceBytes(ds, shard, piece)
	if err != nil {
		return nil, err
	}
	proofs, err := manifest.Prove(data, ds.ChunkSize, indices)
	if err != nil {
		return nil, err
	}
	if corrupt && len(proofs) > 0 {
		p := &proofs[len(proofs)-1]
		p.Chunk = bytes.Clone(p.Chunk)
		p.Chunk[0] ^= 0xff
	}
	return proofs, nil
}

func replicas(ctx sdk.Context, k keeper.Keeper, keep func(types.Replica) bool) ([]types.Replica, error) {
	iter, err := k.Replicas.Iterate(ctx, nil)
	if err != nil {
		return nil, err
	}
	all, err := iter.Values()
	if err != nil {
		return nil, err
	}
	var out []types.Replica
	for _, rep := range all {
		if rep.Status == types.REPLICA_STATUS_ACTIVE && keep(rep) {
			out = append(out, rep)
		}
	}
	return out, nil
}

// SimulateMsgSubmitStorageProof answers the open challenge of an active replica before
// its deadline. One time in ten it sends a proof for the wrong period, which must fail.
// Holders do not always answer: replicas the operation does not reach in time miss
// their deadline and are slashed and eventually terminated by EndBlock.
func SimulateMsgSubmitStorageProof(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgSubmitStorageProof, DefaultWeightMsgSubmitStorageProof, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgSubmitStorageProof{}
		height := ctx.BlockHeight()
		due, err := replicas(ctx, d.Keeper, func(rep types.Replica) bool {
			return rep.NextSeedHeight <= height && height <= rep.NextDeadline
		})
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		rep, ok := simutil.Pick(r, due)
		if !ok {
			return o.NoOp(msg, "no replica with an open challenge")
		}
		if r.Intn(2) == 0 {
			// A diligent holder answers what is due soonest.
			for _, d := range due {
				if d.NextDeadline < rep.NextDeadline {
					rep = d
				}
			}
		}
		holder, ok := o.Account(rep.Holder)
		if !ok {
			return o.NoOp(msg, "holder %s is not a simulated account", rep.Holder)
		}
		res, err := keeper.NewQueryServerImpl(d.Keeper).ChallengeSchedule(ctx, &types.QueryChallengeScheduleRequest{ReplicaId: rep.Id})
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		if !res.Challenge.Open {
			return o.NoOp(msg, "challenge of replica %d not open", rep.Id)
		}
		ds, err := d.Keeper.GetDataset(ctx, rep.DatasetId)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		shard, err := d.Keeper.GetShard(ctx, rep.DatasetId, rep.Shard)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		proofs, err := prove(ds, shard, rep.Piece, res.Challenge.ChunkIndices, false)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		*msg = types.MsgSubmitStorageProof{Holder: rep.Holder, ReplicaId: rep.Id, Period: res.Challenge.Period, Proofs: proofs}
		if simutil.Chance(r, 10) {
			msg.Period++
			return o.DeliverInvalid(holder, msg, types.ErrWrongPeriod, "proof for a period that is not due")
		}
		return o.Deliver(holder, msg, nil)
	})
}

// SimulateMsgReleaseReplica releases a replica in good standing. Sometimes it tries to
// release one that owes its current proof, which must fail.
func SimulateMsgReleaseReplica(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgReleaseReplica, DefaultWeightMsgReleaseReplica, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgReleaseReplica{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		current := types.PeriodOf(ctx.BlockHeight(), params.PeriodBlocks)
		goodStanding := func(rep types.Replica) bool { return rep.NextPeriod > current && rep.ConsecutiveMisses == 0 }
		owing := simutil.Chance(r, 20)
		candidates, err := replicas(ctx, d.Keeper, func(rep types.Replica) bool { return goodStanding(rep) != owing })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		rep, ok := simutil.Pick(r, candidates)
		if !ok {
			return o.NoOp(msg, "no replica to release")
		}
		holder, ok := o.Account(rep.Holder)
		if !ok {
			return o.NoOp(msg, "holder %s is not a simulated account", rep.Holder)
		}
		*msg = types.MsgReleaseReplica{Holder: rep.Holder, ReplicaId: rep.Id}
		if owing {
			return o.DeliverInvalid(holder, msg, types.ErrProofOwed, "replica owes its current proof")
		}
		return o.Deliver(holder, msg, nil)
	})
}

// SimulateMsgDeclareFault has a holder declare an active replica lost. Sometimes another
// account declares it, which must fail.
func SimulateMsgDeclareFault(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgDeclareFault, DefaultWeightMsgDeclareFault, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgDeclareFault{}
		active, err := replicas(ctx, d.Keeper, func(types.Replica) bool { return true })
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		rep, ok := simutil.Pick(r, active)
		if !ok {
			return o.NoOp(msg, "no active replica")
		}
		holder, ok := o.Account(rep.Holder)
		if !ok {
			return o.NoOp(msg, "holder %s is not a simulated account", rep.Holder)
		}
		if simutil.Chance(r, 20) {
			other, _ := simtypes.RandomAcc(r, accs)
			if !other.Address.Equals(holder.Address) {
				*msg = types.MsgDeclareFault{Holder: other.Address.String(), ReplicaId: rep.Id}
				return o.DeliverInvalid(other, msg, types.ErrNotHolder, "someone else declares the replica lost")
			}
		}
		*msg = types.MsgDeclareFault{Holder: rep.Holder, ReplicaId: rep.Id}
		return o.Deliver(holder, msg, nil)
	})
}
