package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/trace"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/disputes"
	"github.com/depinchain/depinchain/provider/trainer"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// The hidden flags of `depinprovider start` that install the roles' test
// hooks. They exist for the end-to-end tests and `make demo-fraud`; nothing
// else about a sidecar started with them differs.
const (
	// flagCheat makes the provider a cheater: the checkpoint covering the
	// step commits fabricated hashes from it on instead of its trainer's.
	flagCheat = "cheat-fabricate-from-step"
	// flagPauseMove stops the sidecar right before it sends its Nth
	// dispute move (counting from 1 in this process): it logs
	// daemon.PausedLogMsg and blocks until it is stopped or killed.
	flagPauseMove = "pause-before-move"
	// flagPauseCheckpoint does the same before its Nth checkpoint
	// submission.
	flagPauseCheckpoint = "pause-before-checkpoint"
	// flagWithhold makes the provider withhold its checkpoints' states: its
	// checkpoint server refuses state downloads, so auditors cannot start
	// from them.
	flagWithhold = "cheat-withhold-state"
	// flagTamper, TENSOR@STEP, makes the operator wrong in exactly one place:
	// one element of one operator output (TENSOR names it, e.g.
	// mb0.l0.probs) or, with TENSOR "window", one token of the batch, in
	// step STEP (from state STEP to STEP+1); everything else it computes
	// honestly from there. A provider commits such checkpoints and defends
	// them; a verifier re-executes with it and challenges honest providers.
	flagTamper = "cheat-tamper"
	// flagCommitRecords makes the operator commit, in phase 2, a record
	// root that is not its records' (one bit flipped): it cannot open it.
	flagCommitRecords = "cheat-commit-records"
	// flagSlowRounds makes every step of a training-together lease this much
	// slower: a deliberately slow worker.
	flagSlowRounds = "slow-round-steps"
	// flagWithholdPieces makes the provider a trainer that commits its states'
	// custody roots but serves none of their pieces: no holder can take them.
	flagWithholdPieces = "cheat-withhold-custody-pieces"
	// flagGarbageParity makes the provider a trainer whose custody parity pieces
	// are garbage: it overwrites them with bytes that are not the Reed-Solomon
	// parity of its state and commits (and serves) their roots.
	flagGarbageParity = "cheat-garbage-parity"
	// flagCheatAggregate makes the provider a lying aggregator of training-together
	// rounds while it serves slot 0: the global state it commits has one weight off.
	flagCheatAggregate = "cheat-aggregate"
	// flagCheatPseudoGradient makes the provider a training-together worker that
	// fabricates its pseudo-gradients: the committed one has one element off while its
	// round-end checkpoint is honest.
	flagCheatPseudoGradient = "cheat-pseudo-gradient"
	// flagCheatErrorOut makes the provider a top-k training-together worker whose
	// pseudo-gradients name error buffers with one element off (records honest).
	flagCheatErrorOut = "cheat-error-out"
	// flagCheatTrainOnSlot makes the provider a training-together worker that trains its
	// rounds on that slot's data instead of its own and commits what it trained: its
	// round checkpoints do not verify against its assigned data.
	flagCheatTrainOnSlot = "cheat-train-on-slot"
)

func addTestHookFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Uint64(flagCheat, 0, "TESTS ONLY: commit fabricated trace hashes from this step on")
	f.Uint64(flagPauseMove, 0, "TESTS ONLY: block right before sending the Nth dispute move")
	f.Uint64(flagPauseCheckpoint, 0, "TESTS ONLY: block right before submitting the Nth checkpoint")
	f.Bool(flagWithhold, false, "TESTS ONLY: refuse to serve checkpoint states")
	f.String(flagTamper, "", "TESTS ONLY: TENSOR@STEP, compute one element of TENSOR (or one token of the batch: window) wrong in step STEP")
	f.Bool(flagCommitRecords, false, "TESTS ONLY: commit a record root that is not the records'")
	f.Duration(flagSlowRounds, 0, "TESTS ONLY: sleep this long after every step of a training-together lease")
	f.Bool(flagWithholdPieces, false, "TESTS ONLY: commit custody roots but serve no custody piece")
	f.Bool(flagGarbageParity, false, "TESTS ONLY: commit and serve custody parity pieces that are not the parity of the state")
	f.Bool(flagCheatAggregate, false, "TESTS ONLY: commit training-together global states with one weight off (when serving slot 0)")
	f.Bool(flagCheatPseudoGradient, false, "TESTS ONLY: commit training-together pseudo-gradients with one element off")
	f.Bool(flagCheatErrorOut, false, "TESTS ONLY: name training-together error buffers with one element off")
	f.Uint32(flagCheatTrainOnSlot, 0, "TESTS ONLY: train training-together rounds on this worker slot's data instead of the leased slot's")
	for _, name := range []string{flagCheat, flagPauseMove, flagPauseCheckpoint, flagWithhold, flagTamper, flagCommitRecords, flagWithholdPieces, flagGarbageParity, flagSlowRounds,
		flagCheatAggregate, flagCheatPseudoGradient, flagCheatErrorOut, flagCheatTrainOnSlot} {
		_ = f.MarkHidden(name)
	}
}

