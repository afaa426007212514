//go:build long

package main_test

import "testing"

// TestTileDisputeEveryKind plays every case of tileCases, each on its own
// chain with its own provider and verifier (about a minute each): a cheater
// wrong in one element of a forward matmul, the attention softmax (its
// sidecar killed and restarted mid-phase 2), a normalisation, a backward
// matmul, the optimizer update, or one token of its batch is convicted by the
// referee at that operator (or load); a lying challenger loses at the tile,
// at its made-up record root (phase 2) and about the batch. The normal e2e
// run plays two of them (TestTileDisputeCatchesACheater,
// TestTileDisputeLyingChallengerLoses).
func TestTileDisputeEveryKind(t *testing.T) {
	for _, c := range tileCases {
		t.Run(c.name, func(t *testing.T) { runTileCase(t, c) })
	}
}
