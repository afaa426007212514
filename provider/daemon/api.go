package daemon

import (
	"context"
	"encoding/hex"
	"github.com/depinchain/depinchain/provider/gpu"
	"net"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/status"
	statusv1 "github.com/depinchain/depinchain/provider/status/v1"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// serveAPI serves the status API, its REST gateway, health checks and
// metrics on the api.listen address.
func (d *Daemon) serveAPI(ctx context.Context, ln net.Listener) error {
	opts := status.Options{Service: statusService{d: d}, Ready: d.notReady, Logger: d.log.With("component", "api")}
	if d.cfg.API.Metrics {
		opts.Metrics = d.metrics.Registry()
	}
	srv, err := status.New(opts)
	if err != nil {
		return err
	}
	return srv.Serve(ctx, ln)
}

// statusService answers the status API from the database, the roles and
// the inventory.
type statusService struct {
	statusv1.UnimplementedStatusServiceServer
	d *Daemon
}

var _ statusv1.StatusServiceServer = statusService{}

func (s statusService) Status(context.Context, *statusv1.StatusRequest) (*statusv1.StatusResponse, error) {
	d := s.d
	st := d.follower.Status()
	res := &statusv1.StatusResponse{
		Version: d.state.version, ChainId: d.cfg.Chain.ChainID, Operator: d.operator, HotKey: d.submitter.HotKeyAddress(),
		StartedAt: timestamppb.New(d.state.startedAt), CursorHeight: st.CursorHeight, ChainHeight: st.ChainHeight, CursorLag: st.Lag,
		WebsocketConnected: st.WebsocketConnected, NotReady: d.notReady(), Runtimes: d.roles.leases.Status().Runtimes,
		Roles: d.roleNames(), LastError: st.LastError,
	}
	res.Ready = len(res.NotReady) == 0
	if msg := d.lastRoleError(); msg != "" {
		res.LastError = msg
	}
	err := d.db.View(func(tx *db.Tx) error { return countRecords(tx, res) })
	return res, dbErr(err)
}

// countRecords fills in the status's counts of jobs, bids, leases and
// checkpoints.
func countRecords(tx *db.Tx, res *statusv1.StatusResponse) error {
	jobs, err := tx.Jobs()
	if err != nil {
		return err
	}
	res.JobsSeen = uint64(len(jobs))
	bids, err := tx.Bids()
	if err != nil {
		return err
	}
	res.BidsPlaced = uint64(len(bids))
	leases, err := tx.Leases()
	if err != nil {
		return err
	}
	for _, l := range leases {
		if l.Status == db.LeaseActive {
			res.LeasesActive++
		}
		cps, err := tx.Checkpoints(l.LeaseID)
		if err != nil {
			return err
		}
		for _, cp := range cps {
			res.CheckpointsSubmitted++
			if cp.Status == db.CheckpointFinalized {
				res.CheckpointsFinalized++
			}
		}
	}
	return nil
}

// lastRoleError is the most recent error any role met, "" when none did. The chain
// refusing every bid of the provider (jailed, tombstoned, bond below the minimum) comes
// first whenever it happened: it holds until the operator acts, and no bid is placed
// meanwhile.
func (d *Daemon) lastRoleError() string {
	b, l, p := d.roles.bidding.Status(), d.roles.leases.Status(), d.roles.disputes.Status()
	if b.Refused != "" {
		return "not bidding: " + b.Refused
	}
	msg, at := b.LastError, b.ErrorAt
	if l.ErrorAt.After(at) {
		msg, at = l.LastError, l.ErrorAt
	}
	if p.ErrorAt.After(at) {
		msg = p.LastError
	}
	return msg
}

func (s statusService) GPUs(context.Context, *statusv1.GPUsRequest) (*statusv1.GPUsResponse, error) {
	d := s.d
	var taken map[string]uint64
	err := d.db.View(func(tx *db.Tx) (err error) {
		taken, err = tx.TakenGPUs()
		return err
	})
	if err != nil {
		return nil, dbErr(err)
	}
	res := &statusv1.GPUsResponse{Driver: d.host.driver}
	for _, g := range d.host.inventory.GPUs() {
		res.Gpus = append(res.Gpus, &statusv1.GPU{
			Index: uint32(g.Index), Uuid: g.UUID, Name: g.Name, Model: d.modelName(g.Name), MemoryMib: g.MemoryMiB,
			UtilizationPercent: g.UtilizationPercent, MemoryUtilizationPercent: g.MemoryUtilizationPercent,
			TemperatureCelsius: g.TemperatureCelsius, PowerMilliwatts: g.PowerMilliwatts,
			EccDoubleBitErrors: g.ECCDoubleBitErrors, Xids: g.XIDs, Healthy: g.Offerable(), Problems: gpuProblems(g),
			LeaseId: taken[g.UUID],
		})
	}
	return res, nil
}

func (s statusService) Jobs(context.Context, *statusv1.JobsRequest) (*statusv1.JobsResponse, error) {
	res := &statusv1.JobsResponse{}
	err := s.d.db.View(func(tx *db.Tx) error {
		jobs, err := tx.Jobs()
		for _, j := range jobs {
			res.Jobs = append(res.Jobs, &statusv1.Job{JobId: j.JobID, SeenHeight: j.SeenHeight, BiddingDeadline: j.BiddingDeadline, Decision: j.Decision})
		}
		return err
	})
	return res, dbErr(err)
}

func (s statusService) Bids(context.Context, *statusv1.BidsRequest) (*statusv1.BidsResponse, error) {
	res := &statusv1.BidsResponse{}
	err := s.d.db.View(func(tx *db.Tx) error {
		bids, err := tx.Bids()
		for _, b := range bids {
			res.Bids = append(res.Bids, &statusv1.Bid{JobId: b.JobID, Price: b.Price, Height: b.Height, TxHash: b.TxHash, Status: string(b.Status)})
		}
		return err
	})
	return res, dbErr(err)
}

func (s statusService) Leases(ctx context.Context, _ *statusv1.LeasesRequest) (*statusv1.LeasesResponse, error) {
	d := s.d
	var leases []db.LeaseRecord
	if err := d.db.View(func(tx *db.Tx) (err error) {
		leases, err = tx.Leases()
		return err
	}); err != nil {
		return nil, dbErr(err)
	}
	res := &statusv1.LeasesResponse{}
	progress := d.roles.leases.Status().Progress
	rounds := map[uint64]*statusv1.LeaseRound{}
	for _, r := range d.roles.rounds.Status() {
		rounds[r.LeaseID] = &statusv1.LeaseRound{Slot: r.Slot, Round: r.Round, Phase: string(r.Phase), Aggregator: r.Aggregator,
			GlobalMismatch: r.GlobalMismatch, TrainSeconds: r.TrainSeconds, WaitSeconds: r.WaitSeconds}
	}
	for _, l := range leases {
		step, running := progress[l.LeaseID]
		if !running {
			step = l.LastCheckpointStep
		}
		res.Leases = append(res.Leases, &statusv1.Lease{
			LeaseId: l.LeaseID, JobId: l.JobID, Worker: l.Worker, Status: string(l.Status), CloseReason: l.CloseReason,
			Runtime: l.Runtime, Dir: l.Dir, CurrentStep: step, TotalSteps: d.totalSteps(ctx, l.JobID),
			LastCheckpointStep: l.LastCheckpointStep, UpdatedHeight: l.UpdatedHeight, CheckpointDeadline: l.CheckpointDeadline,
			GpuUuids: l.GPUs, Problems: l.Problems, Round: rounds[l.LeaseID],
		})
	}
	return res, nil
}

func (s statusService) Checkpoints(_ context.Context, req *statusv1.CheckpointsRequest) (*statusv1.CheckpointsResponse, error) {
	res := &statusv1.CheckpointsResponse{}
	err := s.d.db.View(func(tx *db.Tx) error {
		if _, ok, err := tx.Lease(req.LeaseId); err != nil {
			return err
		} else if !ok {
			return grpcstatus.Errorf(codes.NotFound, "lease %d is not one of this provider's", req.LeaseId)
		}
		cps, err := tx.Checkpoints(req.LeaseId)
		for _, c := range cps {
			res.Checkpoints = append(res.Checkpoints, &statusv1.Checkpoint{
				LeaseId: c.LeaseID, Index: c.Index, StartStep: c.StartStep, EndStep: c.EndStep,
				StateRoot: hex.EncodeToString(c.StateRoot), TraceRoot: hex.EncodeToString(c.TraceRoot), FinalHash: hex.EncodeToString(c.FinalHash),
				TxHash: c.TxHash, Height: c.Height, Status: string(c.Status),
			})
		}
		return err
	})
	if _, ok := grpcstatus.FromError(err); ok && err != nil {
		return nil, err
	}
	return res, dbErr(err)
}

// totalSteps reads a job's length from the chain (the store does not keep specs).
func (d *Daemon) totalSteps(ctx context.Context, jobID uint64) uint64 {
	res, err := d.queries.Job(ctx, &markettypes.QueryJobRequest{JobId: jobID})
	if err != nil {
		return 0
	}
	return res.Job.Spec.TotalSteps
}

func dbErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := grpcstatus.FromError(err); ok {
		return err
	}
	return grpcstatus.Errorf(codes.Internal, "reading the sidecar's store: %v", err)
}

