package keeper

import (
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// The bisection game keeps one invariant: both parties agree on the hash at lo and
// disagree on the hash at hi. Each round halves (lo, hi) at mid: the provider reveals its
// h_mid with a proof against its trace root, the challenger answers with its own h_mid
// against its trace root, and the range keeps the half where they still disagree. At
// hi = lo + 1 the referee re-executes step lo (MsgStep). Rounds: ceil(log2(end − start)).

// openChallenge disputes a pending checkpoint: it posts the challenger's bond and starts
// a game on the checkpoint's whole range (MsgChallenge).
func (k Keeper) openChallenge(ctx sdk.Context, challenger sdk.AccAddress, msg *types.MsgChallenge) (uint64, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	cp, err := k.GetCheckpoint(ctx, msg.LeaseId, msg.CheckpointIndex)
	if err != nil {
		return 0, err
	}
	if cp.Status != types.CHECKPOINT_STATUS_PENDING {
		return 0, errorsmod.Wrapf(types.ErrNotChallengeable, "checkpoint %d/%d is %s", cp.LeaseId, cp.Index, cp.Status)
	}
	if ctx.BlockHeight() > cp.ChallengeDeadline {
		return 0, errorsmod.Wrapf(types.ErrNotChallengeable, "checkpoint %d/%d's challenge window closed at height %d", cp.LeaseId, cp.Index, cp.ChallengeDeadline)
	}
	if cp.WorkloadVersion == 0 {
		return 0, errorsmod.Wrapf(types.ErrNotAdjudicable,
			"checkpoint %d/%d belongs to a container workload: one-step re-execution exists only for the reference workload", cp.LeaseId, cp.Index)
	}
	if cp.WorkloadVersion != types.ReferenceWorkloadVersion {
		return 0, errorsmod.Wrapf(types.ErrNotAdjudicable, "reference workload version %d is not supported by this chain", cp.WorkloadVersion)
	}
	// The referee re-executes a step on data proven against the job's data root; a job
	// whose data it cannot see could never be decided for the challenger, whose bond would
	// be lost by timeout however right it is.
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil {
		return 0, err
	}
	if _, err := k.dataLayout(ctx, job, cp.Worker); err != nil {
		return 0, keeperutil.WrapCause(types.ErrNotAdjudicable, err, "checkpoint %d/%d", cp.LeaseId, cp.Index)
	}
	if msg.Challenger == cp.Provider {
		return 0, errorsmod.Wrap(types.ErrSelfChallenge, msg.Challenger)
	}
	if cp.OpenChallenges >= params.MaxChallengesPerCheckpoint {
		return 0, errorsmod.Wrapf(types.ErrTooManyChallenges, "checkpoint %d/%d has %d open challenges", cp.LeaseId, cp.Index, cp.OpenChallenges)
	}
	size := cp.EndStep - cp.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "final_hash", msg.TraceRoot, size-1, size, msg.FinalHash, msg.FinalHashProof); err != nil {
		return 0, err
	}
	if sameHash(msg.FinalHash, cp.FinalHash) {
		return 0, errorsmod.Wrapf(types.ErrNoDisagreement, "final_hash equals the provider's h_%d", cp.EndStep)
	}
	if err := k.bankKeeper.SendCoinsFromAccountToModule(ctx, challenger, types.ModuleName, sdk.NewCoins(params.ChallengerBond)); err != nil {
		return 0, errorsmod.Wrapf(err, "posting challenger bond %s", params.ChallengerBond)
	}
	id, err := k.NextChallengeID.Next(ctx)
	if err != nil {
		return 0, err
	}
	ch := types.Challenge{
		Id:                  id,
		LeaseId:             cp.LeaseId,
		CheckpointIndex:     cp.Index,
		Challenger:          msg.Challenger,
		Provider:            cp.Provider,
		Bond:                params.ChallengerBond,
		ChallengerTraceRoot: msg.TraceRoot,
		Lo:                  cp.StartStep,
		Hi:                  cp.EndStep,
		OpenedHeight:        ctx.BlockHeight(),
	}
	cp.OpenChallenges++
	if err := k.saveCheckpoint(ctx, cp); err != nil {
		return 0, err
	}
	if err := keeperutil.Emit(ctx, &types.EventChallengeOpened{
		ChallengeId: id, LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, Challenger: msg.Challenger, Provider: cp.Provider, Bond: ch.Bond,
	}); err != nil {
		return 0, err
	}
	return id, k.nextRound(ctx, params, cp, &ch)
}

