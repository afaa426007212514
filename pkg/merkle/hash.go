package merkle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
)

// HashSize is the length in bytes of a [Hash].
const HashSize = sha256.Size

// Hash is a SHA-256 digest: a leaf hash, an interior node hash or a root.
type Hash [HashSize]byte

// ErrHashLength is returned when bytes of the wrong length are converted to a
// [Hash].
var ErrHashLength = errors.New("merkle: hash must be 32 bytes")

// HashFromBytes converts b to a Hash, failing unless b is exactly
// [HashSize] bytes long. It copies b.
func HashFromBytes(b []byte) (Hash, error) {
	var h Hash
	if len(b) != HashSize {
		return h, fmt.Errorf("%w, got %d", ErrHashLength, len(b))
	}
	copy(h[:], b)
	return h, nil
}

// Hex returns the lowercase hexadecimal encoding of h.
func (h Hash) Hex() string { return hex.EncodeToString(h[:]) }

// String returns the lowercase hexadecimal encoding of h.
func (h Hash) String() string { return h.Hex() }

// Domain-separation prefixes from RFC 6962 section 2.1.
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// leafPrefixBytes is leafPrefix as a package-level slice: a slice literal
// handed to hash.Hash.Write would escape and cost an allocation per leaf.
var leafPrefixBytes = []byte{leafPrefix}

// EmptyRoot returns the root of the tree with no leaves: SHA-256 of the empty
// string.
func EmptyRoot() Hash { return sha256.Sum256(nil) }

// LeafHash returns the hash of a leaf holding data: SHA-256(0x00 || data).
func LeafHash(data []byte) Hash {
	return newLeafHasher().sum(data)
}

// NodeHash returns the hash of the interior node whose children hash to left
// and right: SHA-256(0x01 || left || right).
func NodeHash(left, right Hash) Hash {
	var msg [1 + 2*HashSize]byte
	msg[0] = nodePrefix
	copy(msg[1:], left[:])
	copy(msg[1+HashSize:], right[:])
	return sha256.Sum256(msg[:])
}

// LeafHasher computes leaf hashes like LeafHash, reusing one SHA-256 state: for loops
// over many chunks (custody encoding hashes every piece of a state this way). It is not
// safe for concurrent use; give each goroutine its own.
type LeafHasher struct{ lh *leafHasher }

// NewLeafHasher returns a LeafHasher.
func NewLeafHasher() LeafHasher { return LeafHasher{newLeafHasher()} }

// Sum returns SHA-256(0x00 || data).
func (h LeafHasher) Sum(data []byte) Hash { return h.lh.sum(data) }

// leafHasher computes leaf hashes reusing one SHA-256 state and output
// buffer, so hashing a stream of chunks allocates nothing per chunk.
type leafHasher struct {
	state  hash.Hash
	digest []byte
}

func newLeafHasher() *leafHasher {
	return &leafHasher{state: sha256.New(), digest: make([]byte, 0, HashSize)}
}

func (lh *leafHasher) sum(data []byte) Hash {
	lh.state.Reset()
	lh.state.Write(leafPrefixBytes)
	lh.state.Write(data)
	lh.digest = lh.state.Sum(lh.digest[:0])
	return Hash(lh.digest)
}

// HashesToBytes converts hashes (a proof, say) to their wire form, one copied 32-byte
// slice each.
func HashesToBytes(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = append([]byte(nil), h[:]...)
	}
	return out
}
