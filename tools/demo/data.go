package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/storage"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
)

// The training data: Debian's fortunes (installed by scripts/deps.sh), built by
// scripts/fortunes-dataset.sh into shards of one replica each and registered in
// x/shardregistry by the owner; a storage provider's sidecar holds the pieces.
const (
	datasetID    = "fortunes-en"
	fortunesDir  = "/usr/share/games/fortunes"
	shardSize    = "512KiB"
	storageBond  = "20000000udepin" // 20 DEPIN: the storage provider's bond
	storageLabel = "storage"
)

// dataset is what the owner registered.
type dataset struct {
	manifest *manifest.Manifest
	built    string // the build folder: pieces/ and manifest.json
	corpus   string // the concatenated text
	bytes    int64
}

// registerFortunes builds Debian's fortunes into a dataset with the project's own
// script and registers it from the owner's key, narrating the command.
func registerFortunes(ctx context.Context, s *story, n *localnet.Node, demoDir string) (dataset, error) {
	if _, err := os.Stat(filepath.Join(fortunesDir, "fortunes")); err != nil {
		return dataset{}, fmt.Errorf("Debian's fortunes are not installed (`make deps` installs them): %w", err)
	}
	out := filepath.Join(demoDir, "fortunes")
	script := filepath.Join(s.root, "scripts", "fortunes-dataset.sh")
	args := []string{"--out", out, "--id", datasetID, "--replicas", "1", "--shard-size", shardSize,
		"--binary", n.Binary, "--home", n.Home, "--from", "owner", "--keyring-backend", "test",
		"--node", n.RPC, "--chain-id", n.ChainID}
	s.detail("$ scripts/fortunes-dataset.sh --out %s --id %s --replicas 1 --shard-size %s --from owner", s.rel(out), datasetID, shardSize)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(sctx, script, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return dataset{}, fmt.Errorf("scripts/fortunes-dataset.sh did not build and register the dataset within 2m0s\n%s", strings.TrimSpace(stderr.String()))
		}
		return dataset{}, fmt.Errorf("scripts/fortunes-dataset.sh: %w\n%s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	manifestPath := strings.TrimSpace(lines[len(lines)-1])
	m, err := manifest.Load(manifestPath)
	if err != nil {
		return dataset{}, err
	}
	d := dataset{manifest: m, built: filepath.Dir(manifestPath), corpus: filepath.Join(out, "fortunes.txt")}
	fi, err := os.Stat(d.corpus)
	if err != nil {
		return dataset{}, err
	}
	d.bytes = fi.Size()
	return d, nil
}

// holdPieces copies every piece of the dataset into the storage sidecar's pieces
// folder (<pieces_dir>/<dataset>/pieces/...), where `claim_local` finds them.
func holdPieces(d dataset, p *sidecar.Provider) (int, error) {
	n := 0
	for shard := range d.manifest.Shards {
		for piece := range d.manifest.Shards[shard].Pieces {
			data, err := os.ReadFile(filepath.Join(d.built, manifest.PieceFile(uint32(shard), uint32(piece))))
			if err != nil {
				return n, err
			}
			dst := storage.PiecePath(filepath.Join(p.Home, "pieces"), datasetID, uint32(shard), uint32(piece))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return n, err
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// waitClaimed waits until every shard of the dataset has as many live replicas as
// it targets.
func waitClaimed(ctx context.Context, conn *grpc.ClientConn, shards int) error {
	q := shardtypes.NewQueryClient(conn)
	return poll(ctx, fmt.Sprintf("the storage provider's claims of all %d shards of %s", shards, datasetID), 2*time.Minute, func() (bool, error) {
		res, err := q.Shards(ctx, &shardtypes.QueryShardsRequest{DatasetId: datasetID})
		if err != nil || len(res.Shards) != shards {
			return false, err
		}
		for _, sh := range res.Shards {
			if sh.Live < sh.Target {
				return false, nil
			}
		}
		return true, nil
	})
}

// logLine returns the fields of the first line of a sidecar's log whose message
// is msg, or false while there is none.
func logLine(p *sidecar.Provider, msg string) (map[string]string, bool) {
	f, err := os.Open(p.LogPath())
	if err != nil {
		return nil, false
	}
	defer f.Close()
	want := fmt.Sprintf("msg=%q", msg)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, want) {
			return logFields(line), true
		}
	}
	return nil, false
}

// logFields splits a slog text line into its key=value fields (values unquoted).
func logFields(line string) map[string]string {
	out := map[string]string{}
	for len(line) > 0 {
		line = strings.TrimLeft(line, " ")
		eq := strings.IndexByte(line, '=')
		if eq < 0 {
			break
		}
		key := line[:eq]
		line = line[eq+1:]
		var val string
		if strings.HasPrefix(line, `"`) {
			end := 1
			for end < len(line) && (line[end] != '"' || line[end-1] == '\\') {
				end++
			}
			val, line = strings.ReplaceAll(line[1:min(end, len(line))], `\"`, `"`), line[min(end+1, len(line)):]
		} else {
			sp := strings.IndexByte(line, ' ')
			if sp < 0 {
				sp = len(line)
			}
			val, line = line[:sp], line[sp:]
		}
		out[key] = val
	}
	return out
}
