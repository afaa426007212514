package storage

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// endpointIsOperator answers every provider's endpoint with its own address, so the
// fetcher below serves a holder's pieces by its name.
type endpointIsOperator struct{}

func (endpointIsOperator) Provider(_ context.Context, in *stakingexttypes.QueryProviderRequest, _ ...grpc.CallOption) (*stakingexttypes.QueryProviderResponse, error) {
	return &stakingexttypes.QueryProviderResponse{Provider: stakingexttypes.Provider{Operator: in.Operator, Endpoint: in.Operator}}, nil
}

// garbageParityFixture is a 2+1 custody object whose trainer registered a garbage
// parity piece, a role ("repairer") whose downloads serve every piece as registered
// and records what it sends, and the registered roots.
func garbageParityFixture(t *testing.T) (r *Role, info *shardInfo, l custody.Layout, roots []merkle.Hash, sent *[]sdk.Msg) {
	t.Helper()
	state := make([]byte, 5*custody.ChunkSize+123)
	for i := range state {
		state[i] = byte(i * 31)
	}
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
	roots, err = custody.Encode(bytes.NewReader(state), l, out, 1)
	if err != nil {
		t.Fatal(err)
	}
	served := make([][]byte, l.Pieces())
	for i, b := range bufs {
		served[i] = b.Bytes()
	}
	target := l.DataPieces
	served[target] = bytes.Repeat([]byte{0xAB}, len(served[target]))
	roots[target] = merkle.RootOfBytes(served[target], custody.ChunkSize)

	id := types.CustodyDatasetID(3, 1)
	info = &shardInfo{
		DatasetID: id, ChunkSize: custody.ChunkSize,
		Encoding: types.Encoding{DataPieces: l.DataPieces, ParityPieces: l.ParityPieces},
		Shard:    types.CustodyShards(id, l, merkle.HashesToBytes(roots))[0],
		Custody:  &types.CustodyInfo{LeaseId: 3, CheckpointIndex: 1, Trainer: "trainer"},
	}
	sent = new([]sdk.Msg)
	r = &Role{
		opts: Options{Operator: "repairer", Submit: func(_ context.Context, msg sdk.Msg) (*chain.TxResult, error) {
			*sent = append(*sent, msg)
			return &chain.TxResult{}, nil
		}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		download: pieces.Downloader{
			Endpoints: pieces.NewEndpoints(endpointIsOperator{}),
			Fetch: func(_ context.Context, holder, _ string, _, piece uint32, _ uint64) ([]byte, error) {
				return bytes.Clone(served[piece]), nil
			},
		},
	}
	return r, info, l, roots, sent
}

// checkSentParityProof checks that sent is one MsgProveParityFault about parity piece
// target of lease 3's checkpoint 1, by the repairer, that the chain's check accepts.
func checkSentParityProof(t *testing.T, sent []sdk.Msg, l custody.Layout, roots []merkle.Hash, target uint32) {
	t.Helper()
	if len(sent) != 1 {
		t.Fatalf("sent %d messages, want one MsgProveParityFault", len(sent))
	}
	msg, ok := sent[0].(*verifytypes.MsgProveParityFault)
	if !ok {
		t.Fatalf("sent %T", sent[0])
	}
	if msg.Prover != "repairer" || msg.LeaseId != 3 || msg.CheckpointIndex != 1 || msg.ParityPiece != target {
		t.Fatalf("proof about the wrong thing: %+v", msg)
	}
	data := make([]custody.ChunkOpening, len(msg.Data))
	for j, d := range msg.Data {
		data[j] = custody.ChunkOpening{Data: d.Data, Proof: toHashes(t, d.Proof)}
	}
	parity := custody.ChunkOpening{Data: msg.Parity.Data, Proof: toHashes(t, msg.Parity.Proof)}
	if err := custody.CheckParityFault(l, roots, msg.ParityPiece, msg.Chunk, data, parity); err != nil {
		t.Fatalf("the chain's check refuses the sidecar's proof: %v", err)
	}
}

// A custody repair of a parity piece whose registered root is not the parity of the
// state: the role rebuilds the state from the data pieces' holders, finds the rebuilt
// piece off its root, gets the registered (garbage) bytes from the trainer and sends the
// MsgProveParityFault that the chain's check accepts. The repair itself fails.
func TestCustodyRepairProvesGarbageParity(t *testing.T) {
	r, info, l, roots, sent := garbageParityFixture(t)
	replicas := []types.Replica{
		{Holder: "holder-0", Piece: 0, Status: types.REPLICA_STATUS_ACTIVE},
		{Holder: "holder-1", Piece: 1, Status: types.REPLICA_STATUS_ACTIVE},
	}
	if _, err := r.rebuildCustodyPiece(context.Background(), info, replicas, l.DataPieces); err == nil {
		t.Fatal("the repair of a garbage parity piece succeeded")
	}
	checkSentParityProof(t, *sent, l, roots, l.DataPieces)
}

// A holder taking a parity piece from a live trainer, nobody else holding anything yet:
// the piece matches its registered root, but the state the trainer's data pieces rebuild
// has other parity. The role does not take the piece and proves the fault; the data
// pieces it takes as they are.
func TestCustodyPieceFromTrainerChecksParity(t *testing.T) {
	r, info, l, roots, sent := garbageParityFixture(t)
	if _, err := r.custodyPiece(context.Background(), info, nil, l.DataPieces); err == nil {
		t.Fatal("the trainer's garbage parity piece was taken")
	}
	checkSentParityProof(t, *sent, l, roots, l.DataPieces)
	for i := range l.DataPieces {
		if _, err := r.custodyPiece(context.Background(), info, nil, i); err != nil {
			t.Fatalf("data piece %d: %v", i, err)
		}
	}
	if len(*sent) != 1 {
		t.Fatalf("taking data pieces sent %d more messages", len(*sent)-1)
	}
}

func toHashes(t *testing.T, bs [][]byte) []merkle.Hash {
	t.Helper()
	out := make([]merkle.Hash, len(bs))
	for i, b := range bs {
		h, err := merkle.HashFromBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = h
	}
	return out
}
