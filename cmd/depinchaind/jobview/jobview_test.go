package jobview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdkmath "cosmossdk.io/math"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/types/query"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/checkpoint"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// fakeChain answers the queries a View needs from fixed values.
type fakeChain struct {
	job         markettypes.Job
	escrow      markettypes.QueryEscrowResponse
	leases      []markettypes.Lease
	checkpoints map[uint64][]verifytypes.Checkpoint
	challenges  map[uint64][]verifytypes.Challenge
	bids        []markettypes.Bid
	bidQueries  int
	// rounds are served two a page; commits by round.
	rounds  []markettypes.Round
	commits map[uint64][]markettypes.RoundCommit
}

func (f market) Rounds(_ context.Context, r *markettypes.QueryRoundsRequest, _ ...grpc.CallOption) (*markettypes.QueryRoundsResponse, error) {
	from := 0
	if len(r.Pagination.GetKey()) > 0 {
		from = int(r.Pagination.Key[0])
	}
	to := min(from+2, len(f.rounds))
	resp := &markettypes.QueryRoundsResponse{Rounds: f.rounds[from:to], Pagination: &query.PageResponse{}}
	if to < len(f.rounds) {
		resp.Pagination.NextKey = []byte{byte(to)}
	}
	return resp, nil
}

func (f market) RoundCommits(_ context.Context, r *markettypes.QueryRoundCommitsRequest, _ ...grpc.CallOption) (*markettypes.QueryRoundCommitsResponse, error) {
	return &markettypes.QueryRoundCommitsResponse{Commits: f.commits[r.Round]}, nil
}

func (f market) Bids(_ context.Context, r *markettypes.QueryBidsRequest, _ ...grpc.CallOption) (*markettypes.QueryBidsResponse, error) {
	f.bidQueries++
	return &markettypes.QueryBidsResponse{Bids: f.bids}, nil
}

func (f market) Job(context.Context, *markettypes.QueryJobRequest, ...grpc.CallOption) (*markettypes.QueryJobResponse, error) {
	return &markettypes.QueryJobResponse{Job: f.job}, nil
}

func (f market) Escrow(context.Context, *markettypes.QueryEscrowRequest, ...grpc.CallOption) (*markettypes.QueryEscrowResponse, error) {
	return &f.escrow, nil
}

func (f market) Leases(_ context.Context, r *markettypes.QueryLeasesRequest, _ ...grpc.CallOption) (*markettypes.QueryLeasesResponse, error) {
	return &markettypes.QueryLeasesResponse{Leases: f.leases}, nil
}

func (f verify) Checkpoints(_ context.Context, r *verifytypes.QueryCheckpointsRequest, _ ...grpc.CallOption) (*verifytypes.QueryCheckpointsResponse, error) {
	return &verifytypes.QueryCheckpointsResponse{Checkpoints: f.checkpoints[r.LeaseId]}, nil
}

func (f verify) Challenges(_ context.Context, r *verifytypes.QueryChallengesRequest, _ ...grpc.CallOption) (*verifytypes.QueryChallengesResponse, error) {
	return &verifytypes.QueryChallengesResponse{Challenges: f.challenges[r.LeaseId]}, nil
}

// market and verify serve fakeChain's values; other queries panic.
type market struct {
	markettypes.QueryClient
	*fakeChain
}

type verify struct {
	verifytypes.QueryClient
	*fakeChain
}

func newSource(f *fakeChain) *Source { return New(market{fakeChain: f}, verify{fakeChain: f}, nil) }

