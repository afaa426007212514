package shardregistry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/x/shardregistry/manifest"
)

// TestEndToEnd drives the real binary: build a dataset offline, register it, claim a
// piece and answer a storage challenge through the CLI, and read the shard over REST. It
// runs only when DEPINCHAIND_BINARY names a built depinchaind (as `make test-e2e` sets
// it), so that `go test ./x/shardregistry/...` stays fast.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("DEPINCHAIND_BINARY") == "" {
		t.Skip("set DEPINCHAIND_BINARY to a built depinchaind to run the end-to-end test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	node, err := localnet.Start(ctx, localnet.Options{
		Home:     filepath.Join(dir, "home"),
		Accounts: map[string]int64{"owner": 1_000_000_000, "storage1": 1_000_000_000},
		Genesis: func(state map[string]any) error {
			params := state["shardregistry"].(map[string]any)["params"].(map[string]any)
			params["period_blocks"] = "20"
			params["proof_window_blocks"] = "5"
			return nil
		},
	})
	require.NoError(t, err)
	defer node.Stop()

	tx := func(from string, args ...string) localnet.TxResult {
		t.Helper()
		res, err := node.Tx(ctx, from, args...)
		require.NoError(t, err)
		require.Zero(t, res.Code, res.RawLog)
		return res
	}
	tx("storage1", "stakingext", "register-provider", "storage1", "https://storage1.example.com:8443", "eu-west", "8000000udepin")

	corpus := filepath.Join(dir, "corpus")
	for i := 0; i < 12; i++ {
		require.NoError(t, os.MkdirAll(corpus, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(corpus, fmt.Sprintf("doc-%02d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("document %d ", i), 400+i*50)), 0o644))
	}
	out := filepath.Join(dir, "pieces")
	summary, err := node.Exec(ctx, "dataset", "build", corpus, "--out", out, "--shard-size", "64KiB", "--rs", "2+1", "--id", "e2e-corpus")
	require.NoError(t, err)
	require.Contains(t, summary, "bafkrei")
	m, err := manifest.Load(filepath.Join(out, manifest.ManifestFile))
	require.NoError(t, err)

	tx("owner", "shardregistry", "register-dataset", "--manifest", filepath.Join(out, manifest.ManifestFile))
	var ds struct {
		Dataset struct {
			ShardCount int `json:"shard_count"`
		} `json:"dataset"`
		OpenSlots int `json:"open_slots"`
	}
	require.NoError(t, node.Query(ctx, &ds, "shardregistry", "dataset", "e2e-corpus"))
	require.Equal(t, len(m.Shards), ds.Dataset.ShardCount)
	require.Equal(t, 3*len(m.Shards), ds.OpenSlots)

	piece := filepath.Join(out, m.Shards[0].Pieces[1].File)
	// A claim proves the current period: retry once if the period turned meanwhile.
	var claim localnet.TxResult
	for attempt := 0; attempt < 3; attempt++ {
		if claim, err = node.Tx(ctx, "storage1", "shardregistry", "claim-replica", "e2e-corpus", "0", "1", "--piece-file", piece); err == nil && claim.Code == 0 {
			break
		}
	}
	require.NoError(t, err)
	require.Zero(t, claim.Code, claim.RawLog)
	id, ok := claim.Attr("depinchain.shardregistry.v1.EventReplicaClaimed", "replica_id")
	require.True(t, ok)
	id = strings.Trim(id, `"`)

	var sched struct {
		Challenge struct {
			SeedHeight string `json:"seed_height"`
			Deadline   string `json:"deadline"`
		} `json:"challenge"`
	}
	require.NoError(t, node.Query(ctx, &sched, "shardregistry", "challenge", id))
	var seed int64
	fmt.Sscan(sched.Challenge.SeedHeight, &seed)
	require.NoError(t, node.WaitHeight(ctx, seed+1))
	tx("storage1", "shardregistry", "submit-proof", id, "--piece-file", piece)

	var rep struct {
		Replica struct {
			ProofsAccepted string `json:"proofs_accepted"`
			Status         string `json:"status"`
		} `json:"replica"`
	}
	require.NoError(t, node.Query(ctx, &rep, "shardregistry", "replica", id))
	require.Equal(t, "2", rep.Replica.ProofsAccepted)
	require.Equal(t, "REPLICA_STATUS_ACTIVE", rep.Replica.Status)

	body, err := node.REST(ctx, "/depinchain/shardregistry/v1/datasets/e2e-corpus/shards/0")
	require.NoError(t, err)
	var shard struct {
		Shard struct {
			Pieces []struct {
				Cid         string `json:"cid"`
				LiveHolders int    `json:"live_holders"`
			} `json:"pieces"`
		} `json:"shard"`
	}
	require.NoError(t, json.Unmarshal(body, &shard), string(body))
	require.Len(t, shard.Shard.Pieces, 3)
	require.Equal(t, m.Shards[0].Pieces[1].CID, shard.Shard.Pieces[1].Cid)
	require.Equal(t, 1, shard.Shard.Pieces[1].LiveHolders)
}
