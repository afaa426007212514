package datasets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/provider/storage"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

const testDataset = "unit-corpus"

var rs21 = types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: 2, ParityPieces: 1}

// world is a registered dataset, its holders' piece servers and the chain's
// view of both, as the fetcher's narrow interfaces see them.
type world struct {
	t         *testing.T
	m         *manifest.Manifest
	built     string // the dataset build's folder (manifest.json, pieces/)
	ds        types.Dataset
	shards    []types.Shard
	replicas  map[uint32][]types.Replica // by shard
	endpoints map[string]string          // holder → URL
	dirs      map[string]string          // holder → pieces folder
	assigned  []types.WorkerAssignment
	fetches   atomic.Int64
}

// newWorld builds a small dataset (1 KiB chunks, 4 KiB shards) and gives
// piece p of every shard to holder "h<p>" (and, under replicas, every copy
// to "h0", "h1", ...), each serving its pieces folder over HTTP.
func newWorld(t *testing.T, enc types.Encoding) *world {
	t.Helper()
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus")
	if err := os.MkdirAll(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		text := strings.Repeat(fmt.Sprintf("line %d of the unit corpus, which the fetcher must deliver byte for byte. ", i), 20+i*7)
		if err := os.WriteFile(filepath.Join(corpus, fmt.Sprintf("doc-%d.txt", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := &world{t: t, built: filepath.Join(dir, "built"), replicas: map[uint32][]types.Replica{}, endpoints: map[string]string{}, dirs: map[string]string{}}
	var err error
	w.m, err = manifest.Build(corpus, w.built, manifest.Options{ShardSize: 4 << 10, ChunkSize: 1024, Encoding: enc, ID: testDataset})
	if err != nil {
		t.Fatal(err)
	}
	if w.shards, err = w.m.ChainShards(); err != nil {
		t.Fatal(err)
	}
	if len(w.shards) < 3 {
		t.Fatalf("the test wants at least 3 shards, the build made %d", len(w.shards))
	}
	w.ds = types.Dataset{Id: testDataset, Encoding: enc, ChunkSize: w.m.ChunkSize, TotalSize: w.m.TotalSize, ShardCount: uint32(len(w.shards))}
	holders := int(enc.PiecesPerShard())
	if !enc.IsReedSolomon() {
		holders = int(enc.Replicas)
	}
	for h := range holders {
		name := fmt.Sprintf("h%d", h)
		w.dirs[name] = filepath.Join(dir, name)
		srv := httptest.NewServer(storage.NewPieceHandler(w.dirs[name]))
		t.Cleanup(srv.Close)
		w.endpoints[name] = srv.URL
	}
	for _, sh := range w.shards {
		for _, p := range sh.Pieces {
			if enc.IsReedSolomon() {
				w.give(fmt.Sprintf("h%d", p.Index), sh.Index, p.Index)
				continue
			}
			for h := range holders {
				w.give(fmt.Sprintf("h%d", h), sh.Index, p.Index)
			}
		}
	}
	return w
}

// give places piece `piece` of shard `shard` with holder and registers the replica.
func (w *world) give(holder string, shard, piece uint32) {
	w.t.Helper()
	data := w.piece(shard, piece)
	path := storage.PiecePath(w.dirs[holder], testDataset, shard, piece)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.replicas[shard] = append(w.replicas[shard], types.Replica{DatasetId: testDataset, Shard: shard, Piece: piece, Holder: holder, Status: types.REPLICA_STATUS_ACTIVE})
}

// piece returns the built bytes of a piece.
func (w *world) piece(shard, piece uint32) []byte {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.built, manifest.PieceFile(shard, piece)))
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

// corrupt flips a byte of holder's copy of a piece.
func (w *world) corrupt(holder string, shard, piece uint32) {
	w.t.Helper()
	path := storage.PiecePath(w.dirs[holder], testDataset, shard, piece)
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	b[len(b)/2] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) fetcher() *Fetcher {
	w.t.Helper()
	http := pieces.HTTPFetcher(nil, 10*time.Second)
	f, err := New(Options{Registry: w, Providers: w, Fetch: func(ctx context.Context, endpoint, id string, shard, piece uint32, size uint64) ([]byte, error) {
		w.fetches.Add(1)
		return http(ctx, endpoint, id, shard, piece, size)
	}})
	if err != nil {
		w.t.Fatal(err)
	}
	return f
}

func (w *world) job() markettypes.Job {
	return markettypes.Job{Id: 7, Spec: markettypes.JobSpec{DatasetId: testDataset, Workers: uint32(len(w.assigned))}}
}

// layout is x/verify's layout of worker's stream.
func (w *world) layout(worker uint32) traindata.Layout {
	w.t.Helper()
	var shards []types.Shard
	for _, i := range w.assigned[worker].Shards {
		shards = append(shards, w.shards[i])
	}
	l, err := verifytypes.DatasetLayout(w.ds, shards)
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// The fake chain: types.QueryClient's and stakingexttypes.QueryClient's methods the fetcher uses.

func (w *world) Dataset(_ context.Context, in *types.QueryDatasetRequest, _ ...grpc.CallOption) (*types.QueryDatasetResponse, error) {
	if in.DatasetId != testDataset {
		return nil, status.Error(codes.NotFound, "no such dataset")
	}
	return &types.QueryDatasetResponse{Dataset: w.ds}, nil
}

func (w *world) view(sh types.Shard) types.ShardView {
	v := types.ShardView{DatasetId: testDataset, Index: sh.Index, SizeBytes: sh.SizeBytes, Target: w.ds.Encoding.Target(), MinLive: w.ds.Encoding.MinLive()}
	live := map[uint32]uint32{}
	for _, r := range w.replicas[sh.Index] {
		if r.Status == types.REPLICA_STATUS_ACTIVE {
			live[r.Piece]++
		}
	}
	for _, p := range sh.Pieces {
		v.Pieces = append(v.Pieces, types.PieceView{Piece: p, LiveHolders: live[p.Index]})
		if w.ds.Encoding.IsReedSolomon() && live[p.Index] > 0 {
			v.Live++
		} else if !w.ds.Encoding.IsReedSolomon() {
			v.Live += live[p.Index]
		}
	}
	return v
}

func (w *world) Shard(_ context.Context, in *types.QueryShardRequest, _ ...grpc.CallOption) (*types.QueryShardResponse, error) {
	if in.DatasetId != testDataset || int(in.Index) >= len(w.shards) {
		return nil, status.Error(codes.NotFound, "no such shard")
	}
	return &types.QueryShardResponse{Shard: w.view(w.shards[in.Index]), Replicas: w.replicas[in.Index]}, nil
}

func (w *world) Shards(_ context.Context, in *types.QueryShardsRequest, _ ...grpc.CallOption) (*types.QueryShardsResponse, error) {
	if in.DatasetId != testDataset {
		return nil, status.Error(codes.NotFound, "no such dataset")
	}
	res := &types.QueryShardsResponse{}
	for _, sh := range w.shards {
		res.Shards = append(res.Shards, w.view(sh))
	}
	return res, nil
}

func (w *world) Assignment(_ context.Context, in *types.QueryAssignmentRequest, _ ...grpc.CallOption) (*types.QueryAssignmentResponse, error) {
	if in.Epoch != AssignmentEpoch {
		return nil, status.Error(codes.InvalidArgument, "the fetcher asked for the wrong epoch")
	}
	return &types.QueryAssignmentResponse{JobId: in.JobId, DatasetId: testDataset, ShardCount: uint32(len(w.shards)), Workers: w.assigned}, nil
}

func (w *world) Provider(_ context.Context, in *stakingexttypes.QueryProviderRequest, _ ...grpc.CallOption) (*stakingexttypes.QueryProviderResponse, error) {
	u, ok := w.endpoints[in.Operator]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such provider")
	}
	return &stakingexttypes.QueryProviderResponse{Provider: stakingexttypes.Provider{Operator: in.Operator, Endpoint: u}}, nil
}

// checkStream checks dir against worker's layout: the files in name order
// are the layout's segments, each matching its root, and exact.ReadStreamDir
// (the trainer's reader) returns the stream the referee checks.
func checkStream(t *testing.T, w *world, worker uint32, dir string, res Result) []byte {
	t.Helper()
	layout := w.layout(worker)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, res.Files) || len(names) != len(layout.Segments) {
		t.Fatalf("files %v, result %v, layout of %d segments", names, res.Files, len(layout.Segments))
	}
	stream, err := exact.ReadStreamDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traindata.NewStream(layout, stream); err != nil {
		t.Fatalf("the written stream is not the layout's: %v", err)
	}
	if uint64(len(stream)) != res.Size {
		t.Fatalf("stream is %d bytes, result says %d", len(stream), res.Size)
	}
	return stream
}

func TestPrepareWritesTheLayoutInOrder(t *testing.T) {
	w := newWorld(t, rs21)
	// Worker 1's shards in assignment order; several shards, several data pieces each.
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{1}}, {Worker: 1, Shards: []uint32{0, 2}}}
	dir := filepath.Join(t.TempDir(), "data")
	res, err := w.fetcher().Prepare(context.Background(), w.job(), 1, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{FileName(0, 0, 0), FileName(1, 0, 1), FileName(2, 2, 0), FileName(3, 2, 1)}
	if !slices.Equal(res.Files, want) || res.Reused || res.Rebuilt != 0 || len(res.Refused) != 0 {
		t.Fatalf("result %+v, want files %v fetched intact", res, want)
	}
	stream := checkStream(t, w, 1, dir, res)
	// The data pieces of a shard concatenated are the shard's bytes (plus
	// Reed–Solomon's zero padding at the end of its last piece).
	off := 0
	for _, shard := range []uint32{0, 2} {
		data, err := w.m.RebuildFromDir(w.built, shard)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(stream[off:off+len(data)], data) {
			t.Fatalf("shard %d is not where the layout puts it", shard)
		}
		off += 2 * len(w.piece(shard, 0))
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Fatalf("temporary folders left beside the data folder: %v", entries)
	}
}

func TestPrepareRefusesACorruptPieceAndRebuildsItFromParity(t *testing.T) {
	w := newWorld(t, rs21)
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{0, 1}}}
	w.corrupt("h0", 1, 0)
	dir := filepath.Join(t.TempDir(), "data")
	res, err := w.fetcher().Prepare(context.Background(), w.job(), 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) != 1 || res.Refused[0].Holder != "h0" || res.Refused[0].Piece != 0 || !errors.Is(res.Refused[0].Err, pieces.ErrRootMismatch) {
		t.Fatalf("refused %+v, want h0's piece 0 refused for its root", res.Refused)
	}
	if res.Rebuilt != 1 {
		t.Fatalf("rebuilt %d pieces, want 1", res.Rebuilt)
	}
	stream := checkStream(t, w, 0, dir, res)
	// The rebuilt piece is the registered one, byte for byte.
	off := 2 * len(w.piece(0, 0))
	if got := stream[off : off+len(w.piece(1, 0))]; !bytes.Equal(got, w.piece(1, 0)) {
		t.Fatal("the rebuilt piece differs from the built one")
	}
}

