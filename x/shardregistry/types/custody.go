package types

import (
	"fmt"
	"strings"
	"time"

	errorsmod "cosmossdk.io/errors"
	"cosmossdk.io/math"

	"github.com/depinchain/depinchain/pkg/custody"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// CustodyIDPrefix starts every custody object's dataset id; MsgRegisterDataset refuses
// it, so nobody can take a checkpoint's id before x/verify registers it.
const CustodyIDPrefix = "ckpt-"

// IsCustodyDatasetID reports whether id is in the custody objects' reserved namespace:
// checkpoint states, and the pseudo-gradients and global states of sync jobs' rounds
// (x/market names those), so nobody can take a round's id before its commit.
func IsCustodyDatasetID(id string) bool {
	return strings.HasPrefix(id, CustodyIDPrefix) ||
		strings.HasPrefix(id, markettypes.PseudoGradientCustodyPrefix) || strings.HasPrefix(id, markettypes.GlobalCustodyPrefix)
}

// CustodyDatasetID is the dataset id of checkpoint index of a lease's state: it is
// derived, so a sidecar or the CLI finds a checkpoint's pieces without a lookup.
func CustodyDatasetID(leaseID, index uint64) string {
	return fmt.Sprintf("%s%d-%d", CustodyIDPrefix, leaseID, index)
}

// CustodyShards is the single shard of a custody object: the whole state, its pieces
// cut by pkg/custody's layout.
func CustodyShards(datasetID string, l custody.Layout, pieceRoots [][]byte) []Shard {
	pieces := make([]Piece, l.Pieces())
	for i := range pieces {
		size := l.PieceBytes(uint32(i))
		pieces[i] = Piece{Index: uint32(i), Root: pieceRoots[i], SizeBytes: size, ChunkCount: ChunkCount(size, custody.ChunkSize)}
	}
	return []Shard{{DatasetId: datasetID, Index: 0, SampleStart: 0, SampleEnd: 1, SizeBytes: l.StateSize, Pieces: pieces}}
}

// CustodyLayout is the layout a custody dataset's shard must have.
func CustodyLayout(d Dataset) (custody.Layout, error) {
	return custody.NewLayout(d.TotalSize, d.Encoding.DataPieces, d.Encoding.ParityPieces)
}

// ValidateCustody checks a custody dataset (d.Custody set) and its shards statelessly:
// Reed-Solomon with the layout's effective data pieces, ChunkSize chunks, one shard
// holding the whole state, the layout's piece sizes, data pieces whose roots make the
// state root, and the manifest root. It is what genesis import checks of a custody object
// (x/verify registers them from checked checkpoints).
func ValidateCustody(p Params, d Dataset, shards []Shard) error {
	fail := func(format string, args ...any) error {
		return errorsmod.Wrapf(ErrInvalidManifest, "custody object %q: "+format, append([]any{d.Id}, args...)...)
	}
	if d.Custody == nil {
		return fail("has no custody record")
	}
	if !d.Encoding.IsReedSolomon() || d.ChunkSize != custody.ChunkSize {
		return fail("must be Reed-Solomon with %d-byte chunks, got %s with %d", custody.ChunkSize, d.Encoding.Describe(), d.ChunkSize)
	}
	if d.TotalSize > p.CustodyMaxStateSize {
		return fail("state of %d bytes is above custody_max_state_size %d", d.TotalSize, p.CustodyMaxStateSize)
	}
	l, err := CustodyLayout(d)
	if err != nil {
		return fail("%v", err)
	}
	if l.DataPieces != d.Encoding.DataPieces || l.PieceSize != d.Custody.PieceSize {
		return fail("layout of a %d-byte state is %d data pieces of %d bytes, the record says %d of %d",
			d.TotalSize, l.DataPieces, l.PieceSize, d.Encoding.DataPieces, d.Custody.PieceSize)
	}
	if len(shards) != 1 {
		return fail("has %d shards, a state is one", len(shards))
	}
	roots := make([][]byte, len(shards[0].Pieces))
	for i, pc := range shards[0].Pieces {
		roots[i] = pc.Root
	}
	want := CustodyShards(d.Id, l, roots)[0]
	s := shards[0]
	if s.Index != 0 || s.SampleStart != 0 || s.SampleEnd != 1 || s.SizeBytes != d.TotalSize || len(s.Pieces) != len(want.Pieces) {
		return fail("its shard is not the one shard of the %d-byte state with %d pieces", d.TotalSize, l.Pieces())
	}
	for i, pc := range s.Pieces {
		if w := want.Pieces[i]; pc.Index != w.Index || pc.SizeBytes != w.SizeBytes || pc.ChunkCount != w.ChunkCount {
			return fail("piece %d is %d bytes in %d chunks, the layout says %d in %d", i, pc.SizeBytes, pc.ChunkCount, want.Pieces[i].SizeBytes, want.Pieces[i].ChunkCount)
		}
	}
	if err := custody.CheckRoots(l, d.Custody.StateRoot, roots); err != nil {
		return fail("%v", err)
	}
	if root := ManifestRoot(d.Encoding, d.ChunkSize, d.TotalSize, shards); string(root[:]) != string(d.ManifestRoot) {
		return fail("manifest_root does not match its shard")
	}
	return nil
}

// CustodyRetentionPeriods is how many challenge periods the storage budget pays for a
// retention of retain: ceil(retain in seconds / period_blocks), which counts blocks of at
// least one second each — an upper bound on the periods that fit in retain.
func (p Params) CustodyRetentionPeriods(retain time.Duration) uint64 {
	secs := uint64(retain / time.Second)
	if retain%time.Second != 0 {
		secs++
	}
	return (secs + p.PeriodBlocks - 1) / p.PeriodBlocks
}

// CustodyStorageBudget is what a job with this custody section reserves from its deposit
// for its holders at submit: (data + parity pieces) × retention periods × fee per piece
// and period. Holders are paid from it per proven period until it runs out, so it bounds
// the owner's storage cost.
func (p Params) CustodyStorageBudget(spec markettypes.CustodySpec) math.Int {
	pieces := math.NewIntFromUint64(uint64(spec.DataPieces) + uint64(spec.ParityPieces))
	return pieces.Mul(math.NewIntFromUint64(p.CustodyRetentionPeriods(spec.RetainCheckpoints))).
		Mul(math.NewIntFromUint64(p.CustodyStorageFeePerPiecePeriod))
}

// CheckCustodySpec checks a job spec's custody section against params: a piece count the
// chain accepts and a retention no longer than custody_max_retention_seconds.
func (p Params) CheckCustodySpec(spec markettypes.CustodySpec) error {
	if spec.DataPieces == 0 || spec.ParityPieces == 0 || spec.DataPieces+spec.ParityPieces > p.MaxPiecesPerShard {
		return errorsmod.Wrapf(ErrInvalidCustody, "custody.data_pieces (%d) and custody.parity_pieces (%d) must be at least 1 each and at most %d together (max_pieces_per_shard)",
			spec.DataPieces, spec.ParityPieces, p.MaxPiecesPerShard)
	}
	max := time.Duration(p.CustodyMaxRetentionSeconds) * time.Second
	if spec.RetainCheckpoints <= 0 || spec.RetainCheckpoints > max {
		return errorsmod.Wrapf(ErrInvalidCustody, "custody.retain_checkpoints must be positive and at most %s (x/shardregistry's custody_max_retention_seconds), got %s",
			max, spec.RetainCheckpoints)
	}
	return nil
}
