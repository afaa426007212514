package simulation

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"

	"cosmossdk.io/collections"

	sdk "github.com/cosmos/cosmos-sdk/types"
	simtypes "github.com/cosmos/cosmos-sdk/types/simulation"
	"github.com/cosmos/cosmos-sdk/x/simulation"

	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/x/internal/simutil"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	"github.com/depinchain/depinchain/x/verify/keeper"
	"github.com/depinchain/depinchain/x/verify/types"
)

// Operation weights: the keys a simulation params file may set, and their defaults.
const (
	OpWeightMsgSubmitCheckpoint = "op_weight_msg_submit_checkpoint"
	OpWeightMsgChallenge        = "op_weight_msg_challenge"
	OpWeightMsgRevealHash       = "op_weight_msg_reveal_hash"
	OpWeightMsgRespond          = "op_weight_msg_respond"
	OpWeightMsgStep             = "op_weight_msg_step"
	OpWeightMsgClaimTimeout     = "op_weight_msg_claim_timeout"
	OpWeightMsgAttest           = "op_weight_msg_attest"
	OpWeightMsgReportUnavail    = "op_weight_msg_report_unavailable"

	DefaultWeightMsgSubmitCheckpoint = 50
	DefaultWeightMsgChallenge        = 30
	DefaultWeightMsgRevealHash       = 40
	DefaultWeightMsgRespond          = 40
	DefaultWeightMsgStep             = 30
	DefaultWeightMsgClaimTimeout     = 15
	DefaultWeightMsgAttest           = 40
	DefaultWeightMsgReportUnavail    = 10
)

// lieChance is how often (in percent) a provider commits a made-up trace, and
// liarChallengeChance how often a challenger disputes an honest checkpoint with one.
const (
	lieChance           = 15
	liarChallengeChance = 30
)

// MarketKeeper is what the operations read of x/market: the jobs and the active leases
// whose providers checkpoint.
type MarketKeeper interface {
	GetJob(ctx context.Context, id uint64) (markettypes.Job, error)
	AllActiveLeases(ctx context.Context) ([]markettypes.Lease, error)
}

// Deps are what the operations sign with and read. Shards rebuilds dataset-backed
// training streams, as the referee sees them (types.ShardKeeper).
type Deps struct {
	simutil.Signer
	Keeper keeper.Keeper
	Market MarketKeeper
	Shards types.ShardKeeper
}

// WeightedOperations returns an operation for every message of x/verify except the
// authority-only MsgUpdateParams, which ProposalMsgs covers.
func WeightedOperations(appParams simtypes.AppParams, d Deps) simulation.WeightedOperations {
	d.Module = types.ModuleName
	return simutil.WeightedOperations(appParams,
		SimulateMsgSubmitCheckpoint(d), SimulateMsgChallenge(d), SimulateMsgRevealHash(d), SimulateMsgRespond(d), SimulateMsgStep(d),
		SimulateMsgClaimTimeout(d), SimulateMsgAttest(d), SimulateMsgReportUnavailable(d),
	)
}

// ---- what a checkpoint's parties know ----

// work is what the simulation knows about the workload behind a lease's checkpoints.
type work struct {
	job markettypes.Job
	// run is the honest computation up to the needed step; nil when the checkpoint cannot
	// be adjudicated (container job, or training data the referee cannot see).
	run *honestRun
	// whyNot says why run is nil.
	whyNot string
}

func (d Deps) workFor(ctx sdk.Context, jobID uint64, worker uint32, upTo uint64) (work, error) {
	job, err := d.Market.GetJob(ctx, jobID)
	if err != nil {
		return work{}, err
	}
	w := work{job: job}
	if !job.Spec.Workload.Kind.Adjudicable() {
		w.whyNot = "container workload"
		return w, nil
	}
	data, err := trainingData(ctx, d.Shards, job, worker)
	if err != nil {
		w.whyNot = err.Error()
		return w, nil
	}
	w.run, err = runFor(job, data, upTo)
	return w, err
}

// providerTraces are the traces a simulated provider may have committed for a
// checkpoint over [a, b] of a lease: honest, or its own lie.
func providerTraces(w work, provider string, leaseID, index, a, b uint64) []party {
	if w.run == nil {
		return []party{{trace: opaque(leaseID, a, b), honest: true}}
	}
	return []party{
		{trace: w.run.honest(a, b), honest: true},
		{trace: lie(w.run.hashes, a, b, saltOf("provider", provider, leaseID, index))},
	}
}

