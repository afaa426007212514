package keeper

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// Rounds of a sync job (docs/training-together.md, x/market/README.md): round r opens
// from the global state G_r; its workers train `every` steps and commit their
// pseudo-gradients (MsgCommitRound); the round closes when all committed, or at its
// commit deadline with a quorum; one worker commits the aggregation G_{r+1}
// (MsgCommitGlobal), which opens round r+1 at once; G_{r+1} is final after its challenge
// window once its custody is held, and only then are the round's entered workers paid.
// Every timed transition walks the RoundDeadlines index in EndBlock.

// GlobalRootGasPerChunk is the gas for computing round 0's global root, per 4 KiB chunk
// of the global state file: two hashes at x/verify's default gas_per_hash, as x/verify
// charges for a job's initial state root.
const GlobalRootGasPerChunk = 2 * 50

// roundRecheckBlocks is how long a committed global whose custody is not held yet (or
// whose previous global is not final yet) waits before it is looked at again.
const roundRecheckBlocks = 10

// GetRound returns round `round` of a sync job or ErrRoundNotFound.
func (k Keeper) GetRound(ctx context.Context, jobID, round uint64) (types.Round, error) {
	r, err := k.Rounds.Get(ctx, collections.Join(jobID, round))
	if err != nil {
		return r, keeperutil.NotFound(err, types.ErrRoundNotFound, "round %d of job %d", round, jobID)
	}
	return r, nil
}

// GetRoundCommit returns worker's commit in a round or ErrRoundCommitNotFound.
func (k Keeper) GetRoundCommit(ctx context.Context, jobID, round uint64, worker uint32) (types.RoundCommit, error) {
	c, err := k.RoundCommits.Get(ctx, collections.Join3(jobID, round, worker))
	if err != nil {
		return c, keeperutil.NotFound(err, types.ErrRoundCommitNotFound, "commit of worker %d in round %d of job %d", worker, round, jobID)
	}
	return c, nil
}

// roundCommits is every commit of a round, by worker.
func (k Keeper) roundCommits(ctx context.Context, jobID, round uint64) ([]types.RoundCommit, error) {
	iter, err := k.RoundCommits.Iterate(ctx, collections.NewSuperPrefixedTripleRange[uint64, uint64, uint32](jobID, round))
	if err != nil {
		return nil, err
	}
	return iter.Values()
}

// setRoundDeadline moves a round's entry in RoundDeadlines to deadline (0: none). The
// caller saves the round.
func (k Keeper) setRoundDeadline(ctx context.Context, r *types.Round, deadline int64) error {
	if r.Deadline != 0 {
		if err := k.RoundDeadlines.Remove(ctx, collections.Join3(r.Deadline, r.JobId, r.Round)); err != nil {
			return err
		}
	}
	r.Deadline = deadline
	if deadline == 0 {
		return nil
	}
	return k.RoundDeadlines.Set(ctx, collections.Join3(deadline, r.JobId, r.Round))
}

// activeSlots maps the job's worker slots with an active lease to it.
func (k Keeper) activeSlots(ctx sdk.Context, jobID uint64) (map[uint32]types.Lease, error) {
	leases, err := k.ActiveLeases(ctx, jobID)
	if err != nil {
		return nil, err
	}
	slots := make(map[uint32]types.Lease, len(leases))
	for _, l := range leases {
		slots[l.Worker] = l
	}
	return slots, nil
}

// roundDataSlots keeps the slots round r of job gives data to train on: every slot of a
// job on the built-in corpus; of a job on a dataset, those x/shardregistry's
// AssignRoundShards gives at least one shard in the round. A slot given none sits the
// round out: the round neither waits for it nor counts it as missed. (Were the dataset's
// shard count unreadable, which a registered dataset's is not, every slot is kept.)
func (k Keeper) roundDataSlots(ctx sdk.Context, job types.Job, r uint64, slots map[uint32]types.Lease) map[uint32]types.Lease {
	if job.Spec.DatasetId == "" || k.custody.keeper == nil {
		return slots
	}
	n, err := k.custody.keeper.DatasetShardCount(ctx, job.Spec.DatasetId)
	if err != nil {
		return slots
	}
	a, err := shardtypes.AssignRoundShards(job.Seed, r, n, job.Spec.Workers)
	if err != nil {
		return slots
	}
	out := make(map[uint32]types.Lease, len(slots))
	for w, l := range slots {
		if int(w) < len(a) && len(a[w]) > 0 {
			out[w] = l
		}
	}
	return out
}

