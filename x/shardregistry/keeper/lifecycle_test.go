package keeper_test

import (
	"bytes"
	"testing"

	"github.com/klauspost/reedsolomon"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

func TestRegisterDataset(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 1000, 900, 1001)
	e.register(ds)

	res, err := e.query.Dataset(e.Ctx, &types.QueryDatasetRequest{DatasetId: "corpus-v1"})
	require.NoError(t, err)
	d := res.Dataset
	require.Equal(t, e.owner.String(), d.Owner)
	require.Equal(t, uint32(3), d.ShardCount)
	require.Equal(t, uint64(30), d.SampleCount)
	require.Equal(t, uint64(2901), d.TotalSize)
	require.Equal(t, ds.msg.ManifestRoot, d.ManifestRoot)
	require.Equal(t, uint32(9), res.OpenSlots, "every piece starts with an open slot")
	require.Equal(t, uint32(3), res.UnderReplicatedShards)

	shards, err := e.query.Shards(e.Ctx, &types.QueryShardsRequest{DatasetId: "corpus-v1"})
	require.NoError(t, err)
	require.Len(t, shards.Shards, 3)
	for i, s := range shards.Shards {
		require.Len(t, s.Pieces, 3)
		for j, p := range s.Pieces {
			require.Equal(t, ds.msg.Shards[i].Pieces[j].Root, p.Piece.Root)
			require.Equal(t, types.PieceCID(p.Piece.Root), p.Cid)
			require.Regexp(t, "^bafkrei[a-z2-7]{52}$", p.Cid)
			require.Equal(t, types.ChunkCount(p.Piece.SizeBytes, chunkSize), p.Piece.ChunkCount)
			require.Equal(t, uint32(1), p.RequiredHolders)
		}
		require.Equal(t, uint32(0), s.Live)
		require.Equal(t, uint32(3), s.Target)
		require.Equal(t, uint32(2), s.MinLive)
	}
	slots, err := e.query.RepairSlots(e.Ctx, &types.QueryRepairSlotsRequest{DatasetId: "corpus-v1"})
	require.NoError(t, err)
	require.Len(t, slots.Slots, 9)

	events := typedEvents[*types.EventDatasetRegistered](t, e.Ctx.EventManager().ABCIEvents())
	require.Len(t, events, 1)
	require.Equal(t, uint32(3), events[0].ShardCount)

	owned, err := e.query.Datasets(e.Ctx, &types.QueryDatasetsRequest{Owner: e.owner.String()})
	require.NoError(t, err)
	require.Len(t, owned.Datasets, 1)
}

// TestProofsAcrossPeriods: three providers hold the three pieces of a 2+1 shard and
// answer every challenge of four periods in time: nobody is slashed, each deadline sits
// at the replica's own offset in the period, and the shard stays fully replicated.
func TestProofsAcrossPeriods(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 1000, 900)
	e.register(ds)
	holders := []string{"alpha", "bravo", "charlie"}
	var ids []uint64
	for i, label := range holders {
		op := e.registerProvider(label)
		ids = append(ids, e.claim(op, ds, 0, uint32(i)))
		require.Equal(t, int64(collateral), e.provider(op).Locked.Amount.Int64())
	}
	full := typedEvents[*types.EventShardFullyReplicated](t, e.Ctx.EventManager().ABCIEvents())
	require.Len(t, full, 1, "the third claim completes shard 0")
	under, err := e.query.UnderReplicatedShards(e.Ctx, &types.QueryUnderReplicatedShardsRequest{})
	require.NoError(t, err)
	require.Len(t, under.Shards, 1)
	require.Equal(t, uint32(1), under.Shards[0].Shard)

	params := testParams()
	for period := 0; period < 4; period++ {
		e.advanceToOpen(ids[0])
		for _, id := range ids {
			r := e.replica(id)
			offset := r.NextDeadline - r.NextSeedHeight
			require.GreaterOrEqual(t, offset, int64(params.ProofWindowBlocks))
			require.Less(t, offset, int64(params.PeriodBlocks))
			require.Equal(t, types.PeriodOf(r.NextSeedHeight, params.PeriodBlocks), r.NextPeriod)
			e.prove(id)
		}
	}
	e.NextBlock(t)
	for i, id := range ids {
		r := e.replica(id)
		require.Equal(t, types.REPLICA_STATUS_ACTIVE, r.Status)
		require.Equal(t, uint64(5), r.ProofsAccepted, "the claim's proof and four periods")
		require.Zero(t, r.ConsecutiveMisses)
		require.Zero(t, r.TotalMisses)
		require.Equal(t, int64(providerBond), e.provider(addr(holders[i])).Bond.Amount.Int64(), "nobody was slashed")
	}
	require.Empty(t, typedEvents[*types.EventDeadlineMissed](t, e.allEvents()))
	require.Len(t, typedEvents[*types.EventStorageProofAccepted](t, e.allEvents()), 12)
}

