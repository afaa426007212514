package keeper_test

import (
	"bytes"
	"math/rand"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cosmos/gogoproto/proto"
	"github.com/stretchr/testify/require"

	"cosmossdk.io/collections"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/shardregistry/keeper"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingextkeeper "github.com/depinchain/depinchain/x/staking_ext/keeper"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// The numbers the scenarios share. A period is 20 blocks and a holder has at least 5
// blocks to answer; a replica locks 1 DEPIN, a miss costs half of it, a declared fault a
// tenth, and the third miss in a row terminates the replica.
const (
	periodBlocks  = 20
	proofWindow   = 5
	collateral    = 1_000_000
	missSlash     = collateral / 2
	faultSlash    = collateral / 10
	providerBond  = 20_000_000
	providerFunds = 100_000_000
	chunkSize     = 64
)

func testParams() types.Params {
	p := types.DefaultParams()
	p.PeriodBlocks = periodBlocks
	p.ProofWindowBlocks = proofWindow
	p.ChallengesPerPeriod = 4
	p.MaxDeadlinesPerBlock = 100
	p.MissSlashFraction = math.LegacyNewDecWithPrec(5, 1)
	p.DeclaredFaultSlashFraction = math.LegacyNewDecWithPrec(1, 1)
	p.MaxConsecutiveMisses = 3
	p.MinReplicaCollateral = sdk.NewInt64Coin(denom, collateral)
	p.CollateralPerMib = math.ZeroInt()
	p.MinChunkSize = chunkSize
	return p
}

type (
	collPairI64U64 = collections.Pair[int64, uint64]
)

// env is a fixture plus the servers, accounts and datasets the scenarios use.
type env struct {
	*keepers.Fixture
	t        *testing.T
	msg      types.MsgServer
	query    types.QueryServer
	sxMsg    stakingexttypes.MsgServer
	owner    sdk.AccAddress
	datasets map[string]*testDataset
}

func newEnv(t *testing.T) *env {
	t.Helper()
	gs := types.DefaultGenesis()
	gs.Params = testParams()
	return newEnvWith(t, gs)
}

func newEnvWith(t *testing.T, gs *types.GenesisState) *env {
	t.Helper()
	f := newFixture(t, gs)
	e := &env{
		Fixture: f, t: t,
		msg:      keeper.NewMsgServerImpl(f.ShardRegistry),
		query:    keeper.NewQueryServerImpl(f.ShardRegistry),
		sxMsg:    stakingextkeeper.NewMsgServerImpl(f.StakingExt),
		owner:    addr("owner"),
		datasets: map[string]*testDataset{},
	}
	keepers.RequireInvariantsAtEnd(t, e.requireInvariants)
	return e
}

var (
	addr = keepers.Addr
	coin = keepers.Coin
)

// requireInvariants fails the test when any shardregistry or stakingext invariant is broken.
func (e *env) requireInvariants() {
	e.t.Helper()
	e.RequireInvariants(e.t, keeper.AllInvariants(e.ShardRegistry, keeper.StakingExtLocks(e.StakingExt.Locks)))
}

// registerProvider funds and registers a storage-only provider (no GPUs) with a bond.
func (e *env) registerProvider(label string) sdk.AccAddress {
	e.t.Helper()
	return e.RegisterProvider(e.t, label, providerFunds, providerBond)
}

func (e *env) provider(op sdk.AccAddress) stakingexttypes.Provider { return e.Provider(e.t, op) }

// testDataset is a dataset with its bytes, so that tests can prove pieces.
type testDataset struct {
	id     string
	enc    types.Encoding
	shards [][]byte
	pieces [][][]byte // [shard][piece]
	msg    *types.MsgRegisterDataset
}

func rs(k, m uint32) types.Encoding {
	return types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: k, ParityPieces: m}
}

func replicas(n uint32) types.Encoding {
	return types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: n}
}

// newTestDataset makes shards of pseudo-random bytes of the given sizes (10 samples each),
// encodes them and builds the registration message, as `dataset build` would.
func newTestDataset(t testing.TB, owner sdk.AccAddress, id string, enc types.Encoding, sizes ...int) *testDataset {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(len(id)*7919 + len(sizes))))
	ds := &testDataset{id: id, enc: enc}
	msg := &types.MsgRegisterDataset{Owner: owner.String(), DatasetId: id, Name: "test " + id, Encoding: enc, ChunkSize: chunkSize}
	for i, size := range sizes {
		data := make([]byte, size)
		rng.Read(data)
		ds.shards = append(ds.shards, data)
		pieces, err := manifest.EncodePieces(enc, bytes.Clone(data))
		require.NoError(t, err)
		ds.pieces = append(ds.pieces, pieces)
		s := types.Shard{Index: uint32(i), SampleStart: uint64(i * 10), SampleEnd: uint64(i*10 + 10), SizeBytes: uint64(size)}
		for j, p := range pieces {
			root := merkle.RootOfBytes(p, chunkSize)
			s.Pieces = append(s.Pieces, types.Piece{Index: uint32(j), Root: root[:], SizeBytes: uint64(len(p))})
		}
		msg.Shards = append(msg.Shards, s)
		msg.TotalSize += uint64(size)
	}
	root := types.ManifestRoot(enc, chunkSize, msg.TotalSize, msg.Shards)
	msg.ManifestRoot = root[:]
	ds.msg = msg
	return ds
}