// serveStates serves chunk 0 of each state, with its proof, at
// /checkpoints/<lease>/<index>/chunks/0 as a sidecar does.
func serveStates(t *testing.T, states map[checkpoint.Ref][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for ref, st := range states {
			if r.URL.Path == checkpoint.URI("", ref)+"/chunks/0" {
				data, proof, err := merkle.ProofFromReaderAt(bytes.NewReader(st), int64(len(st)), exact.ChunkSize, 0)
				require.NoError(t, err)
				_ = json.NewEncoder(w).Encode(checkpoint.ChunkProof{Chunks: uint64(len(st) / exact.ChunkSize), Data: data, Proof: merkle.HashesToBytes(proof)})
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func coin(n int64) sdk.Coin { return sdk.NewInt64Coin("udpin", n) }

func exactState(t *testing.T, step uint64, lossQ int64) []byte {
	st, err := exact.Init(exact.ReferenceConfig(), []byte("seed"))
	require.NoError(t, err)
	st.Step, st.Loss = step, lossQ
	return st.Encode()
}

// A reopened worker's two leases, their checkpoints' losses proven from the
// provider (and one whose proof fails shown self-reported, with why), a
// dispute, money and the rate and ETA of the active lease.
func TestJobViewAssemblesAReopenedJob(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s10, s20, s30 := exactState(t, 10, 4<<30), exactState(t, 20, 3<<30), exactState(t, 30, 2<<30)
	srv := serveStates(t, map[checkpoint.Ref][]byte{{LeaseID: 1, Index: 0}: s10, {LeaseID: 2, Index: 0}: s20, {LeaseID: 2, Index: 1}: s30})
	root := func(b []byte) []byte { r := exact.StateRoot(b); return r[:] }
	cp := func(lease, index, start, end uint64, stateRoot []byte, st verifytypes.CheckpointStatus) verifytypes.Checkpoint {
		return verifytypes.Checkpoint{LeaseId: lease, Index: index, JobId: 7, StartStep: start, EndStep: end, StateRoot: stateRoot,
			Uri: checkpoint.URI(srv.URL, checkpoint.Ref{LeaseID: lease, Index: index}), Status: st, Claim: coin(5),
			Metrics: []verifytypes.Metric{{Name: "loss", Value: "9.5"}}}
	}
	f := &fakeChain{
		job: markettypes.Job{Id: 7, Owner: "owner", State: markettypes.JOB_STATE_LEASED, Deposited: coin(1000),
			Spec: markettypes.JobSpec{Name: "tiny", Workers: 1, TotalSteps: 100, CheckpointInterval: 10,
				Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_REFERENCE}},
			Progress: []markettypes.WorkerProgress{{Worker: 0, Step: 30}}},
		escrow: markettypes.QueryEscrowResponse{Deposited: coin(1000), Unspent: coin(900), Pending: coin(10),
			Withdrawable: coin(5), Withdrawn: coin(15), AuditFees: coin(3), Compensation: coin(0)},
		leases: []markettypes.Lease{
			// The first lease's second checkpoint was rejected: 8 of its 13 went back to the job.
			{Id: 1, JobId: 7, Provider: "p1", State: markettypes.LEASE_STATE_CLOSED, CloseReason: markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE,
				Accrued: coin(13), Pending: coin(0), Withdrawable: coin(0), Withdrawn: coin(5)},
			{Id: 2, JobId: 7, Provider: "p2", State: markettypes.LEASE_STATE_ACTIVE, ResumeStep: 10,
				StartTime: now.Add(-2 * time.Hour), CheckpointDeadline: 77, StepsPerHour: 40, PricePerStep: sdkmath.LegacyNewDec(2),
				ClaimedStep: 30, Accrued: coin(30), Pending: coin(10), Withdrawable: coin(5), Withdrawn: coin(15)},
		},
		checkpoints: map[uint64][]verifytypes.Checkpoint{
			1: {cp(1, 0, 0, 10, root(s10), verifytypes.CHECKPOINT_STATUS_FINAL)},
			2: {cp(2, 0, 10, 20, root(s20), verifytypes.CHECKPOINT_STATUS_FINAL),
				cp(2, 1, 20, 30, bytes.Repeat([]byte{9}, 32), verifytypes.CHECKPOINT_STATUS_PENDING)}, // a root the served state does not match
		},
		challenges: map[uint64][]verifytypes.Challenge{2: {{Id: 4, LeaseId: 2, CheckpointIndex: 1, Lo: 20, Hi: 30, Rounds: 2, Turn: verifytypes.GAME_TURN_PROVIDER}}},
	}
	src := newSource(f)
	src.Now = func() time.Time { return now }
	v, err := src.Job(context.Background(), 7)
	require.NoError(t, err)

	require.Len(t, v.Leases, 2)
	require.Equal(t, "LEASE_CLOSE_REASON_NON_PERFORMANCE", v.Leases[0].CloseReason)
	require.Equal(t, Money{Denom: "udpin", Deposited: "1000", Escrowed: "900", Pending: "10", Paid: "20", AuditFees: "3", Compensation: "0", StorageEscrowed: "0", StoragePaid: "0", Refunded: "0"}, v.Money)
	require.Len(t, v.Checkpoints, 3)
	require.Equal(t, []LossPoint{{Step: 10, Nats: 4, Source: LossVerified}, {Step: 20, Nats: 3, Source: LossVerified}, {Step: 30, Nats: 9.5, Source: LossSelfReported}}, v.Loss)
	require.Contains(t, v.Checkpoints[2].LossError, "verification failed")
	require.Equal(t, []Dispute{{ID: 4, LeaseID: 2, Checkpoint: 1, Phase: "GAME_TURN_PROVIDER", ToMove: "provider", Rounds: 2, Lo: 20, Hi: 30}}, v.Disputes)

	require.Len(t, v.Workers, 1)
	w := v.Workers[0]
	require.Equal(t, uint64(30), w.Step)
	require.Equal(t, "p2", w.Provider)
	require.Equal(t, int64(77), w.CheckpointDeadline)
	require.InDelta(t, 10, w.StepsPerHour, 1e-9) // 20 steps since the resume at 10, in 2 h
	require.InDelta(t, 7*3600, w.ETASeconds, 1e-6)
	require.Equal(t, LossPoint{Step: 30, Nats: 9.5, Source: LossSelfReported}, *w.LatestLoss)
	// Pay for work: the checkpointed rate (20 steps in 2 h) against the committed 40, and
	// the worker's money over both leases.
	require.Equal(t, uint64(40), w.CommittedStepsPerHour)
	require.Equal(t, uint64(30), w.CheckpointedStep)
	require.InDelta(t, 10, w.CheckpointedStepsPerHour, 1e-9)
	require.Equal(t, "2.000000000000000000", w.PricePerStep)
	require.Equal(t, "25", w.Paid)
	require.Equal(t, "10", w.Pending)
	require.Equal(t, "8", w.Refunded)
	require.Equal(t, "8", v.Leases[0].Refunded)
	require.Equal(t, uint64(40), v.Leases[1].StepsPerHour)
}

// A container job's loss is the checkpoint's metric, labelled
// self-reported, and no provider is asked; a closed job shows its refund.
func TestJobViewContainerLossIsSelfReported(t *testing.T) {
	f := &fakeChain{
		job: markettypes.Job{Id: 8, State: markettypes.JOB_STATE_FAILED, Deposited: coin(100),
			Spec: markettypes.JobSpec{Workers: 1, TotalSteps: 10, Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER}}},
		escrow: markettypes.QueryEscrowResponse{Deposited: coin(100), Unspent: coin(0), Pending: coin(0),
			Withdrawable: coin(0), Withdrawn: coin(30), AuditFees: coin(0), Compensation: coin(0)},
		leases: []markettypes.Lease{{Id: 3, State: markettypes.LEASE_STATE_CLOSED}},
		checkpoints: map[uint64][]verifytypes.Checkpoint{3: {{LeaseId: 3, EndStep: 5, Uri: "http://127.0.0.1:1/checkpoints/3/0",
			Metrics: []verifytypes.Metric{{Name: "loss", Value: "2.25"}}}}},
	}
	v, err := newSource(f).Job(context.Background(), 8)
	require.NoError(t, err)
	require.False(t, v.Verifiable)
	require.Equal(t, []LossPoint{{Step: 5, Nats: 2.25, Source: LossSelfReported}}, v.Loss)
	require.Empty(t, v.Checkpoints[0].LossError)
	require.Equal(t, "70", v.Money.Refunded)

	// Storage paid to custody holders, and what is still reserved for them, is not refunded.
	f.job.StorageFees, f.job.StorageEscrow = coin(12), coin(8)
	v, err = newSource(f).Job(context.Background(), 8)
	require.NoError(t, err)
	require.Equal(t, "12", v.Money.StoragePaid)
	require.Equal(t, "8", v.Money.StorageEscrowed)
	require.Equal(t, "50", v.Money.Refunded)
}

// An open job shows its auction's bids cheapest per step first (not cheapest per
// GPU-hour: the faster provider wins), ties to the earlier bid; a reopened job's
// earlier lease shows as the bid that won it.
func TestJobViewShowsOpenBidsAndTheBidsThatWon(t *testing.T) {
	price := func(n int64) sdk.Coin { return sdk.NewInt64Coin("udpin", n) }
	f := &fakeChain{
		job: markettypes.Job{Id: 9, State: markettypes.JOB_STATE_OPEN, BiddingDeadline: 120, Deposited: coin(1000),
			Spec: markettypes.JobSpec{Workers: 1, TotalSteps: 100, Gpu: markettypes.GPURequirement{PerWorker: 2},
				Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER}}},
		escrow: markettypes.QueryEscrowResponse{Deposited: coin(1000)},
		leases: []markettypes.Lease{{Id: 5, JobId: 9, Worker: 0, Provider: "old", State: markettypes.LEASE_STATE_CLOSED,
			PricePerGpuHour: price(300), Gpus: 2, StepsPerHour: 60, PricePerStep: markettypes.PricePerStep(sdkmath.NewInt(300), 2, 60),
			Runtime: "container", StartHeight: 40}},
		bids: []markettypes.Bid{
			// 100 × 2 ÷ 40 = 5 per step
			{JobId: 9, Provider: "slow-cheap", PricePerGpuHour: price(100), StepsPerHour: 40, Sequence: 1, CreatedHeight: 101, Runtime: "container"},
			// 300 × 2 ÷ 200 = 3 per step, bid later
			{JobId: 9, Provider: "fast-late", PricePerGpuHour: price(300), StepsPerHour: 200, Sequence: 3, CreatedHeight: 103},
			// 150 × 2 ÷ 100 = 3 per step, bid earlier
			{JobId: 9, Provider: "fast-early", PricePerGpuHour: price(150), StepsPerHour: 100, Sequence: 2, CreatedHeight: 102},
		},
	}
	v, err := newSource(f).Job(context.Background(), 9)
	require.NoError(t, err)
	require.Equal(t, int64(120), v.BiddingDeadline)
	require.Equal(t, []Bid{
		{Provider: "fast-early", PricePerGPUHour: "150udpin", GPUs: 2, StepsPerHour: 100, PricePerStep: "3udpin", Status: BidOpen, CreatedHeight: 102},
		{Provider: "fast-late", PricePerGPUHour: "300udpin", GPUs: 2, StepsPerHour: 200, PricePerStep: "3udpin", Status: BidOpen, CreatedHeight: 103},
		{Provider: "slow-cheap", PricePerGPUHour: "100udpin", GPUs: 2, StepsPerHour: 40, PricePerStep: "5udpin", Runtime: "container", Status: BidOpen, CreatedHeight: 101},
		{Provider: "old", PricePerGPUHour: "300udpin", GPUs: 2, StepsPerHour: 60, PricePerStep: "10udpin", Runtime: "container", Status: BidWon, CreatedHeight: 40, LeaseID: 5},
	}, v.Bids)

	// Once leased the auction is over and its bids are gone from the chain: the
	// view does not ask for them and shows the winners only, with a fractional
	// price per step written exactly.
	f.job.State, f.job.BiddingDeadline = markettypes.JOB_STATE_LEASED, 0
	f.leases = append(f.leases, markettypes.Lease{Id: 6, JobId: 9, Provider: "fast-early", State: markettypes.LEASE_STATE_ACTIVE,
		PricePerGpuHour: price(150), Gpus: 2, StepsPerHour: 120, PricePerStep: markettypes.PricePerStep(sdkmath.NewInt(150), 2, 120)})
	asked := f.bidQueries
	require.Equal(t, 1, asked)
	v, err = newSource(f).Job(context.Background(), 9)
	require.NoError(t, err)
	require.Equal(t, asked, f.bidQueries)
	require.Zero(t, v.BiddingDeadline)
	require.Len(t, v.Bids, 2)
	require.Equal(t, BidWon, v.Bids[1].Status)
	require.Equal(t, uint64(6), v.Bids[1].LeaseID)
	require.Equal(t, "2.5udpin", v.Bids[1].PricePerStep)
}

// A sync job's rounds, read over several pages: who entered, missed and was excluded,
// and what became of each commit's claim — paid in a final round (the claim the chain
// zeroed when it paid is read from the round-end checkpoint), returned for a worker
// convicted or left out, pending while the global is not final.
func TestJobViewShowsASyncJobsRounds(t *testing.T) {
	commit := func(round uint64, worker uint32, lease uint64, claim int64) markettypes.RoundCommit {
		return markettypes.RoundCommit{JobId: 11, Round: round, Worker: worker, LeaseId: lease, Provider: fmt.Sprintf("p%d", worker),
			CommittedHeight: int64(10*round) + int64(worker) + 5, Claim: coin(claim)}
	}
	excluded := commit(1, 2, 23, 0)
	excluded.Excluded, excluded.ExcludedReason = true, "pseudo-gradient proven wrong"
	f := &fakeChain{
		job: markettypes.Job{Id: 11, State: markettypes.JOB_STATE_LEASED, Round: 2, Deposited: coin(1000),
			Spec: markettypes.JobSpec{Workers: 3, TotalSteps: 40, CheckpointInterval: 10,
				Workload: markettypes.Workload{Kind: markettypes.WORKLOAD_KIND_CONTAINER},
				Sync:     &markettypes.SyncSpec{Every: 10, OuterLrQ30: 7 << 27, OuterMomentumQ30: 9 << 27, TopK: 64}}},
		escrow: markettypes.QueryEscrowResponse{Deposited: coin(1000)},
		leases: []markettypes.Lease{{Id: 21, JobId: 11, Worker: 0, Provider: "p0", State: markettypes.LEASE_STATE_ACTIVE}},
		// Lease 21's round-0 checkpoint ends at step 10 and keeps the claim it made.
		checkpoints: map[uint64][]verifytypes.Checkpoint{21: {{LeaseId: 21, Index: 0, EndStep: 10, Claim: coin(50)}}},
		rounds: []markettypes.Round{
			{JobId: 11, Round: 0, State: markettypes.ROUND_STATE_FINAL, OpenedHeight: 1, Workers: []uint32{0, 1, 2}, Entered: []uint32{0, 2},
				Missed: []uint32{1}, Aggregator: "p2", NextGlobalRoot: []byte{0xab, 0xcd, 0xef, 1, 2, 3, 4, 5}, ChallengeDeadline: 18},
			{JobId: 11, Round: 1, State: markettypes.ROUND_STATE_CHALLENGE, OpenedHeight: 12, Workers: []uint32{0, 1, 2},
				Entered: []uint32{0, 1}, Aggregator: "p0", NextGlobalRoot: []byte{1, 2}, ChallengeDeadline: 30},
			{JobId: 11, Round: 2, State: markettypes.ROUND_STATE_OPEN, OpenedHeight: 22, Deadline: 32, Workers: []uint32{0, 1, 2}},
		},
		commits: map[uint64][]markettypes.RoundCommit{
			0: {commit(0, 0, 21, 0), commit(0, 2, 23, 0)},
			1: {commit(1, 0, 21, 50), commit(1, 1, 22, 50), excluded},
			2: {commit(2, 0, 21, 50)},
		},
	}
	v, err := newSource(f).Job(context.Background(), 11)
	require.NoError(t, err)
	require.Equal(t, &Sync{Every: 10, OuterLR: 0.875, OuterMomentum: 1.125, TopK: 64, Round: 2, TotalRounds: 4}, v.Sync)
	require.Len(t, v.Rounds, 3)

	r0 := v.Rounds[0]
	require.Equal(t, "FINAL", r0.State)
	require.Equal(t, []uint32{0, 2}, r0.Entered)
	require.Equal(t, []uint32{1}, r0.Missed)
	require.Equal(t, []uint32{}, r0.Excluded)
	require.Equal(t, "abcdef010203", r0.NextGlobalRoot)
	require.Equal(t, RoundCommit{Worker: 0, LeaseID: 21, Provider: "p0", CommittedHeight: 5, Claim: "50udpin", Pay: PayPaid}, r0.Commits[0])
	require.Equal(t, PayPaid, r0.Commits[1].Pay)
	require.Equal(t, "0udpin", r0.Commits[1].Claim) // no checkpoint of lease 23 in view

	r1 := v.Rounds[1]
	require.Equal(t, "CHALLENGE", r1.State)
	require.Equal(t, []uint32{2}, r1.Excluded)
	require.Equal(t, []string{PayPending, PayPending, PayReturned}, []string{r1.Commits[0].Pay, r1.Commits[1].Pay, r1.Commits[2].Pay})
	require.Equal(t, "pseudo-gradient proven wrong", r1.Commits[2].ExcludedReason)

	r2 := v.Rounds[2]
	require.Equal(t, "OPEN", r2.State)
	require.Equal(t, int64(32), r2.Deadline)
	require.Equal(t, []uint32{}, r2.Entered)
	require.Equal(t, PayPending, r2.Commits[0].Pay)

	// A job that closed before round 2's global was committed returns its claims.
	f.job.State = markettypes.JOB_STATE_FAILED
	v, err = newSource(f).Job(context.Background(), 11)
	require.NoError(t, err)
	require.Equal(t, PayReturned, v.Rounds[2].Commits[0].Pay)
	require.Equal(t, PayPending, v.Rounds[1].Commits[0].Pay)

	// A job without sync has no rounds and asks for none.
	f.job.Spec.Sync, f.rounds = nil, nil
	v, err = newSource(f).Job(context.Background(), 11)
	require.NoError(t, err)
	require.Nil(t, v.Sync)
	require.Nil(t, v.Rounds)
}