// nextRound sets up the game's next move for its current (lo, hi): the one-step phase at
// adjacent steps, otherwise a new midpoint, skipping the provider's turn when it has
// already revealed that midpoint for another game on the same checkpoint.
func (k Keeper) nextRound(ctx sdk.Context, params types.Params, cp types.Checkpoint, ch *types.Challenge) error {
	if ch.Hi-ch.Lo == 1 {
		ch.Turn = types.GAME_TURN_ONE_STEP
		ch.Mid = 0
	} else {
		ch.Mid = ch.Lo + (ch.Hi-ch.Lo)/2
		_, revealed, err := k.traceHashAt(ctx, cp, ch.Mid)
		if err != nil {
			return err
		}
		ch.Turn = types.GAME_TURN_PROVIDER
		if revealed {
			ch.Turn = types.GAME_TURN_CHALLENGER
		}
	}
	return k.setDeadline(ctx, params, ch)
}

// setDeadline gives the party to move move_timeout blocks, re-indexes the game and saves it.
func (k Keeper) setDeadline(ctx sdk.Context, params types.Params, ch *types.Challenge) error {
	if ch.Deadline != 0 {
		if err := k.MoveDeadlines.Remove(ctx, collections.Join(ch.Deadline, ch.Id)); err != nil {
			return err
		}
	}
	ch.Deadline = ctx.BlockHeight() + int64(params.MoveTimeout)
	if err := k.MoveDeadlines.Set(ctx, collections.Join(ch.Deadline, ch.Id)); err != nil {
		return err
	}
	if err := k.Challenges.Set(ctx, ch.Id, *ch); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventGameTurn{
		ChallengeId: ch.Id, LeaseId: ch.LeaseId, CheckpointIndex: ch.CheckpointIndex, Turn: ch.Turn,
		Lo: ch.Lo, Hi: ch.Hi, Mid: ch.Mid, Deadline: ch.Deadline, Round: ch.Rounds + 1,
	})
}

// checkInTime refuses a move after the game's deadline. The end blocker times games out
// at their deadline, but only max_deadlines_per_block of them per block: a game it has
// not reached yet is lost all the same, and a late move must not rescue it.
func checkInTime(ctx sdk.Context, ch types.Challenge) error {
	if ctx.BlockHeight() > ch.Deadline {
		return errorsmod.Wrapf(types.ErrMoveTooLate, "challenge %d: the %s move was due by height %d", ch.Id, ch.Turn, ch.Deadline)
	}
	return nil
}

// openChallengesOf lists the unresolved games on a checkpoint.
func (k Keeper) openChallengesOf(ctx sdk.Context, leaseID, index uint64) ([]types.Challenge, error) {
	iter, err := k.Challenges.Indexes.Checkpoint.MatchExact(ctx, collections.Join(leaseID, index))
	if err != nil {
		return nil, err
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return nil, err
	}
	var open []types.Challenge
	for _, id := range ids {
		ch, err := k.Challenges.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if ch.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED {
			open = append(open, ch)
		}
	}
	return open, nil
}

