// Package release says which release of depinchain a binary is built as.
//
// A plain build is the current release (v5). A build with `-tags prev_release`
// is the previous release (v4) as far as the chain is concerned: it knows no
// upgrade handler for "v5", and x/market and x/verify report consensus version 4
// (before rounds of sync jobs and file queries). Nothing else differs.
//
// That binary exists for one purpose: the upgrade end-to-end test
// (cmd/depinchaind/upgrade_e2e_test.go) runs a real v4 → v5 software upgrade
// through governance, x/upgrade's halt and the store migrations, from a fresh
// clone with no release tags, old commits or network. Every difference
// between the two builds reads the constant Previous, so `grep -rn
// release.Previous` lists them all. When the next upgrade (v6) is written,
// the v5 differences here are removed and the v6 ones take their place.
package release
