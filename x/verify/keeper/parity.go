package keeper

import (
	"errors"
	"fmt"

	errorsmod "cosmossdk.io/errors"

	sdk "github.com/cosmos/cosmos-sdk/types"

	"github.com/depinchain/depinchain/pkg/custody"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/internal/keeperutil"
	"github.com/depinchain/depinchain/x/verify/types"
)

// proveParityFault checks a parity fraud proof (MsgProveParityFault) and convicts the
// checkpoint's trainer when it holds: one column of the custody object — chunk c of every
// data piece and of the accused parity piece, opened against the roots the trainer
// registered — recomputed with pkg/custody's Reed-Solomon encoding. Gas is charged per
// byte and per hash before anything is checked. A proof that proves nothing (bad index,
// bad opening, a parity chunk that is right) fails and changes nothing.
//
// A pending checkpoint is rejected with the trainer's other pending ones (punishFraud).
// A final checkpoint stays final: its data pieces are bound to its state root, so the
// state the job resumes from is right; only its redundancy was fake. Its trainer is
// convicted all the same (fraud is fraud): slashed, tombstoned, its lease closed and its
// pending checkpoints rejected. A rejected or withheld checkpoint is refused: its trainer
// was already punished with its lease. The auditors are not slashed: they attest to the
// trace, not to the custody pieces.
func (k Keeper) proveParityFault(ctx sdk.Context, prover sdk.AccAddress, msg *types.MsgProveParityFault) error {
	params, err := k.Params.Get(ctx)
	if err != nil {
		return err
	}
	var bytesIn uint64
	for _, o := range msg.Data {
		bytesIn += uint64(len(o.Data))
	}
	bytesIn += uint64(len(msg.Parity.Data))
	data, err := toChunkOpenings(msg.Data)
	if err != nil {
		return err
	}
	parity, err := toChunkOpening(fmt.Sprintf("parity chunk of piece %d", msg.ParityPiece), msg.Parity)
	if err != nil {
		return err
	}
	// The column is recomputed over chunks padded to ChunkSize: that work, the bytes sent
	// and every hash of the openings.
	ctx.GasMeter().ConsumeGas(params.GasPerByte*(bytesIn+uint64(len(msg.Data)+1)*custody.ChunkSize), "parity column")
	ctx.GasMeter().ConsumeGas(params.GasPerHash*custody.ProofHashes(data, parity), "parity openings")

	cp, err := k.GetCheckpoint(ctx, msg.LeaseId, msg.CheckpointIndex)
	if err != nil {
		return err
	}
	if cp.CustodyId == "" {
		return errorsmod.Wrapf(types.ErrInvalidParityProof, "checkpoint %d/%d has no custody object", cp.LeaseId, cp.Index)
	}
	if cp.ParityFaultProven {
		return errorsmod.Wrapf(types.ErrInvalidParityProof, "checkpoint %d/%d's parity fault was already proven", cp.LeaseId, cp.Index)
	}
	if cp.Status != types.CHECKPOINT_STATUS_PENDING && cp.Status != types.CHECKPOINT_STATUS_FINAL {
		return errorsmod.Wrapf(types.ErrInvalidParityProof, "checkpoint %d/%d is %s: its trainer was already punished with its lease", cp.LeaseId, cp.Index, cp.Status)
	}
	trainer, err := k.addressCodec.StringToBytes(cp.Provider)
	if err != nil {
		return err
	}
	if sdk.AccAddress(trainer).Equals(prover) {
		return errorsmod.Wrapf(types.ErrSelfChallenge, "%s trained checkpoint %d/%d", cp.Provider, cp.LeaseId, cp.Index)
	}
	l, roots, err := k.shardKeeper.CustodyPieceRoots(ctx, cp.CustodyId)
	if err != nil {
		return err
	}
	if err := custody.CheckParityFault(l, roots, msg.ParityPiece, msg.Chunk, data, parity); err != nil {
		if errors.Is(err, custody.ErrParityConsistent) {
			return errorsmod.Wrapf(types.ErrParityConsistent, "checkpoint %d/%d: %v", cp.LeaseId, cp.Index, err)
		}
		return errorsmod.Wrapf(types.ErrInvalidParityProof, "checkpoint %d/%d: %v", cp.LeaseId, cp.Index, err)
	}

	wasFinal := cp.Status == types.CHECKPOINT_STATUS_FINAL
	cp.ParityFaultProven = true
	if err := k.saveCheckpoint(ctx, cp); err != nil {
		return err
	}
	fraud := fmt.Sprintf("checkpoint %d/%d: chunk %d of its registered parity piece %d is not the Reed-Solomon parity of its data pieces (proven by %s)",
		cp.LeaseId, cp.Index, msg.Chunk, msg.ParityPiece, msg.Prover)
	p, err := k.punishFraud(ctx, params, cp, prover, trainer, fraud, false)
	if err != nil {
		return err
	}
	return keeperutil.Emit(ctx, &types.EventParityFaultProven{
		LeaseId: cp.LeaseId, CheckpointIndex: cp.Index, CustodyId: cp.CustodyId, ParityPiece: msg.ParityPiece, Chunk: msg.Chunk,
		Trainer: cp.Provider, Prover: msg.Prover, WasFinal: wasFinal,
		Slashed: p.slashed, Reward: p.reward, AuditorsSlashed: p.auditors, OwnerCompensation: p.compensation, CommunityPool: p.communityPool,
	})
}

func toChunkOpenings(os []types.PieceChunk) ([]custody.ChunkOpening, error) {
	if len(os) > custody.MaxPieces {
		return nil, errorsmod.Wrapf(types.ErrInvalidParityProof, "%d data chunks, at most %d pieces exist", len(os), custody.MaxPieces)
	}
	out := make([]custody.ChunkOpening, len(os))
	for j, o := range os {
		var err error
		if out[j], err = toChunkOpening(fmt.Sprintf("data chunk of piece %d", j), o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func toChunkOpening(what string, o types.PieceChunk) (custody.ChunkOpening, error) {
	if len(o.Data) > custody.ChunkSize {
		return custody.ChunkOpening{}, errorsmod.Wrapf(types.ErrInvalidParityProof, "%s has %d bytes, a chunk at most %d", what, len(o.Data), custody.ChunkSize)
	}
	if len(o.Proof) > 64 {
		return custody.ChunkOpening{}, errorsmod.Wrapf(types.ErrInvalidParityProof, "%s has a proof of %d hashes", what, len(o.Proof))
	}
	proof := make([]merkle.Hash, len(o.Proof))
	for i, h := range o.Proof {
		var err error
		if proof[i], err = merkle.HashFromBytes(h); err != nil {
			return custody.ChunkOpening{}, errorsmod.Wrapf(types.ErrInvalidParityProof, "%s proof[%d]: %v", what, i, err)
		}
	}
	return custody.ChunkOpening{Data: o.Data, Proof: proof}, nil
}
