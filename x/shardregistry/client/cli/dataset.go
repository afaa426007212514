package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/depinchain/depinchain/pkg/manifest"
)

const (
	flagOut         = "out"
	flagShardSize   = "shard-size"
	flagRS          = "rs"
	flagReplicas    = "replicas"
	flagChunkSize   = "chunk-size"
	flagSampleBytes = "sample-bytes"
	flagLines       = "lines"
	flagWorkers     = "workers"
	flagShard       = "shard"
	flagPieces      = "pieces"
	flagShowShards  = "show-shards"
)

// NewDatasetCmd returns the offline `dataset` command: build manifests and pieces, and
// rebuild shards from pieces. It needs no node and signs nothing.
func NewDatasetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dataset",
		Short: "Build dataset manifests and pieces for x/shardregistry, and rebuild shards (offline)",
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBuildCmd(), newRebuildCmd())
	return cmd
}

func newBuildCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build [path] --out [dir] --shard-size 1MiB (--rs 4+2 | --replicas 3)",
		Short: "Split a folder or token file into shards, encode them into pieces and write manifest.json",
		Long: `Build a dataset for x/shardregistry. A folder makes one sample per regular file (in
lexical path order); a file makes samples of --sample-bytes bytes (--lines: one per line).
Shards hold whole samples, up to --shard-size bytes. With --rs k+m every shard becomes k
data and m parity pieces (Reed-Solomon; any k rebuild it); with --replicas n every shard
is one piece that n holders keep. Each piece is written to <out>/pieces and hashed into
its RFC 6962 Merkle root over --chunk-size chunks; <out>/manifest.json lists them all.
The summary prints each piece's CIDv1 (raw codec, sha2-256 multihash of that Merkle
root: it names the root, not the plain bytes). Register with
'depinchaind tx shardregistry register-dataset --manifest <out>/manifest.json'.`,
		Example: `depinchaind dataset build ./corpus --out ./corpus-pieces --shard-size 1MiB --rs 4+2 --id corpus-v1
depinchaind dataset build tokens.bin --out ./tok --shard-size 4MiB --replicas 3 --sample-bytes 4096`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			out, _ := f.GetString(flagOut)
			if out == "" {
				return fmt.Errorf("--%s is required: the folder for the pieces and manifest.json", flagOut)
			}
			sizeText, _ := f.GetString(flagShardSize)
			shardSize, err := ParseSize(sizeText)
			if err != nil {
				return fmt.Errorf("--%s: %w", flagShardSize, err)
			}
			chunkText, _ := f.GetString(flagChunkSize)
			chunkSize, err := ParseSize(chunkText)
			if err != nil {
				return fmt.Errorf("--%s: %w", flagChunkSize, err)
			}
			rs, _ := f.GetString(flagRS)
			replicas, _ := f.GetUint32(flagReplicas)
			enc, err := manifest.ParseEncoding(rs, replicas)
			if err != nil {
				return err
			}
			sampleText, _ := f.GetString(flagSampleBytes)
			sampleBytes, err := ParseSize(sampleText)
			if err != nil {
				return fmt.Errorf("--%s: %w", flagSampleBytes, err)
			}
			if lines, _ := f.GetBool(flagLines); lines {
				sampleBytes = -1
			}
			id, _ := f.GetString(flagID)
			name, _ := f.GetString(flagName)
			workers, _ := f.GetInt(flagWorkers)
			if chunkSize > 1<<31 {
				return fmt.Errorf("--%s: %d is too large", flagChunkSize, chunkSize)
			}
			start := time.Now()
			m, err := manifest.Build(args[0], out, manifest.Options{
				ShardSize: shardSize, ChunkSize: uint32(chunkSize), Encoding: enc, SampleBytes: sampleBytes,
				ID: id, Name: name, Workers: workers,
			})
			if err != nil {
				return err
			}
			elapsed := time.Since(start)
			show, _ := f.GetInt(flagShowShards)
			fmt.Fprint(cmd.OutOrStdout(), m.Summary(show))
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s in %s (%.1f MB/s)\n", filepath.Join(out, manifest.ManifestFile),
				elapsed.Round(time.Millisecond), float64(m.TotalSize)/1e6/max(elapsed.Seconds(), 1e-9))
			return nil
		},
	}
	f := cmd.Flags()
	f.String(flagOut, "", "output folder for pieces/ and manifest.json (required)")
	f.String(flagShardSize, "1MiB", "most bytes of samples per shard (B, KiB, MiB, GiB)")
	f.String(flagRS, "", "Reed-Solomon data+parity pieces per shard, e.g. 4+2")
	f.Uint32(flagReplicas, 0, "replicate every shard as one piece kept by n holders")
	f.String(flagChunkSize, strconv.Itoa(manifest.DefaultChunkSize), "Merkle leaf size of the pieces")
	f.String(flagSampleBytes, strconv.Itoa(manifest.DefaultSampleBytes), "bytes per sample of a file input")
	f.Bool(flagLines, false, "file input: one sample per line instead of fixed-size samples")
	f.String(flagID, "", "dataset id to record in the manifest (3-64 of a-z, 0-9, '-')")
	f.String(flagName, "", "dataset name to record in the manifest")
	f.Int(flagWorkers, 0, "shards encoded in parallel (default: all CPUs)")
	f.Int(flagShowShards, 20, "shards to list in the summary (0: all)")
	return cmd
}

func newRebuildCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:          "rebuild --manifest [manifest.json] --shard [n] --out [file]",
		Short:        "Rebuild a shard's bytes from the pieces left (any k of k+m, or one replica)",
		Example:      "depinchaind dataset rebuild --manifest ./corpus-pieces/manifest.json --shard 3 --out shard3.bin",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			path, _ := f.GetString(flagManifest)
			if path == "" {
				return fmt.Errorf("--%s is required", flagManifest)
			}
			m, err := manifest.Load(path)
			if err != nil {
				return err
			}
			dir, _ := f.GetString(flagPieces)
			if dir == "" {
				dir = filepath.Dir(path)
			}
			shard, _ := f.GetUint32(flagShard)
			out, _ := f.GetString(flagOut)
			if out == "" {
				return fmt.Errorf("--%s is required: where to write the shard", flagOut)
			}
			data, err := m.RebuildFromDir(dir, shard)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rebuilt shard %d (%d bytes, samples [%d, %d)) into %s\n",
				shard, len(data), m.Shards[shard].SampleStart, m.Shards[shard].SampleEnd, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.String(flagManifest, "", "the dataset's manifest.json (required)")
	f.String(flagPieces, "", "folder the manifest's piece paths are relative to (default: the manifest's folder)")
	f.Uint32(flagShard, 0, "shard index")
	f.String(flagOut, "", "file to write the shard to (required)")
	return cmd
}

// ParseSize reads a byte size such as 4096, 512KiB, 1MiB, 2GiB (also K/M/G, KB/MB/GB as
// powers of 1024, which is what shard sizes are counted in).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"k", 1 << 10}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size like 4096, 512KiB or 1MiB", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
