// Package audits is the provider sidecar's audits role: the operator as a bonded
// verifier that x/verify draws to audit other providers' checkpoints.
//
// For every checkpoint of an adjudicable job the chain draws auditors from the
// registered verifiers (EventAuditAssigned). Each must answer before the checkpoint's
// challenge window closes: attest (commit the trace root of its own re-execution, which
// must be the provider's), challenge (a re-execution that differs), or report that the
// provider does not serve the state the checkpoint starts from. The role answers every
// assignment of the operator with the disputes role's re-execution (the same one
// verifier mode runs), ahead of verifier-mode sampling: assignments are paid from the
// job's escrow and missed ones are slashed, samples are neither. A challenge it opens
// is played by the disputes role.
//
// At start it registers the operator as a verifier (audits.register_bond) or puts it
// back into the audit set (audits.reactivate), and picks up every open assignment
// from the chain. What it did is kept in the database (db.AuditRecord) and served by
// the status API (/v1/audits) and the metrics.
package audits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/config"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/internal/rolekit"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// RequiredGrants are the messages the audits role sends on the operator's behalf,
// besides chain.RequiredGrants: its answers, the game moves of the challenges it opens
// (played by the disputes role), and its registration in the audit set.
var RequiredGrants = []string{
	sdk.MsgTypeURL(&verifytypes.MsgAttest{}),
	sdk.MsgTypeURL(&verifytypes.MsgReportUnavailable{}),
	sdk.MsgTypeURL(&verifytypes.MsgChallenge{}),
	sdk.MsgTypeURL(&verifytypes.MsgRespond{}),
	sdk.MsgTypeURL(&verifytypes.MsgStep{}),
	sdk.MsgTypeURL(&verifytypes.MsgClaimTimeout{}),
	sdk.MsgTypeURL(&verifytypes.MsgProveTile{}),
	sdk.MsgTypeURL(&stakingexttypes.MsgRegisterVerifier{}),
	sdk.MsgTypeURL(&stakingexttypes.MsgActivateVerifier{}),
}

// queueSize bounds the assignments waiting; past it they wait for the next start.
const queueSize = 1024

// retryAfter is how long an audit that could not be answered waits before it is tried
// again (until its deadline).
const retryAfter = 2 * time.Second

// Chain is what the role reads from the chain: chain.Queries satisfies the x/verify
// part; Verifier is x/stakingext's verifier query.
type Chain interface {
	chain.AuditsQuerier
	chain.CheckpointQuerier
	Verifier(ctx context.Context, in *stakingexttypes.QueryVerifierRequest, opts ...grpc.CallOption) (*stakingexttypes.QueryVerifierResponse, error)
}

// Checker re-executes a checkpoint for an audit; *disputes.Role satisfies it.
type Checker interface {
	Audit(ctx context.Context, ref checkpoint.Ref) (disputes.AuditResult, error)
}

// Metrics counts what the role does; *metrics.Metrics satisfies it.
type Metrics interface {
	AuditAssigned()
	AuditAnswered(status string)
	AuditSettled(status string, paid, slashed sdk.Coin)
}

// Options configure a Role.
type Options struct {
	// Operator is the verifier's address.
	Operator string
	Submit   chain.SubmitFunc
	Chain    Chain
	// Height is the chain's latest height as the daemon last saw it.
	Height  func() int64
	DB      *db.DB
	Config  config.Audits
	Checker Checker
	// Priority is held while assignments wait, so that verifier-mode sampling (the
	// disputes role) yields to them.
	Priority *rolekit.Priority
	Metrics  Metrics
	// Logger receives the role's logs; nil discards them.
	Logger *slog.Logger
}

// Role is the audits role. Create it with New.
type Role struct {
	opts    Options
	log     *slog.Logger
	queue   rolekit.Queue[checkpoint.Ref]
	lastErr rolekit.LastError
	// activate asks the worker to put the verifier back into the audit set.
	activate chan struct{}

	mu     sync.Mutex
	queued map[checkpoint.Ref]bool
}

