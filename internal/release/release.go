// Package release says which release of depinchain a binary is built as.
//
// A plain build is the current release (v3). A build with `-tags prev_release`
// is the previous release (v2) as far as the chain is concerned: it knows no
// upgrade handler for "v3", x/verify and x/stakingext report consensus version
// 1, and x/stakingext writes its version 1 layout of unbonding entries (no
// completion height). Nothing else differs.
//
// That binary exists for one purpose: the upgrade end-to-end test
// (cmd/depinchaind/upgrade_e2e_test.go) runs a real v2 → v3 software upgrade
// through governance, x/upgrade's halt and the store migrations, from a fresh
// clone with no release tags, old commits or network. Every difference
// between the two builds reads the constant Previous, so `grep -rn
// release.Previous` lists them all. When the next upgrade (v4) is written,
// the v3 differences here are removed and the v4 ones take their place.
package release
