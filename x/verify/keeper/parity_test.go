package keeper_test

import (
	"bytes"
	"testing"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/custody/fetch"
	"github.com/depinchain/depinchain/pkg/merkle"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	"github.com/depinchain/depinchain/x/verify/types"
)

// parityProofGas is the gas TestParityFaultOnFinalCheckpointConvicts pins (206,666 before
// the storage escrow fields made the job x/market reads longer; 207,944 before x/market
// version 5's custody_held and the worker progress's custody id made it longer again;
// 208,451 before x/verify version 5's file_query_deposit made its params longer).
const parityProofGas = 208_508

// garbageParity makes the scenario's trainer register (and hold) a parity piece that is
// not the parity of its data: made-up bytes of the right length under their own root.
func (c *custodyScenario) garbageParity() uint32 {
	p := c.layout.DataPieces
	junk := bytes.Clone(c.pieces[p])
	for i := range junk {
		junk[i] = byte(i*7 + 3)
	}
	c.pieces[p] = junk
	c.roots[p] = merkle.RootOfBytes(junk, custody.ChunkSize)
	return p
}

func (c *custodyScenario) object() fetch.Object {
	return fetch.Object{
		DatasetID: shardtypes.CustodyDatasetID(c.lease.Id, 0),
		Custody:   shardtypes.CustodyInfo{LeaseId: c.lease.Id, CheckpointIndex: 0},
		Layout:    c.layout, Roots: c.roots,
	}
}

func (c *custodyScenario) state() []byte {
	return bytes.Join(c.pieces[:c.layout.DataPieces], nil)
}

// proofOf opens chunk ch of every data piece and of parity piece p as registered.
func (c *custodyScenario) proofOf(prover sdk.AccAddress, p uint32, ch uint64) *types.MsgProveParityFault {
	c.t.Helper()
	data := make([]custody.ChunkOpening, c.layout.DataPieces)
	for j := range c.layout.DataPieces {
		var err error
		data[j], err = c.layout.OpenChunk(bytes.NewReader(c.pieces[j]), j, ch)
		require.NoError(c.t, err)
	}
	parity, err := c.layout.OpenChunk(bytes.NewReader(c.pieces[p]), p, ch)
	require.NoError(c.t, err)
	return fetch.NewParityFaultMsg(prover.String(), c.lease.Id, 0, p, ch, data, parity)
}

func (c *custodyScenario) prove(msg *types.MsgProveParityFault) (uint64, error) {
	return c.deliver(func(ctx sdk.Context) error {
		_, err := c.env.msg.ProveParityFault(ctx, msg)
		return err
	})
}

// An honest trainer's parity chunks are the parity of its data: every proof about them
// is refused as consistent and changes nothing; the builder finds no fault.
func TestParityFaultRefusedForHonestParity(t *testing.T) {
	c := newCustodyScenario(t)
	c.submit()
	prover := c.account("prover")
	msg, err := fetch.ParityFault(prover.String(), c.object(), bytes.NewReader(c.state()), c.layout.DataPieces, bytes.NewReader(c.pieces[c.layout.DataPieces]))
	require.NoError(t, err)
	require.Nil(t, msg, "the builder finds no fault in honest parity")
	for ch := range c.layout.ChunksPerPiece() {
		for p := c.layout.DataPieces; p < c.layout.Pieces(); p++ {
			m := c.proofOf(prover, p, ch)
			err := c.requireRejected(types.ErrParityConsistent, func(ctx sdk.Context) error {
				_, err := c.env.msg.ProveParityFault(ctx, m)
				return err
			})
			require.ErrorContains(t, err, "is the parity of the data chunks")
		}
	}
	require.Equal(t, types.CHECKPOINT_STATUS_PENDING, c.checkpoint(c.lease.Id, 0).Status)
	c.requireInvariants()
}

