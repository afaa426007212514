package merkle_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// propertySizes returns every tree size up to 64 and a fixed random sample up
// to 300: exhaustive where the shapes are most varied, sampled beyond to keep
// the test fast.
func propertySizes() []int {
	sizes := make([]int, 0, 64+24)
	for n := 1; n <= 64; n++ {
		sizes = append(sizes, n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 24 {
		sizes = append(sizes, 65+rng.IntN(300-64))
	}
	return sizes
}

func TestProofLength(t *testing.T) {
	for size := 1; size <= 300; size++ {
		longest := 0
		for index := range size {
			want := len(siblingOnLeft(index, size))
			if got := merkle.ProofLength(uint64(index), uint64(size)); got != want {
				t.Fatalf("ProofLength(%d, %d) = %d, want %d", index, size, got, want)
			}
			longest = max(longest, want)
		}
		if got := merkle.MaxProofDepth(uint64(size)); got != longest {
			t.Fatalf("MaxProofDepth(%d) = %d, want %d", size, got, longest)
		}
	}
	for _, tc := range []struct {
		index, size uint64
		want        int
	}{
		{0, 0, -1},
		{5, 5, -1},
		{6, 5, -1},
		{0, math.MaxUint64, 64},
		{math.MaxUint64 - 1, math.MaxUint64, 63}, // last leaf: right border only
		{1 << 63, 1<<63 + 1, 1},
	} {
		if got := merkle.ProofLength(tc.index, tc.size); got != tc.want {
			t.Errorf("ProofLength(%d, %d) = %d, want %d", tc.index, tc.size, got, tc.want)
		}
	}
	for size, want := range map[uint64]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 1 << 20: 20, math.MaxUint64: merkle.MaxTreeDepth} {
		if got := merkle.MaxProofDepth(size); got != want {
			t.Errorf("MaxProofDepth(%d) = %d, want %d", size, got, want)
		}
	}
}

// VerifyInclusion drops RFC 9162's "sn is 0" checks in favour of its exact
// length check; this shows the two reject exactly the same proofs.
func TestLengthCheckMatchesRFC9162(t *testing.T) {
	for size := uint64(1); size <= 130; size++ {
		for index := range size {
			want := merkle.ProofLength(index, size)
			for length := 0; length <= want+2; length++ {
				_, lengthOK := rfc9162Verify(index, size, merkle.Hash{}, make([]merkle.Hash, length))
				if lengthOK != (length == want) {
					t.Fatalf("index %d size %d: RFC 9162 accepts length %d = %v, ProofLength says %d",
						index, size, length, lengthOK, want)
				}
			}
		}
	}
}

func TestInclusionProofProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range propertySizes() {
		leafHashes := hashesForSize(n)
		root := naiveRoot(leafHashes)
		size := uint64(n)
		for i := range n {
			index := uint64(i)
			proof, err := merkle.InclusionProof(leafHashes, index)
			if err != nil {
				t.Fatalf("InclusionProof(size %d, index %d): %v", n, i, err)
			}
			if want := naiveProof(i, leafHashes); !equalHashes(proof, want) {
				t.Fatalf("InclusionProof(size %d, index %d) differs from RFC 6962 PATH", n, i)
			}
			leaf := leafHashes[i]
			if err := merkle.VerifyInclusion(root, index, size, leaf, proof); err != nil {
				t.Fatalf("valid proof (size %d, index %d) rejected: %v", n, i, err)
			}
			if got, ok := rfc9162Verify(index, size, leaf, proof); !ok || got != root {
				t.Fatalf("reference RFC 9162 verifier rejects proof (size %d, index %d)", n, i)
			}

			check := func(what string, err, want error) {
				t.Helper()
				if !errors.Is(err, want) {
					t.Fatalf("size %d index %d, %s: error %v, want %v", n, i, what, err, want)
				}
			}
			// Which error a different (index, size) must give: a different
			// proof length, else a different path shape, gives a different
			// root. Same length and shape verifies, as RFC 6962 proofs do
			// not commit to the size (see VerifyInclusion).
			wantFor := func(otherIndex, otherSize uint64) error {
				switch {
				case otherIndex >= otherSize:
					return merkle.ErrIndexOutOfRange
				case merkle.ProofLength(otherIndex, otherSize) != len(proof):
					return merkle.ErrProofLength
				case !slices.Equal(siblingOnLeft(int(otherIndex), int(otherSize)), siblingOnLeft(i, n)):
					return merkle.ErrRootMismatch
				default:
					return nil
				}
			}

			if len(proof) > 0 {
				tampered := slices.Clone(proof)
				tampered[rng.IntN(len(tampered))][rng.IntN(merkle.HashSize)] ^= 1 << rng.IntN(8)
				check("tampered sibling", merkle.VerifyInclusion(root, index, size, leaf, tampered), merkle.ErrRootMismatch)
				check("truncated proof", merkle.VerifyInclusion(root, index, size, leaf, proof[:len(proof)-1]), merkle.ErrProofLength)
			}
			check("extra hash", merkle.VerifyInclusion(root, index, size, leaf, append(slices.Clone(proof), root)), merkle.ErrProofLength)
			check("padded with zero hash", merkle.VerifyInclusion(root, index, size, leaf, append(slices.Clone(proof), merkle.Hash{})), merkle.ErrProofLength)
			wrongRoot := root
			wrongRoot[0] ^= 0x80
			check("wrong root", merkle.VerifyInclusion(wrongRoot, index, size, leaf, proof), merkle.ErrRootMismatch)
			check("wrong leaf", merkle.VerifyInclusion(root, index, size, merkle.LeafHash([]byte("forged")), proof), merkle.ErrRootMismatch)
			check("index == size", merkle.VerifyInclusion(root, size, size, leaf, proof), merkle.ErrIndexOutOfRange)
			check("max index", merkle.VerifyInclusion(root, math.MaxUint64, size, leaf, proof), merkle.ErrIndexOutOfRange)
			for _, other := range []uint64{index + 1, index - 1} { // index-1 wraps to MaxUint64 at 0
				want := wantFor(other, size)
				if want == nil {
					t.Fatalf("size %d: indices %d and %d share a path", n, i, other)
				}
				check("wrong index", merkle.VerifyInclusion(root, other, size, leaf, proof), want)
			}
			for _, other := range []uint64{size - 1, size + 1, 2 * size, 0} {
				err := merkle.VerifyInclusion(root, index, other, leaf, proof)
				if want := wantFor(index, other); want != nil {
					check("wrong size", err, want)
				} else if err != nil {
					t.Fatalf("size %d index %d: same-shape size %d rejected: %v", n, i, other, err)
				}
			}
		}
		if _, err := merkle.InclusionProof(leafHashes, size); !errors.Is(err, merkle.ErrIndexOutOfRange) {
			t.Fatalf("InclusionProof(size %d, index %d) error = %v, want ErrIndexOutOfRange", n, n, err)
		}
	}
	if _, err := merkle.InclusionProof(nil, 0); !errors.Is(err, merkle.ErrIndexOutOfRange) {
		t.Fatalf("InclusionProof(empty tree) error = %v, want ErrIndexOutOfRange", err)
	}
}

// Leaf 0 of 6 leaves also verifies as leaf 0 of 7 or 8: the behaviour behind
// VerifyInclusion's warning that size must come from a trusted source.
func TestProofDoesNotCommitToSize(t *testing.T) {
	leafHashes := hashesForSize(6)
	root := merkle.RootFromLeafHashes(leafHashes)
	proof, err := merkle.InclusionProof(leafHashes, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []uint64{5, 6, 7, 8} {
		if err := merkle.VerifyInclusion(root, 0, size, leafHashes[0], proof); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
	}
}