// roleNames are the roles the status API lists: "provider" when the
// sidecar bids, "verifier" in verifier mode, "storage" for the storage role.
func (d *Daemon) roleNames() []string {
	var names []string
	if d.roles.bidding.Status().Bidding {
		names = append(names, "provider")
	}
	if d.roles.disputes.Status().Verifier {
		names = append(names, "verifier")
	}
	if d.roles.audits != nil {
		names = append(names, "auditor")
	}
	if d.roles.storage != nil {
		names = append(names, "storage")
	}
	return names
}

func (s statusService) Disputes(ctx context.Context, _ *statusv1.DisputesRequest) (*statusv1.DisputesResponse, error) {
	challenges, err := s.d.roles.disputes.Disputes(ctx)
	if err != nil {
		return nil, dbErr(err)
	}
	res := &statusv1.DisputesResponse{}
	for _, ch := range challenges {
		outcome := ""
		if ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			outcome = strings.TrimPrefix(ch.Outcome.String(), "CHALLENGE_OUTCOME_")
		}
		res.Disputes = append(res.Disputes, &statusv1.Dispute{
			ChallengeId: ch.Id, Role: dispute.SideOf(ch, s.d.operator).String(), LeaseId: ch.LeaseId, CheckpointIndex: ch.CheckpointIndex,
			Lo: ch.Lo, Hi: ch.Hi, Mid: ch.Mid, Turn: strings.TrimPrefix(ch.Turn.String(), "GAME_TURN_"), Deadline: ch.Deadline,
			Rounds: ch.Rounds, Outcome: outcome, OutcomeReason: ch.OutcomeReason,
		})
	}
	return res, nil
}

