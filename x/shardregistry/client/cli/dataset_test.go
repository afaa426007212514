package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/x/shardregistry/client/cli"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "1MiB": 1 << 20, "512KiB": 512 << 10, "2GiB": 2 << 30, "4k": 4096, "3 MB": 3 << 20, "7B": 7} {
		got, err := cli.ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5MiB", "1TiB"} {
		_, err := cli.ParseSize(bad)
		require.Error(t, err, bad)
	}
}

// TestDatasetBuildAndRebuild drives `dataset build` and `dataset rebuild` as a user would.
func TestDatasetBuildAndRebuild(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "tokens.bin")
	data := bytes.Repeat([]byte("0123456789abcdef"), 10_000)
	require.NoError(t, os.WriteFile(input, data, 0o644))
	out := filepath.Join(dir, "out")

	cmd := cli.NewDatasetCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"build", input, "--out", out, "--shard-size", "64KiB", "--rs", "4+2", "--id", "tokens-v1", "--sample-bytes", "1024"})
	require.NoError(t, cmd.Execute())
	require.Contains(t, stdout.String(), "Reed-Solomon 4+2")
	require.Contains(t, stdout.String(), "bafkrei")
	m, err := manifest.Load(filepath.Join(out, manifest.ManifestFile))
	require.NoError(t, err)
	require.Equal(t, "tokens-v1", m.ID)
	require.Len(t, m.Shards, 3)

	require.NoError(t, os.Remove(filepath.Join(out, m.Shards[1].Pieces[2].File)))
	cmd = cli.NewDatasetCmd()
	cmd.SetOut(&stdout)
	shard := filepath.Join(dir, "shard1.bin")
	cmd.SetArgs([]string{"rebuild", "--manifest", filepath.Join(out, manifest.ManifestFile), "--shard", "1", "--out", shard})
	require.NoError(t, cmd.Execute())
	got, err := os.ReadFile(shard)
	require.NoError(t, err)
	require.Equal(t, data[64<<10:128<<10], got)

	cmd = cli.NewDatasetCmd()
	cmd.SetOut(&stdout)
	cmd.SetErr(&stdout)
	cmd.SetArgs([]string{"build", input, "--out", out, "--shard-size", "64KiB"})
	require.ErrorContains(t, cmd.Execute(), "choose an encoding")
}
