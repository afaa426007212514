package keeper

import (
	"fmt"

	"cosmossdk.io/collections"
	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/x/internal/keeperutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// The bisection game keeps one invariant: both parties agree on the hash at lo and
// disagree on the hash at hi. Each round halves (lo, hi) at mid: the provider reveals its
// h_mid with a proof against its trace root, the challenger answers with its own h_mid
// against its trace root, and the range keeps the half where they still disagree. At
// hi = lo + 1 the referee re-executes step lo (MsgStep). Rounds: ceil(log2(end − start)).
//
// There is no cap on the games of a checkpoint, so nothing in a game may cost work in
// proportion to the others: a reveal is one write, however many games wait on it (each
// game passes its turn to its challenger when it next moves, see effective); a
// conviction rejects the checkpoints and leaves the other games to end moot when they
// next move or time out (at most move_timeout later), instead of ending them all in the
// winning challenger's transaction. An honest challenger's game therefore resolves within
// its own move deadlines whatever else is open, and MsgClaimTimeout ends it at once when
// the provider misses one, without waiting for the end blocker's per-block cap.

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
	if cp.WorkloadVersion != types.ExactWorkloadVersion {
		return 0, errorsmod.Wrapf(types.ErrNotAdjudicable, "reference workload version %d is not supported by this chain", cp.WorkloadVersion)
	}
	// The referee re-executes a step on data proven against the job's data root; a job
	// whose data it cannot see could never be decided for the challenger, whose bond would
	// be lost by timeout however right it is.
	job, err := k.marketKeeper.GetJob(ctx, cp.JobId)
	if err != nil {
		return 0, err
	}
	if _, err := k.dataLayout(ctx, job, cp.Worker, cp.StartStep); err != nil {
		return 0, keeperutil.WrapCause(types.ErrNotAdjudicable, err, "checkpoint %d/%d", cp.LeaseId, cp.Index)
	}
	if msg.Challenger == cp.Provider {
		return 0, errorsmod.Wrap(types.ErrSelfChallenge, msg.Challenger)
	}
	size := cp.EndStep - cp.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "final_hash", msg.TraceRoot, size-1, size, msg.FinalHash, msg.FinalHashProof); err != nil {
		return 0, err
	}
	if sameHash(msg.FinalHash, cp.FinalHash) {
		return 0, errorsmod.Wrapf(types.ErrNoDisagreement, "final_hash equals the provider's h_%d", cp.EndStep)
	}
	audit, assigned, err := k.openAudit(ctx, cp, msg.Challenger)
	if err != nil {
		return 0, err
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
	if assigned {
		// An auditor that challenges has answered its assignment.
		if err := k.answerAudit(ctx, &audit, types.AUDIT_STATUS_CHALLENGED, nil, id); err != nil {
			return 0, err
		}
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
	return k.setDeadline(ctx, params, ch, ctx.BlockHeight()+int64(params.MoveTimeout))
}

// setDeadline gives the party to move until deadline, re-indexes the game and saves it.
// ch.Deadline must be the deadline the index holds for the game (or 0).
func (k Keeper) setDeadline(ctx sdk.Context, params types.Params, ch *types.Challenge, deadline int64) error {
	if ch.Deadline != 0 {
		if err := k.MoveDeadlines.Remove(ctx, collections.Join(ch.Deadline, ch.Id)); err != nil {
			return err
		}
	}
	ch.Deadline = deadline
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

// effective is a game as it stands at the current height: a game stored as waiting on
// the provider at mid whose provider revealed h_mid in time (at or before the game's
// deadline, for this or any other game) is the challenger's turn, with until the reveal
// height + move_timeout to answer. Queries show games this way; every move and timeout
// starts from it. It reads, never writes.
func (k Keeper) effective(ctx sdk.Context, params types.Params, ch types.Challenge) (types.Challenge, error) {
	if ch.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED || ch.Turn != types.GAME_TURN_PROVIDER {
		return ch, nil
	}
	revealed, found, err := keeperutil.Optional(k.OpeningHeights.Get(ctx, collections.Join3(ch.LeaseId, ch.CheckpointIndex, ch.Mid)))
	if err != nil || !found || revealed > ch.Deadline {
		return ch, err
	}
	ch.Turn = types.GAME_TURN_CHALLENGER
	ch.Deadline = revealed + int64(params.MoveTimeout)
	return ch, nil
}

// materialize stores a game's effective state: the index moves from the stored deadline
// to the effective one, and EventGameTurn tells the challenger its turn came. It returns
// the game as stored now.
func (k Keeper) materialize(ctx sdk.Context, params types.Params, stored types.Challenge) (types.Challenge, error) {
	eff, err := k.effective(ctx, params, stored)
	if err != nil || eff.Turn == stored.Turn {
		return stored, err
	}
	ch := stored
	ch.Turn = eff.Turn
	return ch, k.setDeadline(ctx, params, &ch, eff.Deadline)
}

// Effective is the game as it stands now (see effective), for queries and other modules.
func (k Keeper) Effective(ctx sdk.Context, ch types.Challenge) (types.Challenge, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return ch, err
	}
	return k.effective(ctx, params, ch)
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

// checkPending refuses a move in a game whose checkpoint is no longer pending: it was
// proven wrong in another game (or withheld), and the game ends moot.
func checkPending(ch types.Challenge, cp types.Checkpoint) error {
	if cp.Status != types.CHECKPOINT_STATUS_PENDING {
		return errorsmod.Wrapf(types.ErrNotYourTurn,
			"challenge %d: checkpoint %d/%d is %s, so the game ends moot (MsgClaimTimeout ends it now)", ch.Id, cp.LeaseId, cp.Index, cp.Status)
	}
	return nil
}

// revealHash puts the provider's h_step of a checkpoint on-chain, proven against its
// trace root (MsgRevealHash). It is one write whatever the number of games: every game
// waiting on that step moves on to its challenger by reading the reveal's height
// (effective), and later games reaching the step skip the provider's turn.
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
	if cp.Status != types.CHECKPOINT_STATUS_PENDING || cp.OpenChallenges == 0 {
		return errorsmod.Wrapf(types.ErrNoGameWaiting, "checkpoint %d/%d is %s with %d open challenges", cp.LeaseId, cp.Index, cp.Status, cp.OpenChallenges)
	}
	if _, revealed, err := k.traceHashAt(ctx, cp, msg.Step); err != nil {
		return err
	} else if revealed {
		return errorsmod.Wrapf(types.ErrAlreadyRevealed, "h_%d of checkpoint %d/%d is already on-chain", msg.Step, cp.LeaseId, cp.Index)
	}
	if msg.Step <= cp.StartStep || msg.Step >= cp.EndStep {
		return errorsmod.Wrapf(types.ErrNoGameWaiting, "step %d is not a midpoint of checkpoint %d/%d (steps %d..%d)", msg.Step, cp.LeaseId, cp.Index, cp.StartStep, cp.EndStep)
	}
	size := cp.EndStep - cp.StartStep + 1
	if err := verifyTraceLeaf(ctx, params, "hash", cp.TraceRoot, msg.Step-cp.StartStep, size, msg.Hash, msg.Proof); err != nil {
		return err
	}
	key := collections.Join3(cp.LeaseId, cp.Index, msg.Step)
	if err := k.Openings.Set(ctx, key, msg.Hash); err != nil {
		return err
	}
	if err := k.OpeningHeights.Set(ctx, key, ctx.BlockHeight()); err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventHashRevealed{LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, Step: msg.Step, Hash: msg.Hash})
}