func TestPrepareWithTooFewIntactPiecesSaysWhy(t *testing.T) {
	w := newWorld(t, rs21)
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{0, 2}}}
	w.corrupt("h0", 2, 0)
	if err := os.Remove(storage.PiecePath(w.dirs["h2"], testDataset, 2, 2)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	_, err := w.fetcher().Prepare(context.Background(), w.job(), 0, dir)
	if !errors.Is(err, ErrNotFetchable) {
		t.Fatalf("want ErrNotFetchable, got %v", err)
	}
	for _, want := range []string{`shard 2 of dataset "unit-corpus"`, "1 of its 3 pieces", "needs 2", "piece 0 from h0 refused", "piece 2 from h2", "404"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, statErr := os.Stat(dir); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatalf("a data folder was left after a failed fetch: %v", statErr)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 0 {
		t.Fatalf("temporary folders left: %v", entries)
	}

	// A worker with no shard, and a job without a dataset, are refused too.
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{0}}, {Worker: 1}}
	if _, err := w.fetcher().Prepare(context.Background(), w.job(), 1, dir); !errors.Is(err, ErrNotFetchable) || !strings.Contains(err.Error(), "no shard to worker 1") {
		t.Fatalf("worker without shards: %v", err)
	}
}

func TestPrepareIsIdempotent(t *testing.T) {
	w := newWorld(t, rs21)
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{0, 1, 2}}}
	dir := filepath.Join(t.TempDir(), "data")
	// The leases role creates the (empty) folder before it prepares it.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := w.fetcher()
	first, err := f.Prepare(context.Background(), w.job(), 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	fetched := w.fetches.Load()
	if first.Reused || fetched != 6 {
		t.Fatalf("first prepare: reused %v after %d downloads, want 6 downloads", first.Reused, fetched)
	}
	want := checkStream(t, w, 0, dir, first)

	// A restarted sidecar (a new fetcher) reuses the verified folder.
	again, err := w.fetcher().Prepare(context.Background(), w.job(), 0, dir)
	if err != nil || !again.Reused || w.fetches.Load() != fetched {
		t.Fatalf("second prepare: %+v, %v, %d downloads", again, err, w.fetches.Load()-fetched)
	}

	// A damaged file, or a stray one, is not reused: the folder is replaced whole.
	b, err := os.ReadFile(filepath.Join(dir, first.Files[3]))
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(filepath.Join(dir, first.Files[3]), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zz-stray"), []byte("not training data"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := f.Prepare(context.Background(), w.job(), 0, dir)
	if err != nil || third.Reused {
		t.Fatalf("third prepare: %+v, %v", third, err)
	}
	if got := checkStream(t, w, 0, dir, third); !bytes.Equal(got, want) {
		t.Fatal("the replaced stream differs")
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Fatalf("folders left beside the data folder: %v", entries)
	}
}

func TestPrepareReplicatedShards(t *testing.T) {
	enc := types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 2}
	w := newWorld(t, enc)
	w.assigned = []types.WorkerAssignment{{Worker: 0, Shards: []uint32{1, 2}}}
	w.corrupt("h0", 2, 0)
	dir := filepath.Join(t.TempDir(), "data")
	res, err := w.fetcher().Prepare(context.Background(), w.job(), 0, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Refused) != 1 || res.Refused[0].Holder != "h0" || res.Rebuilt != 0 {
		t.Fatalf("result %+v: want h0's copy refused and h1's used", res)
	}
	if !slices.Equal(res.Files, []string{FileName(0, 1, 0), FileName(1, 2, 0)}) {
		t.Fatalf("files %v", res.Files)
	}
	checkStream(t, w, 0, dir, res)

	// With every copy corrupt nothing can be had.
	w.corrupt("h1", 2, 0)
	if _, err := w.fetcher().Prepare(context.Background(), w.job(), 0, filepath.Join(t.TempDir(), "data")); !errors.Is(err, ErrNotFetchable) {
		t.Fatalf("want ErrNotFetchable, got %v", err)
	}
}

