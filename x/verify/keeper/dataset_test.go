package keeper_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/traindata"
	shardkeeper "github.com/depinchain/depinchain/x/shardregistry/keeper"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// registerCorpusDataset registers the first 24,000 bytes of the built-in corpus as dataset
// id in shards of shardSize bytes, Reed–Solomon 2+1 in 256-byte chunks, and returns the
// folder of its pieces (manifest.PieceFile names).
func (e *env) registerCorpusDataset(id string, shardSize int64) string {
	e.t.Helper()
	dir := e.t.TempDir()
	input := filepath.Join(dir, "corpus.txt")
	require.NoError(e.t, os.WriteFile(input, traindata.BuiltinCorpus()[:24_000], 0o644))
	out := filepath.Join(dir, "out")
	m, err := manifest.Build(input, out, manifest.Options{
		ShardSize: shardSize, ChunkSize: 256,
		Encoding: shardtypes.Encoding{Kind: shardtypes.ENCODING_KIND_REED_SOLOMON, DataPieces: 2, ParityPieces: 1},
	})
	require.NoError(e.t, err)
	reg, err := m.RegisterMsg(e.owner.String(), id, "corpus")
	require.NoError(e.t, err)
	_, err = shardkeeper.NewMsgServerImpl(e.ShardRegistry).RegisterDataset(e.Ctx, reg)
	require.NoError(e.t, err)
	return out
}

// shardStream is the bytes of the given shards' data pieces (2 of each), as a prover
// reads them from the piece files in out.
func shardStream(t *testing.T, out string, shards []shardtypes.Shard) []byte {
	var stream []byte
	for _, sh := range shards {
		for p := uint32(0); p < 2; p++ {
			piece, err := os.ReadFile(filepath.Join(out, manifest.PieceFile(sh.Index, p)))
			require.NoError(t, err)
			stream = append(stream, piece...)
		}
	}
	return stream
}

// A dataset-backed reference job trains each worker on the data pieces of the shards
// x/shardregistry assigns it. The referee proves the disputed step's batch against those
// piece roots, registered on-chain with the dataset, and convicts a lying provider.
func TestDatasetJobDisputeChecksShardRoots(t *testing.T) {
	e := newEnv(t)
	out := e.registerCorpusDataset("corpus-v1", 4096)

	prov := e.registerProvider("provider", 8)
	spec := referenceSpec(16, 16)
	spec.DatasetId = "corpus-v1"
	job, lease := e.leaseJob(prov, spec)

	// The worker's stream as a prover assembles it: its shards' data pieces, from files.
	ds, err := e.ShardRegistry.GetDataset(e.Ctx, "corpus-v1")
	require.NoError(t, err)
	shards, err := e.ShardRegistry.WorkerShards(e.Ctx, job.Id, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, shards)
	layout, err := types.DatasetLayout(ds, shards)
	require.NoError(t, err)
	require.Len(t, layout.Segments, 2*len(shards), "two data pieces per Reed-Solomon 2+1 shard")
	stream := shardStream(t, out, shards)
	data, err := traindata.NewStream(layout, stream)
	require.NoError(t, err)
	_, err = traindata.NewStream(layout, append([]byte{'x'}, stream[1:]...))
	require.ErrorContains(t, err, "does not match its committed root")

	r := computeRunOn(t, job, data, 16)
	liarTrace, liarStates := r.corruptedAt(t, 0, 16, 11)
	liar := newParty(prov, liarTrace, liarStates)
	e.submitCheckpoint(liar, lease.Id, 0)
	v := newParty(e.account("verifier"), r.trace(0, 16), func(step uint64) *exact.State { return r.stateAt(t, step) })
	id := e.openChallenge(v, lease.Id, 0)
	g := e.game(id, liar, v, nil)
	g.play(r)
	ch := e.challenge(id)
	require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
	require.Equal(t, uint64(10), ch.Lo)

	// A chunk whose bytes are not the committed piece's is refused, changing nothing.
	bad := stepMsg(r, v.addr, id, v.stateAt(ch.Lo), ch.Lo)
	bad.Data[0].Data = append([]byte(nil), bad.Data[0].Data...)
	bad.Data[0].Data[0] ^= 1
	e.requireRejected(types.ErrInvalidProof, func(ctx sdk.Context) error {
		_, err := e.msg.Step(ctx, bad)
		return err
	})

	g.stepper = v
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, g.play(r).Outcome)
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, e.checkpoint(lease.Id, 0).Status)
}