// New checks opts and prepares a Role; nothing is sent until Run.
func New(opts Options) (*Role, error) {
	switch {
	case opts.Operator == "":
		return nil, errors.New("audits role: needs an operator")
	case opts.Submit == nil || opts.Chain == nil || opts.Height == nil || opts.DB == nil:
		return nil, errors.New("audits role: needs a submitter, a chain, its height and a database")
	case opts.Checker == nil || opts.Metrics == nil || opts.Priority == nil:
		return nil, errors.New("audits role: needs the checker, the metrics and the priority it holds")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Role{
		opts: opts, log: opts.Logger, queue: rolekit.NewQueue[checkpoint.Ref](queueSize),
		activate: make(chan struct{}, 1), queued: map[checkpoint.Ref]bool{},
	}, nil
}

// Name implements the daemon's Role.
func (*Role) Name() string { return "audits" }

// Status is what the role reports to the status API.
type Status struct {
	// Queued is how many assignments wait for an answer.
	Queued    int
	LastError string
	ErrorAt   time.Time
}

// Status reports the role's state.
func (r *Role) Status() Status {
	msg, at := r.lastErr.Get()
	return Status{Queued: r.queue.Len(), LastError: msg, ErrorAt: at}
}

// Audits lists the operator's assignments as the database has them, in lease and index
// order.
func (r *Role) Audits() ([]db.AuditRecord, error) {
	var out []db.AuditRecord
	err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		out, err = tx.Audits()
		return err
	})
	return out, err
}

// Resume picks up every open assignment of the operator after a start: those the
// chain has (assigned while the sidecar was away, whose events the follower replays
// too) and those the database still has unanswered.
func (r *Role) Resume(ctx context.Context, _ *chain.Snapshot) error {
	var pageKey []byte
	for {
		res, err := r.opts.Chain.Audits(ctx, &verifytypes.QueryAuditsRequest{Auditor: r.opts.Operator, OpenOnly: true,
			Pagination: pageRequest(pageKey)})
		if err != nil {
			r.log.Warn("looking up open audits failed; their events bring them", "err", err)
			break
		}
		for _, a := range res.Audits {
			if err := r.opts.DB.Update(func(tx *db.Tx) error { return r.record(tx, a) }); err != nil {
				return err
			}
			r.enqueue(checkpoint.Ref{LeaseID: a.LeaseId, Index: a.CheckpointIndex})
		}
		if res.Pagination == nil || len(res.Pagination.NextKey) == 0 {
			break
		}
		pageKey = res.Pagination.NextKey
	}
	recs, err := r.Audits()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Status == db.AuditAssigned || rec.Status == db.AuditFailed {
			r.enqueue(checkpoint.Ref{LeaseID: rec.LeaseID, Index: rec.Index})
		}
	}
	return nil
}

// Run registers or reactivates the verifier, then answers queued assignments until
// ctx ends.
func (r *Role) Run(ctx context.Context) error {
	if err := r.join(ctx); err != nil && ctx.Err() == nil {
		r.log.Error("could not join the audit set; assignments already drawn are still answered", "err", err)
		r.lastErr.Note(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.activate:
				if err := r.join(ctx); err != nil && ctx.Err() == nil {
					r.log.Warn("could not rejoin the audit set", "err", err)
					r.lastErr.Note(err)
				}
			}
		}
	}()
	r.queue.Serve(ctx, r.answerQueued)
	wg.Wait()
	return nil
}

// enqueue queues an assignment once and holds the priority until it is answered.
func (r *Role) enqueue(ref checkpoint.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queued[ref] {
		return
	}
	if !r.queue.Push(ref) {
		r.log.Error("audit queue full; the assignment is picked up at the next start", "checkpoint", ref.String())
		return
	}
	r.queued[ref] = true
	r.opts.Priority.Hold()
}

