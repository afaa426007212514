package jobview

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardregistrytypes "github.com/depinchain/depinchain/x/shardregistry/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Custody is the custody of one checkpoint's state: its pieces' holders on chain.
type Custody struct {
	LeaseID uint64 `json:"lease_id"`
	Index   uint64 `json:"index"`
	Object  string `json:"object"`
	// Proven is how many pieces have an active holder (each proved its piece when it
	// claimed it and keeps proving it every storage period), of Pieces (k+m); the state
	// can be rebuilt while Proven ≥ Needed (k).
	Proven  uint32   `json:"proven"`
	Pieces  uint32   `json:"pieces"`
	Needed  uint32   `json:"needed"`
	Holders []string `json:"holders"`
	// Final is the checkpoint's finality; WaitsOnCustody says a pending checkpoint
	// cannot be final yet for want of proven pieces (Proven < Needed), whatever its
	// challenge window; it is withheld if still short at CustodyDeadline.
	Final           bool  `json:"final"`
	WaitsOnCustody  bool  `json:"waits_on_custody"`
	CustodyDeadline int64 `json:"custody_deadline"`
}

// custody reads the custody object of every checkpoint of a job with a custody section.
func (s *Source) custody(ctx context.Context, job markettypes.Job, cps []Checkpoint) ([]Custody, error) {
	if s.Shards == nil || job.Spec.Custody == nil {
		return nil, nil
	}
	var out []Custody
	for _, cp := range cps {
		id := shardregistrytypes.CustodyDatasetID(cp.LeaseID, cp.Index)
		res, err := s.Shards.Shard(ctx, &shardregistrytypes.QueryShardRequest{DatasetId: id, Index: 0})
		if status.Code(err) == codes.NotFound {
			continue // submitted before the job's custody applied, or not adjudicable
		}
		if err != nil {
			return nil, fmt.Errorf("custody of checkpoint %d/%d: %w", cp.LeaseID, cp.Index, err)
		}
		c := Custody{LeaseID: cp.LeaseID, Index: cp.Index, Object: id, Proven: res.Shard.Live, Pieces: res.Shard.Target,
			Needed: res.Shard.MinLive, Holders: []string{}, Final: cp.Final, CustodyDeadline: cp.CustodyDeadline}
		c.WaitsOnCustody = cp.Status == verifytypes.CHECKPOINT_STATUS_PENDING.String() && c.Proven < c.Needed
		for _, r := range res.Replicas {
			if r.Status == shardregistrytypes.REPLICA_STATUS_ACTIVE {
				c.Holders = append(c.Holders, r.Holder)
			}
		}
		out = append(out, c)
	}
	return out, nil
}
