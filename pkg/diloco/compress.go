package diloco

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/depinchain/depinchain/pkg/exact"
	"github.com/depinchain/depinchain/pkg/merkle"
)

// EntryBytes is the size of one kept element in a compressed record: its
// index in the chunk (uint16) and its value (int32), little-endian.
const EntryBytes = 6

// RecordBytes is the size of one chunk's record at top-k k: k entries.
func RecordBytes(k int) int { return k * EntryBytes }

// CompressChunk is top-k sparsification with error feedback of one section
// chunk (ChunkElems elements each): a = clamp32(delta + errBuf); the k
// elements of largest |a| are kept (ties: the lower index first), sent
// holds them (zeros elsewhere) and newErr = a − sent is what the worker
// carries to its next round. The record lists the kept elements in
// ascending index order. Padding elements are zero in a, so they are kept
// only when fewer than k parameter elements are non-zero, and then as zeros.
func CompressChunk(delta, errBuf []int64, k int) (record []byte, sent, newErr []int64) {
	a := make([]int64, ChunkElems)
	for i := range a {
		a[i] = clamp32(delta[i] + errBuf[i])
	}
	idx := make([]int, ChunkElems)
	for i := range idx {
		idx[i] = i
	}
	abs := func(v int64) int64 { return max(v, -v) }
	sort.SliceStable(idx, func(x, y int) bool { return abs(a[idx[x]]) > abs(a[idx[y]]) })
	kept := idx[:k]
	sort.Ints(kept)
	sent = make([]int64, ChunkElems)
	newErr = a
	record = make([]byte, 0, RecordBytes(k))
	for _, i := range kept {
		sent[i] = a[i]
		newErr[i] = 0
		record = binary.LittleEndian.AppendUint16(record, uint16(i))
		record = binary.LittleEndian.AppendUint32(record, uint32(sent[i]))
	}
	return record, sent, newErr
}

// DecompressChunk returns the dense chunk (ChunkSize bytes, int32
// little-endian) of a record of k entries, checking that it is one
// CompressChunk can write for a chunk of valid parameter elements: indices
// strictly ascending and below ChunkElems, values in the s32 range and zero
// at padding indices (≥ valid).
func DecompressChunk(record []byte, k, valid int) ([]byte, error) {
	v, err := decompress(record, k, valid)
	if err != nil {
		return nil, err
	}
	return encodeSection(nil, v), nil
}

func decompress(record []byte, k, valid int) ([]int64, error) {
	if k < 1 || k > ChunkElems || valid < 0 || valid > ChunkElems {
		return nil, fmt.Errorf("%w: top-k %d or valid count %d out of range", ErrInvalid, k, valid)
	}
	if len(record) != RecordBytes(k) {
		return nil, fmt.Errorf("%w: record of %d bytes, want %d", ErrInvalid, len(record), RecordBytes(k))
	}
	v := make([]int64, ChunkElems)
	prev := -1
	for e := range k {
		i := int(binary.LittleEndian.Uint16(record[e*EntryBytes:]))
		x := int64(int32(binary.LittleEndian.Uint32(record[e*EntryBytes+2:])))
		switch {
		case i <= prev || i >= ChunkElems:
			return nil, fmt.Errorf("%w: entry %d: index %d not ascending or not below %d", ErrInvalid, e, i, ChunkElems)
		case x < -exact.Max32:
			return nil, fmt.Errorf("%w: entry %d: value %d outside the s32 range", ErrInvalid, e, x)
		case i >= valid && x != 0:
			return nil, fmt.Errorf("%w: entry %d: padding index %d holds %d, not 0", ErrInvalid, e, i, x)
		}
		v[i] = x
		prev = i
	}
	// Zeros may be listed only where CompressChunk lists them (the lowest
	// free indices), so one pseudo-gradient has one commitment.
	if canon, _, _ := CompressChunk(v, make([]int64, ChunkElems), k); !bytes.Equal(canon, record) {
		return nil, fmt.Errorf("%w: record is not canonical (zero entries must take the lowest unused indices)", ErrInvalid)
	}
	return v, nil
}

