package keeper_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	storetypes "cosmossdk.io/store/types"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/x/verify/types"
)

// TestGasConsumption pins the gas each message of a dispute uses on a fresh gas meter
// (store access at the SDK's KV gas costs plus the module's own charges), like
// celestia-app's x/blob gas table. The scenario is deterministic: a 64-step checkpoint
// whose provider lies from step 37 on, disputed by an honest verifier. A change in these
// numbers is a change in what users pay: update them deliberately.
func TestGasConsumption(t *testing.T) {
	s := newScenario(t, 64, 64)
	liar := s.liar(s.prov, 0, 64, 37, false)
	v := s.verifier("verifier", 0, 64)
	used := map[string]uint64{}
	run := func(name string, call func(ctx sdk.Context) error) {
		t.Helper()
		gas, err := s.deliver(call)
		require.NoError(t, err, name)
		if _, seen := used[name]; !seen {
			used[name] = gas
		}
	}

	run("SubmitCheckpoint", func(ctx sdk.Context) error {
		_, err := s.msg.SubmitCheckpoint(ctx, checkpointMsg(liar, s.lease.Id, 0))
		return err
	})
	var id uint64
	run("Challenge", func(ctx sdk.Context) error {
		res, err := s.msg.Challenge(ctx, challengeMsg(v, s.lease.Id, 0))
		if res != nil {
			id = res.ChallengeId
		}
		return err
	})
	g := s.game(id, liar, v, v)
	// 64 steps bisect in 6 rounds of a reveal and an answer, then one step: a
	// move that does not advance the game fails the test instead of looping.
	const maxMoves = 2*6 + 1
	for moves := 0; ; moves++ {
		ch := s.challenge(id)
		require.LessOrEqual(t, moves, maxMoves, "the game did not end in %d moves: turn %s, range [%d, %d]", maxMoves, ch.Turn, ch.Lo, ch.Hi)
		switch ch.Turn {
		case types.GAME_TURN_PROVIDER:
			run("RevealHash", func(ctx sdk.Context) error { return g.reveal(ctx, ch.Mid) })
			continue
		case types.GAME_TURN_CHALLENGER:
			run("Respond", func(ctx sdk.Context) error { _, err := s.msg.Respond(ctx, g.respondMsg(ch.Mid)); return err })
			continue
		case types.GAME_TURN_ONE_STEP:
			run("Step", func(ctx sdk.Context) error {
				_, err := s.msg.Step(ctx, stepMsg(s.run, v.addr, id, s.run.stateAt(t, ch.Lo), ch.Lo))
				return err
			})
		}
		break
	}
	require.Equal(t, types.CHALLENGE_OUTCOME_CHALLENGER_WON, s.challenge(id).Outcome)

	// A round fault: a worker's fabricated dense pseudo-gradient chunk, convicted.
	rs := newRoundScenario(t, 0)
	p, err := diloco.DecodePseudoGradient(rs.files["pg/1/1"])
	require.NoError(t, err)
	p.Delta[7]++
	rs.replace("pg/1/1", p.EncodeDense())
	rs.commit(1, 1)
	roundFault := rs.pgProof(rs.account("prover"), 1, 1, 0)
	gas, err := rs.prove(roundFault)
	require.NoError(t, err)
	used["ProveRoundFault"] = gas

	for _, tc := range []struct {
		msg string
		gas uint64
	}{
		// The first move of each kind (the first reveal and answer are at step 32).
		// SubmitCheckpoint and Step also keep x/market's leases-by-state index
		// (consensus version 2) up to date when they touch the lease; SubmitCheckpoint
		// queues the checkpoint's audit draw. The lease's first checkpoint also pays for
		// hashing the initial state (h_0): 117 chunks of the reference model's 479 KB.
		// (x/market version 4: the per-step claim reads and writes the lease and job
		// once, where time-based settlement walked the job's leases; it was 120406; +3
		// since the max_transformer_params default of 2^31 is one byte longer; every message
		// reads the params, and the custody params of x/verify version 4 add 21 gas to each read.)
		// The job record carries storage_escrow and storage_fees (custody storage pay),
		// read (and for a claim written) by these messages: +1176, +84 and +2268 gas.
		// x/market version 5's default_custody and round params make its params (read here)
		// longer, and the job record carries custody_held and the round fields. x/verify
		// version 5's file_query_deposit adds 57 gas to each read of its params.
		{"SubmitCheckpoint", 97857},
		{"Challenge", 53773},
		// One write, whatever the number of games waiting on the step (x/verify
		// version 2; it was 25903 when a reveal updated every waiting game).
		{"RevealHash", 11858},
		// Reads the reveal's height to see whose turn it is.
		{"Respond", 24928},
		// The referee step that proves the fraud: re-execution of one exact step of the
		// reference transformer (one gas per MAC, 8.65 M, and per element of its other
		// operators, 0.74 M), the 479 KB pre-state (2 gas a byte) and its root, the data
		// bytes and proofs, then the slash of the bond and of the
		// unbondings begun since the commit, and the payouts: the challenger's reward,
		// the owner's compensation (into the job's escrow), the community pool. The
		// conviction reads the job to see whether the checkpoint is a round's (its worker
		// is then excluded from the round): 1,966 more than 10,678,544.
		{"Step", 10680624},
		// One chunk of a dense pseudo-gradient against G_r's and the end state's weights
		// chunks (3 chunks of 4 KiB and their proofs, 2 gas a byte, 10 a hash), then the
		// exclusion and the fraud path's slash and payouts, and the by-commit index walk
		// that ends any file query open on the commit (30 when none is).
		{"ProveRoundFault", 253703},
	} {
		t.Logf("%-16s %d gas", tc.msg, used[tc.msg])
		assert.Equal(t, tc.gas, used[tc.msg], "gas of %s", tc.msg)
	}
	require.Greater(t, used["Step"], uint64(s.run.cfg.MACsPerStep())*s.verifyParams().GasPerMac)
}

