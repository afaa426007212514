// Package roletest holds what the sidecar roles' unit tests share: an
// in-memory stand-in for the chain (Chain), a database in a test's temp
// folder (OpenDB), and a way to feed a role events as the daemon does
// (Deliver).
package roletest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	abci "github.com/cometbft/cometbft/abci/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"

	"github.com/depinchain/depinchain/provider/chain"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// Chain is an in-memory chain: it answers the market and verify queries the
// roles make from maps the test fills, and records every message a role
// submits (committing checkpoints and opening challenges as the chain would,
// without checking them). Fill its maps before a role runs; use the methods
// once it does.
type Chain struct {
	mu          sync.Mutex
	Jobs        map[uint64]markettypes.Job
	LeaseByID   map[uint64]markettypes.Lease
	Cps         map[[2]uint64]verifytypes.Checkpoint
	ChallengeBy map[uint64]verifytypes.Challenge
	// Rounds are training rounds, by (job, round).
	Rounds map[[2]uint64]markettypes.Round
	// TileGames are the phase 2–3 states of challenges, by id.
	TileGames map[uint64]verifytypes.TileGame
	// VerifyParamsValue is what VerifyParams returns (x/verify's defaults from NewChain).
	VerifyParamsValue verifytypes.Params
	// Height is what submitted messages are included at.
	Height int64
	// Fail, when set, makes every submission fail with it.
	Fail error
	sent []sdk.Msg
}

// NewChain returns an empty chain at height 10.
func NewChain() *Chain {
	return &Chain{
		Jobs: map[uint64]markettypes.Job{}, LeaseByID: map[uint64]markettypes.Lease{},
		Cps: map[[2]uint64]verifytypes.Checkpoint{}, ChallengeBy: map[uint64]verifytypes.Challenge{}, Height: 10,
		TileGames: map[uint64]verifytypes.TileGame{}, VerifyParamsValue: verifytypes.DefaultParams(),
		Rounds: map[[2]uint64]markettypes.Round{},
	}
}

func notFound(what string, id ...uint64) error {
	return status.Errorf(codes.NotFound, "%s %v not found", what, id)
}

// Job implements the x/market query.
func (c *Chain) Job(_ context.Context, in *markettypes.QueryJobRequest, _ ...grpc.CallOption) (*markettypes.QueryJobResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.Jobs[in.JobId]
	if !ok {
		return nil, notFound("job", in.JobId)
	}
	return &markettypes.QueryJobResponse{Job: j}, nil
}

// Round implements the x/market query.
func (c *Chain) Round(_ context.Context, in *markettypes.QueryRoundRequest, _ ...grpc.CallOption) (*markettypes.QueryRoundResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd, ok := c.Rounds[[2]uint64{in.JobId, in.Round}]
	if !ok {
		return nil, notFound("round", in.JobId, in.Round)
	}
	return &markettypes.QueryRoundResponse{Round: rd}, nil
}

// Lease implements the x/market query.
func (c *Chain) Lease(_ context.Context, in *markettypes.QueryLeaseRequest, _ ...grpc.CallOption) (*markettypes.QueryLeaseResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.LeaseByID[in.LeaseId]
	if !ok {
		return nil, notFound("lease", in.LeaseId)
	}
	return &markettypes.QueryLeaseResponse{Lease: l}, nil
}

// Leases implements the x/market query (by provider and job, one page).
func (c *Chain) Leases(_ context.Context, in *markettypes.QueryLeasesRequest, _ ...grpc.CallOption) (*markettypes.QueryLeasesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := &markettypes.QueryLeasesResponse{Pagination: &query.PageResponse{}}
	for _, l := range c.LeaseByID {
		if (in.Provider == "" || l.Provider == in.Provider) && (in.JobId == 0 || l.JobId == in.JobId) {
			res.Leases = append(res.Leases, l)
		}
	}
	slices.SortFunc(res.Leases, func(a, b markettypes.Lease) int { return int(a.Id) - int(b.Id) })
	return res, nil
}

// Checkpoint implements the x/verify query.
func (c *Chain) Checkpoint(_ context.Context, in *verifytypes.QueryCheckpointRequest, _ ...grpc.CallOption) (*verifytypes.QueryCheckpointResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp, ok := c.Cps[[2]uint64{in.LeaseId, in.Index}]
	if !ok {
		return nil, notFound("checkpoint", in.LeaseId, in.Index)
	}
	return &verifytypes.QueryCheckpointResponse{Checkpoint: cp}, nil
}