func sortedSlots(slots map[uint32]types.Lease) []uint32 {
	out := make([]uint32, 0, len(slots))
	for w := range slots {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// roundQuorum is how many of n workers must commit for a round to close at its deadline:
// ceil(round_quorum · n), at least one.
func roundQuorum(q math.LegacyDec, n int) uint32 {
	need := q.MulInt64(int64(n)).Ceil().TruncateInt64()
	return uint32(max(need, 1))
}

// initialGlobal is round 0's global state root and size: pkg/diloco.InitGlobal of the
// job's configuration and seed, charged per chunk like x/verify's initial state root.
func initialGlobal(ctx sdk.Context, job types.Job) ([]byte, uint64, error) {
	cfg, err := job.Spec.ExactConfig()
	if err != nil {
		return nil, 0, err
	}
	g, err := diloco.InitGlobal(cfg, job.Spec.Sync.Diloco(), job.Seed)
	if err != nil {
		return nil, 0, err
	}
	enc := g.Encode()
	chunks := (uint64(len(enc)) + diloco.ChunkSize - 1) / diloco.ChunkSize
	ctx.GasMeter().ConsumeGas(GlobalRootGasPerChunk*chunks, "round 0 global root")
	root := merkle.RootOfBytes(enc, diloco.ChunkSize)
	return root[:], uint64(len(enc)), nil
}

// openFirstRound opens round 0 of a sync job once every slot is leased (the auction that
// filled the last one calls it); a job whose rounds already run is left alone. The caller
// saves the job.
func (k Keeper) openFirstRound(ctx sdk.Context, params types.Params, job *types.Job) error {
	if job.Spec.Sync == nil {
		return nil
	}
	if has, err := k.Rounds.Has(ctx, collections.Join(job.Id, uint64(0))); err != nil || has {
		return err
	}
	root, size, err := initialGlobal(ctx, *job)
	if err != nil {
		return err
	}
	job.MissedRounds = make([]uint32, job.Spec.Workers)
	return k.openRound(ctx, params, job, 0, root, size)
}

// openRound opens round r from the global (root, size) for the slots with an active
// lease now. The caller saves the job.
func (k Keeper) openRound(ctx sdk.Context, params types.Params, job *types.Job, r uint64, root []byte, size uint64) error {
	slots, err := k.activeSlots(ctx, job.Id)
	if err != nil {
		return err
	}
	round := types.Round{
		JobId: job.Id, Round: r, State: types.ROUND_STATE_OPEN, GlobalRoot: root, GlobalSize: size,
		OpenedHeight: ctx.BlockHeight(), Workers: sortedSlots(k.roundDataSlots(ctx, *job, r, slots)),
	}
	if err := k.setRoundDeadline(ctx, &round, ctx.BlockHeight()+int64(job.Spec.RoundCommitBlocks(params))); err != nil {
		return err
	}
	if err := k.Rounds.Set(ctx, collections.Join(job.Id, r), round); err != nil {
		return err
	}
	job.Round = r
	return keeperutil.Emit(ctx, &types.EventRoundOpened{
		JobId: job.Id, Round: r, GlobalRoot: root, GlobalSize: size, Deadline: round.Deadline, Workers: round.Workers,
	})
}

// checkRoot refuses a root that is not a 32-byte hash.
func checkRoot(field string, root []byte) error {
	if len(root) != merkle.HashSize {
		return errorsmod.Wrapf(types.ErrInvalidRoundCommit, "%s: must be a %d-byte root, got %d bytes", field, merkle.HashSize, len(root))
	}
	return nil
}

// syncJob loads a live sync job.
func (k Keeper) syncJob(ctx context.Context, jobID uint64) (types.Job, error) {
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return job, err
	}
	if job.Spec.Sync == nil {
		return job, errorsmod.Wrapf(types.ErrNotSyncJob, "job %d trains without rounds", jobID)
	}
	if job.State.IsTerminal() {
		return job, errorsmod.Wrapf(types.ErrJobClosed, "job %d is %s", jobID, job.State)
	}
	return job, nil
}

// commitRound records a worker's pseudo-gradient for an open round and registers it in
// custody (MsgCommitRound). Everything is checked before the first write.
func (k Keeper) commitRound(ctx sdk.Context, msg *types.MsgCommitRound) (types.RoundCommit, string, error) {
	lease, err := k.GetLease(ctx, msg.LeaseId)
	if err != nil {
		return types.RoundCommit{}, "", err
	}
	if lease.Provider != msg.Provider {
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrNotLeaseProvider, "lease %d is served by %s", lease.Id, lease.Provider)
	}
	if lease.State != types.LEASE_STATE_ACTIVE {
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrLeaseNotActive, "lease %d was closed (%s)", lease.Id, lease.CloseReason)
	}
	job, err := k.syncJob(ctx, lease.JobId)
	if err != nil {
		return types.RoundCommit{}, "", err
	}
	round, found, err := keeperutil.Optional(k.Rounds.Get(ctx, collections.Join(job.Id, msg.Round)))
	if err != nil {
		return types.RoundCommit{}, "", err
	}
	if !found || msg.Round != job.Round {
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrWrongRound, "job %d's current round is %d, not %d", job.Id, job.Round, msg.Round)
	}
	if round.State != types.ROUND_STATE_OPEN {
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrRoundNotOpen, "round %d of job %d is %s", round.Round, job.Id, round.State)
	}
	if _, ok := slices.BinarySearch(round.Workers, lease.Worker); !ok {
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrNotRoundWorker, "worker %d joined job %d after round %d opened; it trains from the next round", lease.Worker, job.Id, round.Round)
	}
	if err := checkRoot("global_root", msg.GlobalRoot); err != nil {
		return types.RoundCommit{}, "", err
	}
	if !bytes.Equal(msg.GlobalRoot, round.GlobalRoot) {
		// The round was deleted with its voided start global and opened again on a new one
		// while the worker trained: a commit from the old one would be a provable START fault.
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrStaleGlobal, "round %d of job %d starts from global %x, the commit was trained from %x: train the round again from its global",
			round.Round, job.Id, round.GlobalRoot, msg.GlobalRoot)
	}
	key := collections.Join3(job.Id, round.Round, lease.Worker)
	if has, err := k.RoundCommits.Has(ctx, key); err != nil || has {
		if err != nil {
			return types.RoundCommit{}, "", err
		}
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrInvalidRoundCommit, "worker %d already committed round %d of job %d", lease.Worker, round.Round, job.Id)
	}
	for _, f := range []struct {
		name string
		root []byte
	}{{"start_root", msg.StartRoot}, {"end_root", msg.EndRoot}, {"pseudo_gradient_root", msg.PseudoGradientRoot}} {
		if err := checkRoot(f.name, f.root); err != nil {
			return types.RoundCommit{}, "", err
		}
	}
	if msg.PseudoGradientSize == 0 {
		return types.RoundCommit{}, "", errorsmod.Wrap(types.ErrInvalidRoundCommit, "pseudo_gradient_size: must be positive")
	}
	if k.custody.keeper == nil {
		return types.RoundCommit{}, "", errorsmod.Wrap(types.ErrInvalidRoundCommit, "no custody keeper: rounds cannot run")
	}
	// The custody keeper checks the pieces' roots against the pseudo-gradient root before
	// its first write, and its writes come before ours: a refusal changes nothing.
	id := types.PseudoGradientCustodyID(job.Id, round.Round, lease.Worker)
	if err := k.registerRoundCustody(ctx, &job, id, lease, round.Round,
		msg.PseudoGradientRoot, msg.PseudoGradientSize, msg.PieceRoots); err != nil {
		return types.RoundCommit{}, "", errorsmod.Wrapf(types.ErrInvalidRoundCommit, "pseudo-gradient custody: %v", err)
	}
	commit := types.RoundCommit{
		JobId: job.Id, Round: round.Round, Worker: lease.Worker, LeaseId: lease.Id, Provider: lease.Provider,
		StartRoot: msg.StartRoot, EndRoot: msg.EndRoot, PseudoGradientRoot: msg.PseudoGradientRoot,
		PseudoGradientSize: msg.PseudoGradientSize, CommittedHeight: ctx.BlockHeight(),
		Claim: sdk.NewCoin(job.Escrow.Denom, math.ZeroInt()),
	}
	if err := k.RoundCommits.Set(ctx, key, commit); err != nil {
		return types.RoundCommit{}, "", err
	}
	if err := keeperutil.Emit(ctx, &types.EventRoundCommitted{
		JobId: job.Id, Round: round.Round, Worker: lease.Worker, LeaseId: lease.Id, Provider: lease.Provider,
		PseudoGradientRoot: msg.PseudoGradientRoot, PseudoGradientSize: msg.PseudoGradientSize, CustodyId: id,
	}); err != nil {
		return types.RoundCommit{}, "", err
	}
	if int(lease.Worker) < len(job.MissedRounds) {
		job.MissedRounds[lease.Worker] = 0
	}
	commits, err := k.roundCommits(ctx, job.Id, round.Round)
	if err != nil {
		return types.RoundCommit{}, "", err
	}
	if len(commits) == len(round.Workers) {
		params, err := k.Params.Get(ctx)
		if err != nil {
			return types.RoundCommit{}, "", err
		}
		if err := k.closeRoundCommits(ctx, params, &round, commits, nil); err != nil {
			return types.RoundCommit{}, "", err
		}
	}
	return commit, id, k.Jobs.Set(ctx, job.Id, job)
}