// respond is the challenger's answer at a game's midpoint, proven against its own trace
// root; it halves the disputed range (MsgRespond).
func (k Keeper) respond(ctx sdk.Context, msg *types.MsgRespond) (bool, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return false, err
	}
	stored, err := k.GetChallenge(ctx, msg.ChallengeId)
	if err != nil {
		return false, err
	}
	ch, err := k.effective(ctx, params, stored)
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
	if err := checkPending(ch, cp); err != nil {
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
	// The index holds the stored deadline, which nextRound replaces.
	ch.Deadline = stored.Deadline
	return agreed, k.nextRound(ctx, params, cp, &ch)
}

// claimTimeout ends a game whose party to move missed its deadline (MsgClaimTimeout),
// or a game whose checkpoint is no longer pending (it ends moot), as the end blocker
// would; anyone may send it.
func (k Keeper) claimTimeout(ctx sdk.Context, msg *types.MsgClaimTimeout) (types.ChallengeOutcome, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	stored, err := k.GetChallenge(ctx, msg.ChallengeId)
	if err != nil {
		return 0, err
	}
	if stored.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED {
		return 0, errorsmod.Wrapf(types.ErrNotYourTurn, "challenge %d already ended %s", stored.Id, stored.Outcome)
	}
	cp, err := k.GetCheckpoint(ctx, stored.LeaseId, stored.CheckpointIndex)
	if err != nil {
		return 0, err
	}
	ch, err := k.effective(ctx, params, stored)
	if err != nil {
		return 0, err
	}
	if cp.Status == types.CHECKPOINT_STATUS_PENDING && ctx.BlockHeight() <= ch.Deadline {
		return 0, errorsmod.Wrapf(types.ErrNotDue, "challenge %d: the %s move is due by height %d, now %d", ch.Id, ch.Turn, ch.Deadline, ctx.BlockHeight())
	}
	return k.endOverdue(ctx, stored, cp, false)
}

