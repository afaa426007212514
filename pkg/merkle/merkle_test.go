package merkle_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/depinchain/depinchain/pkg/merkle"
)

// The eight leaves of the Certificate Transparency reference test vectors.
var ctLeaves = [][]byte{
	{},
	{0x00},
	{0x10},
	{0x20, 0x21},
	{0x30, 0x31},
	{0x40, 0x41, 0x42, 0x43},
	{0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57},
	{0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f},
}

// ctRoots[n-1] is the reference root of the first n ctLeaves.
var ctRoots = []string{
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

const emptyRootHex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func mustHash(t testing.TB, s string) merkle.Hash {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	h, err := merkle.HashFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRFC6962Roots(t *testing.T) {
	if got := merkle.Root(nil).Hex(); got != emptyRootHex {
		t.Errorf("empty root = %s, want %s", got, emptyRootHex)
	}
	if got := merkle.EmptyRoot().Hex(); got != emptyRootHex {
		t.Errorf("EmptyRoot() = %s, want %s", got, emptyRootHex)
	}
	for n := 1; n <= len(ctLeaves); n++ {
		want := mustHash(t, ctRoots[n-1])
		// The vector itself is checked against the naive definition, so a
		// typo in the table cannot go unnoticed.
		if naive := naiveRoot(naiveLeafHashes(ctLeaves[:n])); naive != want {
			t.Fatalf("size %d: naive root %s disagrees with reference vector %s", n, naive, want)
		}
		if got := merkle.Root(ctLeaves[:n]); got != want {
			t.Errorf("Root(size %d) = %s, want %s", n, got, want)
		}
		leafHashes := make([]merkle.Hash, n)
		for i, leaf := range ctLeaves[:n] {
			leafHashes[i] = merkle.LeafHash(leaf)
		}
		if got := merkle.RootFromLeafHashes(leafHashes); got != want {
			t.Errorf("RootFromLeafHashes(size %d) = %s, want %s", n, got, want)
		}
	}
}

// Inclusion proofs from the Certificate Transparency reference vectors
// (leaf indices 0-based here).
var ctProofs = []struct {
	index, size uint64
	proof       []string
}{
	{0, 1, nil},
	{0, 8, []string{
		"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
		"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
	}},
	{5, 8, []string{
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
		"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	}},
	{2, 3, []string{
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	}},
	{1, 5, []string{
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
	}},
}

func TestRFC6962InclusionProofs(t *testing.T) {
	leafHashes := naiveLeafHashes(ctLeaves)
	for _, tc := range ctProofs {
		want := make([]merkle.Hash, len(tc.proof))
		for i, s := range tc.proof {
			want[i] = mustHash(t, s)
		}
		tree := leafHashes[:tc.size]
		if naive := naiveProof(int(tc.index), tree); !equalHashes(naive, want) {
			t.Fatalf("index %d size %d: naive proof %v disagrees with reference vector %v", tc.index, tc.size, naive, want)
		}
		got, err := merkle.InclusionProof(tree, tc.index)
		if err != nil {
			t.Fatalf("InclusionProof(size %d, index %d): %v", tc.size, tc.index, err)
		}
		if !equalHashes(got, want) {
			t.Errorf("InclusionProof(size %d, index %d) = %v, want %v", tc.size, tc.index, got, want)
		}
		root := mustHash(t, ctRoots[tc.size-1])
		if err := merkle.VerifyInclusion(root, tc.index, tc.size, leafHashes[tc.index], want); err != nil {
			t.Errorf("VerifyInclusion(size %d, index %d): %v", tc.size, tc.index, err)
		}
	}
}

func equalHashes(a, b []merkle.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLeafAndNodeHashes(t *testing.T) {
	data := []byte("depinchain")
	if got, want := merkle.LeafHash(data), naiveLeafHash(data); got != want {
		t.Errorf("LeafHash = %s, want %s", got, want)
	}
	l, r := merkle.LeafHash([]byte("l")), merkle.LeafHash([]byte("r"))
	if got, want := merkle.NodeHash(l, r), naiveNodeHash(l, r); got != want {
		t.Errorf("NodeHash = %s, want %s", got, want)
	}
	// Domain separation: a node's preimage hashed as a leaf gives another
	// hash.
	preimage := append(append([]byte{}, l[:]...), r[:]...)
	if merkle.LeafHash(preimage) == merkle.NodeHash(l, r) {
		t.Error("leaf and node hashes of the same bytes collide")
	}
}

func TestHashFromBytes(t *testing.T) {
	b := bytes.Repeat([]byte{0xab}, merkle.HashSize)
	h, err := merkle.HashFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.String(), hex.EncodeToString(b); got != want || h.Hex() != want {
		t.Errorf("String/Hex = %s/%s, want %s", got, h.Hex(), want)
	}
	b[0] = 0 // HashFromBytes copies
	if h[0] != 0xab {
		t.Error("HashFromBytes aliases its input")
	}
	for _, n := range []int{0, 31, 33, 64} {
		if _, err := merkle.HashFromBytes(make([]byte, n)); !errors.Is(err, merkle.ErrHashLength) {
			t.Errorf("HashFromBytes(%d bytes) error = %v, want ErrHashLength", n, err)
		}
	}
}

func TestBuilderMatchesNaiveRootAtEverySize(t *testing.T) {
	leafHashes := hashesForSize(300)
	var b merkle.Builder
	if b.Root() != merkle.EmptyRoot() || b.Size() != 0 {
		t.Fatal("zero Builder is not the empty tree")
	}
	for n, h := range leafHashes {
		b.AddLeafHash(h)
		if b.Size() != uint64(n+1) {
			t.Fatalf("Size() = %d, want %d", b.Size(), n+1)
		}
		if got, want := b.Root(), naiveRoot(leafHashes[:n+1]); got != want {
			t.Fatalf("size %d: Root() = %s, want %s", n+1, got, want)
		}
	}
}
