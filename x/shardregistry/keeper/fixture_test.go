package keeper_test

import (
	"testing"
	"time"

	"github.com/depinchain/depinchain/testutil/keepers"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// denom is the test chain's only denomination.
const denom = keepers.Denom

// blockTime is the scenarios' block interval.
const blockTime = 6 * time.Second

// newFixture is the shared test chain of real keepers (testutil/keepers) as the
// registry's scenarios run it: committed after every block, as a node does (scenarios
// hold thousands of entries), its first block begun so that period 0 has a seed, and
// x/shardregistry started from gs.
func newFixture(t testing.TB, gs *types.GenesisState) *keepers.Fixture {
	t.Helper()
	return keepers.New(t, keepers.WithShardRegistryGenesis(gs), keepers.Committing(), keepers.BeginFirstBlock())
}

// NextBlock ends the current block and begins the next one, blockTime later.
func (e *env) NextBlock(t testing.TB) { e.Fixture.NextBlock(t, blockTime) }

// JumpTo ends the current block and begins height h directly, skipping the blocks in
// between; only for tests where nothing is due in them.
func (e *env) JumpTo(t testing.TB, h int64) { e.Fixture.JumpTo(t, h, blockTime) }

// AdvanceTo runs blocks until the current height is h (h itself is begun, not ended).
func (e *env) AdvanceTo(t testing.TB, h int64) { e.Fixture.AdvanceTo(t, h, blockTime) }
