package keeper_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"
	sdkerrors "github.com/cosmos/cosmos-sdk/types/errors"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// cloneRegister deep-copies a registration message so a case can damage it.
func cloneRegister(m *types.MsgRegisterDataset) *types.MsgRegisterDataset {
	c := *m
	c.ManifestRoot = bytes.Clone(m.ManifestRoot)
	c.Shards = make([]types.Shard, len(m.Shards))
	for i, s := range m.Shards {
		s.Pieces = append([]types.Piece(nil), s.Pieces...)
		for j := range s.Pieces {
			s.Pieces[j].Root = bytes.Clone(s.Pieces[j].Root)
		}
		c.Shards[i] = s
	}
	return &c
}

// reroot recomputes the manifest root after a case changed the manifest on purpose, so
// that the check under test is the one that fires.
func reroot(m *types.MsgRegisterDataset) {
	root := types.ManifestRoot(m.Encoding, m.ChunkSize, m.TotalSize, m.Shards)
	m.ManifestRoot = root[:]
}

func TestRegisterDatasetRejects(t *testing.T) {
	e := newEnv(t)
	good := newTestDataset(t, e.owner, "corpus-v1", rs(4, 2), 4000, 4000, 1234)
	taken := newTestDataset(t, e.owner, "taken", replicas(2), 500)
	e.register(taken)

	cases := []struct {
		name   string
		damage func(m *types.MsgRegisterDataset)
		err    *errorsmod.Error
		text   string
	}{
		{"wrong manifest root", func(m *types.MsgRegisterDataset) { m.ManifestRoot[0] ^= 1 },
			types.ErrInvalidManifest, "does not match the manifest's contents"},
		{"a piece root changed without the manifest root", func(m *types.MsgRegisterDataset) { m.Shards[1].Pieces[4].Root[7] ^= 1 },
			types.ErrInvalidManifest, "manifest_root"},
		{"short piece root", func(m *types.MsgRegisterDataset) {
			m.Shards[1].Pieces[2].Root = m.Shards[1].Pieces[2].Root[:31]
			reroot(m)
		}, types.ErrInvalidManifest, "shard 1: piece 2: root is 31 bytes"},
		{"piece count is not k+m", func(m *types.MsgRegisterDataset) {
			m.Shards[2].Pieces = m.Shards[2].Pieces[:5]
			reroot(m)
		}, types.ErrInvalidManifest, "shard 2: has 5 pieces, but Reed-Solomon 4+2 needs 6"},
		{"piece size inconsistent with the shard", func(m *types.MsgRegisterDataset) {
			m.Shards[0].Pieces[3].SizeBytes++
			reroot(m)
		}, types.ErrInvalidManifest, "shard 0: piece 3: size is 1001"},
		{"sizes do not add up", func(m *types.MsgRegisterDataset) { m.TotalSize++; reroot(m) },
			types.ErrInvalidManifest, "total_size is 9235, but the shards add up to 9234"},
		{"sample ranges not contiguous", func(m *types.MsgRegisterDataset) { m.Shards[1].SampleStart = 11; reroot(m) },
			types.ErrInvalidManifest, "shard 1: samples start at 11"},
		{"shards out of order", func(m *types.MsgRegisterDataset) { m.Shards[1].Index = 2; reroot(m) },
			types.ErrInvalidManifest, "shard 1: index is 2"},
		{"chunk size below the minimum", func(m *types.MsgRegisterDataset) { m.ChunkSize = 32; reroot(m) },
			types.ErrInvalidManifest, "chunk_size must be within"},
		{"no parity", func(m *types.MsgRegisterDataset) { m.Encoding.ParityPieces = 0 },
			types.ErrInvalidManifest, "at least 1 data and 1 parity piece"},
		{"no shards", func(m *types.MsgRegisterDataset) { m.Shards = nil; m.TotalSize = 0 },
			types.ErrInvalidManifest, "at least one shard"},
		{"bad id", func(m *types.MsgRegisterDataset) { m.DatasetId = "Corpus_V1" }, types.ErrInvalidDataset, "3 to 64 characters"},
		{"custody id", func(m *types.MsgRegisterDataset) { m.DatasetId = "ckpt-1-0" }, types.ErrInvalidDataset, "reserved for custody objects"},
		// Squatting a sync job's round files before the worker or aggregator commits them.
		{"pseudo-gradient id", func(m *types.MsgRegisterDataset) { m.DatasetId = "pg-1-0-0" }, types.ErrInvalidDataset, "reserved for custody objects"},
		{"global id", func(m *types.MsgRegisterDataset) { m.DatasetId = "global-1-1" }, types.ErrInvalidDataset, "reserved for custody objects"},
		{"id taken", func(m *types.MsgRegisterDataset) { m.DatasetId = "taken" }, types.ErrDatasetExists, "already registered"},
		{"owner not an address", func(m *types.MsgRegisterDataset) { m.Owner = "depin1nope" }, sdkerrors.ErrInvalidAddress, `owner "depin1nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := cloneRegister(good.msg)
			tc.damage(msg)
			before := e.snapshot()
			_, err := e.msg.RegisterDataset(e.Ctx, msg)
			require.ErrorIs(t, err, tc.err)
			require.Contains(t, err.Error(), tc.text)
			before.RequireUnchanged(t)
		})
	}
	e.register(good)
}

// proofFor builds proofs of indices over piece bytes (possibly the wrong ones).
func proofFor(t testing.TB, piece []byte, indices []uint64) []types.ChunkProof {
	t.Helper()
	proofs, err := manifest.Prove(piece, chunkSize, indices)
	require.NoError(t, err)
	return proofs
}

func TestClaimRejects(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 1000, 1000)
	e.register(ds)
	alpha, bravo := e.registerProvider("alpha"), e.registerProvider("bravo")
	e.claim(alpha, ds, 0, 0)
	// A provider whose bond cannot cover another replica's collateral.
	poor := addr("poor")
	e.Fund(t, poor, providerFunds)
	_, err := e.sxMsg.RegisterProvider(e.Ctx, newProviderMsg(poor, collateral/2))
	require.NoError(t, err)
	e.AdvanceTo(t, 3)

	cases := []struct {
		name string
		msg  func() *types.MsgClaimReplica
		err  *errorsmod.Error
		text string
	}{
		{"claim without proof", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Proofs = nil
			return m
		}, types.ErrInvalidProof, "must carry the proof"},
		{"proof for the wrong chunk", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			other := (m.Proofs[0].Index + 1) % 8
			for _, p := range m.Proofs {
				if p.Index == other {
					other = (other + 1) % 8
				}
			}
			m.Proofs[0] = proofFor(t, ds.pieces[1][0], []uint64{other})[0]
			return m
		}, types.ErrInvalidProof, "but the challenge asks for chunk"},
		{"tampered chunk", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Proofs[1].Chunk[3] ^= 0x40
			return m
		}, types.ErrInvalidProof, "does not match piece root"},
		{"proof from another piece (wrong root)", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			var indices []uint64
			for _, p := range m.Proofs {
				indices = append(indices, p.Index)
			}
			m.Proofs = proofFor(t, ds.pieces[1][1], indices)
			return m
		}, types.ErrInvalidProof, "does not match piece root"},
		{"over-deep proof", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Proofs[2].Proof = append(m.Proofs[2].Proof, bytes.Repeat([]byte{7}, 32))
			return m
		}, types.ErrInvalidProof, "must have exactly 3"},
		{"truncated chunk", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Proofs[0].Chunk = m.Proofs[0].Chunk[:10]
			return m
		}, types.ErrInvalidProof, "is 10 bytes, must be"},
		{"wrong period", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Period++
			return m
		}, types.ErrWrongPeriod, "current period is 0"},
		{"not a provider", func() *types.MsgClaimReplica {
			m := e.claimMsg(addr("stranger"), ds, 1, 0)
			return m
		}, types.ErrProviderIneligible, "is not a stakingext provider"},
		{"slot already filled", func() *types.MsgClaimReplica { return e.claimMsg(bravo, ds, 0, 0) },
			types.ErrNoOpenSlot, "already has 1 of 1 holders"},
		{"second piece of the same shard", func() *types.MsgClaimReplica { return e.claimMsg(alpha, ds, 0, 1) },
			types.ErrAlreadyHolder, "one failure must not take two pieces of a shard"},
		{"free bond below the collateral", func() *types.MsgClaimReplica { return e.claimMsg(poor, ds, 1, 0) },
			types.ErrProviderIneligible, "free bond 500000udepin"},
		{"no such piece", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Piece = 3
			return m
		}, types.ErrPieceNotFound, "pieces 0..2, not 3"},
		{"no such dataset", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.DatasetId = "nope"
			return m
		}, types.ErrDatasetNotFound, `"nope"`},
		{"holder not an address", func() *types.MsgClaimReplica {
			m := e.claimMsg(bravo, ds, 1, 0)
			m.Holder = "depin1nope"
			return m
		}, sdkerrors.ErrInvalidAddress, `holder "depin1nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.msg()
			before := e.snapshot()
			_, err := e.msg.ClaimReplica(e.Ctx, msg)
			require.ErrorIs(t, err, tc.err)
			require.Contains(t, err.Error(), tc.text)
			before.RequireUnchanged(t)
		})
	}
	// An ineligible claimant is the registry's refusal, with x/stakingext's reason kept.
	_, err = e.msg.ClaimReplica(e.Ctx, e.claimMsg(addr("stranger"), ds, 1, 0))
	require.ErrorIs(t, err, types.ErrProviderIneligible)
	require.ErrorIs(t, err, stakingexttypes.ErrProviderNotFound)
	e.claim(bravo, ds, 1, 0)
}