// Compress returns p's compressed form under p.Sync.TopK and the worker's
// new error buffer, given its error buffer from its previous round (nil:
// zeros, a worker's first round). The returned pseudo-gradient's Delta is
// what was sent; its Root is the commitment.
func (p *PseudoGradient) Compress(errBuf []int64) (*PseudoGradient, []int64, error) {
	k := int(p.Sync.TopK)
	if k < 1 {
		return nil, nil, fmt.Errorf("%w: compression needs sync.top_k > 0", ErrInvalid)
	}
	l := NewLayout(p.Config)
	if errBuf == nil {
		errBuf = make([]int64, l.Elems())
	}
	if len(errBuf) != l.Elems() || len(p.Delta) != l.Elems() {
		return nil, nil, fmt.Errorf("%w: error buffer or pseudo-gradient has the wrong length", ErrInvalid)
	}
	out := *p
	out.Delta = make([]int64, l.Elems())
	newErr := make([]int64, l.Elems())
	for c := range l.Chunks {
		lo, hi := c*ChunkElems, (c+1)*ChunkElems
		_, sent, e := CompressChunk(p.Delta[lo:hi], errBuf[lo:hi], k)
		copy(out.Delta[lo:], sent)
		copy(newErr[lo:], e)
	}
	out.ErrIn, out.ErrOut = ErrorBufferRoot(errBuf), ErrorBufferRoot(newErr)
	return &out, newErr, nil
}

// Compressed is the committed form of a compressed pseudo-gradient: the
// header chunk (kind KindCompressed) and one record per section chunk,
// served back to back (Encode). Its root is the Merkle root of Encode in
// ChunkSize chunks, like every other file's, so the one root serves custody
// (pieces are cut from the file as from a checkpoint state) and
// adjudication (record k lies in the chunks RecordSpan names).
type Compressed struct {
	Header  []byte
	Records [][]byte
}

// Compressed returns p's committed compressed form. p.Delta must have at
// most TopK non-zeros per chunk (as Compress leaves it).
func (p *PseudoGradient) Compressed() (*Compressed, error) {
	k := int(p.Sync.TopK)
	l := NewLayout(p.Config)
	c := &Compressed{Header: p.header(KindCompressed).encode()}
	for ch := range l.Chunks {
		d := p.Delta[ch*ChunkElems : (ch+1)*ChunkElems]
		rec, sent, _ := CompressChunk(d, make([]int64, ChunkElems), k)
		for i := range d {
			if sent[i] != d[i] {
				return nil, fmt.Errorf("%w: chunk %d has more than top_k = %d non-zeros", ErrInvalid, ch, k)
			}
		}
		c.Records = append(c.Records, rec)
	}
	return c, nil
}

// Root is the commitment: the chunk Merkle root of Encode.
func (c *Compressed) Root() merkle.Hash { return merkle.RootOfBytes(c.Encode(), ChunkSize) }

// Encode is the file that is served: the header chunk, then the records
// back to back. Its length is ChunkSize + Chunks·RecordBytes(TopK).
func (c *Compressed) Encode() []byte {
	out := append([]byte(nil), c.Header...)
	for _, r := range c.Records {
		out = append(out, r...)
	}
	return out
}

// DecodeCompressed parses a compressed file into the pseudo-gradient it
// commits to (Delta dense, zeros where nothing was sent).
func DecodeCompressed(b []byte) (*PseudoGradient, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return nil, err
	}
	if h.kind != KindCompressed || h.sync.TopK < 1 {
		return nil, fmt.Errorf("%w: kind %d with top_k %d is not a compressed pseudo-gradient", ErrInvalid, h.kind, h.sync.TopK)
	}
	l := NewLayout(h.cfg)
	k := int(h.sync.TopK)
	if want := ChunkSize + l.Chunks*RecordBytes(k); len(b) != want {
		return nil, fmt.Errorf("%w: compressed pseudo-gradient of %d bytes, want %d", ErrInvalid, len(b), want)
	}
	p := &PseudoGradient{Config: l.Config, Sync: h.sync, Round: h.round, Worker: h.worker, Base: h.base, Delta: make([]int64, l.Elems()),
		ErrIn: h.errIn, ErrOut: h.errOut}
	for c := range l.Chunks {
		off := ChunkSize + c*RecordBytes(k)
		v, err := decompress(b[off:off+RecordBytes(k)], k, l.Valid(c))
		if err != nil {
			return nil, fmt.Errorf("chunk %d: %w", c, err)
		}
		copy(p.Delta[c*ChunkElems:], v)
	}
	return p, nil
}
