package merkle

import (
	"math/bits"
	"testing"
)

// The Builder's memory bound: one subtree root per set bit of its size.
func TestBuilderKeepsOneSubtreePerSetBit(t *testing.T) {
	var b Builder
	for n := uint64(1); n <= 1<<12; n++ {
		b.AddLeafHash(LeafHash([]byte{byte(n)}))
		if got, want := len(b.subtrees), bits.OnesCount64(n); got != want {
			t.Fatalf("size %d: %d subtree roots, want %d", n, got, want)
		}
	}
}
