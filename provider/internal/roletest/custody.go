package roletest

import (
	"context"
	"errors"
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
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/pieces"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// CustodyNet is the custody layer of a role's test: custody objects registered "on
// chain" (it answers the shard queries fetch.Source makes) and one holder serving every
// piece of them over HTTP.
type CustodyNet struct {
	mu       sync.Mutex
	dir      string
	datasets map[string]shardtypes.Dataset
	shards   map[string]shardtypes.ShardView
	// unheld are objects registered whose pieces no holder has taken yet.
	unheld map[string]bool
	srv    *httptest.Server
}

// NewCustodyNet starts the holder; it stops with the test.
func NewCustodyNet(t *testing.T) *CustodyNet {
	t.Helper()
	n := &CustodyNet{dir: t.TempDir(), datasets: map[string]shardtypes.Dataset{}, shards: map[string]shardtypes.ShardView{}, unheld: map[string]bool{}}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/pieces/"), "/")
		piece, err := strconv.ParseUint(parts[len(parts)-1], 10, 32)
		if len(parts) != 3 || err != nil {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join(n.dir, parts[0], manifest.PieceFile(0, uint32(piece))))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(b) //nolint:errcheck
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// Put cuts file into custody object id's pieces (2 data, 1 parity) and registers it held.
func (n *CustodyNet) Put(t *testing.T, id string, file []byte) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(src, file, 0o644); err != nil {
		t.Fatal(err)
	}
	l, roots, err := pieces.WriteCustodyObject(n.dir, id, src, 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.datasets[id] = shardtypes.Dataset{Id: id, TotalSize: l.StateSize, Encoding: shardtypes.Encoding{DataPieces: 2, ParityPieces: 1}, Custody: &shardtypes.CustodyInfo{}}
	sh := shardtypes.ShardView{DatasetId: id}
	for i, root := range roots {
		sh.Pieces = append(sh.Pieces, shardtypes.PieceView{Piece: shardtypes.Piece{Index: uint32(i), Root: root[:]}})
	}
	n.shards[id] = sh
}

// PutUnheld is Put with no holder holding the pieces yet, until Hold.
func (n *CustodyNet) PutUnheld(t *testing.T, id string, file []byte) {
	t.Helper()
	n.Put(t, id, file)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unheld[id] = true
}

// Hold makes the holder hold the pieces of an object PutUnheld registered.
func (n *CustodyNet) Hold(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.unheld, id)
}

// Dataset implements the x/shardregistry query.
func (n *CustodyNet) Dataset(_ context.Context, in *shardtypes.QueryDatasetRequest, _ ...grpc.CallOption) (*shardtypes.QueryDatasetResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ds, ok := n.datasets[in.DatasetId]
	if !ok {
		return nil, errors.New("not found")
	}
	return &shardtypes.QueryDatasetResponse{Dataset: ds}, nil
}

// Shard implements the x/shardregistry query: every piece has the one active holder
// (none while unheld).
func (n *CustodyNet) Shard(_ context.Context, in *shardtypes.QueryShardRequest, _ ...grpc.CallOption) (*shardtypes.QueryShardResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sh, ok := n.shards[in.DatasetId]
	if !ok {
		return nil, errors.New("not found")
	}
	res := &shardtypes.QueryShardResponse{Shard: sh}
	for i := range sh.Pieces {
		if n.unheld[in.DatasetId] {
			break
		}
		res.Replicas = append(res.Replicas, shardtypes.Replica{DatasetId: in.DatasetId, Piece: uint32(i), Holder: "holder", Status: shardtypes.REPLICA_STATUS_ACTIVE})
	}
	return res, nil
}

// Source fetches from the net's holder.
func (n *CustodyNet) Source() *fetch.Source {
	return &fetch.Source{Shards: n, Fetcher: fetch.Fetcher{Endpoint: func(context.Context, string) (string, error) { return n.srv.URL, nil }}}
}