// timeOut is the end blocker's side of a deadline: the party to move missed it and loses,
// or the game's checkpoint was rejected meanwhile and it ends moot, or the game was
// waiting on a reveal that came in time and now waits on its challenger.
func (k Keeper) timeOut(ctx sdk.Context, id uint64) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	stored, err := k.GetChallenge(ctx, id)
	if err != nil {
		return err
	}
	if stored.Outcome != types.CHALLENGE_OUTCOME_UNSPECIFIED {
		return nil
	}
	cp, err := k.GetCheckpoint(ctx, stored.LeaseId, stored.CheckpointIndex)
	if err != nil {
		return err
	}
	if cp.Status == types.CHECKPOINT_STATUS_PENDING {
		eff, err := k.effective(ctx, params, stored)
		if err != nil {
			return err
		}
		if eff.Deadline > ctx.BlockHeight() {
			_, err := k.materialize(ctx, params, stored)
			return err
		}
	}
	_, err = k.endOverdue(ctx, stored, cp, true)
	return err
}

// endOverdue ends an open game past its effective deadline (or on a checkpoint that is no
// longer pending) and returns the outcome.
func (k Keeper) endOverdue(ctx sdk.Context, stored types.Challenge, cp types.Checkpoint, endOfBlock bool) (types.ChallengeOutcome, error) {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return 0, err
	}
	if cp.Status != types.CHECKPOINT_STATUS_PENDING {
		return types.CHALLENGE_OUTCOME_MOOT, k.resolve(ctx, stored, types.CHALLENGE_OUTCOME_MOOT,
			fmt.Sprintf("checkpoint %d/%d was %s by another challenge or its auditors", cp.LeaseId, cp.Index, cp.Status), endOfBlock)
	}
	eff, err := k.effective(ctx, params, stored)
	if err != nil {
		return 0, err
	}
	ch := eff
	ch.Deadline = stored.Deadline // the index entry resolve removes
	if ch.Turn == types.GAME_TURN_TILE_PROVIDER {
		return types.CHALLENGE_OUTCOME_CHALLENGER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_CHALLENGER_WON,
			fmt.Sprintf("the provider did not make its phase 2–3 move by height %d", stored.Deadline), endOfBlock)
	}
	if ch.Turn == types.GAME_TURN_PROVIDER {
		return types.CHALLENGE_OUTCOME_CHALLENGER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_CHALLENGER_WON,
			fmt.Sprintf("the provider did not reveal h_%d by height %d", ch.Mid, stored.Deadline), endOfBlock)
	}
	what := fmt.Sprintf("answer at step %d", ch.Mid)
	if ch.Turn == types.GAME_TURN_ONE_STEP {
		what = fmt.Sprintf("prove step %d with MsgStep or start phase 2 with MsgCommitRecords", ch.Lo)
	}
	if ch.Turn == types.GAME_TURN_TILE_CHALLENGER {
		what = fmt.Sprintf("make its phase 2–3 move on step %d", ch.Lo)
	}
	return types.CHALLENGE_OUTCOME_PROVIDER_WON, k.resolve(ctx, ch, types.CHALLENGE_OUTCOME_PROVIDER_WON,
		fmt.Sprintf("the challenger did not %s by height %d", what, eff.Deadline), endOfBlock)
}

