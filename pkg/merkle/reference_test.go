package merkle_test

import (
	"crypto/sha256"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// This file holds naive reference implementations written straight from the
// RFC text, independent of the package's iterative code, so the tests compare
// two derivations of every value.

func naiveLeafHash(data []byte) merkle.Hash {
	return sha256.Sum256(append([]byte{0x00}, data...))
}

func naiveNodeHash(left, right merkle.Hash) merkle.Hash {
	return sha256.Sum256(append(append([]byte{0x01}, left[:]...), right[:]...))
}

// naiveSplit is the RFC 6962 k: the largest power of two smaller than n.
func naiveSplit(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

// naiveRoot is MTH from RFC 6962 section 2.1.
func naiveRoot(leafHashes []merkle.Hash) merkle.Hash {
	switch n := len(leafHashes); n {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leafHashes[0]
	default:
		k := naiveSplit(n)
		return naiveNodeHash(naiveRoot(leafHashes[:k]), naiveRoot(leafHashes[k:]))
	}
}

// naiveProof is PATH from RFC 6962 section 2.1.1.
func naiveProof(m int, leafHashes []merkle.Hash) []merkle.Hash {
	n := len(leafHashes)
	if n <= 1 {
		return nil
	}
	k := naiveSplit(n)
	if m < k {
		return append(naiveProof(m, leafHashes[:k]), naiveRoot(leafHashes[k:]))
	}
	return append(naiveProof(m-k, leafHashes[k:]), naiveRoot(leafHashes[:k]))
}

// siblingOnLeft lists, leaf first like a proof, whether each sibling on the
// path to leaf m of an n-leaf tree is a left sibling. It is the shape of the
// path, which is all a verifier derives from (index, size).
func siblingOnLeft(m, n int) []bool {
	if n <= 1 {
		return nil
	}
	k := naiveSplit(n)
	if m < k {
		return append(siblingOnLeft(m, k), false)
	}
	return append(siblingOnLeft(m-k, n-k), true)
}

// rfc9162Verify is RFC 9162 section 2.1.3.2 step by step, including the "sn
// is 0" checks that VerifyInclusion replaces with its up-front length check.
// lengthOK is false where those checks fail the proof.
func rfc9162Verify(index, size uint64, leafHash merkle.Hash, proof []merkle.Hash) (root merkle.Hash, lengthOK bool) {
	fn, sn := index, size-1
	r := leafHash
	for _, p := range proof {
		if sn == 0 {
			return r, false
		}
		if fn&1 == 1 || fn == sn {
			r = naiveNodeHash(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = naiveNodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	return r, sn == 0
}

func naiveLeafHashes(leaves [][]byte) []merkle.Hash {
	hashes := make([]merkle.Hash, len(leaves))
	for i, leaf := range leaves {
		hashes[i] = naiveLeafHash(leaf)
	}
	return hashes
}

// naiveChunks cuts data into chunkSize-byte chunks, the last one possibly
// shorter.
func naiveChunks(data []byte, chunkSize int) [][]byte {
	var chunks [][]byte
	for start := 0; start < len(data); start += chunkSize {
		chunks = append(chunks, data[start:min(start+chunkSize, len(data))])
	}
	return chunks
}

// hashesForSize returns size distinct leaf hashes.
func hashesForSize(size int) []merkle.Hash {
	leaves := make([][]byte, size)
	for i := range leaves {
		leaves[i] = []byte{byte(i), byte(i >> 8), byte(i >> 16)}
	}
	return naiveLeafHashes(leaves)
}