// The referee's cost cap: a step of the reference configuration fits under the default
// max_step_macs, so any reference job can be adjudicated at default params.
func TestStepCostCap(t *testing.T) {
	p := types.DefaultParams()
	ref := exact.ReferenceConfig()
	t.Logf("reference config: %d MACs + %d elements per step, cap %d MACs", ref.MACsPerStep(), ref.ElementsPerStep(), p.MaxStepMacs)
	require.LessOrEqual(t, uint64(ref.MACsPerStep()), p.MaxStepMacs)
}

// oneStepDispute leads a 16-step dispute against a provider lying from step 9 up to the
// referee, and returns the scenario, the honest challenger and the challenge.
func oneStepDispute(t *testing.T) (*scenario, *party, uint64) {
	s := newScenario(t, 16, 16)
	liar := s.liar(s.prov, 0, 16, 9, false)
	s.submitCheckpoint(liar, s.lease.Id, 0)
	v := s.verifier("verifier", 0, 16)
	id := s.openChallenge(v, s.lease.Id, 0)
	ch := s.game(id, liar, v, nil).play(s.run)
	require.Equal(t, types.GAME_TURN_ONE_STEP, ch.Turn)
	require.Equal(t, uint64(8), ch.Lo)
	return s, v, id
}

func TestStepTooExpensive(t *testing.T) {
	s, v, id := oneStepDispute(t)
	macs := uint64(s.run.cfg.MACsPerStep())
	step := func(ctx sdk.Context) error {
		_, err := s.msg.Step(ctx, stepMsg(s.run, v.addr, id, s.run.stateAt(t, 8), 8))
		return err
	}
	s.setVerifyParams(func(p *types.Params) { p.MaxStepMacs = macs - 1 })
	err := s.requireRejected(types.ErrStepTooExpensive, step)
	require.Contains(t, err.Error(), "max_step_macs")

	// Exactly at the cap it runs, and charges every MAC.
	s.setVerifyParams(func(p *types.Params) { p.MaxStepMacs = macs })
	_, err = s.deliver(step)
	require.NoError(t, err)
	ev := typedEvents[*types.EventStepExecuted](s.env)
	require.Len(t, ev, 1)
	require.Equal(t, macs, ev[0].Macs)
}

// The re-execution is paid per MAC and per element: raising gas_per_mac by 9 raises the
// step's gas by exactly 9 × (MACsPerStep + ElementsPerStep), and a gas limit below it stops the step.
func TestStepGasPerMAC(t *testing.T) {
	stepGas := func(gasPerMac uint64) uint64 {
		s, v, id := oneStepDispute(t)
		s.setVerifyParams(func(p *types.Params) { p.GasPerMac = gasPerMac })
		gas, err := s.deliver(func(ctx sdk.Context) error {
			_, err := s.msg.Step(ctx, stepMsg(s.run, v.addr, id, s.run.stateAt(t, 8), 8))
			return err
		})
		require.NoError(t, err)
		return gas
	}
	one, ten := stepGas(1), stepGas(10)
	ref := exact.ReferenceConfig()
	macs := uint64(ref.MACsPerStep())
	require.Equal(t, 9*(macs+uint64(ref.ElementsPerStep())), ten-one)

	// A gas limit of half the re-execution stops the step inside the referee, before it
	// has written anything. (Byte and hash charges are zeroed so that the limit is reached
	// in the re-execution and not before.)
	s, v, id := oneStepDispute(t)
	s.setVerifyParams(func(p *types.Params) { p.GasPerByte, p.GasPerHash = 0, 0 })
	before := s.snapshot()
	ctx := s.Ctx.WithGasMeter(storetypes.NewGasMeter(macs / 2))
	require.PanicsWithValue(t, storetypes.ErrorOutOfGas{Descriptor: "exact step multiply-accumulates"}, func() {
		_, _ = s.msg.Step(ctx, stepMsg(s.run, v.addr, id, s.run.stateAt(t, 8), 8))
	})
	s.requireUnchanged(before)
}