func (r *Role) done(ref checkpoint.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queued[ref] {
		delete(r.queued, ref)
		r.opts.Priority.Release()
	}
}

// join registers the operator as a verifier (audits.register_bond) when it is not one,
// or activates it when it is inactive and audits.reactivate is set.
func (r *Role) join(ctx context.Context) error {
	res, err := r.opts.Chain.Verifier(ctx, &stakingexttypes.QueryVerifierRequest{Operator: r.opts.Operator})
	if err != nil {
		if r.opts.Config.RegisterBond == "" {
			return fmt.Errorf("the operator is not a verifier and audits.register_bond is empty (register with: depinchaind tx stakingext register-verifier <bond>): %w", err)
		}
		bond, perr := sdk.ParseCoinNormalized(r.opts.Config.RegisterBond)
		if perr != nil {
			return fmt.Errorf("audits.register_bond: %w", perr)
		}
		if _, err := r.opts.Submit(ctx, &stakingexttypes.MsgRegisterVerifier{Operator: r.opts.Operator, Bond: bond}); err != nil {
			return fmt.Errorf("registering as a verifier with %s: %w", bond, err)
		}
		r.log.Info("registered as a verifier", "bond", bond.String())
		return nil
	}
	v := res.Verifier
	switch {
	case v.Status == stakingexttypes.VERIFIER_STATUS_ACTIVE:
		r.log.Info("verifier in the audit set", "bond", v.Bond.String(), "position", res.Position,
			"assigned", v.Record.Assigned, "attested", v.Record.Attested, "missed", v.Record.Missed)
	case v.Status == stakingexttypes.VERIFIER_STATUS_INACTIVE && r.opts.Config.Reactivate:
		if _, err := r.opts.Submit(ctx, &stakingexttypes.MsgActivateVerifier{Operator: r.opts.Operator}); err != nil {
			return fmt.Errorf("rejoining the audit set (out since: %s): %w", v.StatusReason, err)
		}
		r.log.Info("rejoined the audit set", "was_out_because", v.StatusReason)
	default:
		r.log.Warn("the verifier is not in the audit set", "status", v.Status.String(), "reason", v.StatusReason)
	}
	return nil
}

// answerQueued answers one assignment; one that could not be answered is retried until
// its deadline.
func (r *Role) answerQueued(ctx context.Context, ref checkpoint.Ref) {
	retry, err := r.answer(ctx, ref)
	if ctx.Err() != nil {
		r.done(ref)
		return
	}
	if err != nil {
		r.log.Warn("audit not answered", "checkpoint", ref.String(), "err", err, "retry", retry)
		r.lastErr.Note(err)
	}
	r.done(ref)
	if retry {
		time.AfterFunc(retryAfter, func() { r.enqueue(ref) })
	}
}