func TestStorageProofRejects(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", rs(2, 1), 1000)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	id := e.claim(alpha, ds, 0, 0)

	// Right after the claim, the next period's challenge is not known yet.
	r := e.replica(id)
	_, err := e.msg.SubmitStorageProof(e.Ctx, &types.MsgSubmitStorageProof{Holder: alpha.String(), ReplicaId: id, Period: r.NextPeriod,
		Proofs: proofFor(t, ds.pieces[0][0], []uint64{0, 1, 2, 3})})
	require.ErrorIs(t, err, types.ErrChallengeNotOpen)
	require.Contains(t, err.Error(), "is not reached yet")

	e.advanceToOpen(id)
	cases := []struct {
		name   string
		damage func(m *types.MsgSubmitStorageProof)
		err    *errorsmod.Error
		text   string
	}{
		{"tampered chunk", func(m *types.MsgSubmitStorageProof) { m.Proofs[0].Chunk[0] ^= 1 }, types.ErrInvalidProof, "does not match piece root"},
		{"wrong index order", func(m *types.MsgSubmitStorageProof) { m.Proofs[0], m.Proofs[1] = m.Proofs[1], m.Proofs[0] },
			types.ErrInvalidProof, "proof 0 is for chunk"},
		{"wrong root", func(m *types.MsgSubmitStorageProof) {
			var indices []uint64
			for _, p := range m.Proofs {
				indices = append(indices, p.Index)
			}
			m.Proofs = proofFor(t, ds.pieces[0][2], indices)
		}, types.ErrInvalidProof, "does not match piece root"},
		{"tampered proof hash", func(m *types.MsgSubmitStorageProof) { m.Proofs[3].Proof[0][5] ^= 1 }, types.ErrInvalidProof, "does not match piece root"},
		{"over-deep proof", func(m *types.MsgSubmitStorageProof) {
			m.Proofs[1].Proof = append(m.Proofs[1].Proof, make([]byte, 32))
		}, types.ErrInvalidProof, "must have exactly"},
		{"short proof", func(m *types.MsgSubmitStorageProof) { m.Proofs[1].Proof = m.Proofs[1].Proof[1:] }, types.ErrInvalidProof, "must have exactly"},
		{"31-byte proof hash", func(m *types.MsgSubmitStorageProof) { m.Proofs[1].Proof[0] = m.Proofs[1].Proof[0][:31] },
			types.ErrInvalidProof, "hash must be 32 bytes"},
		{"missing proof", func(m *types.MsgSubmitStorageProof) { m.Proofs = m.Proofs[:3] }, types.ErrInvalidProof, "asks for 4 chunks"},
		{"wrong period", func(m *types.MsgSubmitStorageProof) { m.Period++ }, types.ErrWrongPeriod, "is due for period 1 (deadline 31), not 2"},
		{"not the holder", func(m *types.MsgSubmitStorageProof) { m.Holder = addr("mallory").String() }, types.ErrNotHolder, "is held by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := e.proofMsg(id)
			tc.damage(msg)
			before := e.snapshot()
			_, err := e.msg.SubmitStorageProof(e.Ctx, msg)
			require.ErrorIs(t, err, tc.err)
			require.Contains(t, err.Error(), tc.text)
			before.RequireUnchanged(t)
		})
	}

	// A proof that was valid becomes too late once the deadline passes.
	late := e.proofMsg(id)
	deadline := e.replica(id).NextDeadline
	e.AdvanceTo(t, deadline+1)
	_, err = e.msg.SubmitStorageProof(e.Ctx, late)
	require.ErrorIs(t, err, types.ErrWrongPeriod, "the miss moved the replica on to the next period")
	require.Equal(t, uint32(1), e.replica(id).ConsecutiveMisses)
}