// closeRoundCommits moves an open round to AGGREGATING: its entered workers are its
// commits not excluded; the global is due round_aggregate_blocks from now. It saves the round.
func (k Keeper) closeRoundCommits(ctx sdk.Context, params types.Params, round *types.Round, commits []types.RoundCommit, missed []uint32) error {
	round.State = types.ROUND_STATE_AGGREGATING
	round.Entered = nil
	for _, c := range commits {
		if !c.Excluded {
			round.Entered = append(round.Entered, c.Worker)
		}
	}
	round.Missed = missed
	if err := k.setRoundDeadline(ctx, round, ctx.BlockHeight()+int64(params.RoundAggregateBlocks)); err != nil {
		return err
	}
	if err := k.Rounds.Set(ctx, collections.Join(round.JobId, round.Round), *round); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventRoundClosed{
		JobId: round.JobId, Round: round.Round, Entered: round.Entered, Missed: missed, AggregateDeadline: round.Deadline,
	})
}

// commitGlobal records the aggregation of an aggregating round, G_{round+1}, registers
// it in custody and opens the next round from it (MsgCommitGlobal).
func (k Keeper) commitGlobal(ctx sdk.Context, msg *types.MsgCommitGlobal) (types.Round, string, error) {
	job, err := k.syncJob(ctx, msg.JobId)
	if err != nil {
		return types.Round{}, "", err
	}
	round, found, err := keeperutil.Optional(k.Rounds.Get(ctx, collections.Join(job.Id, msg.Round)))
	if err != nil {
		return types.Round{}, "", err
	}
	if !found {
		return types.Round{}, "", errorsmod.Wrapf(types.ErrWrongRound, "job %d has no round %d (its current round is %d)", job.Id, msg.Round, job.Round)
	}
	if round.State != types.ROUND_STATE_AGGREGATING {
		return types.Round{}, "", errorsmod.Wrapf(types.ErrRoundNotAggregating, "round %d of job %d is %s", round.Round, job.Id, round.State)
	}
	slots, err := k.activeSlots(ctx, job.Id)
	if err != nil {
		return types.Round{}, "", err
	}
	var aggregator *types.Lease
	for _, w := range sortedSlots(slots) {
		if l := slots[w]; l.Provider == msg.Provider {
			aggregator = &l
			break
		}
	}
	if aggregator == nil {
		return types.Round{}, "", errorsmod.Wrapf(types.ErrNotLeaseProvider, "%s serves no active lease of job %d", msg.Provider, job.Id)
	}
	if !slices.Equal(msg.Entered, round.Entered) {
		return types.Round{}, "", errorsmod.Wrapf(types.ErrEnteredMismatch, "round %d of job %d entered %v, the message says %v", round.Round, job.Id, round.Entered, msg.Entered)
	}
	if len(round.Entered) == 0 {
		return types.Round{}, "", errorsmod.Wrapf(types.ErrEnteredMismatch, "round %d of job %d has no entered worker to aggregate", round.Round, job.Id)
	}
	if err := checkRoot("global_root", msg.GlobalRoot); err != nil {
		return types.Round{}, "", err
	}
	if msg.GlobalSize == 0 {
		return types.Round{}, "", errorsmod.Wrap(types.ErrInvalidRoundCommit, "global_size: must be positive")
	}
	if k.custody.keeper == nil {
		return types.Round{}, "", errorsmod.Wrap(types.ErrInvalidRoundCommit, "no custody keeper: rounds cannot run")
	}
	// An aggregation may only use pseudo-gradients anyone can fetch: each entered one must
	// be held by its data pieces' count of proven holders.
	for _, w := range round.Entered {
		live, needed, err := k.custody.keeper.CustodyHolders(ctx, types.PseudoGradientCustodyID(job.Id, round.Round, w))
		if err != nil {
			return types.Round{}, "", err
		}
		if live < needed {
			return types.Round{}, "", errorsmod.Wrapf(types.ErrInvalidRoundCommit, "the pseudo-gradient of worker %d is held by %d of the %d holders it needs; aggregate once it is held", w, live, needed)
		}
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return types.Round{}, "", err
	}
	next := round.Round + 1
	id := types.GlobalCustodyID(job.Id, next)
	if err := k.registerRoundCustody(ctx, &job, id, *aggregator, next,
		msg.GlobalRoot, msg.GlobalSize, msg.PieceRoots); err != nil {
		return types.Round{}, "", errorsmod.Wrapf(types.ErrInvalidRoundCommit, "global custody: %v", err)
	}
	round.State = types.ROUND_STATE_CHALLENGE
	round.Aggregator = aggregator.Provider
	round.AggregatorLeaseId = aggregator.Id
	round.NextGlobalRoot = msg.GlobalRoot
	round.NextGlobalSize = msg.GlobalSize
	round.ChallengeDeadline = ctx.BlockHeight() + int64(params.RoundChallengeBlocks)
	if err := k.setRoundDeadline(ctx, &round, round.ChallengeDeadline); err != nil {
		return types.Round{}, "", err
	}
	if err := k.Rounds.Set(ctx, collections.Join(job.Id, round.Round), round); err != nil {
		return types.Round{}, "", err
	}
	if err := keeperutil.Emit(ctx, &types.EventGlobalCommitted{
		JobId: job.Id, Round: round.Round, Aggregator: round.Aggregator, GlobalRoot: msg.GlobalRoot,
		GlobalSize: msg.GlobalSize, CustodyId: id, ChallengeDeadline: round.ChallengeDeadline,
	}); err != nil {
		return types.Round{}, "", err
	}
	if next < job.Spec.Rounds() {
		// Optimistic: the next round trains from the new global during its challenge window.
		if err := k.openRound(ctx, params, &job, next, msg.GlobalRoot, msg.GlobalSize); err != nil {
			return types.Round{}, "", err
		}
	}
	return round, id, k.Jobs.Set(ctx, job.Id, job)
}

