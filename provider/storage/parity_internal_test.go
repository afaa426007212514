package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// pieceServer is the public servers of a custody object's trainer and holders in one:
// provider X's endpoint is <server>/X, and it serves piece i of the object (GET
// <endpoint>/pieces/<object>/0/<i>) from the file <dir>/X/<i> when there is one.
type pieceServer struct {
	dir string
	url string
}

func newPieceServer(t *testing.T) *pieceServer {
	s := &pieceServer{dir: t.TempDir()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/"), "/") // X pieces object 0 i
		if len(parts) != 5 || parts[1] != "pieces" {
			http.NotFound(w, req)
			return
		}
		path := filepath.Join(s.dir, parts[0], parts[4])
		if _, err := os.Stat(path); err != nil {
			http.NotFound(w, req)
			return
		}
		http.ServeFile(w, req, path)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// serve makes provider serve piece i as data.
func (s *pieceServer) serve(t *testing.T, provider string, i uint32, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(s.dir, provider), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, provider, string(rune('0'+i))), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *pieceServer) Provider(_ context.Context, in *stakingexttypes.QueryProviderRequest, _ ...grpc.CallOption) (*stakingexttypes.QueryProviderResponse, error) {
	return &stakingexttypes.QueryProviderResponse{Provider: stakingexttypes.Provider{Operator: in.Operator, Endpoint: s.url + "/" + in.Operator}}, nil
}

// custodyRole is a repairer's storage role whose custody downloads go to srv and whose
// messages are recorded in sent.
func custodyRole(srv *pieceServer, sent *[]sdk.Msg) *Role {
	endpoints := pieces.NewEndpoints(srv)
	return &Role{
		opts: Options{Operator: "repairer", Submit: func(_ context.Context, msg sdk.Msg) (*chain.TxResult, error) {
			*sent = append(*sent, msg)
			return &chain.TxResult{}, nil
		}},
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		download: pieces.Downloader{Endpoints: endpoints},
		custody:  newCustodyFetcher(endpoints, nil),
	}
}

// custodyInfo is the chain's registration of custody object (lease 3, checkpoint 1)
// with layout l and the given roots, and replicas: holder "h<i>" holds piece i for each
// i in held.
func custodyInfo(l custody.Layout, roots []merkle.Hash, held ...uint32) (*shardInfo, []types.Replica) {
	id := types.CustodyDatasetID(3, 1)
	info := &shardInfo{
		DatasetID: id, ChunkSize: custody.ChunkSize,
		Encoding: types.Encoding{DataPieces: l.DataPieces, ParityPieces: l.ParityPieces},
		Shard:    types.CustodyShards(id, l, merkle.HashesToBytes(roots))[0],
		Custody:  &types.CustodyInfo{LeaseId: 3, CheckpointIndex: 1, Trainer: "trainer"},
	}
	var replicas []types.Replica
	for _, i := range held {
		replicas = append(replicas, types.Replica{Holder: "h" + string(rune('0'+i)), Piece: i, Status: types.REPLICA_STATUS_ACTIVE})
	}
	return info, replicas
}

// garbageParity is a 2+1 custody object of a small state whose trainer registered a
// garbage parity piece: its layout, its pieces as registered (the garbage in place of the
// parity) and their roots.
func garbageParity(t *testing.T) (l custody.Layout, registered [][]byte, roots []merkle.Hash) {
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
	registered = make([][]byte, l.Pieces())
	for i, b := range bufs {
		registered[i] = b.Bytes()
	}
	target := l.DataPieces
	registered[target] = bytes.Repeat([]byte{0xAB}, len(registered[target]))
	roots[target] = merkle.RootOfBytes(registered[target], custody.ChunkSize)
	return l, registered, roots
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
// state: the role rebuilds the piece from the data pieces' holders, finds it off its
// root while the data pieces match theirs, gets the registered (garbage) bytes from a
// holder of the piece and sends the MsgProveParityFault that the chain's check accepts.
// The repair itself fails and leaves no piece file.
func TestCustodyRepairProvesGarbageParity(t *testing.T) {
	l, registered, roots := garbageParity(t)
	target := l.DataPieces
	srv := newPieceServer(t)
	srv.serve(t, "h0", 0, registered[0])
	srv.serve(t, "h1", 1, registered[1])

	info, replicas := custodyInfo(l, roots, 0, 1)
	var sent []sdk.Msg
	r := custodyRole(srv, &sent)
	// The trainer is gone and nobody else holds the registered parity piece: the fault is
	// found but cannot be proven.
	path := filepath.Join(t.TempDir(), "piece")
	if err := r.custodyPiece(context.Background(), info, replicas, target, path); !errors.Is(err, custody.ErrWrongParity) {
		t.Fatalf("the repair of a garbage parity piece: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed repair left a piece file: %v", err)
	}
	if len(sent) != 0 {
		t.Fatalf("sent %d messages without the registered bytes to prove anything with", len(sent))
	}
	// A holder of the registered piece serves it: the proof is sent.
	srv.serve(t, "h2", target, registered[target])
	info, replicas = custodyInfo(l, roots, 0, 1, 2)
	if err := r.custodyPiece(context.Background(), info, replicas, target, path); !errors.Is(err, custody.ErrWrongParity) {
		t.Fatalf("the repair of a garbage parity piece: %v", err)
	}
	checkSentParityProof(t, sent, l, roots, target)
}

// A holder taking a parity piece from a live trainer, nobody else holding anything yet:
// the piece matches its registered root, but the state the trainer's data pieces make
// has other parity. The role does not take the piece (no file) and proves the fault; the
// data pieces it takes as they are, nothing more sent.
func TestCustodyPieceFromTrainerChecksParity(t *testing.T) {
	l, registered, roots := garbageParity(t)
	target := l.DataPieces
	srv := newPieceServer(t)
	for i, p := range registered {
		srv.serve(t, "trainer", uint32(i), p)
	}
	info, _ := custodyInfo(l, roots)
	var sent []sdk.Msg
	r := custodyRole(srv, &sent)
	dir := t.TempDir()
	path := filepath.Join(dir, "piece"+string(rune('0'+target)))
	if err := r.custodyPiece(context.Background(), info, nil, target, path); !errors.Is(err, custody.ErrWrongParity) {
		t.Fatalf("the trainer's garbage parity piece: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the garbage parity piece was taken: %v", err)
	}
	checkSentParityProof(t, sent, l, roots, target)
	for i := range l.DataPieces {
		path := filepath.Join(dir, "piece"+string(rune('0'+i)))
		if err := r.custodyPiece(context.Background(), info, nil, i, path); err != nil {
			t.Fatalf("data piece %d: %v", i, err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, registered[i]) {
			t.Fatalf("data piece %d: the file is not the piece (%v)", i, err)
		}
	}
	if len(sent) != 1 {
		t.Fatalf("taking data pieces sent %d more messages", len(sent)-1)
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

// peakHeap samples the heap in use every millisecond until stop is called, which
// returns the largest sample's growth over the heap in use at the start.
func peakHeap() (stop func() uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	peak.Store(base)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load() - base
	}
}

// TestCustodyRepairStreams repairs each piece — data and parity — of a 4+2 custody object
// of a 32 MiB state, the trainer gone, from the four other holders' piece servers: each
// rebuilt file is the piece byte for byte, and the heap never grows by more than 16 MiB
// over the repair, where a repair holding the state (32 MiB) or the k pieces it reads
// (32 MiB) could not stay under it. The bound is (k+m) blocks of custody.BlockSize plus
// the HTTP transfers' buffers. Then the trainer serves every piece, and a holder taking a
// parity piece from it checks the piece against the state's parity under the same bound.
func TestCustodyRepairStreams(t *testing.T) {
	const size = 32<<20 - 1234 // the last data piece is short
	const bound = 16 << 20
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state")
	f, err := os.Create(statePath)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for written := 0; written < size; written += len(block) {
		for i := range block {
			block[i] = byte((written + i) * 7 / 5)
		}
		if _, err := f.Write(block[:min(len(block), size-written)]); err != nil {
			t.Fatal(err)
		}
	}
	l, err := custody.NewLayout(size, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	srv := newPieceServer(t)
	files := make([]*os.File, l.Pieces())
	out := make([]io.Writer, l.Pieces())
	for i := range files {
		holder := filepath.Join(srv.dir, "h"+string(rune('0'+i)))
		if err := os.MkdirAll(holder, 0o755); err != nil {
			t.Fatal(err)
		}
		if files[i], err = os.Create(filepath.Join(holder, string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
		out[i] = files[i]
	}
	roots, err := custody.Encode(f, l, out, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, pf := range files {
		pf.Close()
	}
	all := []uint32{0, 1, 2, 3, 4, 5}
	var sent []sdk.Msg
	r := custodyRole(srv, &sent)
	for _, target := range all {
		info, replicas := custodyInfo(l, roots, all...)
		path := filepath.Join(dir, "rebuilt", "piece"+string(rune('0'+target)))
		// The target's own holder lost it (its replica is what is being repaired).
		lost := filepath.Join(srv.dir, "h"+string(rune('0'+target)), string(rune('0'+target)))
		want, err := os.ReadFile(lost)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(lost, lost+".lost"); err != nil {
			t.Fatal(err)
		}
		stop := peakHeap()
		err = r.custodyPiece(context.Background(), info, replicas, target, path)
		grew := stop()
		if err != nil {
			t.Fatalf("repairing piece %d: %v", target, err)
		}
		if err := os.Rename(lost+".lost", lost); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("piece %d: the rebuilt file differs from the piece (%d bytes, want %d)", target, len(got), len(want))
		}
		t.Logf("piece %d (%d bytes) rebuilt; heap grew by at most %.1f MiB", target, len(got), float64(grew)/(1<<20))
		if grew > bound {
			t.Fatalf("repairing piece %d of a %.0f MiB state grew the heap by %d MiB, over %d MiB: the repair does not stream",
				target, float64(size)/(1<<20), grew>>20, bound>>20)
		}
	}
	// The trainer back, serving every piece: taking a parity piece from it checks the
	// piece against the parity its data pieces make, streamed the same way.
	for i := range l.Pieces() {
		holder := filepath.Join(srv.dir, "h"+string(rune('0'+i)), string(rune('0'+i)))
		if err := os.MkdirAll(filepath.Join(srv.dir, "trainer"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(holder, filepath.Join(srv.dir, "trainer", string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	target := l.DataPieces + 1
	info, _ := custodyInfo(l, roots)
	stop := peakHeap()
	err = r.custodyPiece(context.Background(), info, nil, target, filepath.Join(dir, "taken", "piece"))
	grew := stop()
	if err != nil {
		t.Fatalf("taking parity piece %d from the trainer: %v", target, err)
	}
	t.Logf("parity piece %d taken from the trainer and checked; heap grew by at most %.1f MiB", target, float64(grew)/(1<<20))
	if grew > bound {
		t.Fatalf("checking parity piece %d of a %.0f MiB state grew the heap by %d MiB, over %d MiB: the check does not stream",
			target, float64(size)/(1<<20), grew>>20, bound>>20)
	}
	if len(sent) != 0 {
		t.Fatalf("honest pieces repaired and checked with %d messages sent", len(sent))
	}
}