// testHooks are the hooks the hidden flags ask for; none without them.
func testHooks(cmd *cobra.Command, log *slog.Logger) (daemon.Hooks, error) {
	var hooks daemon.Hooks
	f := cmd.Flags()
	if spec, _ := f.GetString(flagTamper); spec != "" {
		home, _ := f.GetString("home")
		bit, err := loadTamperBit(home)
		if err != nil {
			return hooks, err
		}
		exec, step, err := tamper(spec, bit.bit, log)
		if err != nil {
			return hooks, err
		}
		hooks.Disputes.StepExec = exec
		hooks.Leases.CommitTrace = tamperedTrace(exec, bit, step)
	}
	if from, _ := f.GetUint64(flagCheat); from > 0 {
		hooks.Leases.CommitTrace = func(_ markettypes.Job, cp trainer.Checkpoint) (trace.Trace, error) {
			return fabricateFrom(from, log)(cp)
		}
	}
	var beforeMove []func(ctx context.Context, challengeID uint64, msg sdk.Msg)
	if lie, _ := f.GetBool(flagCommitRecords); lie {
		log.Warn("TEST HOOK: CHEATING: committing record roots that are not the records'")
		beforeMove = append(beforeMove, func(_ context.Context, _ uint64, msg sdk.Msg) {
			if m, ok := msg.(*verifytypes.MsgCommitRecords); ok {
				m.RecordRoot[0] ^= 1
			}
		})
	}
	if n, _ := f.GetUint64(flagPauseMove); n > 0 {
		pause := pauseAt(n, log)
		beforeMove = append(beforeMove, func(ctx context.Context, challengeID uint64, msg sdk.Msg) {
			pause(ctx, "dispute move", "challenge", challengeID, "msg", sdk.MsgTypeURL(msg))
		})
	}
	if len(beforeMove) > 0 {
		hooks.Disputes.BeforeMove = func(ctx context.Context, challengeID uint64, msg sdk.Msg) {
			for _, hook := range beforeMove {
				hook(ctx, challengeID, msg)
			}
		}
	}
	if withhold, _ := f.GetBool(flagWithhold); withhold {
		log.Warn("TEST HOOK: the checkpoint server withholds every state")
		hooks.WithholdStates = true
	}
	if d, _ := f.GetDuration(flagSlowRounds); d > 0 {
		log.Warn("TEST HOOK: every step of a training-together lease is slowed", "by", d)
		hooks.Leases.RoundStepDelay = d
	}
	if withhold, _ := f.GetBool(flagWithholdPieces); withhold {
		log.Warn("TEST HOOK: CHEATING: the public server serves no custody piece of the states this sidecar commits")
		hooks.WithholdCustodyPieces = true
	}
	if garbage, _ := f.GetBool(flagGarbageParity); garbage {
		log.Warn("TEST HOOK: CHEATING: committing custody parity pieces that are not the parity of the state")
		hooks.Leases.CustodyPieces = garbageParity
	}
	if cheat, _ := f.GetBool(flagCheatAggregate); cheat {
		log.Warn("TEST HOOK: CHEATING: committing training-together global states with one weight off")
		hooks.CheatAggregate = true
	}
	if cheat, _ := f.GetBool(flagCheatPseudoGradient); cheat {
		log.Warn("TEST HOOK: CHEATING: committing training-together pseudo-gradients with one element off")
		hooks.CheatPseudoGradient = true
	}
	if cheat, _ := f.GetBool(flagCheatErrorOut); cheat {
		log.Warn("TEST HOOK: CHEATING: naming training-together error buffers with one element off")
		hooks.CheatErrorOut = true
	}
	if f.Changed(flagCheatTrainOnSlot) {
		slot, _ := f.GetUint32(flagCheatTrainOnSlot)
		log.Warn("TEST HOOK: CHEATING: training training-together rounds on another slot's data", "slot", slot)
		hooks.CheatTrainOnSlot = &slot
	}
	if n, _ := f.GetUint64(flagPauseCheckpoint); n > 0 {
		pause := pauseAt(n, log)
		hooks.Leases.BeforeCheckpoint = func(ctx context.Context, leaseID, index uint64) {
			pause(ctx, "checkpoint submission", "lease", leaseID, "index", index)
		}
	}
	return hooks, nil
}