// processRoundDeadline runs when a round's deadline passed (its entry already removed by
// EndBlock): the commit deadline of an open round, the aggregate deadline of an
// aggregating one, or the challenge deadline (or a recheck) of a committed global.
func (k Keeper) processRoundDeadline(ctx sdk.Context, jobID, r uint64) error {
	round, err := k.GetRound(ctx, jobID, r)
	if err != nil {
		return err
	}
	round.Deadline = 0 // the entry was removed by the caller
	if err := k.Rounds.Set(ctx, collections.Join(jobID, r), round); err != nil {
		return err
	}
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	switch round.State {
	case types.ROUND_STATE_OPEN:
		if job.State.IsTerminal() {
			return k.settleRoundClaims(ctx, &job, round)
		}
		return k.commitDeadlinePassed(ctx, params, job, round)
	case types.ROUND_STATE_AGGREGATING:
		if job.State.IsTerminal() {
			return k.settleRoundClaims(ctx, &job, round)
		}
		return k.aggregateDeadlinePassed(ctx, params, job, round)
	case types.ROUND_STATE_CHALLENGE:
		return k.finalizeGlobal(ctx, params, job, round)
	}
	return nil
}

// commitDeadlinePassed closes an open round at its commit deadline. Every slot of the
// round without a commit missed it (a lease that misses max_missed_rounds in a row is
// closed for non-performance and its slot re-auctioned). With a quorum of commits the
// round goes to AGGREGATING; without, it stays open for another commit window, and the
// replacements leased since it opened join it.
func (k Keeper) commitDeadlinePassed(ctx sdk.Context, params types.Params, job types.Job, round types.Round) error {
	commits, err := k.roundCommits(ctx, job.Id, round.Round)
	if err != nil {
		return err
	}
	committed := map[uint32]bool{}
	for _, c := range commits {
		committed[c.Worker] = true
	}
	slots, err := k.activeSlots(ctx, job.Id)
	if err != nil {
		return err
	}
	var missed []uint32
	var lose []types.Lease
	for _, w := range round.Workers {
		if committed[w] {
			continue
		}
		missed = append(missed, w)
		l, ok := slots[w]
		if !ok {
			continue // a vacant slot: its next lease starts with a clean record
		}
		for len(job.MissedRounds) <= int(w) {
			job.MissedRounds = append(job.MissedRounds, 0)
		}
		job.MissedRounds[w]++
		if job.MissedRounds[w] >= params.MaxMissedRounds {
			job.MissedRounds[w] = 0 // the replacement starts with a clean record
			lose = append(lose, l)
		}
	}
	quorum := roundQuorum(params.RoundQuorum, len(round.Workers))
	if uint32(len(commits)) >= quorum {
		if err := k.closeRoundCommits(ctx, params, &round, commits, missed); err != nil {
			return err
		}
	} else {
		workers := round.Workers
		for w := range k.roundDataSlots(ctx, job, round.Round, slots) {
			if _, ok := slices.BinarySearch(workers, w); !ok {
				workers = append(workers, w)
				slices.Sort(workers)
			}
		}
		round.Workers = workers
		if err := k.setRoundDeadline(ctx, &round, ctx.BlockHeight()+int64(job.Spec.RoundCommitBlocks(params))); err != nil {
			return err
		}
		if err := k.Rounds.Set(ctx, collections.Join(job.Id, round.Round), round); err != nil {
			return err
		}
		if err := keeperutil.Emit(ctx, &types.EventRoundDeadlineExtended{
			JobId: job.Id, Round: round.Round, Deadline: round.Deadline, Committed: uint32(len(commits)), Quorum: quorum, Workers: round.Workers,
		}); err != nil {
			return err
		}
	}
	if err := k.Jobs.Set(ctx, job.Id, job); err != nil {
		return err
	}
	for _, l := range lose {
		reason := fmt.Sprintf("lease %d (worker %d of job %d) committed none of its last %d rounds", l.Id, l.Worker, job.Id, params.MaxMissedRounds)
		if err := k.closeLeaseForNonPerformance(ctx, l.Id, reason); err != nil {
			return err
		}
	}
	return nil
}

