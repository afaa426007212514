// Package release says which release of depinchain a binary is built as.
//
// A plain build is the current release (v4). A build with `-tags prev_release`
// is the previous release (v3) as far as the chain is concerned: it knows no
// upgrade handler for "v4", x/market reports consensus version 3, x/verify 3 and
// x/shardregistry 1 (before checkpoint custody), and x/market accepts a bid that
// commits no rate (steps_per_hour 0, the v3 layout of bids and leases; such a lease
// earns nothing per step until the v4 migration gives it a rate). Nothing else differs.
//
// That binary exists for one purpose: the upgrade end-to-end test
// (cmd/depinchaind/upgrade_e2e_test.go) runs a real v3 → v4 software upgrade
// through governance, x/upgrade's halt and the store migrations, from a fresh
// clone with no release tags, old commits or network. Every difference
// between the two builds reads the constant Previous, so `grep -rn
// release.Previous` lists them all. When the next upgrade (v5) is written,
// the v4 differences here are removed and the v5 ones take their place.
package release