// answer re-executes the checkpoint of an assignment and sends the answer it calls for.
// It reports whether to try again.
func (r *Role) answer(ctx context.Context, ref checkpoint.Ref) (retry bool, _ error) {
	var rec db.AuditRecord
	var found bool
	if err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		rec, found, err = tx.Audit(ref.LeaseID, ref.Index)
		return err
	}); err != nil {
		return true, err
	}
	if !found || (rec.Status != db.AuditAssigned && rec.Status != db.AuditFailed) {
		return false, nil
	}
	if h := r.opts.Height(); h > rec.Deadline {
		return false, r.update(ref, func(rec *db.AuditRecord) {
			rec.Status, rec.Detail = db.AuditMissed, fmt.Sprintf("not answered by height %d (now %d)", rec.Deadline, h)
		})
	}
	result, err := r.opts.Checker.Audit(ctx, ref)
	if err != nil {
		_ = r.update(ref, func(rec *db.AuditRecord) { rec.Status, rec.Detail = db.AuditFailed, err.Error() })
		return true, err
	}
	var msg sdk.Msg
	status := db.AuditAttested
	switch result.Outcome {
	case disputes.AuditMatched:
		msg = &verifytypes.MsgAttest{Auditor: r.opts.Operator, LeaseId: ref.LeaseID, CheckpointIndex: ref.Index, TraceRoot: result.TraceRoot}
	case disputes.AuditChallenged:
		// The challenge answered the assignment on chain.
		r.opts.Metrics.AuditAnswered(string(db.AuditChallenged))
		r.log.Warn("audit: checkpoint challenged", "checkpoint", ref.String(), "challenge", result.ChallengeID, "detail", result.Detail)
		return false, r.update(ref, func(rec *db.AuditRecord) {
			rec.Status, rec.ChallengeID, rec.Detail, rec.AnsweredHeight = db.AuditChallenged, result.ChallengeID, result.Detail, r.opts.Height()
		})
	case disputes.AuditUnavailable:
		if !r.opts.Config.ReportUnavailable || ref.Index == 0 {
			// A lease's first checkpoint starts from a state its provider did not
			// produce; the chain refuses reports on it.
			_ = r.update(ref, func(rec *db.AuditRecord) { rec.Status, rec.Detail = db.AuditFailed, result.Detail })
			return true, fmt.Errorf("start state not available, not reported: %s", result.Detail)
		}
		msg = &verifytypes.MsgReportUnavailable{Auditor: r.opts.Operator, LeaseId: ref.LeaseID, CheckpointIndex: ref.Index}
		status = db.AuditReported
	case disputes.AuditMismatchedLate, disputes.AuditUnverifiable:
		_ = r.update(ref, func(rec *db.AuditRecord) { rec.Status, rec.Detail = db.AuditFailed, result.Detail })
		return false, fmt.Errorf("audit of %s cannot be answered: %s", ref, result.Detail)
	default:
		return true, fmt.Errorf("audit of %s: unknown outcome %q", ref, result.Outcome)
	}
	res, err := r.opts.Submit(ctx, msg)
	if err != nil {
		var txErr *chain.TxError
		if errors.As(err, &txErr) {
			// Most often answered already (a replay) or too late; the settlement
			// event tells how it ended.
			r.log.Info("audit answer refused", "checkpoint", ref.String(), "log", txErr.Result.Log)
			return false, r.update(ref, func(rec *db.AuditRecord) { rec.Detail = "answer refused: " + txErr.Result.Log })
		}
		_ = r.update(ref, func(rec *db.AuditRecord) { rec.Status, rec.Detail = db.AuditFailed, err.Error() })
		return true, err
	}
	r.opts.Metrics.AuditAnswered(string(status))
	r.log.Info("audit answered", "checkpoint", ref.String(), "answer", string(status), "included", res.Height, "deadline", rec.Deadline)
	return false, r.update(ref, func(rec *db.AuditRecord) {
		rec.Status, rec.Detail, rec.AnsweredHeight = status, result.Detail, res.Height
	})
}

// update changes one audit record.
func (r *Role) update(ref checkpoint.Ref, change func(*db.AuditRecord)) error {
	return r.opts.DB.Update(func(tx *db.Tx) error {
		rec, ok, err := tx.Audit(ref.LeaseID, ref.Index)
		if err != nil || !ok {
			return err
		}
		change(&rec)
		return tx.PutAudit(rec)
	})
}

// record stores an assignment from the chain unless the database has it already.
func (r *Role) record(tx *db.Tx, a verifytypes.Audit) error {
	if _, ok, err := tx.Audit(a.LeaseId, a.CheckpointIndex); err != nil || ok {
		return err
	}
	return tx.PutAudit(db.AuditRecord{
		LeaseID: a.LeaseId, Index: a.CheckpointIndex, JobID: a.JobId, Provider: a.Provider, Status: db.AuditAssigned,
		Fee: a.Fee.String(), Deadline: a.Deadline, AssignedHeight: a.AssignedHeight,
	})
}
