//go:build !prev_release

package release

// Previous is false: this binary is the current release. See the package comment.
const Previous = false