// aggregateDeadlinePassed runs when no global came by the aggregate deadline: an entered
// pseudo-gradient that is still not held in custody is excluded (its worker did not hand
// it out, so nobody can aggregate it) and the round waits another aggregate window.
func (k Keeper) aggregateDeadlinePassed(ctx sdk.Context, params types.Params, job types.Job, round types.Round) error {
	var keep []uint32
	for _, w := range round.Entered {
		live, needed, err := k.custody.keeper.CustodyHolders(ctx, types.PseudoGradientCustodyID(job.Id, round.Round, w))
		if err != nil {
			return err
		}
		if live >= needed {
			keep = append(keep, w)
			continue
		}
		if err := k.excludeCommit(ctx, job.Id, round.Round, w,
			fmt.Sprintf("pseudo-gradient held by %d of the %d holders it needs at the aggregate deadline", live, needed)); err != nil {
			return err
		}
	}
	round.Entered = keep
	if err := k.setRoundDeadline(ctx, &round, ctx.BlockHeight()+int64(params.RoundAggregateBlocks)); err != nil {
		return err
	}
	if err := k.Rounds.Set(ctx, collections.Join(job.Id, round.Round), round); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventRoundClosed{
		JobId: job.Id, Round: round.Round, Entered: round.Entered, Missed: round.Missed, AggregateDeadline: round.Deadline,
	})
}

// excludeCommit marks a commit excluded (idempotent) and announces it.
func (k Keeper) excludeCommit(ctx sdk.Context, jobID, r uint64, worker uint32, reason string) error {
	key := collections.Join3(jobID, r, worker)
	c, err := k.GetRoundCommit(ctx, jobID, r, worker)
	if err != nil {
		return err
	}
	if c.Excluded {
		return nil
	}
	c.Excluded = true
	c.ExcludedReason = reason
	if err := k.RoundCommits.Set(ctx, key, c); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventRoundWorkerExcluded{JobId: jobID, Round: r, Worker: worker, Reason: reason})
}