// challengerTraces are the traces a simulated challenger may have committed.
func challengerTraces(w work, challenger string, cp types.Checkpoint) []party {
	return []party{
		{trace: w.run.honest(cp.StartStep, cp.EndStep), honest: true},
		{trace: lie(w.run.hashes, cp.StartStep, cp.EndStep, saltOf("challenger", challenger, cp.LeaseId, cp.Index))},
	}
}

// adjudicable reports whether the simulation can play games on cp: the referee can
// re-execute its steps and the checkpoint starts from the honest state (a job resumed
// from an unchallenged lie cannot be replayed from its made-up start hash).
func adjudicable(w work, cp types.Checkpoint) bool {
	return w.run != nil && bytes.Equal(cp.StartHash, w.run.hashes[cp.StartStep][:])
}

// ---- checkpoints ----

// SimulateMsgSubmitCheckpoint has the provider of an active lease commit its next
// checkpoint: the honest trace of the reference workload computed with the real trainer,
// or one time in seven a trace that goes wrong part-way. One time in ten it sends a
// checkpoint that must be refused: the wrong index, a range past the checkpoint
// interval, a final hash its proof does not support, or a sender that is not the
// lease's provider.
func SimulateMsgSubmitCheckpoint(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgSubmitCheckpoint, DefaultWeightMsgSubmitCheckpoint, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgSubmitCheckpoint{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		active, err := d.Market.AllActiveLeases(ctx)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		lease, ok := simutil.Pick(r, active)
		if !ok {
			return o.NoOp(msg, "no active lease")
		}
		provider, ok := o.Account(lease.Provider)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", lease.Provider)
		}
		index, start := uint64(0), lease.ResumeStep
		iter, err := d.Keeper.Checkpoints.Iterate(ctx, collections.NewPrefixedPairRange[uint64, uint64](lease.Id).Descending())
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		if iter.Valid() {
			last, err := iter.Value()
			if err != nil {
				iter.Close()
				return o.NoOp(msg, "%s", err)
			}
			index, start = last.Index+1, last.EndStep
		}
		iter.Close()
		job, err := d.Market.GetJob(ctx, lease.JobId)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		total, interval := job.Spec.TotalSteps, job.Spec.CheckpointInterval
		if start >= total {
			return o.NoOp(msg, "lease %d has checkpointed all %d steps", lease.Id, total)
		}
		maxEnd := min(start+interval, total)
		end := maxEnd
		if r.Intn(4) == 0 {
			end = start + 1 + uint64(r.Int63n(int64(maxEnd-start)))
		}
		w, err := d.workFor(ctx, job.Id, lease.Worker, end)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		traces := providerTraces(w, lease.Provider, lease.Id, index, start, end)
		committed := traces[0]
		if len(traces) > 1 && end > start && simutil.Chance(r, lieChance) {
			committed = traces[1]
		}
		*msg = checkpointMsg(lease.Provider, lease.Id, index, committed.trace, params, r)
		if ctx.BlockHeight() > lease.CheckpointDeadline {
			// Missed: EndBlock's per-block cap has not reached the lease's deadline entry yet,
			// but a late checkpoint must not rescue it.
			return o.DeliverInvalid(provider, msg, markettypes.ErrCheckpointDeadlinePassed, "checkpoint after the lease's checkpoint deadline")
		}

		if simutil.Chance(r, 10) {
			switch r.Intn(4) {
			case 0:
				msg.Index++
				return o.DeliverInvalid(provider, msg, types.ErrWrongIndex, "checkpoint index skips one")
			case 1:
				msg.EndStep = maxEnd + 1
				return o.DeliverInvalid(provider, msg, types.ErrWrongRange, "range past the checkpoint interval or total steps")
			case 2:
				msg.FinalHash = bytes.Clone(msg.FinalHash)
				msg.FinalHash[0] ^= 0x80
				return o.DeliverInvalid(provider, msg, types.ErrInvalidProof, "final hash not the trace's last leaf")
			default:
				other, _ := simtypes.RandomAcc(r, accs)
				if other.Address.String() != lease.Provider {
					msg.Provider = other.Address.String()
					return o.DeliverInvalid(other, msg, types.ErrNotLeaseProvider, "sender does not serve the lease")
				}
			}
		}
		return o.Deliver(provider, msg, nil)
	})
}

