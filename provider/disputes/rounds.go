package disputes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// A job that trains in rounds checkpoints each round a worker commits, once: steps
// [r·every, (r+1)·every) from the worker's round start state (its commit's start_root),
// on its own shards of the round (Role.trainingData; Reexecute). The
// verifier re-executes such a checkpoint like any other, from that start state.

// roundStartState is the state a sync worker's checkpoint of round r > 0 starts from:
// WorkerStart of the round's global G_r with the worker's carry — the end state of the
// last round it entered under the lease, one of the lease's earlier checkpoints' states
// (its latest, unless a round it committed did not enter; never a rejected one, such as
// a round deleted and redone since) — or none (a lease's first
// round). G_r is rebuilt from its custody object and checked against the round's
// global_root; a carry is the verifier's own last re-execution of the lease or a state
// rebuilt or downloaded like any start state and checked against its checkpoint's final
// hash. A start that is none of these is a start fault (MsgProveRoundFault), not a trace
// to re-execute.
func (r *Role) roundStartState(ctx context.Context, cp verifytypes.Checkpoint, job markettypes.Job) (*exact.State, error) {
	round := job.Spec.Sync.Diloco().RoundOf(cp.StartStep)
	g, err := r.roundGlobal(ctx, job, round)
	if err != nil {
		return nil, err
	}
	from := func(carry *exact.State) *exact.State {
		s := g.WorkerStart(carry)
		if h := s.Root(); slices.Equal(h[:], cp.StartHash) {
			return s
		}
		return nil
	}
	r.mu.Lock()
	cached := r.verified[cp.LeaseId]
	r.mu.Unlock()
	if cached != nil {
		if s := from(cached); s != nil {
			return s, nil
		}
	}
	if s := from(nil); s != nil {
		return s, nil
	}
	for i := cp.Index; i > 0; i-- {
		prev, err := r.opts.Chain.Checkpoint(ctx, &verifytypes.QueryCheckpointRequest{LeaseId: cp.LeaseId, Index: i - 1})
		if err != nil {
			return nil, err
		}
		if prev.Checkpoint.Status == verifytypes.CHECKPOINT_STATUS_REJECTED {
			// Discarded with a deleted round (its redo is a later checkpoint) or convicted:
			// no round the lease entered ends there, and its state is no longer served.
			continue
		}
		carry, err := r.servedState(ctx, prev.Checkpoint.Uri, prev.Checkpoint.FinalHash, job)
		if err != nil {
			return nil, err
		}
		if s := from(carry); s != nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("checkpoint %d/%d starts at %x, which is WorkerStart of G_%d with none of lease %d's round states: its start is wrong (a round fault to prove), not its trace",
		cp.LeaseId, cp.Index, cp.StartHash, round, cp.LeaseId)
}

// roundGlobal is job's G_round, rebuilt from its custody holders (waiting up to
// globalHeldWait for them to hold it) and checked against the round's global_root; the
// last one is kept, as a round's workers' checkpoints share it.
func (r *Role) roundGlobal(ctx context.Context, job markettypes.Job, round uint64) (*diloco.GlobalState, error) {
	res, err := r.opts.Chain.Round(ctx, &markettypes.QueryRoundRequest{JobId: job.Id, Round: round})
	if err != nil {
		return nil, fmt.Errorf("reading round %d of job %d: %w", round, job.Id, err)
	}
	want := res.Round.GlobalRoot
	r.mu.Lock()
	cached := r.global
	r.mu.Unlock()
	if cached.g != nil && cached.job == job.Id && cached.round == round && slices.Equal(cached.root, want) {
		return cached.g, nil
	}
	if r.opts.Custody == nil {
		return nil, fmt.Errorf("%w: G_%d of job %d is kept in custody, and this verifier has no custody source", ErrStartStateUnavailable, round, job.Id)
	}
	tmp, err := os.CreateTemp(r.opts.WorkDir, "custody-global-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	id := markettypes.GlobalCustodyID(job.Id, round)
	// A global is committed with its pieces' roots, and the holders take the pieces
	// after: a worker that trained from its own aggregate checkpoints the next round
	// before then, and is not at fault for it.
	heldBy := time.Now().Add(globalHeldWait)
	for {
		_, err := r.opts.Custody.RebuildObject(ctx, id, tmp)
		if err == nil {
			break
		}
		if !errors.Is(err, fetch.ErrNotEnoughHolders) || time.Now().After(heldBy) {
			return nil, fmt.Errorf("%w: rebuilding %s from custody: %w", ErrStartStateUnavailable, id, err)
		}
		r.log.Info("waiting for the round's global state to be held in custody", "custody_id", id, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	raw, err := os.ReadFile(tmp.Name())
	if err != nil {
		return nil, err
	}
	if root := merkle.RootOfBytes(raw, diloco.ChunkSize); !slices.Equal(root[:], want) {
		return nil, fmt.Errorf("%w: %s rebuilt to root %s, round %d's global_root is %x", ErrStartStateUnavailable, id, root, round, want)
	}
	g, err := diloco.DecodeGlobal(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	r.mu.Lock()
	r.global = roundGlobalCache{job: job.Id, round: round, root: want, g: g}
	r.mu.Unlock()
	return g, nil
}

// globalHeldWait bounds how long roundGlobal waits for a committed global's pieces to
// be held (a few of the holders' check intervals).
const globalHeldWait = time.Minute

// roundGlobalCache is the last global state roundGlobal rebuilt.
type roundGlobalCache struct {
	job, round uint64
	root       []byte
	g          *diloco.GlobalState
}