// garbageParity overwrites every parity piece in dir with bytes derived from its
// index (the same size, so the layout still fits) and returns the roots with theirs:
// the data pieces, bound to the state root, stay right.
func garbageParity(dir string, l custody.Layout, roots []merkle.Hash) ([]merkle.Hash, error) {
	roots = slices.Clone(roots)
	for i := l.DataPieces; i < l.Pieces(); i++ {
		garbage := make([]byte, l.PieceBytes(i))
		for b := range garbage {
			garbage[b] = byte(b*7 + int(i))
		}
		if err := os.WriteFile(filepath.Join(dir, manifest.PieceFile(0, i)), garbage, 0o644); err != nil {
			return nil, err
		}
		root, _, err := merkle.StreamRoot(bytes.NewReader(garbage), custody.ChunkSize)
		if err != nil {
			return nil, err
		}
		roots[i] = root
	}
	return roots, nil
}

// tamperBit is the bit of the last element of the tampered tensor a cheater
// flips: a lower bit can vanish in a later quantisation (the step's result
// would not change); bit 12 changes h_{STEP+1} for every tensor the tests name on most
// seeds, and tamperedTrace flips higher ones on a seed where it does not.
const tamperBit = 12

// tamperBitMax bounds the bits a cheater tries when a lower one vanishes for a seed.
const tamperBitMax = 24

// persistentBit is the bit a tampering cheater flips, kept in a file of its
// home folder once tamperedTrace moves it past tamperBit: a cheater killed and
// started again must re-execute the step it committed the same way, or its
// records would not be the ones it committed (it would lose on a missed move).
type persistentBit struct {
	bit  *atomic.Uint32
	path string
}

const tamperBitFile = "test-tamper-bit"

func loadTamperBit(home string) (persistentBit, error) {
	b := persistentBit{bit: new(atomic.Uint32), path: filepath.Join(home, tamperBitFile)}
	b.bit.Store(tamperBit)
	raw, err := os.ReadFile(b.path)
	if os.IsNotExist(err) {
		return b, nil
	}
	if err != nil {
		return b, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 32)
	if err != nil {
		return b, fmt.Errorf("%s: %w", b.path, err)
	}
	b.bit.Store(uint32(n))
	return b, nil
}

// next moves to the next higher bit and records it.
func (b persistentBit) next() error {
	return os.WriteFile(b.path, []byte(strconv.FormatUint(uint64(b.bit.Add(1)), 10)), 0o644)
}

// tamper parses TENSOR@STEP into the operator's execution of steps.
func tamper(spec string, bit *atomic.Uint32, log *slog.Logger) (disputes.StepExec, uint64, error) {
	tensor, stepText, ok := strings.Cut(spec, "@")
	step, err := strconv.ParseUint(stepText, 10, 64)
	if !ok || tensor == "" || err != nil {
		return nil, 0, fmt.Errorf("--%s %q: want TENSOR@STEP", flagTamper, spec)
	}
	log.Warn("TEST HOOK: CHEATING: one element wrong", "tensor", tensor, "step", step)
	return func(at uint64, batch [][]byte) (exact.Executor, [][]byte) {
		if at != step {
			return exact.Executor{}, batch
		}
		if tensor == "window" {
			batch = slices.Clone(batch)
			w := slices.Clone(batch[0])
			w[len(w)-1] ^= 1
			batch[0] = w
			return exact.Executor{}, batch
		}
		return exact.Executor{Observer: func(_ *exact.Op, out *exact.Tensor) {
			if out.Spec.Name == tensor {
				out.Data[len(out.Data)-1] ^= 1 << bit.Load()
			}
		}}, batch
	}, step, nil
}