// resolve ends a game. A provider loss is proven fraud (convict). A challenger loss
// splits its bond between the provider, the job and the community pool, and lets the
// checkpoint finalize (endOfBlock: resolved by the end blocker, see tryFinalize). A moot
// game returns the bond. ch.Deadline must be the deadline the index holds for the game.
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
	zero := sdk.NewInt64Coin(ch.Bond.Denom, 0)
	event := &types.EventChallengeResolved{
		ChallengeId: ch.Id, LeaseId: ch.LeaseId, CheckpointIndex: ch.CheckpointIndex, Outcome: outcome, Reason: reason,
		Challenger: ch.Challenger, Provider: ch.Provider, Slashed: zero, Reward: zero, Bond: ch.Bond,
		OwnerCompensation: zero, CommunityPool: zero, AuditorsSlashed: zero, BondToProvider: zero, BondToOwner: zero,
	}

	switch outcome {
	case types.CHALLENGE_OUTCOME_PROVIDER_WON:
		if err := k.splitLostBond(ctx, params, cp, provider, ch.Bond, event); err != nil {
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
		return k.convict(ctx, params, cp, ch, challenger, provider, reason, event)
	}
	return fmt.Errorf("challenge %d: cannot resolve with outcome %s", ch.Id, outcome)
}

// splitLostBond pays out a challenger bond the provider won: lost_bond_provider_share to
// the provider (its defence cost), lost_bond_owner_share to the job (the delay), the rest
// to the community pool. A provider that challenges itself from other accounts to hold
// its checkpoint open therefore loses most of every bond.
func (k Keeper) splitLostBond(ctx sdk.Context, params types.Params, cp types.Checkpoint, provider sdk.AccAddress, bond sdk.Coin, event *types.EventChallengeResolved) error {
	toProvider := sdk.NewCoin(bond.Denom, params.LostBondProviderShare.MulInt(bond.Amount).TruncateInt())
	toOwner := sdk.NewCoin(bond.Denom, params.LostBondOwnerShare.MulInt(bond.Amount).TruncateInt())
	toPool := bond.Sub(toProvider).Sub(toOwner)
	if toProvider.IsPositive() {
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, provider, sdk.NewCoins(toProvider)); err != nil {
			return err
		}
	}
	if err := k.creditJob(ctx, cp.JobId, toOwner, markettypes.CreditLostBond); err != nil {
		return err
	}
	if err := k.fundCommunityPool(ctx, toPool); err != nil {
		return err
	}
	event.BondToProvider, event.BondToOwner, event.CommunityPool = toProvider, toOwner, toPool
	return nil
}

// convict handles a lost game: the provider committed fraud at cp (see punishFraud).
// Other games on the rejected checkpoints end moot at their next move or deadline.
func (k Keeper) convict(ctx sdk.Context, params types.Params, cp types.Checkpoint, ch types.Challenge, challenger, provider sdk.AccAddress,
	reason string, event *types.EventChallengeResolved,
) error {
	fraud := fmt.Sprintf("checkpoint %d/%d proven wrong by challenge %d: %s", cp.LeaseId, cp.Index, ch.Id, reason)
	if err := k.excludeRoundOfCheckpoint(ctx, cp, fraud); err != nil {
		return err
	}
	p, err := k.punishFraud(ctx, params, cp, challenger, provider, fraud, true)
	if err != nil {
		return err
	}
	event.Slashed, event.Reward, event.AuditorsSlashed = p.slashed, p.reward, p.auditors
	event.OwnerCompensation, event.CommunityPool = p.compensation, p.communityPool
	return keeperutil.Emit(ctx, event)
}