// finalizeGlobal makes a committed global final once its challenge window passed, the
// previous global is final, its custody is held and no entered worker's round checkpoint
// is pending in x/verify (its game could still exclude the worker); it then pays the round's entered
// workers and completes the job after its last round. A global whose custody is still not
// held an aggregate window after its challenge deadline was withheld: it is voided.
func (k Keeper) finalizeGlobal(ctx sdk.Context, params types.Params, job types.Job, round types.Round) error {
	recheck := func() error {
		if err := k.setRoundDeadline(ctx, &round, ctx.BlockHeight()+roundRecheckBlocks); err != nil {
			return err
		}
		return k.Rounds.Set(ctx, collections.Join(job.Id, round.Round), round)
	}
	if round.Round > 0 {
		prev, err := k.GetRound(ctx, job.Id, round.Round-1)
		if err != nil {
			return err
		}
		if prev.State != types.ROUND_STATE_FINAL {
			return recheck()
		}
	}
	id := types.GlobalCustodyID(job.Id, round.Round+1)
	live, needed, err := k.custody.keeper.CustodyHolders(ctx, id)
	if err != nil {
		return err
	}
	if live < needed {
		if ctx.BlockHeight() < round.ChallengeDeadline+int64(params.RoundAggregateBlocks) {
			return recheck()
		}
		return k.voidGlobal(ctx, params, &job, &round,
			fmt.Sprintf("global %s held by %d of the %d holders it needs", id, live, needed))
	}
	if pending, err := k.roundTracesPending(ctx, job, round); err != nil || pending {
		if err != nil {
			return err
		}
		return recheck()
	}
	round.State = types.ROUND_STATE_FINAL
	if err := k.Rounds.Set(ctx, collections.Join(job.Id, round.Round), round); err != nil {
		return err
	}
	paid, refunded, err := k.payRound(ctx, &job, round)
	if err != nil {
		return err
	}
	if err := keeperutil.Emit(ctx, &types.EventGlobalFinal{
		JobId: job.Id, Round: round.Round, GlobalRoot: round.NextGlobalRoot, Paid: paid, Refunded: refunded,
	}); err != nil {
		return err
	}
	// The round's pseudo-gradients and the superseded global are kept retain_checkpoints
	// longer (a late dispute can still fetch them); the last global is the final model.
	commits, err := k.roundCommits(ctx, job.Id, round.Round)
	if err != nil {
		return err
	}
	for _, c := range commits {
		if err := k.custody.keeper.ReleaseCustodyAfterRetention(ctx, types.PseudoGradientCustodyID(job.Id, round.Round, c.Worker)); err != nil {
			return err
		}
	}
	if round.Round > 0 {
		if err := k.custody.keeper.ReleaseCustodyAfterRetention(ctx, types.GlobalCustodyID(job.Id, round.Round)); err != nil {
			return err
		}
	}
	if round.Round+1 < job.Spec.Rounds() || job.State.IsTerminal() {
		return k.Jobs.Set(ctx, job.Id, job)
	}
	if err := k.custody.keeper.ReleaseCustodyAfterRetention(ctx, id); err != nil {
		return err
	}
	_, err = k.closeJob(ctx, &job, types.JOB_STATE_COMPLETED, types.LEASE_CLOSE_REASON_COMPLETED,
		fmt.Sprintf("training completed: the final model is global state %s (root %x)", id, round.NextGlobalRoot))
	return err
}

// roundTracesPending reports whether the round checkpoint of one of the round's entered
// workers is still pending in x/verify, or a file query on one of its commits is open: a
// game or a query proof it loses excludes the worker and voids the global
// (ExcludeRoundWorker), which a final global could no longer undo.
func (k Keeper) roundTracesPending(ctx sdk.Context, job types.Job, round types.Round) (bool, error) {
	if k.roundTraces.keeper == nil {
		return false, nil
	}
	if queried, err := k.roundTraces.keeper.RoundFilesQueried(ctx, job.Id, round.Round); err != nil || queried {
		return queried, err
	}
	end := job.Spec.Sync.Diloco().RoundStart(round.Round + 1)
	for _, w := range round.Entered {
		c, err := k.GetRoundCommit(ctx, job.Id, round.Round, w)
		if err != nil {
			return false, err
		}
		if pending, err := k.roundTraces.keeper.RoundCheckpointPending(ctx, c.LeaseId, end); err != nil || pending {
			return pending, err
		}
	}
	return false, nil
}

// payRound settles the claims of a round whose next global is final: an entered worker's
// claim is released to its lease's withdrawable balance, any other's goes back to the
// job. The caller saves the job.
func (k Keeper) payRound(ctx sdk.Context, job *types.Job, round types.Round) (paid, refunded sdk.Coin, err error) {
	paid = sdk.NewCoin(job.Escrow.Denom, math.ZeroInt())
	refunded = paid
	commits, err := k.roundCommits(ctx, job.Id, round.Round)
	if err != nil {
		return paid, refunded, err
	}
	for _, c := range commits {
		_, entered := slices.BinarySearch(round.Entered, c.Worker)
		amount, err := k.settleClaim(ctx, job, c, entered)
		if err != nil {
			return paid, refunded, err
		}
		if entered {
			paid = paid.Add(amount)
		} else {
			refunded = refunded.Add(amount)
		}
	}
	return paid, refunded, nil
}

// settleRoundClaims returns every claim of a round that will never be final (its job
// closed before the round's global was committed) to the job. The caller saves nothing.
func (k Keeper) settleRoundClaims(ctx sdk.Context, job *types.Job, round types.Round) error {
	commits, err := k.roundCommits(ctx, job.Id, round.Round)
	if err != nil {
		return err
	}
	for _, c := range commits {
		if _, err := k.settleClaim(ctx, job, c, false); err != nil {
			return err
		}
	}
	return k.Jobs.Set(ctx, job.Id, *job)
}