// revealHash puts the provider's h_step of a checkpoint on-chain, proven against its
// trace root, for every game waiting on it (MsgRevealHash).
func (k Keeper) revealHash(ctx sdk.Context, msg *types.MsgRevealHash) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	cp, err := k.GetCheckpoint(ctx, msg.LeaseId, msg.CheckpointIndex)
	if err != nil {
		return err
	}
	if msg.Provider != cp.Provider {
		return errorsmod.Wrapf(types.ErrNotLeaseProvider, "checkpoint %d/%d was committed by %s", cp.LeaseId, cp.Index, cp.Provider)
	}
	if _, revealed, err := k.traceHashAt(ctx, cp, msg.Step); err != nil {
		return err
	} else if revealed {
		return errorsmod.Wrapf(types.ErrAlreadyRevealed, "h_%d of checkpoint %d/%d is already on-chain", msg.Step, cp.LeaseId, cp.Index)
	}
	games, err := k.openChallengesOf(ctx, cp.LeaseId, cp.Index)
	if err != nil {
		return err
	}
	var waiting []types.Challenge
	late := false
	for _, ch := range games {
		if ch.Turn == types.GAME_TURN_PROVIDER && ch.Mid == msg.Step {
			if checkInTime(ctx, ch) != nil {
				late = true // lost already; the end blocker has not got to it yet
				continue
			}
			waiting = append(waiting, ch)
		}
	}
	if len(waiting) == 0 {
		if late {
			return errorsmod.Wrapf(types.ErrMoveTooLate, "the games on checkpoint %d/%d asking for step %d are past their deadlines", cp.LeaseId, cp.Index, msg.Step)
		}
		return errorsmod.Wrapf(types.ErrNoGameWaiting, "no game on checkpoint %d/%d asks for step %d", cp.LeaseId, cp.Index, msg.Step)
	}
	size := cp.EndStep - cp.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "hash", cp.TraceRoot, msg.Step-cp.StartStep, size, msg.Hash, msg.Proof); err != nil {
		return err
	}
	if err := k.Openings.Set(ctx, collections.Join3(cp.LeaseId, cp.Index, msg.Step), msg.Hash); err != nil {
		return err
	}
	if err := keeperutil.Emit(ctx, &types.EventHashRevealed{LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, Step: msg.Step, Hash: msg.Hash}); err != nil {
		return err
	}
	for i := range waiting {
		waiting[i].Turn = types.GAME_TURN_CHALLENGER
		if err := k.setDeadline(ctx, params, &waiting[i]); err != nil {
			return err
		}
	}
	return nil
}

// respond is the challenger's answer at a game's midpoint, proven against its own trace
// root; it halves the disputed range (MsgRespond).
func (k Keeper) respond(ctx sdk.Context, msg *types.MsgRespond) (bool, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return false, err
	}
	ch, err := k.GetChallenge(ctx, msg.ChallengeId)
	if err != nil {
		return false, err
	}
	if msg.Challenger != ch.Challenger {
		return false, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d belongs to %s", ch.Id, ch.Challenger)
	}
	if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED || ch.Turn != types.GAME_TURN_CHALLENGER {
		return false, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d waits for %s", ch.Id, ch.Turn)
	}
	if err := checkInTime(ctx, ch); err != nil {
		return false, err
	}
	cp, err := k.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex)
	if err != nil {
		return false, err
	}
	size := cp.EndStep - cp.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "hash", ch.ChallengerTraceRoot, ch.Mid-cp.StartStep, size, msg.Hash, msg.Proof); err != nil {
		return false, err
	}
	providerHash, ok, err := k.traceHashAt(ctx, cp, ch.Mid)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, fmt.Errorf("challenge %d: provider hash at %d missing while it is the challenger's turn", ch.Id, ch.Mid)
	}
	agreed := sameHash(msg.Hash, providerHash)
	if agreed {
		ch.Lo = ch.Mid
	} else {
		ch.Hi = ch.Mid
	}
	ch.Rounds++
	return agreed, k.nextRound(ctx, params, cp, &ch)
}

