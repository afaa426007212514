package tiles

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// ErrNoDisagreement: both parties revealed the same node; a descent needs
// two different ones.
var ErrNoDisagreement = errors.New("tiles: the nodes agree")

// Descent walks two Merkle trees of Size leaves (RFC 6962 shape, as
// pkg/merkle builds them) from their roots to the leftmost leaf where they
// differ. The current node covers leaves [Lo, Hi); Provider and Challenger
// are the two parties' hashes of it, which differ.
type Descent struct {
	Lo, Hi               uint64
	Provider, Challenger merkle.Hash
}

// NewDescent starts at the roots of two trees of size leaves.
func NewDescent(size uint64, provider, challenger merkle.Hash) (Descent, error) {
	if size == 0 {
		return Descent{}, fmt.Errorf("tiles: empty tree")
	}
	if provider == challenger {
		return Descent{}, ErrNoDisagreement
	}
	return Descent{0, size, provider, challenger}, nil
}

// Done reports that the descent reached a leaf: Lo.
func (d Descent) Done() bool { return d.Hi-d.Lo == 1 }

// Mid is where the current node splits: its left child covers [Lo, Mid).
func (d Descent) Mid() uint64 {
	n := d.Hi - d.Lo
	return d.Lo + 1<<(bits.Len64(n-1)-1)
}

// Rounds is the number of moves left: the depth of the deepest leaf below.
func (d Descent) Rounds() int { return bits.Len64(d.Hi - d.Lo - 1) }

// CheckChildren checks that (left, right) are the children of node.
func CheckChildren(node, left, right merkle.Hash) error {
	if merkle.NodeHash(left, right) != node {
		return fmt.Errorf("tiles: children %x, %x do not hash to the node %x", left[:4], right[:4], node[:4])
	}
	return nil
}

// Next takes both parties' children of the current node (each checked
// against that party's node) and moves to the leftmost differing child.
func (d Descent) Next(pl, pr, cl, cr merkle.Hash) (Descent, error) {
	if d.Done() {
		return d, fmt.Errorf("tiles: the descent is at leaf %d", d.Lo)
	}
	if err := CheckChildren(d.Provider, pl, pr); err != nil {
		return d, fmt.Errorf("provider: %w", err)
	}
	if err := CheckChildren(d.Challenger, cl, cr); err != nil {
		return d, fmt.Errorf("challenger: %w", err)
	}
	mid := d.Mid()
	if pl != cl {
		return Descent{d.Lo, mid, pl, cl}, nil
	}
	return Descent{mid, d.Hi, pr, cr}, nil
}

// Children returns the children of node [lo, hi) of the tree over leaves.
func Children(leaves []merkle.Hash, lo, hi uint64) (left, right merkle.Hash) {
	mid := Descent{Lo: lo, Hi: hi}.Mid()
	return merkle.RootFromLeafHashes(leaves[lo:mid]), merkle.RootFromLeafHashes(leaves[mid:hi])
}
