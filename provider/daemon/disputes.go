package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	game "github.com/depinchain/depinchain/pkg/dispute"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/trainer"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// CommittedTraceFileName holds, in a checkpoint folder, the trace the
// sidecar committed on chain when it differs from the trainer's trace.txt
// (only in the cheating mode tests use). A defender opens hashes from what
// it committed.
const CommittedTraceFileName = "trace.committed.txt"

// enqueueDispute asks the dispute worker to look at a challenge.
func (d *Daemon) enqueueDispute(challengeID uint64) {
	select {
	case d.disputeQueue <- challengeID:
	default:
		d.log.Error("dispute queue full; the challenge is picked up at the next start", "challenge", challengeID)
	}
}

// runDisputes plays every game the operator is a party to, one move at a
// time, as soon as the chain waits on it. A move that fails is retried
// until the game's deadline: losing by silence is the one way an honest
// party loses.
func (d *Daemon) runDisputes(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-d.disputeQueue:
			err := d.playDispute(ctx, id)
			if err == nil || ctx.Err() != nil || errors.Is(err, game.ErrTooLate) {
				if err != nil && ctx.Err() == nil {
					d.log.Error("a dispute move came too late", "challenge", id, "err", err)
				}
				continue
			}
			d.log.Warn("dispute move failed; retrying", "challenge", id, "err", err)
			d.noteError(err)
			time.AfterFunc(time.Second, func() { d.enqueueDispute(id) })
		}
	}
}

// playDispute makes the operator's move in a challenge if the game waits on it.
func (d *Daemon) playDispute(ctx context.Context, id uint64) error {
	res, err := d.verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: id})
	if err != nil {
		return fmt.Errorf("reading challenge %d: %w", id, err)
	}
	ch := res.Challenge
	side := game.SideOf(ch, d.operator)
	if side == 0 || ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
		return nil
	}
	g, err := game.Load(ctx, d.verify, d.market, ch)
	if err != nil {
		return err
	}
	var ev game.Evidence
	if side == game.Defender {
		ev, err = d.defenderEvidence(g.Checkpoint)
	} else {
		ev, err = d.challengerEvidence(ctx, id, g.Checkpoint)
	}
	if err != nil {
		return fmt.Errorf("challenge %d: %w", id, err)
	}
	height := d.follower.Status().ChainHeight
	msg, err := game.NextMove(d.operator, side, g, height, ev)
	if err != nil || msg == nil {
		return err
	}
	result, err := d.submit(ctx, msg)
	var txErr *chain.TxError
	if errors.As(err, &txErr) {
		// Most often the game moved on meanwhile (a replayed turn); the
		// next EventGameTurn says what is due.
		d.log.Info("dispute move refused", "challenge", id, "role", side.String(), "turn", ch.Turn.String(), "log", txErr.Result.Log)
		return nil
	}
	if err != nil {
		return err
	}
	d.log.Info("dispute move", "challenge", id, "role", side.String(), "lease", ch.LeaseId, "index", ch.CheckpointIndex,
		"turn", strings.TrimPrefix(ch.Turn.String(), "GAME_TURN_"), "range", fmt.Sprintf("%d..%d", ch.Lo, ch.Hi), "mid", ch.Mid,
		"round", ch.Rounds, "deadline", ch.Deadline, "included", result.Height, "blocks_to_spare", ch.Deadline-result.Height)
	d.metrics.DisputeMove(side.String(), ch.Deadline-result.Height)
	return nil
}

// defenderEvidence is the trace the provider committed for its checkpoint.
func (d *Daemon) defenderEvidence(cp verifytypes.Checkpoint) (game.Evidence, error) {
	dir := ""
	if e, ok := d.catalog.Lookup(checkpoint.Ref{LeaseID: cp.LeaseId, Index: cp.Index}); ok {
		dir = e.Dir
	} else {
		var rec db.LeaseRecord
		err := d.db.View(func(tx *db.Tx) (err error) {
			rec, _, err = tx.Lease(cp.LeaseId)
			return err
		})
		if err != nil || rec.Dir == "" {
			return game.Evidence{}, fmt.Errorf("no local data for checkpoint %d of lease %d", cp.Index, cp.LeaseId)
		}
		dir = trainer.CheckpointDir(outputDir(rec.Dir), cp.EndStep)
	}
	path := filepath.Join(dir, CommittedTraceFileName)
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(dir, trainer.TraceFileName)
	}
	trace, err := trace.ReadFile(path, cp.StartStep)
	if err != nil {
		return game.Evidence{}, err
	}
	if root := trace.Root(); string(root[:]) != string(cp.TraceRoot) {
		return game.Evidence{}, fmt.Errorf("the local trace of checkpoint %d of lease %d is not the one committed", cp.Index, cp.LeaseId)
	}
	return game.Evidence{Trace: trace}, nil
}

// resumeDisputes queues every open game the operator is in, after a start:
// its own checkpoints' challenges and the ones its verifier opened.
func (d *Daemon) resumeDisputes(ctx context.Context) error {
	ids, verifications, err := d.challengesOf(ctx, true)
	if err != nil {
		return err
	}
	for _, id := range ids {
		d.enqueueDispute(id)
	}
	for _, v := range verifications {
		if v.ChallengeID != 0 && v.Outcome == "" {
			d.enqueueDispute(v.ChallengeID)
		}
	}
	return nil
}

// challengesOf lists the challenges on the provider's own checkpoints (only
// open ones if openOnly), and returns the verifier's records too.
func (d *Daemon) challengesOf(ctx context.Context, openOnly bool) ([]uint64, []db.VerificationRecord, error) {
	var checkpoints []db.CheckpointRecord
	var verifications []db.VerificationRecord
	err := d.db.View(func(tx *db.Tx) error {
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
		if openOnly && cp.Status != db.CheckpointChallenged {
			continue
		}
		res, err := d.verify.Challenges(ctx, &verifytypes.QueryChallengesRequest{LeaseId: cp.LeaseID, CheckpointIndex: cp.Index, OpenOnly: openOnly})
		if err != nil {
			return nil, nil, err
		}
		for _, ch := range res.Challenges {
			ids = append(ids, ch.Id)
		}
	}
	return ids, verifications, nil
}

// challengeIDOf reads the id of the challenge a MsgChallenge opened.
func challengeIDOf(res *chain.TxResult) (uint64, error) {
	for _, ev := range res.Events {
		if ev.Type != "depinchain.verify.v1.EventChallengeOpened" {
			continue
		}
		for _, a := range ev.Attributes {
			if a.Key == "challenge_id" {
				return strconv.ParseUint(strings.Trim(a.Value, `"`), 10, 64)
			}
		}
	}
	return 0, errors.New("no EventChallengeOpened in the transaction")
}