func (s statusService) Verifications(context.Context, *statusv1.VerificationsRequest) (*statusv1.VerificationsResponse, error) {
	res := &statusv1.VerificationsResponse{}
	err := s.d.db.View(func(tx *db.Tx) error {
		vs, err := tx.Verifications()
		for _, v := range vs {
			res.Verifications = append(res.Verifications, &statusv1.Verification{
				LeaseId: v.LeaseID, Index: v.Index, JobId: v.JobID, Provider: v.Provider, Result: string(v.Result),
				Detail: v.Detail, ChallengeId: v.ChallengeID, Outcome: v.Outcome, Height: v.Height,
			})
		}
		return err
	})
	return res, dbErr(err)
}

func (s statusService) Storage(context.Context, *statusv1.StorageRequest) (*statusv1.StorageResponse, error) {
	if s.d.roles.storage == nil {
		return &statusv1.StorageResponse{}, nil
	}
	st := s.d.roles.storage.Status()
	res := &statusv1.StorageResponse{
		Enabled: true, PiecesDir: st.PiecesDir, ClaimLocal: st.ClaimLocal, Repair: st.Repair, Height: st.Height,
		Claims: st.Counters.Claims, ChallengesAnswered: st.Counters.ChallengesAnswered, ChallengesMissed: st.Counters.ChallengesMissed,
		FaultsDeclared: st.Counters.FaultsDeclared, Repairs: st.Counters.Repairs, RepairFailures: st.Counters.RepairFailures,
		Slashed: st.Counters.Slashed, LastError: st.LastError,
	}
	for _, p := range st.Pieces {
		res.Pieces = append(res.Pieces, &statusv1.StoragePiece{
			ReplicaId: p.ReplicaID, DatasetId: p.DatasetID, Shard: p.Shard, Piece: p.Piece, File: p.File,
			NextDeadline: p.NextDeadline, Answered: p.Answered, Missed: p.Missed, Repaired: p.Repaired, Problem: p.Problem,
		})
	}
	return res, nil
}

func (s statusService) Audits(ctx context.Context, _ *statusv1.AuditsRequest) (*statusv1.AuditsResponse, error) {
	r := s.d.roles.audits
	if r == nil {
		return &statusv1.AuditsResponse{}, nil
	}
	recs, err := r.Audits()
	if err != nil {
		return nil, dbErr(err)
	}
	st := r.Status()
	res := &statusv1.AuditsResponse{Enabled: true, Queued: uint64(st.Queued), LastError: st.LastError}
	if v, err := stakingexttypes.NewQueryClient(s.d.conn).Verifier(ctx, &stakingexttypes.QueryVerifierRequest{Operator: s.d.operator}); err == nil {
		res.VerifierStatus, res.VerifierBond = v.Verifier.Status.String(), v.Verifier.Bond.String()
	}
	var earned, slashed sdk.Coins
	for _, a := range recs {
		res.Audits = append(res.Audits, &statusv1.AuditAssignment{
			LeaseId: a.LeaseID, Index: a.Index, JobId: a.JobID, Provider: a.Provider, Status: string(a.Status), Fee: a.Fee,
			Deadline: a.Deadline, AssignedHeight: a.AssignedHeight, AnsweredHeight: a.AnsweredHeight, Detail: a.Detail,
			ChallengeId: a.ChallengeID, Settled: a.Settled, Paid: a.Paid, Slashed: a.Slashed,
		})
		res.Assigned++
		switch a.Status {
		case db.AuditAttested:
			res.Attested++
		case db.AuditChallenged:
			res.Challenged++
		case db.AuditReported:
			res.Reported++
		case db.AuditMissed:
			res.Missed++
		}
		if c, err := sdk.ParseCoinNormalized(a.Paid); err == nil && c.IsPositive() {
			earned = earned.Add(c)
		}
		if c, err := sdk.ParseCoinNormalized(a.Slashed); err == nil && c.IsPositive() {
			slashed = slashed.Add(c)
		}
	}
	res.Earned, res.Slashed = earned.String(), slashed.String()
	return res, nil
}

// gpuProblems are the GPU's health problems and, for a GPU the catalogue does
// not map, why it is not offered.
func gpuProblems(g gpu.GPU) []string {
	if g.Unknown == "" {
		return g.Problems
	}
	return append(append([]string(nil), g.Problems...), g.Unknown)
}
