package disputes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/tiles"
	"github.com/depinchain/depinchain/pkg/traindata"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/trainer"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// retryAfter is how long a failed move waits before it is tried again.
const retryAfter = time.Second

// playQueued makes the operator's move in a queued challenge; a move that
// fails is retried until the game's deadline.
func (r *Role) playQueued(ctx context.Context, id uint64) {
	err := r.play(ctx, id)
	if err == nil || ctx.Err() != nil {
		return
	}
	if errors.Is(err, dispute.ErrTooLate) {
		r.log.Error("a dispute move came too late", "challenge", id, "err", err)
		return
	}
	r.log.Warn("dispute move failed; retrying", "challenge", id, "err", err)
	r.lastErr.Note(err)
	time.AfterFunc(retryAfter, func() { r.enqueueGame(id) })
}

// play makes the operator's move in a challenge if the game waits on it.
func (r *Role) play(ctx context.Context, id uint64) error {
	res, err := r.opts.Chain.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: id})
	if err != nil {
		return fmt.Errorf("reading challenge %d: %w", id, err)
	}
	ch := res.Challenge
	side := dispute.SideOf(ch, r.opts.Operator)
	if side == 0 || ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
		r.forget(id)
		return nil
	}
	g, err := dispute.Load(ctx, r.opts.Chain, r.opts.Chain, ch)
	if err != nil {
		return err
	}
	g.Tile = res.TileGame
	// The checkpoint's steps are of one round, so one stream is every step's; it is
	// fetched only for the moves that read it.
	g.Data = func() (traindata.Stream, error) {
		return r.trainingData(ctx, g.Job, g.Checkpoint.Worker, g.Checkpoint.StartStep)
	}
	var ev dispute.Evidence
	if side == dispute.Defender {
		ev, err = r.defenderEvidence(ctx, g)
	} else {
		ev, err = r.challengerEvidence(ctx, id, g)
	}
	if err != nil {
		return fmt.Errorf("challenge %d: %w", id, err)
	}
	msg, err := dispute.NextMove(r.opts.Operator, side, g, r.opts.Height(), ev)
	if errors.Is(err, dispute.ErrNothingToProve) {
		// The provider's chunk is the one this verifier computed: its own
		// execution was wrong; the game is lost and there is no move to retry.
		r.log.Error("the disputed tile is what this operator computed too; the game is lost", "challenge", id, "entry", g.Tile.Entry, "chunk", g.Tile.Chunk)
		return nil
	}
	if err != nil || msg == nil {
		return err
	}
	if hook := r.opts.Hooks.BeforeMove; hook != nil {
		hook(ctx, id, msg)
	}
	result, err := r.opts.Submit(ctx, msg)
	var txErr *chain.TxError
	if errors.As(err, &txErr) {
		// Most often the game moved on meanwhile (a replayed turn); the
		// next EventGameTurn says what is due.
		r.log.Info("dispute move refused", "challenge", id, "role", side.String(), "turn", ch.Turn.String(), "log", txErr.Result.Log)
		return nil
	}
	if err != nil {
		return err
	}
	r.log.Info("dispute move", "challenge", id, "role", side.String(), "lease", ch.LeaseId, "index", ch.CheckpointIndex,
		"turn", strings.TrimPrefix(ch.Turn.String(), "GAME_TURN_"), "range", fmt.Sprintf("%d..%d", ch.Lo, ch.Hi), "mid", ch.Mid,
		"round", ch.Rounds, "deadline", ch.Deadline, "included", result.Height, "blocks_to_spare", ch.Deadline-result.Height)
	r.opts.Metrics.DisputeMove(side.String(), ch.Deadline-result.Height)
	return nil
}