// TestDeadlineIsInclusive: a proof in the deadline block itself counts.
func TestDeadlineIsInclusive(t *testing.T) {
	e := newEnv(t)
	ds := newTestDataset(t, e.owner, "corpus-v1", replicas(1), 300)
	e.register(ds)
	alpha := e.registerProvider("alpha")
	id := e.claim(alpha, ds, 0, 0)
	e.AdvanceTo(t, e.replica(id).NextDeadline)
	e.prove(id)
	e.NextBlock(t)
	require.Zero(t, e.replica(id).TotalMisses)
}

func newProviderMsg(op sdk.AccAddress, bond int64) *stakingexttypes.MsgRegisterProvider {
	return &stakingexttypes.MsgRegisterProvider{Operator: op.String(), Moniker: "poor", Endpoint: "https://poor.example.com:8443", Region: "eu-west", Bond: coin(bond)}
}

// The merkle package is the one RFC 6962 implementation: the proofs the manifest package
// builds verify with it directly.
func TestProofsUseTheSharedMerklePackage(t *testing.T) {
	piece := bytes.Repeat([]byte("abcdefgh"), 100)
	root := merkle.RootOfBytes(piece, chunkSize)
	proofs := proofFor(t, piece, []uint64{0, 5, 12})
	for _, p := range proofs {
		path := make([]merkle.Hash, len(p.Proof))
		for i, h := range p.Proof {
			path[i], _ = merkle.HashFromBytes(h)
		}
		require.NoError(t, merkle.VerifyInclusion(root, p.Index, types.ChunkCount(uint64(len(piece)), chunkSize), merkle.LeafHash(p.Chunk), path))
	}
}