// A trainer that registered garbage parity is convicted by one column: its checkpoint is
// rejected, its bond slashed and it is tombstoned, its lease closed for fraud and the job
// reopened; the prover gets whistleblower_share of the slash. Malformed proofs first are
// refused with clear errors and change nothing; a second proof after the conviction too.
func TestParityFaultConvictsGarbageParity(t *testing.T) {
	c := newCustodyScenario(t)
	p := c.garbageParity()
	c.submit()
	prover := c.account("prover")
	good, err := fetch.ParityFault(prover.String(), c.object(), bytes.NewReader(c.state()), p, bytes.NewReader(c.pieces[p]))
	require.NoError(t, err)
	require.NotNil(t, good, "the builder finds the garbage")

	clone := func(change func(m *types.MsgProveParityFault)) *types.MsgProveParityFault {
		m := *good
		m.Data = make([]types.PieceChunk, len(good.Data))
		for j, d := range good.Data {
			m.Data[j] = types.PieceChunk{Data: bytes.Clone(d.Data), Proof: append([][]byte(nil), d.Proof...)}
		}
		m.Parity = types.PieceChunk{Data: bytes.Clone(good.Parity.Data), Proof: append([][]byte(nil), good.Parity.Proof...)}
		change(&m)
		return &m
	}
	bad := []struct {
		name   string
		want   *errorsmod.Error
		text   string
		change func(m *types.MsgProveParityFault)
	}{
		{"a data piece as the parity piece", types.ErrInvalidParityProof, "is not a parity piece", func(m *types.MsgProveParityFault) { m.ParityPiece = 0 }},
		{"a piece past the last", types.ErrInvalidParityProof, "is not a parity piece", func(m *types.MsgProveParityFault) { m.ParityPiece = c.layout.Pieces() }},
		{"a chunk past the piece", types.ErrInvalidParityProof, "a piece has", func(m *types.MsgProveParityFault) { m.Chunk = c.layout.ChunksPerPiece() }},
		{"a data chunk that is not the registered one", types.ErrInvalidParityProof, "inclusion proof does not match root", func(m *types.MsgProveParityFault) { m.Data[0].Data[0] ^= 1 }},
		{"a parity chunk that is not the registered one", types.ErrInvalidParityProof, "chunk", func(m *types.MsgProveParityFault) { m.Parity.Data[1] ^= 1 }},
		{"a short parity chunk", types.ErrInvalidParityProof, "bytes, want", func(m *types.MsgProveParityFault) { m.Parity.Data = m.Parity.Data[:100] }},
		{"an oversized chunk", types.ErrInvalidParityProof, "a chunk at most", func(m *types.MsgProveParityFault) { m.Parity.Data = make([]byte, custody.ChunkSize+1) }},
		{"a data chunk missing", types.ErrInvalidParityProof, "data chunk openings", func(m *types.MsgProveParityFault) { m.Data = m.Data[1:] }},
		{"a proof hash of 31 bytes", types.ErrInvalidParityProof, "proof[0]", func(m *types.MsgProveParityFault) {
			m.Data[0].Proof = append([][]byte{make([]byte, 31)}, m.Data[0].Proof...)
		}},
		{"another checkpoint", types.ErrCheckpointNotFound, "", func(m *types.MsgProveParityFault) { m.CheckpointIndex = 5 }},
		{"the trainer itself", types.ErrSelfChallenge, "trained checkpoint", func(m *types.MsgProveParityFault) { m.Prover = c.prov.String() }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			m := clone(tc.change)
			err := c.requireRejected(tc.want, func(ctx sdk.Context) error {
				_, err := c.env.msg.ProveParityFault(ctx, m)
				return err
			})
			require.ErrorContains(t, err, tc.text)
		})
	}

	bond := c.provider(c.prov).Bond.Amount
	before := c.Balance(prover)
	_, err = c.prove(good)
	require.NoError(t, err)
	params := c.verifyParams()
	cp := c.checkpoint(c.lease.Id, 0)
	require.Equal(t, types.CHECKPOINT_STATUS_REJECTED, cp.Status)
	require.True(t, cp.ParityFaultProven)
	prov := c.provider(c.prov)
	slashed := params.FraudSlashFraction.MulInt(bond).TruncateInt()
	require.Equal(t, bond.Sub(slashed), prov.Bond.Amount)
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_TOMBSTONED, prov.Status)
	reward := params.WhistleblowerShare.MulInt(slashed).TruncateInt()
	require.True(t, reward.IsPositive())
	require.Equal(t, before.Add(reward), c.Balance(prover), "the prover is paid as a winning challenger")
	lease := c.getLease(c.lease.Id)
	require.Equal(t, markettypes.LEASE_STATE_CLOSED, lease.State)
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_FRAUD, lease.CloseReason)
	require.Equal(t, markettypes.JOB_STATE_OPEN, c.getJob(c.job.Id).State, "the job reopens from its last final checkpoint")
	events := typedEvents[*types.EventParityFaultProven](c.env)
	require.Len(t, events, 1)
	require.Equal(t, reward, events[0].Reward.Amount)
	require.Equal(t, slashed, events[0].Slashed.Amount)
	require.False(t, events[0].WasFinal)
	require.Equal(t, c.prov.String(), events[0].Trainer)
	c.requireInvariants()

	// Proven once: a second proof (the same, or another chunk) is refused, nothing changes.
	err = c.requireRejected(types.ErrInvalidParityProof, func(ctx sdk.Context) error {
		_, err := c.env.msg.ProveParityFault(ctx, good)
		return err
	})
	require.ErrorContains(t, err, "already proven")
}