// tamperedTrace is a cheater's checkpoint commitment with exec: every
// checkpoint ending after the tampered step is trained again from its
// local start state (the initial one or the previous checkpoint's, itself
// tampered) as exec computes, and its state file replaced by the result.
func tamperedTrace(exec disputes.StepExec, bit persistentBit, step uint64) func(job markettypes.Job, cp trainer.Checkpoint) (trace.Trace, error) {
	return func(job markettypes.Job, cp trainer.Checkpoint) (trace.Trace, error) {
		var start *exact.State
		var err error
		if cp.StartStep() == 0 {
			start, err = verifytypes.InitialState(job)
		} else {
			start, err = exact.LoadCheckpointState(exact.CheckpointDir(filepath.Dir(filepath.Dir(cp.Dir)), cp.StartStep()))
		}
		if err != nil {
			return trace.Trace{}, fmt.Errorf("the start state of steps %d..%d: %w", cp.StartStep(), cp.EndStep(), err)
		}
		// The leases role's checkpoints are of jobs without rounds, whose data does not
		// depend on the worker.
		data, err := verifytypes.JobTrainingData(job)
		if err != nil {
			return trace.Trace{}, err
		}
		e, err := disputes.Reexecute(job, data, start, cp.StartStep(), cp.EndStep(), exec)
		if err != nil {
			return trace.Trace{}, err
		}
		// Whether a flipped bit survives the step's later quantisations depends on the
		// job's seed: flip higher ones until the step's result changes (the dispute
		// role's exec reads the same bit, after a restart too). A range without the
		// tampered step stays as is.
		for e.Trace.Root() == cp.Trace.Root() && bit.bit.Load() < tamperBitMax && cp.StartStep() <= step && step < cp.EndStep() {
			if err := bit.next(); err != nil {
				return trace.Trace{}, err
			}
			if e, err = disputes.Reexecute(job, data, start, cp.StartStep(), cp.EndStep(), exec); err != nil {
				return trace.Trace{}, err
			}
		}
		if e.Trace.Root() == cp.Trace.Root() {
			return cp.Trace, nil
		}
		enc := e.End.Encode()
		tmp := cp.StatePath() + ".tampered"
		if err := os.WriteFile(tmp, enc, 0o644); err != nil {
			return trace.Trace{}, err
		}
		return e.Trace, os.Rename(tmp, cp.StatePath())
	}
}

// pauseAt returns a pause point that blocks the nth time it is reached,
// until ctx ends, after logging daemon.PausedLogMsg.
func pauseAt(n uint64, log *slog.Logger) func(ctx context.Context, before string, args ...any) {
	var reached atomic.Uint64
	return func(ctx context.Context, before string, args ...any) {
		if reached.Add(1) != n {
			return
		}
		log.Warn(daemon.PausedLogMsg, append([]any{"before", before, "n", n}, args...)...)
		<-ctx.Done()
	}
}

// fabricatedWeight replaces the first weight of a cheater's state: any value
// but the trained one would do; a fixed one keeps a retry's state the same.
const fabricatedWeight = 12345

// fabricateState rewrites the exact state file at path with made-up weights
// and returns its root (its size is unchanged, as the commitment checks).
func fabricateState(path string) (merkle.Hash, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return merkle.Hash{}, err
	}
	s, err := exact.Decode(raw)
	if err != nil {
		return merkle.Hash{}, err
	}
	s.Tensors[0].Data[0] = fabricatedWeight
	enc := s.Encode()
	tmp := path + ".fabricated"
	if err := os.WriteFile(tmp, enc, 0o644); err != nil {
		return merkle.Hash{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return merkle.Hash{}, err
	}
	return exact.StateRoot(enc), nil
}

// fabricateFrom is the cheating mode: it replaces the trainer's hashes from
// step from on with made-up ones, as a provider that skipped the work
// would. Checkpoints ending before from commit their trainer's trace.
func fabricateFrom(from uint64, log *slog.Logger) func(cp trainer.Checkpoint) (trace.Trace, error) {
	return func(cp trainer.Checkpoint) (trace.Trace, error) {
		if from <= cp.StartStep() || from > cp.EndStep() {
			return cp.Trace, nil
		}
		hashes := slices.Clone(cp.Trace.Hashes)
		for i := from - cp.StartStep(); i < uint64(len(hashes)); i++ {
			hashes[i] = merkle.Hash(sha256.Sum256([]byte(fmt.Sprintf("fabricated h_%d", cp.StartStep()+i))))
		}
		if cp.Hash == trainer.StateRoot {
			// The chain takes an exact workload's checkpoint only if its final
			// hash is its state's root: the cheater commits made-up weights,
			// a state nobody trained, and their root.
			root, err := fabricateState(cp.StatePath())
			if err != nil {
				return trace.Trace{}, fmt.Errorf("fabricating the state: %w", err)
			}
			hashes[len(hashes)-1] = root
		}
		log.Warn("CHEATING: committing fabricated hashes", "from_step", from, "checkpoint_steps", fmt.Sprintf("%d..%d", cp.StartStep(), cp.EndStep()))
		return trace.New(cp.StartStep(), hashes), nil
	}
}
