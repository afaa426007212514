package rounds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

var testSeed = []byte("rounds-role-test-seed")

func tinyConfig() exact.Config {
	return exact.Config{
		Model: exact.ModelConfig{Layers: 1, DModel: 24, Heads: 2, DFF: 40, Context: 16, Vocab: 256},
		Train: exact.TrainConfig{Batch: 2, LR: 0.01, WarmupSteps: 2, WeightDecay: 0.01},
	}
}

// custodyNet is the custody layer of a test: the objects registered "on chain" (the
// shard querier) and one holder serving every piece from the writers' custody folders.
type custodyNet struct {
	mu       sync.Mutex
	datasets map[string]shardtypes.Dataset
	shards   map[string]shardtypes.ShardView
	dirs     map[string]string // object → custody folder holding its pieces
	srv      *httptest.Server
}

func newCustodyNet(t *testing.T) *custodyNet {
	n := &custodyNet{datasets: map[string]shardtypes.Dataset{}, shards: map[string]shardtypes.ShardView{}, dirs: map[string]string{}}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/pieces/"), "/")
		n.mu.Lock()
		dir, ok := n.dirs[parts[0]]
		n.mu.Unlock()
		piece, err := strconv.ParseUint(parts[len(parts)-1], 10, 32)
		if !ok || len(parts) != 3 || err != nil {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, parts[0], manifest.PieceFile(0, uint32(piece))))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(b) //nolint:errcheck
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// register records p, written under custodyDir, as held by the one holder.
func (n *custodyNet) register(custodyDir string, p Pieces) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ds := shardtypes.Dataset{Id: p.ObjectID, TotalSize: p.Size, Encoding: shardtypes.Encoding{DataPieces: 2, ParityPieces: 1}, Custody: &shardtypes.CustodyInfo{}}
	sh := shardtypes.ShardView{DatasetId: p.ObjectID}
	for i, root := range p.Roots {
		sh.Pieces = append(sh.Pieces, shardtypes.PieceView{Piece: shardtypes.Piece{Index: uint32(i), Root: root[:]}})
	}
	n.datasets[p.ObjectID], n.shards[p.ObjectID], n.dirs[p.ObjectID] = ds, sh, custodyDir
}

func (n *custodyNet) Dataset(_ context.Context, in *shardtypes.QueryDatasetRequest, _ ...grpc.CallOption) (*shardtypes.QueryDatasetResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ds, ok := n.datasets[in.DatasetId]
	if !ok {
		return nil, errors.New("not found")
	}
	return &shardtypes.QueryDatasetResponse{Dataset: ds}, nil
}

func (n *custodyNet) Shard(_ context.Context, in *shardtypes.QueryShardRequest, _ ...grpc.CallOption) (*shardtypes.QueryShardResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sh, ok := n.shards[in.DatasetId]
	if !ok {
		return nil, errors.New("not found")
	}
	res := &shardtypes.QueryShardResponse{Shard: sh}
	for i := range sh.Pieces {
		res.Replicas = append(res.Replicas, shardtypes.Replica{DatasetId: in.DatasetId, Piece: uint32(i), Holder: "holder", Status: shardtypes.REPLICA_STATUS_ACTIVE})
	}
	return res, nil
}

func (n *custodyNet) source() *fetch.Source {
	return &fetch.Source{Shards: n, Fetcher: fetch.Fetcher{Endpoint: func(context.Context, string) (string, error) { return n.srv.URL, nil }}}
}

// sidecar is one worker's side: its own job folder, output and custody folders.
type sidecar struct {
	w       Worker
	custody string
}

// runRounds runs workers × rounds the way the sidecars do: each trains its round from
// G_r on its own disk, writes its pseudo-gradient's custody pieces; each then fetches
// the others' from custody, aggregates and must reach the same G_{r+1}.
func runRounds(t *testing.T, spec diloco.SyncSpec, workers, rounds int) (roots [][32]byte) {
	t.Helper()
	roots, _ = runRoundsWith(t, spec, workers, rounds, nil)
	return roots
}