// settleClaim releases (pay) or refunds a commit's claim, through the lease's committed
// balance like a checkpoint's claim; what a conviction already refunded is not there any
// more. The commit's claim is zeroed so it is settled once. The caller saves the job.
func (k Keeper) settleClaim(ctx sdk.Context, job *types.Job, c types.RoundCommit, pay bool) (sdk.Coin, error) {
	lease, err := k.GetLease(ctx, c.LeaseId)
	if err != nil {
		return sdk.Coin{}, err
	}
	amount := c.Claim
	if amount.Denom == "" || !amount.IsPositive() {
		return sdk.NewCoin(job.Escrow.Denom, math.ZeroInt()), nil
	}
	if amount.Amount.GT(lease.Committed.Amount) {
		amount = lease.Committed
	}
	lease.Committed = lease.Committed.Sub(amount)
	lease.Pending = lease.Pending.Sub(amount)
	if pay {
		lease.Withdrawable = lease.Withdrawable.Add(amount)
	}
	if err := k.Leases.Set(ctx, lease.Id, lease); err != nil {
		return sdk.Coin{}, err
	}
	c.Claim = sdk.NewCoin(c.Claim.Denom, math.ZeroInt())
	if err := k.RoundCommits.Set(ctx, collections.Join3(c.JobId, c.Round, c.Worker), c); err != nil {
		return sdk.Coin{}, err
	}
	if !amount.IsPositive() {
		return amount, nil
	}
	if pay {
		return amount, keeperutil.Emit(ctx, &types.EventPaymentReleased{
			LeaseId: lease.Id, Provider: lease.Provider, Amount: amount, Withdrawable: lease.Withdrawable,
		})
	}
	if err := k.refundToJob(ctx, job, amount); err != nil {
		return sdk.Coin{}, err
	}
	return amount, keeperutil.Emit(ctx, &types.EventPaymentRefunded{LeaseId: lease.Id, JobId: job.Id, Amount: amount})
}

// voidGlobal takes back a round's committed global: its custody is released, every
// later round (opened on it) is deleted with its commits, whose claims go back to the
// job, and the round aggregates again. It saves the job and the round.
func (k Keeper) voidGlobal(ctx sdk.Context, params types.Params, job *types.Job, round *types.Round, reason string) error {
	if err := k.custody.keeper.ReleaseCustodyNow(ctx, types.GlobalCustodyID(job.Id, round.Round+1)); err != nil {
		return err
	}
	for q := job.Round; q > round.Round; q-- {
		if err := k.deleteRound(ctx, job, q); err != nil {
			return err
		}
	}
	job.Round = round.Round
	rejected, aggregator := round.NextGlobalRoot, round.Aggregator
	round.State = types.ROUND_STATE_AGGREGATING
	round.Aggregator, round.AggregatorLeaseId = "", 0
	round.NextGlobalRoot, round.NextGlobalSize, round.ChallengeDeadline = nil, 0, 0
	if err := k.setRoundDeadline(ctx, round, ctx.BlockHeight()+int64(params.RoundAggregateBlocks)); err != nil {
		return err
	}
	if err := k.Rounds.Set(ctx, collections.Join(job.Id, round.Round), *round); err != nil {
		return err
	}
	if err := k.Jobs.Set(ctx, job.Id, *job); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventGlobalRejected{
		JobId: job.Id, Round: round.Round, Aggregator: aggregator, GlobalRoot: rejected, Reason: reason, AggregateDeadline: round.Deadline,
	})
}

// deleteRound removes a round that trained on a voided global: its commits' claims go
// back to the job and their steps may be claimed again when the round is redone; its
// custody objects are released now; x/verify discards the commits' checkpoints of the
// round (they are not final: they wait for the round's start global), so each worker's
// next checkpoint is its redo of the round. The caller saves the job.
func (k Keeper) deleteRound(ctx sdk.Context, job *types.Job, q uint64) error {
	round, found, err := keeperutil.Optional(k.Rounds.Get(ctx, collections.Join(job.Id, q)))
	if err != nil || !found {
		return err
	}
	commits, err := k.roundCommits(ctx, job.Id, q)
	if err != nil {
		return err
	}
	start := job.Spec.Sync.Diloco().RoundStart(q)
	for _, c := range commits {
		refunded, err := k.settleClaim(ctx, job, c, false)
		if err != nil {
			return err
		}
		lease, err := k.GetLease(ctx, c.LeaseId)
		if err != nil {
			return err
		}
		// The steps are unclaimed again: what the lease took for them no longer counts as
		// accrued, so redoing the round claims them at the same price once more.
		lease.Accrued = lease.Accrued.Sub(refunded)
		lease.ClaimedStep = min(lease.ClaimedStep, max(start, lease.ResumeStep))
		if err := k.Leases.Set(ctx, lease.Id, lease); err != nil {
			return err
		}
		setClaimedStep(job, c.Worker, min(claimedStepOf(*job, c.Worker), start))
		if k.roundTraces.keeper != nil {
			if err := k.roundTraces.keeper.DiscardRoundCheckpoints(ctx, c.LeaseId, start,
				fmt.Sprintf("round %d of job %d was deleted: its start global was voided", q, job.Id)); err != nil {
				return err
			}
		}
		if err := k.custody.keeper.ReleaseCustodyNow(ctx, types.PseudoGradientCustodyID(job.Id, q, c.Worker)); err != nil {
			return err
		}
		if err := k.RoundCommits.Remove(ctx, collections.Join3(job.Id, q, c.Worker)); err != nil {
			return err
		}
	}
	if round.State == types.ROUND_STATE_CHALLENGE {
		if err := k.custody.keeper.ReleaseCustodyNow(ctx, types.GlobalCustodyID(job.Id, q+1)); err != nil {
			return err
		}
	}
	if err := k.setRoundDeadline(ctx, &round, 0); err != nil {
		return err
	}
	return k.Rounds.Remove(ctx, collections.Join(job.Id, q))
}