func checkpointMsg(provider string, leaseID, index uint64, tr trace.Trace, params types.Params, r *rand.Rand) types.MsgSubmitCheckpoint {
	final, proof, err := tr.Open(tr.End())
	if err != nil {
		panic(err) // End is always inside the trace
	}
	root := tr.Root()
	// An exact state's root is its hash h_end (a container job's is whatever it says).
	msg := types.MsgSubmitCheckpoint{
		Provider: provider, LeaseId: leaseID, Index: index, StartStep: tr.Start, EndStep: tr.End(),
		StateRoot: final[:], TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
		Uri: fmt.Sprintf("https://provider.example.com/leases/%d/checkpoints/%d", leaseID, index),
	}
	for i := 0; i < r.Intn(int(params.MaxMetrics)+1); i++ {
		msg.Metrics = append(msg.Metrics, types.Metric{Name: fmt.Sprintf("metric-%d", i), Value: fmt.Sprintf("%d.%02d", r.Intn(10), r.Intn(100))})
	}
	return msg
}

// ---- challenges ----

func (d Deps) checkpoints(ctx sdk.Context, keep func(types.Checkpoint) bool) ([]types.Checkpoint, error) {
	var out []types.Checkpoint
	err := d.Keeper.Checkpoints.Walk(ctx, nil, func(_ collections.Pair[uint64, uint64], cp types.Checkpoint) (bool, error) {
		if keep(cp) {
			out = append(out, cp)
		}
		return false, nil
	})
	return out, err
}

// SimulateMsgChallenge disputes a pending checkpoint within its window. An honest
// verifier challenges a lying provider with the honest trace; sometimes a lying
// challenger disputes an honest checkpoint. Challenges that must be refused are sent
// too: against a checkpoint the referee cannot adjudicate, by an honest verifier who
// agrees with the checkpoint, by the provider itself, or beyond the open-game limit.
func SimulateMsgChallenge(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgChallenge, DefaultWeightMsgChallenge, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgChallenge{}
		params, err := d.Keeper.Params.Get(ctx)
		if err != nil {
			return o.NoOp(msg, "params: %s", err)
		}
		open, err := d.checkpoints(ctx, func(cp types.Checkpoint) bool {
			return cp.Status == types.CHECKPOINT_STATUS_PENDING && ctx.BlockHeight() <= cp.ChallengeDeadline
		})
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		cp, ok := simutil.Pick(r, open)
		if !ok {
			return o.NoOp(msg, "no checkpoint in its challenge window")
		}
		w, err := d.workFor(ctx, cp.JobId, cp.Worker, cp.EndStep)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		challenger, _ := simtypes.RandomAcc(r, accs)
		if w.run == nil {
			tr := opaque(cp.LeaseId^0xdead, cp.StartStep, cp.EndStep)
			*msg = challengeMsg(challenger.Address.String(), cp, tr)
			return o.DeliverInvalid(challenger, msg, types.ErrNotAdjudicable, "checkpoint the referee cannot re-execute ("+w.whyNot+")")
		}
		if !adjudicable(w, cp) {
			return o.NoOp(msg, "checkpoint %d/%d starts from a made-up state", cp.LeaseId, cp.Index)
		}
		prov, ok := recognize(cp.TraceRoot, providerTraces(w, cp.Provider, cp.LeaseId, cp.Index, cp.StartStep, cp.EndStep)...)
		if !ok {
			return o.NoOp(msg, "checkpoint %d/%d has a trace the simulation did not make", cp.LeaseId, cp.Index)
		}
		honest := w.run.honest(cp.StartStep, cp.EndStep)

		if simutil.Chance(r, 10) {
			switch r.Intn(3) {
			case 0:
				if provider, ok := o.Account(cp.Provider); ok {
					*msg = challengeMsg(cp.Provider, cp, lie(w.run.hashes, cp.StartStep, cp.EndStep, []byte("self")))
					return o.DeliverInvalid(provider, msg, types.ErrSelfChallenge, "provider challenges its own checkpoint")
				}
			case 1:
				if prov.honest && challenger.Address.String() != cp.Provider {
					*msg = challengeMsg(challenger.Address.String(), cp, honest)
					return o.DeliverInvalid(challenger, msg, types.ErrNoDisagreement, "verifier agrees with the checkpoint")
				}
			}
		}
		if challenger.Address.String() == cp.Provider {
			return o.NoOp(msg, "drew the provider as challenger")
		}
		var tr = honest
		if prov.honest {
			if !simutil.Chance(r, liarChallengeChance) {
				return o.NoOp(msg, "checkpoint %d/%d is honest", cp.LeaseId, cp.Index)
			}
			tr = lie(w.run.hashes, cp.StartStep, cp.EndStep, saltOf("challenger", challenger.Address.String(), cp.LeaseId, cp.Index))
		}
		*msg = challengeMsg(challenger.Address.String(), cp, tr)
		return o.Deliver(challenger, msg, sdk.NewCoins(params.ChallengerBond))
	})
}

