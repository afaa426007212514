package merkle

import "math/bits"

// Root returns the root of the tree whose leaves hold the given data, one
// leaf per element.
func Root(leaves [][]byte) Hash {
	lh := newLeafHasher()
	var b Builder
	for _, leaf := range leaves {
		b.AddLeafHash(lh.sum(leaf))
	}
	return b.Root()
}

// RootFromLeafHashes returns the root of the tree with the given leaf hashes.
func RootFromLeafHashes(leafHashes []Hash) Hash {
	var b Builder
	for _, h := range leafHashes {
		b.AddLeafHash(h)
	}
	return b.Root()
}

// SplitPoint returns the number of leaves in the left subtree of a tree of
// size leaves: the largest power of two strictly below size (RFC 6962's k).
// size must be at least 2. The subtree over leaves [lo, hi) splits at
// lo + SplitPoint(hi-lo), as a bisection over a file's tree descends.
func SplitPoint(size uint64) uint64 {
	return 1 << (bits.Len64(size-1) - 1)
}

// Builder computes a tree's root incrementally, leaf by leaf, without keeping
// the leaves. The zero value is an empty tree ready to use.
//
// It holds the compact range of the leaves added so far: the roots of the
// perfect subtrees whose sizes are the binary digits of Size(), largest (left)
// first. That is one hash per set bit of Size(), at most 64, so its memory is
// bounded whatever the number of leaves.
type Builder struct {
	size     uint64
	subtrees []Hash
}

// AddLeafHash appends a leaf, given by its leaf hash, to the right end of the
// tree.
func (b *Builder) AddLeafHash(leafHash Hash) {
	// The new leaf is a perfect subtree of size 1. Each trailing one bit of
	// the old size is a perfect subtree of the same size as the one being
	// carried, so they merge like a binary increment carries.
	carried := leafHash
	for size := b.size; size&1 == 1; size >>= 1 {
		last := len(b.subtrees) - 1
		carried = NodeHash(b.subtrees[last], carried)
		b.subtrees = b.subtrees[:last]
	}
	b.subtrees = append(b.subtrees, carried)
	b.size++
}

// Size returns the number of leaves added so far.
func (b *Builder) Size() uint64 { return b.size }

// Root returns the root of the tree of the leaves added so far; the Builder
// stays usable for more leaves.
func (b *Builder) Root() Hash {
	if b.size == 0 {
		return EmptyRoot()
	}
	// RFC 6962 puts the largest power of two on the left and recurses on the
	// right, so the compact range folds from the right.
	root := b.subtrees[len(b.subtrees)-1]
	for i := len(b.subtrees) - 2; i >= 0; i-- {
		root = NodeHash(b.subtrees[i], root)
	}
	return root
}