// ExcludeRoundWorker takes a worker's commit out of a round after x/verify convicted its
// start state, pseudo-gradient or trace: it leaves the entered list (so it is not paid
// for the round), and a global already committed over it is voided (the round aggregates
// again without it). A round whose global is final keeps its global and entered list;
// the commit is only marked. Slashing and closing the lease stay with x/verify.
func (k Keeper) ExcludeRoundWorker(ctx context.Context, jobID, r uint64, worker uint32, reason string) error {
	sdkCtx := sdk.UnwrapSDKContext(ctx)
	round, err := k.GetRound(ctx, jobID, r)
	if err != nil {
		return err
	}
	if _, err := k.GetRoundCommit(ctx, jobID, r, worker); err != nil {
		return err
	}
	if err := k.excludeCommit(sdkCtx, jobID, r, worker, reason); err != nil {
		return err
	}
	if round.State == types.ROUND_STATE_FINAL || round.State == types.ROUND_STATE_OPEN {
		return nil
	}
	i, entered := slices.BinarySearch(round.Entered, worker)
	if !entered {
		return nil
	}
	round.Entered = slices.Delete(round.Entered, i, i+1)
	if round.State == types.ROUND_STATE_AGGREGATING {
		return k.Rounds.Set(ctx, collections.Join(jobID, r), round)
	}
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	return k.voidGlobal(sdkCtx, params, &job, &round, fmt.Sprintf("worker %d was excluded: %s", worker, reason))
}

// RejectGlobal voids the committed aggregation of round r after x/verify proved it wrong
// and returns its aggregator (x/verify convicts the aggregator's lease, Round's
// aggregator_lease_id, through its existing path). A final global cannot be rejected.
func (k Keeper) RejectGlobal(ctx context.Context, jobID, r uint64) (string, error) {
	round, err := k.GetRound(ctx, jobID, r)
	if err != nil {
		return "", err
	}
	if round.State != types.ROUND_STATE_CHALLENGE {
		return "", errorsmod.Wrapf(types.ErrWrongRound, "round %d of job %d has no global in its challenge window (it is %s)", r, jobID, round.State)
	}
	job, err := k.GetJob(ctx, jobID)
	if err != nil {
		return "", err
	}
	params, err := k.Params.Get(ctx)
	if err != nil {
		return "", err
	}
	aggregator := round.Aggregator
	return aggregator, k.voidGlobal(sdk.UnwrapSDKContext(ctx), params, &job, &round, "the aggregation was proven wrong")
}

// roundOfCheckpoint is the commit a sync job's checkpoint ending at endStep belongs to:
// the worker's commit of the round it ends, which must exist (the worker commits the
// round first, normally in the same transaction) and carry no claim yet. Its steps'
// claim starts at the round's start: the steps of rounds the slot did not train in are
// never paid, and a round is claimed once.
func (k Keeper) roundOfCheckpoint(ctx sdk.Context, job types.Job, lease types.Lease, endStep uint64) (types.RoundCommit, error) {
	every := uint64(job.Spec.Sync.Every)
	if endStep == 0 || endStep%every != 0 {
		return types.RoundCommit{}, errorsmod.Wrapf(types.ErrInvalidAmount, "a checkpoint of sync job %d ends a round: its end step must be a positive multiple of %d, got %d", job.Id, every, endStep)
	}
	r := endStep/every - 1
	c, found, err := keeperutil.Optional(k.RoundCommits.Get(ctx, collections.Join3(job.Id, r, lease.Worker)))
	if err != nil {
		return c, err
	}
	if !found || c.LeaseId != lease.Id {
		return c, errorsmod.Wrapf(types.ErrRoundCommitNotFound, "lease %d has no commit of round %d of job %d: commit the round (MsgCommitRound) before its checkpoint", lease.Id, r, job.Id)
	}
	if c.Claim.IsPositive() {
		return c, errorsmod.Wrapf(types.ErrInvalidRoundCommit, "round %d of job %d is already claimed by worker %d's checkpoint", r, job.Id, lease.Worker)
	}
	return c, nil
}

// registerRoundCustody registers a round file of job (a pseudo-gradient or a global,
// trained or aggregated by lease) as a custody object under the job's custody section.
// x/shardregistry counts the object into the stored job (OnCustodyRegistered), so the
// caller's copy takes the new count before it is saved again.
func (k Keeper) registerRoundCustody(ctx context.Context, job *types.Job, id string, lease types.Lease, round uint64, root []byte, size uint64, pieceRoots [][]byte) error {
	c := job.Spec.Custody
	if err := k.custody.keeper.RegisterRoundCustody(ctx, id, job.Owner, lease.Provider, job.Id, lease.Id, round,
		root, size, c.DataPieces, c.ParityPieces, uint64(c.RetainCheckpoints.Seconds()), pieceRoots); err != nil {
		return err
	}
	stored, err := k.GetJob(ctx, job.Id)
	if err != nil {
		return err
	}
	job.CustodyHeld = stored.CustodyHeld
	return nil
}