func challengeMsg(challenger string, cp types.Checkpoint, tr trace.Trace) types.MsgChallenge {
	final, proof, err := tr.Open(tr.End())
	if err != nil {
		panic(err)
	}
	root := tr.Root()
	return types.MsgChallenge{
		Challenger: challenger, LeaseId: cp.LeaseId, CheckpointIndex: cp.Index,
		TraceRoot: root[:], FinalHash: final[:], FinalHashProof: proof,
	}
}

// ---- games ----

// game is an open challenge waiting for turn, with everything its parties know.
type game struct {
	ch         types.Challenge
	cp         types.Checkpoint
	w          work
	provider   party
	challenger party
}

// waitingGame picks an open game whose turn it is and whose deadline has not passed,
// and recognizes both parties' traces.
func (d Deps) waitingGame(ctx sdk.Context, r *rand.Rand, turn types.GameTurn) (game, string) {
	var waiting []types.Challenge
	if err := d.Keeper.Challenges.Walk(ctx, nil, func(_ uint64, stored types.Challenge) (bool, error) {
		ch, err := d.Keeper.Effective(ctx, stored)
		if err != nil {
			return true, err
		}
		if ch.Outcome == types.CHALLENGE_OUTCOME_UNSPECIFIED && ch.Turn == turn && ctx.BlockHeight() <= ch.Deadline {
			waiting = append(waiting, ch)
		}
		return false, nil
	}); err != nil {
		return game{}, err.Error()
	}
	ch, ok := simutil.Pick(r, waiting)
	if !ok {
		return game{}, fmt.Sprintf("no game waits for %s", turn)
	}
	cp, err := d.Keeper.GetCheckpoint(ctx, ch.LeaseId, ch.CheckpointIndex)
	if err != nil {
		return game{}, err.Error()
	}
	if cp.Status != types.CHECKPOINT_STATUS_PENDING {
		return game{}, fmt.Sprintf("checkpoint %d/%d is %s: its games end moot", cp.LeaseId, cp.Index, cp.Status)
	}
	w, err := d.workFor(ctx, cp.JobId, cp.Worker, cp.EndStep)
	if err != nil {
		return game{}, err.Error()
	}
	if w.run == nil || !adjudicable(w, cp) {
		return game{}, fmt.Sprintf("checkpoint %d/%d cannot be replayed", cp.LeaseId, cp.Index)
	}
	g := game{ch: ch, cp: cp, w: w}
	if g.provider, ok = recognize(cp.TraceRoot, providerTraces(w, cp.Provider, cp.LeaseId, cp.Index, cp.StartStep, cp.EndStep)...); !ok {
		return game{}, "unknown provider trace"
	}
	if g.challenger, ok = recognize(ch.ChallengerTraceRoot, challengerTraces(w, ch.Challenger, cp)...); !ok {
		return game{}, "unknown challenger trace"
	}
	return g, ""
}

// SimulateMsgRevealHash has the provider of a game waiting for it reveal its hash at the
// midpoint. Sometimes it reveals a hash its trace root does not support, or another
// account answers in its place; both must be refused.
func SimulateMsgRevealHash(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgRevealHash, DefaultWeightMsgRevealHash, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgRevealHash{}
		g, why := d.waitingGame(ctx, r, types.GAME_TURN_PROVIDER)
		if why != "" {
			return o.NoOp(msg, "%s", why)
		}
		provider, ok := o.Account(g.cp.Provider)
		if !ok {
			return o.NoOp(msg, "provider %s is not a simulated account", g.cp.Provider)
		}
		h, proof, err := g.provider.trace.Open(g.ch.Mid)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		*msg = types.MsgRevealHash{Provider: g.cp.Provider, LeaseId: g.cp.LeaseId, CheckpointIndex: g.cp.Index, Step: g.ch.Mid, Hash: h[:], Proof: proof}
		if simutil.Chance(r, 10) {
			if r.Intn(2) == 0 {
				msg.Hash = bytes.Clone(msg.Hash)
				msg.Hash[31] ^= 0x01
				return o.DeliverInvalid(provider, msg, types.ErrInvalidProof, "revealed hash not in the committed trace")
			}
			other, _ := simtypes.RandomAcc(r, accs)
			if other.Address.String() != g.cp.Provider {
				msg.Provider = other.Address.String()
				return o.DeliverInvalid(other, msg, types.ErrNotLeaseProvider, "someone else reveals for the provider")
			}
		}
		return o.Deliver(provider, msg, nil)
	})
}

