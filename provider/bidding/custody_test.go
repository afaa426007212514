package bidding

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// custodyShards is a chain holding one 2+1 custody object with the given holders.
type custodyShards struct{ holders []string }

func (c custodyShards) Dataset(_ context.Context, in *shardtypes.QueryDatasetRequest, _ ...grpc.CallOption) (*shardtypes.QueryDatasetResponse, error) {
	return &shardtypes.QueryDatasetResponse{Dataset: shardtypes.Dataset{
		Id: in.DatasetId, TotalSize: 3 * 4096, ChunkSize: 4096,
		Encoding: shardtypes.Encoding{Kind: shardtypes.ENCODING_KIND_REED_SOLOMON, DataPieces: 2, ParityPieces: 1},
		Custody:  &shardtypes.CustodyInfo{LeaseId: 3, CheckpointIndex: 1},
	}}, nil
}

func (c custodyShards) Shard(_ context.Context, in *shardtypes.QueryShardRequest, _ ...grpc.CallOption) (*shardtypes.QueryShardResponse, error) {
	res := &shardtypes.QueryShardResponse{Shard: shardtypes.ShardView{DatasetId: in.DatasetId}}
	for i := range 3 {
		root := merkle.EmptyRoot()
		res.Shard.Pieces = append(res.Shard.Pieces, shardtypes.PieceView{Piece: shardtypes.Piece{Index: uint32(i), Root: root[:]}})
	}
	for i, h := range c.holders {
		res.Replicas = append(res.Replicas, shardtypes.Replica{Piece: uint32(i), Holder: h, Status: shardtypes.REPLICA_STATUS_ACTIVE})
	}
	return res, nil
}

// A job resuming from a checkpoint whose custody object has fewer than k pieces held
// gets no bid; with k held it does.
func TestNoBidOnAnUnrebuildableResumeState(t *testing.T) {
	job := markettypes.Job{Id: 9, Spec: markettypes.JobSpec{
		Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE},
		Custody:  &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: time.Hour},
	}, Progress: []markettypes.WorkerProgress{{Worker: 0, Step: 16, Uri: "http://gone.example:8080/checkpoints/3/1"}}}

	r := &Role{opts: Options{Custody: custodyShards{holders: []string{"h1"}}}}
	skip := r.resumable(context.Background(), job)
	if !strings.Contains(skip, "worker 0's resume state (ckpt-3-1) has 1 pieces held, 2 are needed") {
		t.Fatalf("1 of 2 pieces held: %q", skip)
	}
	r.opts.Custody = custodyShards{holders: []string{"h1", "h2"}}
	if skip := r.resumable(context.Background(), job); skip != "" {
		t.Fatalf("2 of 2 pieces held: %q", skip)
	}
	r.opts.Custody = nil
	if skip := r.resumable(context.Background(), job); !strings.Contains(skip, "cannot read") {
		t.Fatalf("no custody reader: %q", skip)
	}
}
