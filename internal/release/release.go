// Package release says which release of depinchain a binary is built as.
//
// A plain build is the current release. A build with `-tags prev_release` is
// the previous release (v1) as far as the chain is concerned: it knows no
// upgrade handler for "v2", x/market reports consensus version 1 and writes
// its v1 state layout (no leases-by-state index). Nothing else differs.
//
// That binary exists for one purpose: the upgrade end-to-end test
// (cmd/depinchaind/upgrade_e2e_test.go) runs a real v1 → v2 software upgrade
// through governance, x/upgrade's halt and the store migration, from a fresh
// clone with no release tags, old commits or network. Every difference
// between the two builds reads the constant Previous, so `grep -rn
// release.Previous` lists them all. When the next upgrade (v3) is written,
// the v2 differences here are removed and the v3 ones take their place.
package release
