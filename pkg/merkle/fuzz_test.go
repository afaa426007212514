package merkle_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// FuzzVerifyInclusion checks that a genuine proof verifies, that flipping any
// bit of it breaks it, and that arbitrary bytes passed off as a proof (as a
// malicious prover would send them) never panic and are only accepted when
// they are the genuine proof.
func FuzzVerifyInclusion(f *testing.F) {
	f.Add(uint16(1), uint16(0), uint16(0), byte(0), []byte{})
	f.Add(uint16(8), uint16(5), uint16(40), byte(0x01), []byte{})
	f.Add(uint16(300), uint16(299), uint16(3), byte(0x80), make([]byte, 9*merkle.HashSize))
	f.Add(uint16(7), uint16(6), uint16(0), byte(0xff), make([]byte, 2*merkle.HashSize))
	f.Add(uint16(65535), uint16(12345), uint16(511), byte(0x10), []byte("short"))
	f.Fuzz(func(t *testing.T, treeSize, leafIndex, flipAt uint16, flipMask byte, forged []byte) {
		size := uint64(treeSize)%512 + 1
		index := uint64(leafIndex) % size
		leafHashes := hashesForSize(int(size))
		root := merkle.RootFromLeafHashes(leafHashes)
		leaf := leafHashes[index]
		proof, err := merkle.InclusionProof(leafHashes, index)
		if err != nil {
			t.Fatal(err)
		}
		if err := merkle.VerifyInclusion(root, index, size, leaf, proof); err != nil {
			t.Fatalf("genuine proof rejected: %v", err)
		}

		if flipMask != 0 && len(proof) > 0 {
			tampered := slices.Clone(proof)
			bit := int(flipAt) % (len(tampered) * merkle.HashSize)
			tampered[bit/merkle.HashSize][bit%merkle.HashSize] ^= flipMask
			if err := merkle.VerifyInclusion(root, index, size, leaf, tampered); !errors.Is(err, merkle.ErrRootMismatch) {
				t.Fatalf("tampered proof: error = %v, want ErrRootMismatch", err)
			}
		}

		forgedProof := make([]merkle.Hash, len(forged)/merkle.HashSize)
		for i := range forgedProof {
			copy(forgedProof[i][:], forged[i*merkle.HashSize:])
		}
		err = merkle.VerifyInclusion(root, index, size, leaf, forgedProof)
		switch {
		case len(forgedProof) != len(proof):
			if !errors.Is(err, merkle.ErrProofLength) {
				t.Fatalf("forged proof of %d hashes: error = %v, want ErrProofLength", len(forgedProof), err)
			}
		case equalHashes(forgedProof, proof):
			if err != nil {
				t.Fatalf("genuine proof given as bytes rejected: %v", err)
			}
		case !errors.Is(err, merkle.ErrRootMismatch):
			t.Fatalf("forged proof: error = %v, want ErrRootMismatch", err)
		}
	})
}

// FuzzStreamRoot checks that every way of hashing chunked data agrees, and
// that a proof served from the data verifies against the streamed root.
func FuzzStreamRoot(f *testing.F) {
	f.Add([]byte{}, uint16(1), uint8(1))
	f.Add([]byte{0}, uint16(1), uint8(2))
	f.Add([]byte("exactly sixteen!"), uint16(8), uint8(3))
	f.Add([]byte("seventeen bytes.."), uint16(8), uint8(4))
	f.Add(bytes.Repeat([]byte{0xa5}, 1000), uint16(7), uint8(8))
	f.Fuzz(func(t *testing.T, data []byte, chunkSize16 uint16, workers8 uint8) {
		chunkSize := int(chunkSize16)%4096 + 1
		workers := int(workers8) % 9
		want := merkle.RootOfBytes(data, chunkSize)
		wantChunks := merkle.ChunkCount(int64(len(data)), chunkSize)
		if naive := naiveRoot(naiveLeafHashes(naiveChunks(data, chunkSize))); naive != want {
			t.Fatalf("RootOfBytes = %s, naive root %s", want, naive)
		}

		got, chunks, err := merkle.StreamRoot(iotest.HalfReader(bytes.NewReader(data)), chunkSize)
		if err != nil || got != want || chunks != wantChunks {
			t.Fatalf("StreamRoot = (%s, %d, %v), want (%s, %d, nil)", got, chunks, err, want, wantChunks)
		}
		got, chunks, err = merkle.ParallelStreamRoot(iotest.HalfReader(bytes.NewReader(data)), chunkSize, workers)
		if err != nil || got != want || chunks != wantChunks {
			t.Fatalf("ParallelStreamRoot(workers %d) = (%s, %d, %v), want (%s, %d, nil)", workers, got, chunks, err, want, wantChunks)
		}

		if wantChunks == 0 {
			return
		}
		index := wantChunks / 2
		chunk, proof, err := merkle.ProofFromReaderAt(bytes.NewReader(data), int64(len(data)), chunkSize, index)
		if err != nil {
			t.Fatal(err)
		}
		if err := merkle.VerifyInclusion(want, index, wantChunks, merkle.LeafHash(chunk), proof); err != nil {
			t.Fatalf("proof of chunk %d of %d: %v", index, wantChunks, err)
		}
	})
}