// runRoundsWith is runRounds with worker i trained by trainerOf(i) (nil: the Go
// trainer); it also returns every worker's contribution of every round.
func runRoundsWith(t *testing.T, spec diloco.SyncSpec, workers, rounds int, trainerOf func(worker int) Trainer) (roots [][32]byte, cons [][]Contribution) {
	t.Helper()
	sync, err := spec.Sync()
	if err != nil {
		t.Fatal(err)
	}
	net := newCustodyNet(t)
	g0, err := diloco.InitGlobal(tinyConfig(), sync, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	cars := make([]*sidecar, workers)
	for i := range cars {
		root := t.TempDir()
		job := Job{ID: 7, Seed: testSeed, Config: tinyConfig(), Sync: sync, Workers: uint32(workers),
			Dir: filepath.Join(root, "rounds"), DataDir: filepath.Join(root, "data"), Data: CorpusData(testSeed, uint32(workers))}
		if _, _, err := job.PutGlobal(g0); err != nil {
			t.Fatal(err)
		}
		cars[i] = &sidecar{w: Worker{Job: job, Index: uint32(i), LeaseID: uint64(100 + i), GPUs: []string{fmt.Sprintf("GPU-test-%d", i)},
			OutputDir: filepath.Join(root, "out"), LogDir: filepath.Join(root, "logs")}, custody: filepath.Join(root, "custody")}
		if trainerOf != nil {
			cars[i].w.Trainer = trainerOf(i)
		}
	}
	roots = append(roots, g0.Root())
	for r := range uint64(rounds) {
		var entered []Entered
		cons = append(cons, nil)
		for _, c := range cars {
			con, err := c.w.Train(context.Background(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			cons[r] = append(cons[r], con)
			if con.StartRoot != mustGlobal(t, c.w.Job, r).WorkerStart(nil).Root() && c.w.Carry == nil {
				t.Fatalf("worker %d round %d: trace starts at %s, not WorkerStart's root", c.w.Index, r, con.StartRoot)
			}
			p, err := WritePieces(c.custody, markettypes.PseudoGradientCustodyID(7, r, c.w.Index), con.PseudoGradientPath, 2, 1)
			if err != nil {
				t.Fatal(err)
			}
			net.register(c.custody, p)
			entered = append(entered, Entered{Worker: c.w.Index, Root: con.PseudoGradientRoot})
		}
		var next [32]byte
		for i, c := range cars {
			g, err := c.w.Aggregate(context.Background(), r, entered, CustodyFetch(net.source(), 7))
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && g.Root() != next {
				t.Fatalf("round %d: sidecars aggregate to different global states", r)
			}
			next = g.Root()
			carry := r
			c.w.Carry = &carry
		}
		roots = append(roots, next)
	}
	return roots, cons
}

// Three sidecars' round code gives diloco.Simulate's global states bit for bit, dense
// and compressed (the error buffer kept locally across rounds).
func TestRoundsMatchSimulate(t *testing.T) {
	for _, spec := range []diloco.SyncSpec{
		{Every: 3, OuterLR: 0.7, OuterMomentum: 0.9},
		{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: 32},
	} {
		t.Run("top_k="+strconv.Itoa(spec.TopK), func(t *testing.T) {
			got := runRounds(t, spec, 3, 2)
			want, err := diloco.Simulate(diloco.SimOptions{Config: tinyConfig(), Sync: spec, Seed: testSeed, Workers: 3, Rounds: 2})
			if err != nil {
				t.Fatal(err)
			}
			for r, g := range want {
				if got[r] != g.Root() {
					t.Fatalf("global root of round %d: %x, Simulate's %s", r, got[r], g.Root())
				}
			}
		})
	}
}

func mustGlobal(t *testing.T, j Job, r uint64) *diloco.GlobalState {
	t.Helper()
	g, err := j.Global(r)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A worker whose custody object holds another file than the pseudo-gradient it committed
// (here: a copy of worker 1's, under its own name) does not enter anyone's aggregate:
// the file fails its commitment and no next global state is written.
func TestAggregateRejectsAFileThatIsNotTheCommitment(t *testing.T) {
	sync, err := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}.Sync()
	if err != nil {
		t.Fatal(err)
	}
	net := newCustodyNet(t)
	g0, err := diloco.InitGlobal(tinyConfig(), sync, testSeed)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	job := Job{ID: 7, Seed: testSeed, Config: tinyConfig(), Sync: sync, Workers: 3, Dir: filepath.Join(root, "rounds"), DataDir: filepath.Join(root, "data"),
		Data: CorpusData(testSeed, 3)}
	if _, _, err := job.PutGlobal(g0); err != nil {
		t.Fatal(err)
	}
	var cons []Contribution
	for i := range uint32(2) {
		w := Worker{Job: job, Index: i, OutputDir: filepath.Join(root, "out", strconv.Itoa(int(i)))}
		con, err := w.Train(context.Background(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		cons = append(cons, con)
	}
	custodyDir := filepath.Join(root, "custody")
	// Worker 2 copies worker 1's file and serves it as its own pseudo-gradient.
	p, err := WritePieces(custodyDir, markettypes.PseudoGradientCustodyID(7, 0, 2), cons[1].PseudoGradientPath, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	net.register(custodyDir, p)
	other := Job{ID: 7, Seed: testSeed, Config: tinyConfig(), Sync: sync, Workers: 3, Dir: filepath.Join(t.TempDir(), "rounds")}
	if _, _, err := other.PutGlobal(g0); err != nil {
		t.Fatal(err)
	}
	for _, claimed := range []Entered{{Worker: 2, Root: cons[1].PseudoGradientRoot}, {Worker: 2, Root: cons[0].PseudoGradientRoot}} {
		_, err = other.Aggregate(context.Background(), 0, []Entered{claimed}, CustodyFetch(net.source(), 7))
		if !errors.Is(err, ErrBadPseudoGradient) {
			t.Fatalf("worker 2 serving worker 1's file as %s: %v", claimed.Root, err)
		}
		if _, err := os.Stat(other.GlobalPath(1)); !os.IsNotExist(err) {
			t.Fatalf("a next global state was written: %v", err)
		}
	}
}
