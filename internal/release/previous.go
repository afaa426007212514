//go:build prev_release

package release

// Previous is true: this binary stands in for the previous release (v4) in
// the upgrade end-to-end test. See the package comment.
const Previous = true