// Checkpoints implements the x/verify query (by lease).
func (c *Chain) Checkpoints(_ context.Context, in *verifytypes.QueryCheckpointsRequest, _ ...grpc.CallOption) (*verifytypes.QueryCheckpointsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := &verifytypes.QueryCheckpointsResponse{}
	for k, cp := range c.Cps {
		if k[0] == in.LeaseId {
			res.Checkpoints = append(res.Checkpoints, cp)
		}
	}
	return res, nil
}

// Challenge implements the x/verify query.
func (c *Chain) Challenge(_ context.Context, in *verifytypes.QueryChallengeRequest, _ ...grpc.CallOption) (*verifytypes.QueryChallengeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.ChallengeBy[in.ChallengeId]
	if !ok {
		return nil, notFound("challenge", in.ChallengeId)
	}
	res := &verifytypes.QueryChallengeResponse{Challenge: ch}
	if tg, ok := c.TileGames[in.ChallengeId]; ok {
		res.TileGame = &tg
	}
	return res, nil
}

// VerifyParams implements the x/verify params query.
func (c *Chain) VerifyParams(_ context.Context, _ *verifytypes.QueryParamsRequest, _ ...grpc.CallOption) (*verifytypes.QueryParamsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &verifytypes.QueryParamsResponse{Params: c.VerifyParamsValue}, nil
}

// Challenges implements the x/verify query (by checkpoint).
func (c *Chain) Challenges(_ context.Context, in *verifytypes.QueryChallengesRequest, _ ...grpc.CallOption) (*verifytypes.QueryChallengesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := &verifytypes.QueryChallengesResponse{}
	for _, ch := range c.ChallengeBy {
		open := ch.Outcome == verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED
		if ch.LeaseId == in.LeaseId && ch.CheckpointIndex == in.CheckpointIndex && (open || !in.OpenOnly) {
			res.Challenges = append(res.Challenges, ch)
		}
	}
	return res, nil
}

// Submit records msg as included at Height. A MsgSubmitCheckpoint becomes a
// pending checkpoint, a MsgChallenge an open challenge (its id in the
// result's EventChallengeOpened).
func (c *Chain) Submit(_ context.Context, msg sdk.Msg) (*chain.TxResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, msg)
	if c.Fail != nil {
		return nil, c.Fail
	}
	res := &chain.TxResult{Hash: fmt.Sprintf("TX%d", len(c.sent)), Height: c.Height}
	switch m := msg.(type) {
	case *verifytypes.MsgSubmitCheckpoint:
		lease := c.LeaseByID[m.LeaseId]
		c.Cps[[2]uint64{m.LeaseId, m.Index}] = verifytypes.Checkpoint{
			LeaseId: m.LeaseId, Index: m.Index, JobId: lease.JobId, Provider: m.Provider, StartStep: m.StartStep, EndStep: m.EndStep,
			StateRoot: m.StateRoot, TraceRoot: m.TraceRoot, FinalHash: m.FinalHash, Uri: m.Uri,
			SubmittedHeight: c.Height, Status: verifytypes.CHECKPOINT_STATUS_PENDING,
		}
	case *verifytypes.MsgChallenge:
		id := uint64(len(c.ChallengeBy) + 1)
		cp := c.Cps[[2]uint64{m.LeaseId, m.CheckpointIndex}]
		c.ChallengeBy[id] = verifytypes.Challenge{Id: id, LeaseId: m.LeaseId, CheckpointIndex: m.CheckpointIndex,
			Provider: cp.Provider, Challenger: m.Challenger, Lo: cp.StartStep, Hi: cp.EndStep}
		res.Events = []abci.Event{{Type: "depinchain.verify.v1.EventChallengeOpened",
			Attributes: []abci.EventAttribute{{Key: "challenge_id", Value: fmt.Sprintf("%q", fmt.Sprint(id))}}}}
	}
	return res, nil
}

// Sent returns the messages submitted so far.
func (c *Chain) Sent() []sdk.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// SentOf returns the submitted messages of type T.
func SentOf[T sdk.Msg](c *Chain) []T {
	var out []T
	for _, m := range c.Sent() {
		if t, ok := m.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