// register registers a test dataset and remembers its bytes.
func (e *env) register(ds *testDataset) {
	e.t.Helper()
	_, err := e.msg.RegisterDataset(e.Ctx, ds.msg)
	require.NoError(e.t, err)
	e.datasets[ds.id] = ds
}

// claimMsg builds a claim of a piece with the proof of the current period's challenge.
func (e *env) claimMsg(holder sdk.AccAddress, ds *testDataset, shard, piece uint32) *types.MsgClaimReplica {
	e.t.Helper()
	res, err := e.query.ClaimChallenge(e.Ctx, &types.QueryClaimChallengeRequest{DatasetId: ds.id, Shard: shard, Piece: piece, Holder: holder.String()})
	require.NoError(e.t, err)
	require.True(e.t, res.Challenge.Open)
	proofs, err := manifest.Prove(ds.pieces[shard][piece], chunkSize, res.Challenge.ChunkIndices)
	require.NoError(e.t, err)
	return &types.MsgClaimReplica{Holder: holder.String(), DatasetId: ds.id, Shard: shard, Piece: piece, Period: res.Challenge.Period, Proofs: proofs}
}

// claim claims a piece and returns the replica id.
func (e *env) claim(holder sdk.AccAddress, ds *testDataset, shard, piece uint32) uint64 {
	e.t.Helper()
	res, err := e.msg.ClaimReplica(e.Ctx, e.claimMsg(holder, ds, shard, piece))
	require.NoError(e.t, err)
	return res.ReplicaId
}

func (e *env) replica(id uint64) types.Replica {
	e.t.Helper()
	r, err := e.ShardRegistry.GetReplica(e.Ctx, id)
	require.NoError(e.t, err)
	return r
}

// proofMsg answers a replica's due challenge from the piece's bytes.
func (e *env) proofMsg(id uint64) *types.MsgSubmitStorageProof {
	e.t.Helper()
	r := e.replica(id)
	res, err := e.query.ChallengeSchedule(e.Ctx, &types.QueryChallengeScheduleRequest{ReplicaId: id})
	require.NoError(e.t, err)
	require.True(e.t, res.Challenge.Open, "challenge of replica %d opens at %d, now %d", id, res.Challenge.SeedHeight, e.Ctx.BlockHeight())
	piece := e.datasets[r.DatasetId].pieces[r.Shard][r.Piece]
	proofs, err := manifest.Prove(piece, chunkSize, res.Challenge.ChunkIndices)
	require.NoError(e.t, err)
	return &types.MsgSubmitStorageProof{Holder: r.Holder, ReplicaId: id, Period: res.Challenge.Period, Proofs: proofs}
}

// prove submits the proof of a replica's due challenge.
func (e *env) prove(id uint64) {
	e.t.Helper()
	_, err := e.msg.SubmitStorageProof(e.Ctx, e.proofMsg(id))
	require.NoError(e.t, err)
}

// advanceToOpen moves to the block after a replica's challenge seed block.
func (e *env) advanceToOpen(id uint64) {
	e.t.Helper()
	e.AdvanceTo(e.t, e.replica(id).NextSeedHeight+1)
}

// passDeadline moves to the block after a replica's current deadline, with no proof.
func (e *env) passDeadline(id uint64) {
	e.t.Helper()
	e.AdvanceTo(e.t, e.replica(id).NextDeadline+1)
}

// typedEvents returns the events of type T among events.
func typedEvents[T proto.Message](t testing.TB, events []abci.Event) []T {
	t.Helper()
	return keepers.TypedEvents[T](t, events)
}

// allEvents is every event so far: finished blocks and the current one.
func (e *env) allEvents() []abci.Event { return e.Events() }

// snapshot captures everything a rejected message must leave alone: the registry's
// exported state and its deadline and open-slot indexes, stakingext's state, every
// balance, and the number of events emitted so far.
func (e *env) snapshot() keepers.Snapshot {
	e.t.Helper()
	parts := []keepers.Part{e.ShardRegistryState(), e.StakingExtState(), e.Balances()}
	return e.Snapshot(e.t, append(parts, e.ShardRegistryIndexes()...)...)
}