// TestMissesTerminateAndRepair: a holder that stops answering is slashed
// miss_slash_fraction of its collateral per miss, terminated on the third miss in a row
// with its collateral unlocked, and its piece's slot reopens. A new provider rebuilds the
// lost piece from the other two (Reed-Solomon 2+1) and claims the slot against the root
// registered up front.
func TestMissesTerminateAndRepair(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 1000)
	e.register(ds)
	alpha, bravo, charlie := e.registerProvider("alpha"), e.registerProvider("bravo"), e.registerProvider("charlie")
	lost := e.claim(alpha, ds, 0, 0)
	keepers := []uint64{e.claim(bravo, ds, 0, 1), e.claim(charlie, ds, 0, 2)}

	for miss := 1; miss <= 3; miss++ {
		e.advanceToOpen(lost)
		for _, id := range keepers {
			e.prove(id)
		}
		deadline := e.replica(lost).NextDeadline
		e.passDeadline(lost)
		missed := typedEvents[*types.EventDeadlineMissed](t, e.EventsAt[deadline])
		require.Len(t, missed, 1)
		require.Equal(t, uint32(miss), missed[0].ConsecutiveMisses)
		require.Equal(t, int64(missSlash), missed[0].Slashed.Amount.Int64())
		require.Equal(t, int64(providerBond-miss*missSlash), e.provider(alpha).Bond.Amount.Int64())
		r := e.replica(lost)
		if miss < 3 {
			require.Equal(t, types.REPLICA_STATUS_ACTIVE, r.Status)
			require.Greater(t, r.NextDeadline, deadline)
			require.Equal(t, int64(collateral), e.provider(alpha).Locked.Amount.Int64())
			continue
		}
		require.Equal(t, types.REPLICA_STATUS_TERMINATED, r.Status)
		require.Equal(t, types.TERMINATION_REASON_MISSED_DEADLINES, r.TerminationReason)
		require.Zero(t, r.NextDeadline)
		require.Zero(t, e.provider(alpha).Locked.Amount.Int64(), "collateral unlocked after the slash")

		events := e.EventsAt[deadline]
		terminated := typedEvents[*types.EventReplicaTerminated](t, events)
		require.Len(t, terminated, 1)
		require.Equal(t, int64(collateral), terminated[0].CollateralUnlocked.Amount.Int64())
		opened := typedEvents[*types.EventRepairSlotOpened](t, events)
		require.Len(t, opened, 1)
		require.Equal(t, ds.msg.Shards[0].Pieces[0].Root, opened[0].PieceRoot)
		require.Equal(t, types.PieceCID(opened[0].PieceRoot), opened[0].PieceCid)
		underEv := typedEvents[*types.EventShardUnderReplicated](t, events)
		require.Len(t, underEv, 1)
		require.Equal(t, uint32(2), underEv[0].Live)
		require.Equal(t, uint32(3), underEv[0].Target)
		require.True(t, underEv[0].Recoverable)
	}

	slots, err := e.query.RepairSlots(e.Ctx, &types.QueryRepairSlotsRequest{DatasetId: ds.id})
	require.NoError(t, err)
	require.Len(t, slots.Slots, 1)
	require.Equal(t, uint32(0), slots.Slots[0].Piece.Piece.Index)

	// The repairer has only pieces 1 and 2, and rebuilds piece 0 from them.
	enc, err := reedsolomon.New(2, 1)
	require.NoError(t, err)
	pieces := [][]byte{nil, bytes.Clone(ds.pieces[0][1]), bytes.Clone(ds.pieces[0][2])}
	require.NoError(t, enc.Reconstruct(pieces))
	require.Equal(t, ds.pieces[0][0], pieces[0])
	ds.pieces[0][0] = pieces[0] // the repairer proves from the rebuilt bytes

	delta := e.registerProvider("delta")
	repaired := e.claim(delta, ds, 0, 0)
	require.Equal(t, types.REPLICA_STATUS_ACTIVE, e.replica(repaired).Status)
	require.Len(t, typedEvents[*types.EventShardFullyReplicated](t, e.Ctx.EventManager().ABCIEvents()), 1)
	slots, err = e.query.RepairSlots(e.Ctx, &types.QueryRepairSlotsRequest{DatasetId: ds.id})
	require.NoError(t, err)
	require.Empty(t, slots.Slots)

	// The terminated holder may claim again elsewhere, but the replica record stays.
	replicas, err := e.query.Replicas(e.Ctx, &types.QueryReplicasRequest{Holder: alpha.String()})
	require.NoError(t, err)
	require.Len(t, replicas.Replicas, 1)
	active, err := e.query.Replicas(e.Ctx, &types.QueryReplicasRequest{Holder: alpha.String(), ActiveOnly: true})
	require.NoError(t, err)
	require.Empty(t, active.Replicas)
}

