package traindata_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/pkg/traindata"
)

// streamOf cuts data into segments of the given sizes, each chunked by chunkSize.
func streamOf(t *testing.T, data []byte, chunkSize uint64, sizes ...int) traindata.Stream {
	t.Helper()
	var segs []traindata.Segment
	off := 0
	for _, n := range sizes {
		segs = append(segs, traindata.Segment{Root: merkle.RootOfBytes(data[off:off+n], int(chunkSize)), Size: uint64(n), ChunkSize: chunkSize})
		off += n
	}
	s, err := traindata.NewStream(traindata.NewLayout(segs), data[:off])
	require.NoError(t, err)
	return s
}

func TestLayoutAddressesEveryByte(t *testing.T) {
	data := bytes.Repeat([]byte("exactly reproducible "), 200)
	s := streamOf(t, data, 64, 1000, 37, 64, 513)
	require.Equal(t, uint64(1000+37+64+513), s.Size())
	require.Equal(t, uint64(16+1+1+9), s.Chunks())
	for off := uint64(0); off < s.Size(); off++ {
		n, ok := s.ChunkAt(off)
		require.True(t, ok)
		_, _, start, end, ok := s.Chunk(n)
		require.True(t, ok)
		require.True(t, start <= off && off < end, "byte %d not in chunk %d [%d, %d)", off, n, start, end)
	}
	_, ok := s.ChunkAt(s.Size())
	require.False(t, ok)
	_, _, _, _, ok = s.Chunk(s.Chunks())
	require.False(t, ok)
}

func TestNewStreamChecksEverySegment(t *testing.T) {
	data := bytes.Repeat([]byte("abc"), 100)
	s := streamOf(t, data, 16, 100, 200)
	_, err := traindata.NewStream(s.Layout, data[:299])
	require.ErrorContains(t, err, "stream is 299 bytes, the layout 300")
	tampered := append([]byte(nil), data...)
	tampered[150] ^= 1
	_, err = traindata.NewStream(s.Layout, tampered)
	require.ErrorContains(t, err, "segment 1 of the stream does not match")
}

// Prove supplies each chunk a window touches once, with a proof against its segment's
// root, across segment boundaries, and refuses windows outside the stream.
func TestProveCoversTheWindows(t *testing.T) {
	data := make([]byte, 2000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	s := streamOf(t, data, 64, 700, 300, 65, 900)
	windows := []traindata.Window{{Start: 690, Length: 20}, {Start: 0, Length: 5}, {Start: 695, Length: 400}, {Start: 1964, Length: 1}}
	proofs, err := s.Prove(windows)
	require.NoError(t, err)
	got := map[uint64][]byte{}
	for _, p := range proofs {
		require.NotContains(t, got, p.Index, "chunk %d twice", p.Index)
		seg, local, start, end, ok := s.Chunk(p.Index)
		require.True(t, ok)
		require.Equal(t, data[start:end], p.Data)
		require.NoError(t, merkle.VerifyInclusion(seg.Root, local, seg.Chunks(), merkle.LeafHash(p.Data), p.Proof))
		got[p.Index] = p.Data
	}
	for _, w := range windows {
		for off := w.Start; off < w.Start+w.Length; off++ {
			n, _ := s.ChunkAt(off)
			require.Contains(t, got, n, "chunk of byte %d not supplied", off)
		}
	}
	for _, w := range []traindata.Window{{Start: 1960, Length: 10}, {Start: 5, Length: 0}} {
		_, err := s.Prove([]traindata.Window{w})
		require.ErrorContains(t, err, "outside the 1965-byte stream")
	}
}