// SimulateMsgRespond has the challenger of a game waiting for it answer with its own hash
// at the midpoint. Sometimes the provider answers in the challenger's place, which must
// be refused.
func SimulateMsgRespond(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgRespond, DefaultWeightMsgRespond, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx := o.R, o.Ctx
		msg := &types.MsgRespond{}
		g, why := d.waitingGame(ctx, r, types.GAME_TURN_CHALLENGER)
		if why != "" {
			return o.NoOp(msg, "%s", why)
		}
		challenger, ok := o.Account(g.ch.Challenger)
		if !ok {
			return o.NoOp(msg, "challenger %s is not a simulated account", g.ch.Challenger)
		}
		h, proof, err := g.challenger.trace.Open(g.ch.Mid)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		*msg = types.MsgRespond{Challenger: g.ch.Challenger, ChallengeId: g.ch.Id, Hash: h[:], Proof: proof}
		if simutil.Chance(r, 10) {
			if provider, ok := o.Account(g.cp.Provider); ok && g.cp.Provider != g.ch.Challenger {
				msg.Challenger = g.cp.Provider
				return o.DeliverInvalid(provider, msg, types.ErrNotYourTurn, "the provider answers for the challenger")
			}
		}
		return o.Deliver(challenger, msg, nil)
	})
}

// SimulateMsgStep settles a game at its one-step phase: a party (or any account) sends
// the agreed pre-state and the step's data chunks with their proofs, and the chain
// re-executes the step. The operation then checks the referee's verdict against the
// truth it knows: whoever committed the honest hash at the disputed step must win.
// Sometimes it sends a pre-state of the wrong step, or leaves out a data chunk; both
// must be refused.
func SimulateMsgStep(d Deps) simutil.Weighted {
	return d.Weighted(OpWeightMsgStep, DefaultWeightMsgStep, func(o simutil.Op) (simtypes.OperationMsg, []simtypes.FutureOperation, error) {
		r, ctx, accs := o.R, o.Ctx, o.Accs
		msg := &types.MsgStep{}
		g, why := d.waitingGame(ctx, r, types.GAME_TURN_ONE_STEP)
		if why != "" {
			return o.NoOp(msg, "%s", why)
		}
		lo, hi := g.ch.Lo, g.ch.Hi
		run := g.w.run
		providerHi, _, err := g.provider.trace.Open(hi)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		data, err := types.StepData(run.data, run.cfg, run.seed, lo)
		if err != nil {
			return o.NoOp(msg, "%s", err)
		}
		sender, _ := simtypes.RandomAcc(r, accs)
		switch r.Intn(3) {
		case 0:
			if acc, ok := o.Account(g.ch.Challenger); ok {
				sender = acc
			}
		case 1:
			if acc, ok := o.Account(g.cp.Provider); ok {
				sender = acc
			}
		}
		*msg = types.MsgStep{Sender: sender.Address.String(), ChallengeId: g.ch.Id, PreState: run.states[lo].Encode(), Data: data}
		if simutil.Chance(r, 10) {
			if r.Intn(2) == 0 {
				msg.PreState = run.states[hi].Encode()
				return o.DeliverInvalid(sender, msg, types.ErrInvalidPreState, "pre-state of the step after the agreed one")
			}
			msg.Data = msg.Data[1:]
			return o.DeliverInvalid(sender, msg, types.ErrInvalidData, "a data chunk of the batch left out")
		}
		opMsg, future, err := o.Deliver(sender, msg, nil)
		if err != nil || !opMsg.OK {
			return opMsg, future, err
		}
		want := types.CHALLENGE_OUTCOME_CHALLENGER_WON
		if providerHi == run.hashes[hi] {
			want = types.CHALLENGE_OUTCOME_PROVIDER_WON
		}
		ch, err := d.Keeper.GetChallenge(ctx, g.ch.Id)
		if err != nil {
			return opMsg, future, err
		}
		if ch.Outcome != want {
			return opMsg, future, fmt.Errorf("challenge %d on checkpoint %d/%d at step %d: the referee decided %s, but the provider's h_%d is %s honest (%s)",
				ch.Id, g.cp.LeaseId, g.cp.Index, lo, ch.Outcome, hi, map[bool]string{true: "the", false: "not the"}[want == types.CHALLENGE_OUTCOME_PROVIDER_WON], ch.OutcomeReason)
		}
		return opMsg, future, nil
	})
}