// Fraud is fraud: a checkpoint that went final with garbage parity (holders of its data
// pieces sufficed) still convicts its trainer. The checkpoint stays final — its data
// pieces are bound to its state root, so the state the job resumes from is right — and
// is marked parity_fault_proven. (Its lease had completed: the lease and the job stay
// completed; a live lease would be closed for fraud by the same
// OnCheckpointRejected call as in the pending case.) It also pins the gas of a proof (per byte and per hash).
func TestParityFaultOnFinalCheckpointConvicts(t *testing.T) {
	c := newCustodyScenario(t)
	p := c.garbageParity()
	cp := c.submit()
	c.advanceTo(cp.ChallengeDeadline + 1)
	for j := range c.layout.DataPieces {
		require.NoError(t, c.claim(c.registerProvider("holder-"+string(rune('a'+j)), 1), j))
	}
	c.advance(int(c.verifyParams().CustodyRecheckBlocks) + 1)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, c.checkpoint(c.lease.Id, 0).Status)

	prover := c.account("prover")
	msg, err := fetch.ParityFault(prover.String(), c.object(), bytes.NewReader(c.state()), p, bytes.NewReader(c.pieces[p]))
	require.NoError(t, err)
	require.NotNil(t, msg)
	gas, err := c.prove(msg)
	require.NoError(t, err)
	params := c.verifyParams()
	floor := params.GasPerByte * uint64(len(msg.Data)+1) * custody.ChunkSize
	require.Greater(t, gas, floor, "gas covers the column's bytes")
	require.Equal(t, uint64(parityProofGas), gas, "gas of a parity fraud proof on the reference 2+1 custody object; update deliberately")

	final := c.checkpoint(c.lease.Id, 0)
	require.Equal(t, types.CHECKPOINT_STATUS_FINAL, final.Status)
	require.True(t, final.ParityFaultProven)
	require.Equal(t, stakingexttypes.PROVIDER_STATUS_TOMBSTONED, c.provider(c.prov).Status)
	// The checkpoint was the job's last: the lease had completed and the job with it; a
	// conviction afterwards does not reopen or re-close them.
	require.Equal(t, markettypes.LEASE_CLOSE_REASON_COMPLETED, c.getLease(c.lease.Id).CloseReason)
	require.Equal(t, markettypes.JOB_STATE_COMPLETED, c.getJob(c.job.Id).State)
	events := typedEvents[*types.EventParityFaultProven](c.env)
	require.Len(t, events, 1)
	require.True(t, events[0].WasFinal)
	c.requireInvariants()
}
