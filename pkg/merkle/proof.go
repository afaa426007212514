package merkle

import (
	"errors"
	"fmt"
	"math/bits"
)

// Errors returned by inclusion proof generation and verification. They are
// wrapped with details; test for them with errors.Is.
var (
	// ErrIndexOutOfRange: the leaf index is not below the tree size.
	ErrIndexOutOfRange = errors.New("merkle: leaf index out of range")
	// ErrProofLength: the proof does not have exactly the number of hashes
	// that the leaf index and tree size determine.
	ErrProofLength = errors.New("merkle: wrong inclusion proof length")
	// ErrRootMismatch: the proof is well formed but does not lead to the
	// expected root.
	ErrRootMismatch = errors.New("merkle: inclusion proof does not match root")
)

// MaxTreeDepth is the longest inclusion proof for any tree whose size fits in
// a uint64.
const MaxTreeDepth = 64

// ProofLength returns the exact number of hashes in the inclusion proof of
// leaf index in a tree of size leaves, or -1 when index >= size (no such
// leaf, so no proof length can match).
//
// The proof climbs from the leaf to the root. Below the level where the paths
// to index and to the last leaf (size-1) part, every subtree is perfect and
// contributes one sibling per level: that is the bit length of
// index ^ (size-1). Above it, the path runs along the right border of the
// tree and has a left sibling exactly where index has a one bit.
func ProofLength(index, size uint64) int {
	if index >= size {
		return -1
	}
	inner := bits.Len64(index ^ (size - 1))
	border := bits.OnesCount64(index >> inner)
	return inner + border
}

// MaxProofDepth returns the length of the longest inclusion proof in a tree
// of size leaves, ceil(log2(size)), and 0 for an empty tree. On-chain callers
// can bound the proofs they accept, and the gas they charge, with it.
func MaxProofDepth(size uint64) int {
	if size == 0 {
		return 0
	}
	return bits.Len64(size - 1)
}

// InclusionProof returns the RFC 6962 audit path proving that leaf index is
// in the tree with the given leaf hashes: the sibling hashes from the leaf's
// level up to the root's children.
func InclusionProof(leafHashes []Hash, index uint64) ([]Hash, error) {
	size := uint64(len(leafHashes))
	if index >= size {
		return nil, fmt.Errorf("%w: index %d, tree size %d", ErrIndexOutOfRange, index, size)
	}
	return inclusionPath(index, size, func(begin, end uint64) (Hash, error) {
		return RootFromLeafHashes(leafHashes[begin:end]), nil
	})
}

// inclusionPath builds the proof of leaf index (< size) by descending from
// the root, asking subtreeRoot for the root of each sibling subtree, given as
// the leaf range [begin, end). Each subtree is asked for once, so the leaves
// are hashed once in total.
func inclusionPath(index, size uint64, subtreeRoot func(begin, end uint64) (Hash, error)) ([]Hash, error) {
	proof := make([]Hash, ProofLength(index, size))
	// Siblings are found root first but the proof lists them leaf first, so
	// fill it from the end.
	next := len(proof)
	begin, end := uint64(0), size
	for end-begin > 1 {
		mid := begin + SplitPoint(end-begin)
		var sibling Hash
		var err error
		if index < mid {
			sibling, err = subtreeRoot(mid, end)
			end = mid
		} else {
			sibling, err = subtreeRoot(begin, mid)
			begin = mid
		}
		if err != nil {
			return nil, err
		}
		next--
		proof[next] = sibling
	}
	return proof, nil
}

// VerifyInclusion checks that proof proves the leaf with hash leafHash is
// leaf index of the tree of size leaves with the given root, following
// RFC 9162 section 2.1.3.2.
//
// It rejects index >= size with ErrIndexOutOfRange and a proof of any length
// other than ProofLength(index, size) with ErrProofLength, both before
// hashing anything; otherwise it computes exactly len(proof) node hashes and
// reports ErrRootMismatch if they do not end at root. Counting the leaf hash,
// which the caller computes, checking a proof costs len(proof)+1 hashes, at
// most MaxProofDepth(size)+1.
//
// A proof commits to the leaf's position only through root: the same hashes
// also verify for another size whose path to index has the same shape (leaf 0
// of a tree of 6 leaves verifies as leaf 0 of 7 or 8). Callers must therefore
// take size from the same trusted commitment as root, never from the prover.
func VerifyInclusion(root Hash, index, size uint64, leafHash Hash, proof []Hash) error {
	if index >= size {
		return fmt.Errorf("%w: index %d, tree size %d", ErrIndexOutOfRange, index, size)
	}
	if want := ProofLength(index, size); len(proof) != want {
		return fmt.Errorf("%w: got %d hashes, want %d for index %d in tree size %d",
			ErrProofLength, len(proof), want, index, size)
	}
	// RFC 9162 steps 2 to 4. fn is the position of the current node on its
	// level and sn that of the level's last node. The exact length check
	// above replaces the RFC's "sn is 0" failure checks: they fire exactly
	// when the proof is longer or shorter than ProofLength.
	fn, sn := index, size-1
	computed := leafHash
	for _, sibling := range proof {
		if fn&1 == 1 || fn == sn {
			// The current node is a right child, or the last node of its
			// level with no right sibling: the sibling is on the left.
			computed = NodeHash(sibling, computed)
			// A last node that is a left child is promoted unchanged until
			// it becomes a right child (or the leftmost node).
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			computed = NodeHash(computed, sibling)
		}
		fn >>= 1
		sn >>= 1
	}
	if computed != root {
		return fmt.Errorf("%w: index %d, tree size %d: computed %s, want %s",
			ErrRootMismatch, index, size, computed, root)
	}
	return nil
}
