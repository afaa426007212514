package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// reregisteredChain answers the shard registry queries fillSlot makes about one custody
// object as now registered; a claim means the role took its local file for the piece.
type reregisteredChain struct {
	types.QueryClient
	now *shardInfo
}

func (c reregisteredChain) Dataset(context.Context, *types.QueryDatasetRequest, ...grpc.CallOption) (*types.QueryDatasetResponse, error) {
	return &types.QueryDatasetResponse{Dataset: types.Dataset{Id: c.now.DatasetID, Encoding: c.now.Encoding, ChunkSize: c.now.ChunkSize, Custody: c.now.Custody}}, nil
}

func (c reregisteredChain) Shard(context.Context, *types.QueryShardRequest, ...grpc.CallOption) (*types.QueryShardResponse, error) {
	v := types.ShardView{DatasetId: c.now.DatasetID, Index: c.now.Shard.Index, SizeBytes: c.now.Shard.SizeBytes}
	for _, p := range c.now.Shard.Pieces {
		v.Pieces = append(v.Pieces, types.PieceView{Piece: p, RequiredHolders: 1})
	}
	return &types.QueryShardResponse{Shard: v}, nil
}

func (reregisteredChain) ClaimChallenge(context.Context, *types.QueryClaimChallengeRequest, ...grpc.CallOption) (*types.QueryClaimChallengeResponse, error) {
	return nil, errors.New("claimed with the piece file of the object registered before")
}

// custodyObjectOf cuts state into a 2+1 custody object: its layout and its pieces' roots.
func custodyObjectOf(t *testing.T, state []byte) (custody.Layout, [][]byte, []merkle.Hash) {
	t.Helper()
	l, err := custody.NewLayout(uint64(len(state)), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	bufs := make([]*bytes.Buffer, l.Pieces())
	out := make([]io.Writer, l.Pieces())
	for i := range bufs {
		bufs[i] = new(bytes.Buffer)
		out[i] = bufs[i]
	}
	roots, err := custody.Encode(bytes.NewReader(state), l, out, 1)
	if err != nil {
		t.Fatal(err)
	}
	encoded := make([][]byte, l.Pieces())
	for i, b := range bufs {
		encoded[i] = b.Bytes()
	}
	return l, encoded, roots
}

// A custody object released and registered again under the same id with other content
// (a round's voided global, aggregated anew): a holder that read the first registration
// and kept its piece file does not claim the new object's slot with that file. It reads
// the registration again and, its file not being the new piece, leaves the slot to a
// repair (none allowed here) instead of failing at every check forever.
func TestFillSlotRereadsAnObjectRegisteredAgain(t *testing.T) {
	before, after := make([]byte, 3*custody.ChunkSize+17), make([]byte, 3*custody.ChunkSize+17)
	for i := range before {
		before[i], after[i] = byte(i*7), byte(i*11+1)
	}
	l, oldPieces, oldRoots := custodyObjectOf(t, before)
	_, _, newRoots := custodyObjectOf(t, after)
	stale, _ := custodyInfo(l, oldRoots)
	now, _ := custodyInfo(l, newRoots)
	dir := t.TempDir()
	if err := pieces.WriteBytesAtomic(PiecePath(dir, stale.DatasetID, 0, 0), oldPieces[0]); err != nil {
		t.Fatal(err)
	}
	r := &Role{opts: Options{Operator: "holder", PiecesDir: dir}, query: reregisteredChain{now: now},
		log: slog.New(slog.DiscardHandler), shards: map[shardKey]*shardInfo{{stale.DatasetID, 0}: stale}}
	_, err := r.fillSlot(context.Background(), slotKey{dataset: stale.DatasetID, shard: 0, piece: 0}, false)
	if !errors.Is(err, errNothingToDo) {
		t.Fatalf("filling the slot of the object registered again: %v, want nothing to do (no repair allowed)", err)
	}
	if got := r.shards[shardKey{stale.DatasetID, 0}].Shard.Pieces[0].Root; !bytes.Equal(got, newRoots[0][:]) {
		t.Fatalf("the role keeps root %x for piece 0, the chain registers %x", got, newRoots[0][:])
	}
}
