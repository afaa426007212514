package jobview

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// shards serves fixed custody objects by id; other queries panic.
type shards struct {
	shardregistrytypes.QueryClient
	byID map[string]*shardregistrytypes.QueryShardResponse
}

func (s shards) Shard(_ context.Context, r *shardregistrytypes.QueryShardRequest, _ ...grpc.CallOption) (*shardregistrytypes.QueryShardResponse, error) {
	if res, ok := s.byID[r.DatasetId]; ok {
		return res, nil
	}
	return nil, status.Error(codes.NotFound, "no such dataset")
}

// Each checkpoint's custody says how many of its k+m pieces are proven and by whom
// (terminated holders left out), whether it is final, and whether a pending one waits
// on custody (fewer than k proven) or only on its window; a checkpoint without a
// custody object is left out.
func TestJobViewCustodyAndWhetherFinalityWaitsOnIt(t *testing.T) {
	piece := func(holder string, st shardregistrytypes.ReplicaStatus) shardregistrytypes.Replica {
		return shardregistrytypes.Replica{Holder: holder, Status: st}
	}
	f := &fakeChain{
		job: markettypes.Job{Id: 4, State: markettypes.JOB_STATE_LEASED, Deposited: coin(100),
			Spec: markettypes.JobSpec{Workers: 1, TotalSteps: 64, Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER},
				Custody: &markettypes.CustodySpec{DataPieces: 2, ParityPieces: 1, RetainCheckpoints: time.Hour}}},
		escrow: markettypes.QueryEscrowResponse{Deposited: coin(100), Unspent: coin(100), Pending: coin(0),
			Withdrawable: coin(0), Withdrawn: coin(0), AuditFees: coin(0), Compensation: coin(0)},
		leases: []markettypes.Lease{{Id: 2, State: markettypes.LEASE_STATE_ACTIVE}},
		checkpoints: map[uint64][]verifytypes.Checkpoint{2: {
			{LeaseId: 2, Index: 0, EndStep: 16, Status: verifytypes.CHECKPOINT_STATUS_FINAL, CustodyId: "ckpt-2-0", CustodyDeadline: 130},
			{LeaseId: 2, Index: 1, EndStep: 32, Status: verifytypes.CHECKPOINT_STATUS_PENDING, CustodyId: "ckpt-2-1", CustodyDeadline: 150},
			{LeaseId: 2, Index: 2, EndStep: 48, Status: verifytypes.CHECKPOINT_STATUS_PENDING, CustodyId: "ckpt-2-2", CustodyDeadline: 170},
			{LeaseId: 2, Index: 3, EndStep: 64, Status: verifytypes.CHECKPOINT_STATUS_PENDING},
		}},
	}
	src := newSource(f)
	src.Shards = shards{byID: map[string]*shardregistrytypes.QueryShardResponse{
		"ckpt-2-0": {Shard: shardregistrytypes.ShardView{Live: 2, Target: 3, MinLive: 2},
			Replicas: []shardregistrytypes.Replica{piece("h1", shardregistrytypes.REPLICA_STATUS_ACTIVE), piece("h2", shardregistrytypes.REPLICA_STATUS_TERMINATED), piece("h3", shardregistrytypes.REPLICA_STATUS_ACTIVE)}},
		"ckpt-2-1": {Shard: shardregistrytypes.ShardView{Live: 1, Target: 3, MinLive: 2},
			Replicas: []shardregistrytypes.Replica{piece("h2", shardregistrytypes.REPLICA_STATUS_ACTIVE)}},
		"ckpt-2-2": {Shard: shardregistrytypes.ShardView{Live: 3, Target: 3, MinLive: 2},
			Replicas: []shardregistrytypes.Replica{piece("h1", shardregistrytypes.REPLICA_STATUS_ACTIVE), piece("h2", shardregistrytypes.REPLICA_STATUS_ACTIVE), piece("h3", shardregistrytypes.REPLICA_STATUS_ACTIVE)}},
	}}
	v, err := src.Job(context.Background(), 4)
	require.NoError(t, err)
	require.Equal(t, []Custody{
		{LeaseID: 2, Index: 0, Object: "ckpt-2-0", Proven: 2, Pieces: 3, Needed: 2, Holders: []string{"h1", "h3"}, Final: true, CustodyDeadline: 130},
		{LeaseID: 2, Index: 1, Object: "ckpt-2-1", Proven: 1, Pieces: 3, Needed: 2, Holders: []string{"h2"}, WaitsOnCustody: true, CustodyDeadline: 150},
		{LeaseID: 2, Index: 2, Object: "ckpt-2-2", Proven: 3, Pieces: 3, Needed: 2, Holders: []string{"h1", "h2", "h3"}, CustodyDeadline: 170},
	}, v.Custody)
}