func TestFetchableCountsLivePieces(t *testing.T) {
	w := newWorld(t, rs21)
	f := w.fetcher()
	ctx := context.Background()
	if err := f.Fetchable(ctx, w.job()); err != nil {
		t.Fatal(err)
	}
	if err := f.Fetchable(ctx, markettypes.Job{}); err != nil {
		t.Fatalf("a job without a dataset: %v", err)
	}
	// One lost holder of 3 leaves k = 2: still fetchable. Two are not.
	lose := func(shard, piece uint32) {
		for i, r := range w.replicas[shard] {
			if r.Piece == piece {
				w.replicas[shard][i].Status = types.REPLICA_STATUS_TERMINATED
			}
		}
	}
	lose(1, 2)
	if err := f.Fetchable(ctx, w.job()); err != nil {
		t.Fatalf("k of k+m live: %v", err)
	}
	lose(1, 0)
	err := f.Fetchable(ctx, w.job())
	if !errors.Is(err, ErrNotFetchable) || !strings.Contains(err.Error(), "shard 1") || !strings.Contains(err.Error(), "1 live pieces and needs 2") {
		t.Fatalf("want shard 1 not fetchable, got %v", err)
	}
	if err := f.Fetchable(ctx, markettypes.Job{Spec: markettypes.JobSpec{DatasetId: "absent"}}); !errors.Is(err, ErrNotFetchable) {
		t.Fatalf("unregistered dataset: %v", err)
	}
	if w.fetches.Load() != 0 {
		t.Fatal("Fetchable downloaded pieces")
	}
}
