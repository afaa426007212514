package types_test

import (
	"slices"
	"testing"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// The chain assigns a round from the shard count alone; the sidecar and Simulate assign
// over the dataset's byte ranges. Both name the shards alike, so the assignment is the
// same, and the byte ranges lie back to back in shard order.
func TestRoundShardsAssignLikeTheChain(t *testing.T) {
	sizes := []uint64{4096, 4096, 100, 4096, 1, 4096, 4096, 2048}
	units, err := types.RoundShards(uint32(len(sizes)), sizes)
	if err != nil {
		t.Fatal(err)
	}
	var off uint64
	for i, u := range units {
		if u.ID != types.RoundShardID(uint32(i)) || u.Start != off || u.End != off+sizes[i] {
			t.Fatalf("unit %d is %+v", i, u)
		}
		off = u.End
	}
	seed := []byte("job seed")
	for round := range uint64(3) {
		chain, err := types.AssignRoundShards(seed, round, uint32(len(sizes)), 3)
		if err != nil {
			t.Fatal(err)
		}
		bytes, err := diloco.Assign(seed, round, units, 3)
		if err != nil {
			t.Fatal(err)
		}
		for w := range chain {
			got := make([]uint32, len(bytes[w]))
			for i, idx := range bytes[w] {
				got[i] = uint32(idx)
			}
			if !slices.Equal(chain[w], got) {
				t.Fatalf("round %d worker %d: chain %v, over byte ranges %v", round, w, chain[w], got)
			}
		}
	}
	if _, err := types.RoundShards(3, sizes); err == nil {
		t.Fatal("sizes of another shard count accepted")
	}
	if _, err := types.AssignRoundShards(seed, 0, 4, 0); err == nil {
		t.Fatal("zero workers accepted")
	}
}
