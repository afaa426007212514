package types_test

import (
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/x/shardregistry/types"
)

func TestPieceCID(t *testing.T) {
	// The well-known CIDv1 of the empty raw block: raw codec, sha2-256 of "".
	empty := sha256.Sum256(nil)
	require.Equal(t, "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", types.PieceCID(empty[:]))

	root := sha256.Sum256([]byte("a Merkle root"))
	cid := types.PieceCID(root[:])
	require.Regexp(t, "^bafkrei[a-z2-7]{52}$", cid)
	back, err := types.ParsePieceCID(cid)
	require.NoError(t, err)
	require.Equal(t, root[:], back)

	require.Empty(t, types.PieceCID(root[:31]))
	for _, bad := range []string{"", "Bafkrei", "zb2rh", "bafyreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "bafkrei!"} {
		_, err := types.ParsePieceCID(bad)
		require.Error(t, err, bad)
	}
}