// TestMissThenProveResetsCount: a proof after a miss resets consecutive_misses, so only
// misses in a row terminate.
func TestMissThenProveResetsCount(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", replicas(2), 700)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	id := e.claim(alpha, ds, 0, 0)
	for round := 0; round < 3; round++ {
		e.passDeadline(id)
		require.Equal(t, uint32(1), e.replica(id).ConsecutiveMisses)
		e.advanceToOpen(id)
		e.prove(id)
		require.Zero(t, e.replica(id).ConsecutiveMisses)
	}
	r := e.replica(id)
	require.Equal(t, types.REPLICA_STATUS_ACTIVE, r.Status)
	require.Equal(t, uint64(3), r.TotalMisses)
	require.Equal(t, int64(providerBond-3*missSlash), e.provider(alpha).Bond.Amount.Int64())
}

// TestDeclaredFaultCostsLessThanAMiss: declaring a lost piece is slashed
// declared_fault_slash_fraction (a tenth of the collateral here) against half for a
// miss, and ends the replica at once, reopening its slot.
func TestDeclaredFaultCostsLessThanAMiss(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", replicas(2), 700)
	e.register(ds)
	alpha, bravo := e.registerProvider("alpha"), e.registerProvider("bravo")
	missing := e.claim(alpha, ds, 0, 0)
	honest := e.claim(bravo, ds, 0, 0)

	e.passDeadline(missing)
	missCost := int64(providerBond) - e.provider(alpha).Bond.Amount.Int64()

	res, err := e.msg.DeclareFault(e.Ctx, &types.MsgDeclareFault{Holder: bravo.String(), ReplicaId: honest})
	require.NoError(t, err)
	faultCost := int64(providerBond) - e.provider(bravo).Bond.Amount.Int64()
	require.Equal(t, int64(faultSlash), res.Slashed.Amount.Int64())
	require.Equal(t, int64(faultSlash), faultCost)
	require.Equal(t, int64(missSlash), missCost)
	require.Less(t, faultCost, missCost)

	r := e.replica(honest)
	require.Equal(t, types.REPLICA_STATUS_TERMINATED, r.Status)
	require.Equal(t, types.TERMINATION_REASON_DECLARED_FAULT, r.TerminationReason)
	require.Zero(t, e.provider(bravo).Locked.Amount.Int64())
	events := e.Ctx.EventManager().ABCIEvents()
	require.Len(t, typedEvents[*types.EventFaultDeclared](t, events), 1)
	opened := typedEvents[*types.EventRepairSlotOpened](t, events)
	require.Len(t, opened, 1)
	require.Equal(t, uint32(1), opened[0].LiveHolders)
	require.Equal(t, uint32(2), opened[0].RequiredHolders)

	_, err = e.msg.DeclareFault(e.Ctx, &types.MsgDeclareFault{Holder: bravo.String(), ReplicaId: honest})
	require.ErrorIs(t, err, types.ErrReplicaNotActive)
}

// TestRelease: a holder in good standing releases and gets its collateral back; one that
// owes the current period's proof must prove (or declare a fault) first.
func TestRelease(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", replicas(1), 700)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	id := e.claim(alpha, ds, 0, 0)

	e.advanceToOpen(id) // the next period started: its proof is owed
	before := e.snapshot()
	_, err := e.msg.ReleaseReplica(e.Ctx, &types.MsgReleaseReplica{Holder: alpha.String(), ReplicaId: id})
	require.ErrorIs(t, err, types.ErrProofOwed)
	require.Contains(t, err.Error(), "submit it first, or declare a fault")
	before.RequireUnchanged(t)

	_, err = e.msg.ReleaseReplica(e.Ctx, &types.MsgReleaseReplica{Holder: addr("mallory").String(), ReplicaId: id})
	require.ErrorIs(t, err, types.ErrNotHolder)

	e.prove(id)
	res, err := e.msg.ReleaseReplica(e.Ctx, &types.MsgReleaseReplica{Holder: alpha.String(), ReplicaId: id})
	require.NoError(t, err)
	require.Equal(t, int64(collateral), res.CollateralUnlocked.Amount.Int64())
	require.Zero(t, e.provider(alpha).Locked.Amount.Int64())
	require.Equal(t, int64(providerBond), e.provider(alpha).Bond.Amount.Int64())
	_, err = e.ShardRegistry.GetReplica(e.Ctx, id)
	require.ErrorIs(t, err, types.ErrReplicaNotFound)
	require.Len(t, typedEvents[*types.EventReplicaReleased](t, e.Ctx.EventManager().ABCIEvents()), 1)
	require.Len(t, typedEvents[*types.EventShardUnderReplicated](t, e.Ctx.EventManager().ABCIEvents()), 1)
}