// fraudPayout is where a conviction's slash went.
type fraudPayout struct {
	slashed, reward, auditors, compensation, communityPool sdk.Coin
}

// punishFraud is a conviction: the provider committed fraud at cp, proven by
// whistleblower (a challenger's won game, a parity fraud proof). Its pending checkpoints
// are rejected (the job resumes from its last final one, and x/market closes the lease
// and refunds their pay); its bond and the unbondings it began since cp's submission are
// slashed, and (slashAuditors: the fraud is in what they attested to, the trace) so are
// the bonds of the auditors that attested to cp; the pot pays the
// whistleblower's reward, then the owner's compensation for the lost progress, then the
// community pool. The provider is tombstoned.
func (k Keeper) punishFraud(ctx sdk.Context, params types.Params, cp types.Checkpoint, whistleblower, provider sdk.AccAddress, fraud string, slashAuditors bool) (fraudPayout, error) {
	rejected, err := k.rejectPending(ctx, cp.LeaseId, fraud)
	if err != nil {
		return fraudPayout{}, err
	}
	refund, err := k.marketKeeper.OnCheckpointRejected(ctx, cp.LeaseId)
	if err != nil {
		return fraudPayout{}, err
	}
	slashed, err := k.providerKeeper.SlashInfraction(ctx, provider, params.FraudSlashFraction, cp.SubmittedHeight, fraud, types.ModuleName)
	if err != nil {
		return fraudPayout{}, err
	}
	auditors := sdk.NewCoin(slashed.Denom, math.ZeroInt())
	if slashAuditors {
		if auditors, err = k.slashAttesters(ctx, params, cp, fraud); err != nil {
			return fraudPayout{}, err
		}
	}
	pot := slashed.Add(auditors)
	reward := sdk.NewCoin(pot.Denom, params.WhistleblowerShare.MulInt(pot.Amount).TruncateInt())
	if reward.IsPositive() {
		if err := k.bankKeeper.SendCoinsFromModuleToAccount(ctx, types.ModuleName, whistleblower, sdk.NewCoins(reward)); err != nil {
			return fraudPayout{}, err
		}
	}
	rest := pot.Sub(reward)
	owed := sdk.NewCoin(pot.Denom, params.OwnerCompensationRatio.MulInt(coinAmount(refund)).TruncateInt())
	if refund.Denom != "" && refund.Denom != pot.Denom {
		owed = sdk.NewCoin(pot.Denom, math.ZeroInt())
	}
	compensation := rest
	if owed.IsLT(rest) {
		compensation = owed
	}
	if err := k.creditJob(ctx, cp.JobId, compensation, markettypes.CreditCompensation); err != nil {
		return fraudPayout{}, err
	}
	toPool := rest.Sub(compensation)
	if err := k.fundCommunityPool(ctx, toPool); err != nil {
		return fraudPayout{}, err
	}
	if err := k.providerKeeper.Tombstone(ctx, provider, fraud); err != nil {
		return fraudPayout{}, err
	}
	for _, r := range rejected {
		if err := k.settleAudits(ctx, r, r.Index == cp.Index); err != nil {
			return fraudPayout{}, err
		}
	}
	return fraudPayout{slashed: pot, reward: reward, auditors: auditors, compensation: compensation, communityPool: toPool}, nil
}

// coinAmount is a coin's amount, zero for an empty coin.
func coinAmount(c sdk.Coin) math.Int {
	if c.Amount.IsNil() {
		return math.ZeroInt()
	}
	return c.Amount
}