// defenderEvidence is the trace the provider committed for its checkpoint,
// and its execution of the disputed step for phases 2–3.
func (r *Role) defenderEvidence(ctx context.Context, g dispute.Game) (dispute.Evidence, error) {
	dir, err := r.checkpointDir(g.Checkpoint.LeaseId, g.Checkpoint.Index, g.Checkpoint.EndStep)
	if err != nil {
		return dispute.Evidence{}, err
	}
	cp := g.Checkpoint
	tr, err := checkpoint.ReadCommittedTrace(dir, cp.StartStep)
	if err != nil {
		return dispute.Evidence{}, err
	}
	if root := tr.Root(); string(root[:]) != string(cp.TraceRoot) {
		return dispute.Evidence{}, fmt.Errorf("the local trace of checkpoint %d of lease %d is not the one committed", cp.Index, cp.LeaseId)
	}
	ev := dispute.Evidence{Trace: tr}
	ev.Tiles = func(g dispute.Game) (*tiles.Party, error) {
		return r.tileParty(g, tr, func(step uint64) (*exact.State, error) { return r.ownStateAt(ctx, g, step) })
	}
	return ev, nil
}

// checkpointDir is the local folder of the operator's checkpoint index of
// lease, ending at endStep.
func (r *Role) checkpointDir(lease, index, endStep uint64) (string, error) {
	if e, ok := r.opts.Checkpoints.Lookup(checkpoint.Ref{LeaseID: lease, Index: index}); ok {
		return e.Dir, nil
	}
	var rec db.LeaseRecord
	err := r.opts.DB.View(func(tx *db.Tx) (err error) {
		rec, _, err = tx.Lease(lease)
		return err
	})
	if err != nil || rec.Dir == "" {
		return "", fmt.Errorf("no local data for checkpoint %d of lease %d", index, lease)
	}
	return trainer.CheckpointDir(rec.OutputDir(), endStep), nil
}

// Disputes lists the challenges of the operator's own checkpoints and those
// its verifier opened, open or decided, as the chain has them now.
func (r *Role) Disputes(ctx context.Context) ([]verifytypes.Challenge, error) {
	own, verifications, err := r.challengesOf(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, v := range verifications {
		own = append(own, v.ChallengeID)
	}
	seen := map[uint64]bool{}
	var out []verifytypes.Challenge
	for _, id := range own {
		if id == 0 || seen[id] {
			continue
		}
		seen[id] = true
		res, err := r.opts.Chain.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: id})
		if err != nil {
			return nil, err
		}
		out = append(out, res.Challenge)
	}
	return out, nil
}

// challengesOf lists the challenges on the provider's own checkpoints (only
// open ones if openOnly, asking the chain about every checkpoint not yet final
// or rejected), and returns the verifier's records too.
func (r *Role) challengesOf(ctx context.Context, openOnly bool) ([]uint64, []db.VerificationRecord, error) {
	var checkpoints []db.CheckpointRecord
	var verifications []db.VerificationRecord
	err := r.opts.DB.View(func(tx *db.Tx) error {
		leases, err := tx.Leases()
		if err != nil {
			return err
		}
		for _, l := range leases {
			cps, err := tx.Checkpoints(l.LeaseID)
			if err != nil {
				return err
			}
			checkpoints = append(checkpoints, cps...)
		}
		verifications, err = tx.Verifications()
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	var ids []uint64
	for _, cp := range checkpoints {
		// Not only those recorded as challenged: a challenge opened within a block
		// or two of the checkpoint can reach the follower before the checkpoint's
		// record is written, which then stays "submitted". A checkpoint that is
		// final or rejected has no open game.
		if openOnly && (cp.Status == db.CheckpointFinalized || cp.Status == db.CheckpointRejected) {
			continue
		}
		res, err := r.opts.Chain.Challenges(ctx, &verifytypes.QueryChallengesRequest{LeaseId: cp.LeaseID, CheckpointIndex: cp.Index, OpenOnly: openOnly})
		if err != nil {
			return nil, nil, err
		}
		for _, ch := range res.Challenges {
			ids = append(ids, ch.Id)
		}
	}
	return ids, verifications, nil
}
