package manifest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/x/shardregistry/types"
)

// benchSize is the token file the build benchmark encodes: 64 MiB.
const benchSize = 64 << 20

// BenchmarkBuildVsSha256sum measures manifest building (read, shard, encode, write the
// pieces, Merkle-hash every piece) against `sha256sum` over the same file in the same
// run: sha256sum comes first so that tools/benchratio reports the builds as ratios
// to it. MB/s is of input bytes.
func BenchmarkBuildVsSha256sum(b *testing.B) {
	sum, err := exec.LookPath("sha256sum")
	if err != nil {
		b.Skip("sha256sum is not installed")
	}
	dir := b.TempDir()
	input := filepath.Join(dir, "tokens.bin")
	if err := os.WriteFile(input, randomBytes(42, benchSize), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("sha256sum", func(b *testing.B) {
		b.SetBytes(benchSize)
		for b.Loop() {
			if out, err := exec.Command(sum, input).CombinedOutput(); err != nil {
				b.Fatalf("%s: %s", err, out)
			}
		}
	})
	for _, c := range []struct {
		name string
		enc  types.Encoding
	}{
		{"build-rs-4+2", rs(4, 2)},
		{"build-rs-10+4", rs(10, 4)},
		{"build-replicas-3", types.Encoding{Kind: types.ENCODING_KIND_REPLICAS, Replicas: 3}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				out := filepath.Join(dir, c.name)
				if _, err := manifest.Build(input, out, manifest.Options{ShardSize: 1 << 20, Encoding: c.enc}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = os.RemoveAll(out)
				b.StartTimer()
			}
		})
	}
}