// resolve ends a game. A provider loss is proven fraud: slash with the challenger as
// whistleblower, tombstone, reject the lease's pending checkpoints and hand the job back
// to the market; the other games on those checkpoints end moot. A challenger loss pays
// its bond to the provider for the delay and lets the checkpoint finalize (endOfBlock:
// resolved by the end blocker, see tryFinalize).
func (k Keeper) resolve(ctx sdk.Context, ch types.Challenge, outcome types.ChallengeOutcome, reason string, endOfBlock bool) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	if err := k.MoveDeadlines.Remove(ctx, collections.Join(ch.Deadline, ch.Id)); err != nil {
		return err
	}
	challenger, err := k.addressCodec.StringToBytes(ch.Challenger)
	if err != nil {
		return err
	}
	provider, err := k.addressCodec.StringToBytes(ch.Provider)
	if err != nil {
		return err
	}
	ch.Outcome = outcome
	ch.OutcomeReason = reason
	ch.Turn = types.GAME_TURN_DONE
	if err := k.Challenges.Set(ctx, ch.Id, ch); err != nil {
		return err
	}
	cp, err := k.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex)
	if err != nil {
		return err
	}
	cp.OpenChallenges--
	if err := k.saveCheckpoint(ctx, cp); err != nil {
		return err
	}
	event := &types.EventChallengeResolved{
		ChallengeId: ch.Id, LeaseId: ch.LeaseId, CheckpointIndex: ch.CheckpointIndex, Outcome: outcome, Reason: reason,
		Challenger: ch.Challenger, Provider: ch.Provider,
		Slashed: sdk.NewInt64Coin(ch.Bond.Denom, 0), Reward: sdk.NewInt64Coin(ch.Bond.Denom, 0), Bond: ch.Bond,
	}

	switch outcome {
	case types.CHALLENGE_OUTCOME_PROVIDER_WON:
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, provider, sdk.NewCoins(ch.Bond)); err != nil {
			return err
		}
		if err := keeperutil.Emit(ctx, event); err != nil {
			return err
		}
		return k.tryFinalize(ctx, cp.LeaseId, cp.Index, endOfBlock)

	case types.CHALLENGE_OUTCOME_MOOT:
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, challenger, sdk.NewCoins(ch.Bond)); err != nil {
			return err
		}
		return keeperutil.Emit(ctx, event)

	case types.CHALLENGE_OUTCOME_CHALLENGER_WON:
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, challenger, sdk.NewCoins(ch.Bond)); err != nil {
			return err
		}
		fraud := fmt.Sprintf("checkpoint %d/%d proven wrong by challenge %d: %s", cp.LeaseId, cp.Index, ch.Id, reason)
		slashed, err := k.providerKeeper.Slash(ctx, provider, params.FraudSlashFraction, fraud, challenger, params.WhistleblowerShare)
		if err != nil {
			return err
		}
		event.Slashed = slashed
		event.Reward = sdk.NewCoin(slashed.Denom, params.WhistleblowerShare.MulInt(slashed.Amount).TruncateInt())
		if err := k.providerKeeper.Tombstone(ctx, provider, fraud); err != nil {
			return err
		}
		if err := keeperutil.Emit(ctx, event); err != nil {
			return err
		}
		if err := k.endOtherGamesOnLease(ctx, ch.LeaseId, endOfBlock); err != nil {
			return err
		}
		if err := k.rejectPending(ctx, cp.LeaseId, fraud); err != nil {
			return err
		}
		return k.marketKeeper.OnCheckpointRejected(ctx, cp.LeaseId)
	}
	return fmt.Errorf("challenge %d: cannot resolve with outcome %s", ch.Id, outcome)
}

// endOtherGamesOnLease ends as moot every open game on any checkpoint of the lease: once
// the provider is proven a cheat, those disputes have nothing left to decide.
func (k Keeper) endOtherGamesOnLease(ctx sdk.Context, leaseID uint64, endOfBlock bool) error {
	iter, err := k.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](leaseID))
	if err != nil {
		return err
	}
	cps, err := iter.Values()
	if err != nil {
		return err
	}
	for _, cp := range cps {
		if cp.OpenChallenges == 0 {
			continue
		}
		open, err := k.openChallengesOf(ctx, cp.LeaseId, cp.Index)
		if err != nil {
			return err
		}
		for _, other := range open {
			if err := k.resolve(ctx, other, types.CHALLENGE_OUTCOME_MOOT, "the provider was proven wrong in another challenge", endOfBlock); err != nil {
				return err
			}
		}
	}
	return nil
}

// timeOut ends a game whose party to move missed its deadline: that party loses. Only
// the end blocker calls it.
func (k Keeper) timeOut(ctx sdk.Context, id uint64) error {
	ch, err := k.GetChallenge(ctx, id)
	if err != nil {
		return err
	}
	if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED {
		return nil
	}
	if ch.Turn == types.GAME_TURN_PROVIDER {
		return k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_CHALLENGER_WON,
			fmt.Sprintf("the provider did not reveal h_%d by height %d", ch.Mid, ch.Deadline), true)
	}
	what := fmt.Sprintf("answer at step %d", ch.Mid)
	if ch.Turn == types.GAME_TURN_ONE_STEP {
		what = fmt.Sprintf("prove step %d with MsgStep", ch.Lo)
	}
	return k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_PROVIDER_WON, fmt.Sprintf("the challenger did not %s by height %d", what, ch.Deadline), true)
}
