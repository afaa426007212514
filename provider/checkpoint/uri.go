package checkpoint

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// PathPrefix is where a provider's server serves its checkpoints: a
// checkpoint's URI on chain is <base URL>/checkpoints/<lease>/<index>.
const PathPrefix = "/checkpoints/"

// URI is where others download checkpoint ref from the server at base.
func URI(base string, ref Ref) string {
	return fmt.Sprintf("%s%s%d/%d", strings.TrimRight(base, "/"), PathPrefix, ref.LeaseID, ref.Index)
}

// ParseURI splits a checkpoint URI into its server's base URL and the
// checkpoint it names. It accepts any base path before /checkpoints/ and
// drops a query or fragment.
func ParseURI(uri string) (base string, ref Ref, err error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", ref, err
	}
	parts := strings.Split(strings.TrimRight(u.Path, "/"), "/")
	if len(parts) < 3 || parts[len(parts)-3] != strings.Trim(PathPrefix, "/") {
		return "", ref, fmt.Errorf("checkpoint URI %q does not end in %s<lease>/<index>", uri, PathPrefix)
	}
	if ref.LeaseID, err = strconv.ParseUint(parts[len(parts)-2], 10, 64); err != nil {
		return "", ref, fmt.Errorf("checkpoint URI %q: lease: %w", uri, err)
	}
	if ref.Index, err = strconv.ParseUint(parts[len(parts)-1], 10, 64); err != nil {
		return "", ref, fmt.Errorf("checkpoint URI %q: index: %w", uri, err)
	}
	u.Path = strings.Join(parts[:len(parts)-3], "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), ref, nil
}
