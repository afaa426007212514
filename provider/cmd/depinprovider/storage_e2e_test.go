package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sdkmath "cosmossdk.io/math"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/pieces"
	"github.com/depinchain/depinchain/provider/storage"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

const storageDatasetID = "sidecar-corpus"

// storageSidecar is a storage provider whose sidecar is a real depinprovider
// with [storage_role] enabled.
type storageSidecar struct {
	name      string
	p         *sidecar.Provider
	piecesDir string
}

// TestStorageRoleWithRealSidecars is the storage story with real processes
// and nobody at the keyboard. A corpus is built into a Reed-Solomon 2+1
// dataset of two shards with `depinchaind dataset build` and registered with
// `depinchaind tx shardregistry register-dataset`, on a chain whose challenge
// periods are 16 blocks. Three providers run depinprovider with
// [storage_role] enabled and claim_local on, each with one piece of every
// shard in its pieces_dir (s1 signs through an authz hot key, with the grants
// localnet.SetupProvider gives it): the sidecars claim the six replicas
// themselves when the dataset is registered and answer every storage
// challenge for two periods, with no miss on chain. One of s1's piece files
// is deleted: its sidecar declares the fault, the replica is terminated as a
// declared fault and s1's bond drops by exactly declared_fault_slash_fraction
// of the collateral. A fourth provider, s4, with repair on and no pieces,
// downloads the shard's two other pieces from s2's and s3's /pieces/ servers
// (the checkpoint server at the endpoint each registered), rebuilds the lost
// piece byte for byte, claims the repair slot and answers its next
// challenge; s2, repair on too but already a holder of that shard, does not.
func TestStorageRoleWithRealSidecars(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node and four real sidecars")
	}
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()

	node, err := localnet.Start(ctx, localnet.Options{
		Home:      filepath.Join(dir, "chain"),
		BlockTime: 500 * time.Millisecond,
		Accounts: map[string]int64{
			"owner": 1_000_000_000_000, "s1": 1_000_000_000_000, "s1-hot": 1_000_000_000,
			"s2": 1_000_000_000_000, "s3": 1_000_000_000_000, "s4": 1_000_000_000_000,
		},
		// Periods of 16 blocks (about 8 s), each replica's deadline at least 8
		// blocks after its seed block, as in provider/storage's own test.
		Genesis: func(state map[string]any) error {
			params := state["shardregistry"].(map[string]any)["params"].(map[string]any)
			params["period_blocks"] = "16"
			params["proof_window_blocks"] = "8"
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	conn, err := grpc.NewClient(node.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	q := shardtypes.NewQueryClient(conn)
	providers := stakingexttypes.NewQueryClient(conn)

	// Four providers, set up side by side (each signs with its own keys). s1
	// signs with a hot key through authz; the others sign as the operator.
	// s2 and s4 have repair on; s1 must not (it would rebuild its lost piece
	// in place instead of declaring the fault).
	sidecars := map[string]*storageSidecar{}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		setupErr []error
	)
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		opts := sidecar.Options{
			Home: filepath.Join(dir, name), Operator: name, HotKey: name, SkipGrants: true, Bond: "100000000000udepin",
			Set: map[string]string{
				"storage_role.enabled": "true", "storage_role.claim_local": "true",
				"storage_role.repair": fmt.Sprint(name == "s2" || name == "s4"), "storage_role.check_interval": `"1s"`,
			},
		}
		if name == "s1" {
			opts.HotKey, opts.SkipGrants = "s1-hot", false
		}
		if testing.Verbose() {
			opts.Log = prefixWriter{os.Stderr, "    " + name + "| "}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sidecar.Setup(ctx, node, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				setupErr = append(setupErr, fmt.Errorf("%s: %w", name, err))
				return
			}
			// pieces_dir keeps its default, "pieces" beside config.toml.
			sidecars[name] = &storageSidecar{name: name, p: p, piecesDir: filepath.Join(opts.Home, "pieces")}
		}()
	}

	// Meanwhile the dataset is built offline: 2 shards, Reed-Solomon 2+1, 1 KiB chunks.
	corpus := filepath.Join(dir, "corpus")
	if err := os.MkdirAll(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	// Every file is a sample; eight of 3..4.5 KB make two 16 KiB shards.
	for i := range 8 {
		text := strings.Repeat(fmt.Sprintf("storage role document %d. ", i), 120+i*7)
		if err := os.WriteFile(filepath.Join(corpus, fmt.Sprintf("doc-%02d.txt", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	built := filepath.Join(dir, "built")
	if _, err := node.Exec(ctx, "dataset", "build", corpus, "--out", built, "--shard-size", "16KiB", "--chunk-size", "1024",
		"--rs", "2+1", "--id", storageDatasetID); err != nil {
		t.Fatal(err)
	}
	manifestPath := filepath.Join(built, manifest.ManifestFile)
	m, err := manifest.Load(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != 2 {
		t.Fatalf("the corpus made %d shards, want 2", len(m.Shards))
	}

	wg.Wait()
	if err := errors.Join(setupErr...); err != nil {
		t.Fatal(err)
	}
	for _, s := range sidecars {
		t.Cleanup(s.p.Stop)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range []string{"s1", "s2", "s3", "s4"} {
			t.Logf("%s's log tail:\n%s", name, readTail(sidecars[name].p.LogPath()))
		}
		t.Logf("node log tail:\n%s", readTail(filepath.Join(node.Home, "node.log")))
	})
	t.Logf("chain, dataset build and four providers set up at %s", since())

	// s1, s2 and s3 get piece 0, 1 and 2 of every shard, where the role looks
	// for them: <pieces_dir>/<dataset id>/pieces/sSSSSSS-pPPP.piece.
	holders := []string{"s1", "s2", "s3"}
	for i, name := range holders {
		for shard := range m.Shards {
			data, err := os.ReadFile(filepath.Join(built, manifest.PieceFile(uint32(shard), uint32(i))))
			if err != nil {
				t.Fatal(err)
			}
			path := storage.PiecePath(sidecars[name].piecesDir, storageDatasetID, uint32(shard), uint32(i))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	startAll := func(names ...string) {
		t.Helper()
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sidecars[name].p.Start(ctx); err != nil {
					errs[i] = fmt.Errorf("%s: %w", name, err)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	startAll(holders...)
	t.Logf("s1..s3 ready at %s", since())

	// The dataset is registered through the CLI once the sidecars run: they
	// learn of it from EventDatasetRegistered and claim their pieces.
	res, err := node.Tx(ctx, "owner", "shardregistry", "register-dataset", "--manifest", manifestPath)
	if err != nil || res.Code != 0 {
		t.Fatalf("register-dataset: %v %s", err, res.RawLog)
	}

	heldBy := func(name string) []shardtypes.Replica {
		t.Helper()
		res, err := q.Replicas(ctx, &shardtypes.QueryReplicasRequest{Holder: sidecars[name].p.Operator, ActiveOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Replicas
	}
	replica := func(id uint64) shardtypes.Replica {
		t.Helper()
		res, err := q.Replica(ctx, &shardtypes.QueryReplicaRequest{ReplicaId: id})
		if err != nil {
			t.Fatal(err)
		}
		return res.Replica
	}
	bond := func(name string) sdkmath.Int {
		t.Helper()
		res, err := providers.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: sidecars[name].p.Operator})
		if err != nil {
			t.Fatal(err)
		}
		return res.Provider.Bond.Amount
	}
	logCount := func(name, msg string) int {
		b, _ := os.ReadFile(sidecars[name].p.LogPath())
		return strings.Count(string(b), `msg="`+msg+`"`)
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %s waiting until %s", timeout, what)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting until %s: %v", what, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	noMisses := func(names ...string) {
		t.Helper()
		for _, name := range names {
			for _, rep := range heldBy(name) {
				if rep.TotalMisses != 0 || rep.ConsecutiveMisses != 0 {
					t.Fatalf("%s's replica %d (shard %d piece %d) missed %d deadlines", name, rep.Id, rep.Shard, rep.Piece, rep.TotalMisses)
				}
			}
			if n := logCount(name, "storage challenge missed"); n != 0 {
				t.Fatalf("%s's sidecar logged %d missed challenges", name, n)
			}
		}
	}

	// Claims: each of s1..s3 holds its own piece of both shards.
	waitFor("s1..s3 claim their local pieces", 40*time.Second, func() bool {
		for _, name := range holders {
			// The sidecar logs a claim once its transaction is in a block.
			if len(heldBy(name)) != 2 || logCount(name, "replica claimed") != 2 {
				return false
			}
		}
		return true
	})
	for i, name := range holders {
		for _, rep := range heldBy(name) {
			if rep.DatasetId != storageDatasetID || rep.Piece != uint32(i) {
				t.Fatalf("%s claimed %s shard %d piece %d, want piece %d of each shard", name, rep.DatasetId, rep.Shard, rep.Piece, i)
			}
		}
	}
	t.Logf("six replicas claimed at %s", since())

	// The repairer starts once the pieces are held: started earlier, it could
	// rebuild a piece from the other two before its own holder claimed it,
	// which the chain allows but this test does not want. It starts while the
	// others answer their challenges.
	startAll("s4")

	// Two periods of challenges, every one answered before its deadline: each
	// replica has the claim's proof and two more accepted, and no miss.
	waitFor("every replica proves two more periods", 60*time.Second, func() bool {
		for _, name := range holders {
			for _, rep := range heldBy(name) {
				if rep.ProofsAccepted < 3 {
					return false
				}
			}
			// The sidecar logs each answer once its transaction is in a block.
			if logCount(name, "storage challenge answered") < 4 {
				return false
			}
		}
		return true
	})
	noMisses(holders...)
	t.Logf("two periods answered at %s", since())

	// The piece servers on the public (checkpoint) servers serve what the
	// sidecars hold, and nothing else.
	get := func(name string, shard, piece uint32) (int, []byte) {
		t.Helper()
		url, err := pieces.URL(sidecars[name].p.Public, storageDatasetID, shard, piece)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body
	}
	want, err := os.ReadFile(filepath.Join(built, manifest.PieceFile(0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get("s2", 0, 1); code != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("GET s2's /pieces/%s/0/1: %d, %d bytes (want 200, the piece's %d bytes)", storageDatasetID, code, len(body), len(want))
	}
	if code, _ := get("s2", 0, 0); code != http.StatusNotFound {
		t.Fatalf("GET s2's /pieces/%s/0/0 (not held there): %d, want 404", storageDatasetID, code)
	}

	// s1 loses shard 0's first data piece. Its sidecar finds out (the next
	// full check, every second) and declares the fault.
	var lost shardtypes.Replica
	for _, rep := range heldBy("s1") {
		if rep.Shard == 0 {
			lost = rep
		}
	}
	params, err := q.Params(ctx, &shardtypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	bondBefore := bond("s1")
	lostPath := storage.PiecePath(sidecars["s1"].piecesDir, storageDatasetID, 0, 0)
	lostBytes, err := os.ReadFile(lostPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lostPath); err != nil {
		t.Fatal(err)
	}
	waitFor("s1 declares the fault", 30*time.Second, func() bool {
		return replica(lost.Id).Status == shardtypes.REPLICA_STATUS_TERMINATED
	})
	if rep := replica(lost.Id); rep.TerminationReason != shardtypes.TERMINATION_REASON_DECLARED_FAULT || rep.TotalMisses != 0 {
		t.Fatalf("s1's lost replica: %s after %d misses, want a declared fault and no miss", rep.TerminationReason, rep.TotalMisses)
	}
	slash := params.Params.DeclaredFaultSlashFraction.MulInt(lost.Collateral.Amount).TruncateInt()
	if got := bondBefore.Sub(bond("s1")); !got.Equal(slash) || !slash.IsPositive() {
		t.Fatalf("s1's bond fell by %s, want the declared-fault slash %s (%s of %s)", got, slash, params.Params.DeclaredFaultSlashFraction, lost.Collateral)
	}
	waitFor("s1's sidecar logs the fault", 10*time.Second, func() bool { return logCount("s1", "fault declared") == 1 })
	if reps := heldBy("s1"); len(reps) != 1 || reps[0].Shard != 1 {
		t.Fatalf("s1 holds %+v after the fault, want only its piece of shard 1", reps)
	}
	t.Logf("fault declared at %s: s1 slashed %sudepin", since(), slash)

	// s4 repairs the slot: it holds nothing, downloads shard 0's two other
	// pieces from s2's and s3's piece servers, rebuilds the lost one and
	// claims it. s2 (repair on) already holds a piece of shard 0, so it may not.
	var repaired shardtypes.Replica
	waitFor("s4 claims the repair slot", 40*time.Second, func() bool {
		reps := heldBy("s4")
		if len(reps) == 1 {
			repaired = reps[0]
		}
		return len(reps) == 1
	})
	if repaired.DatasetId != storageDatasetID || repaired.Shard != 0 || repaired.Piece != 0 {
		t.Fatalf("s4 holds %s shard %d piece %d, want shard 0 piece 0", repaired.DatasetId, repaired.Shard, repaired.Piece)
	}
	rebuilt, err := os.ReadFile(storage.PiecePath(sidecars["s4"].piecesDir, storageDatasetID, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rebuilt, lostBytes) {
		t.Fatal("s4's rebuilt piece differs from the lost one")
	}
	if n := logCount("s4", "piece rebuilt for a repair slot"); n < 1 {
		t.Fatal("s4's sidecar logged no rebuild")
	}
	// Nothing but the rebuilt piece is in s4's folder: the two pieces it was
	// rebuilt from came over HTTP.
	entries, err := os.ReadDir(filepath.Dir(storage.PiecePath(sidecars["s4"].piecesDir, storageDatasetID, 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("s4's pieces folder holds %d files, want only the rebuilt piece", len(entries))
	}
	if reps := heldBy("s2"); len(reps) != 2 || slices.ContainsFunc(reps, func(r shardtypes.Replica) bool { return r.Piece != 1 }) {
		t.Fatalf("s2 (already a holder of shard 0) holds %+v, want only its own two pieces", reps)
	}
	t.Logf("repaired by s4 at %s", since())

	// The repaired replica answers its next challenge; nobody missed anything.
	waitFor("s4 answers the repaired replica's next challenge", 40*time.Second, func() bool {
		return replica(repaired.Id).ProofsAccepted >= 2 && logCount("s4", "storage challenge answered") >= 1
	})
	noMisses("s1", "s2", "s3", "s4")
	for _, name := range []string{"s1", "s2", "s3", "s4"} {
		var st struct {
			Roles []string `json:"roles"`
		}
		if err := sidecars[name].p.REST(ctx, "/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(st.Roles, "storage") {
			t.Errorf("%s's status lists roles %v, without storage", name, st.Roles)
		}
	}
	t.Logf("done in %s", since())
}
