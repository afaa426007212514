package main_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
)

// holderOptions make a sidecar a custody holder: the storage role with custody on,
// checking every two seconds, no GPU priced.
func holderOptions() sidecar.Options {
	return sidecar.Options{Set: map[string]string{"storage_role.enabled": "true", "storage_role.custody": "true", "storage_role.check_interval": `"2s"`}}
}

// shortStorageProofs is the genesis edit of the custody tests: proof periods of 16
// blocks with 8-block windows, so holders prove within a test's minutes.
func shortStorageProofs(state map[string]any) {
	sr := state["shardregistry"].(map[string]any)["params"].(map[string]any)
	sr["period_blocks"], sr["proof_window_blocks"] = "16", "8"
}

// cluster is a real node and sidecars set up (registered, bonded, not started) for the
// multi-sidecar tests: trainers and the storage holders of custody.
type cluster struct {
	node     *localnet.Node
	conn     *grpc.ClientConn
	sidecars map[string]*sidecar.Provider
	start    time.Time
}

// startCluster starts a node (half-second blocks; every name and "owner" funded;
// genesis edits the genesis state) and sets up one sidecar per name in parallel, with
// the options options gives it (home, operator, hot key, grants and bond are filled
// in). On failure every sidecar's log tail and the node's are logged.
func startCluster(ctx context.Context, t testing.TB, dir string, names []string, genesis func(map[string]any) error, options func(name string) sidecar.Options) *cluster {
	t.Helper()
	c := &cluster{sidecars: map[string]*sidecar.Provider{}, start: time.Now()}
	accounts := map[string]int64{"owner": 1_000_000_000_000, "outsider": 1_000_000_000}
	for _, n := range names {
		accounts[n] = 1_000_000_000_000
	}
	var err error
	c.node, err = localnet.Start(ctx, localnet.Options{Home: filepath.Join(dir, "chain"), BlockTime: 500 * time.Millisecond, Accounts: accounts, Genesis: genesis})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.node.Stop)
	if c.conn, err = grpc.NewClient(c.node.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.conn.Close() })
	var mu sync.Mutex
	var wg sync.WaitGroup
	var setupErr []error
	for _, name := range names {
		opts := options(name)
		opts.Home, opts.Operator, opts.HotKey, opts.SkipGrants, opts.Bond = filepath.Join(dir, name), name, name, true, "100000000000udepin"
		if testing.Verbose() {
			opts.Log = prefixWriter{os.Stderr, "    " + name + "| "}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sidecar.Setup(ctx, c.node, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				setupErr = append(setupErr, fmt.Errorf("%s: %w", name, err))
				return
			}
			c.sidecars[name] = p
		}()
	}
	wg.Wait()
	if err := errors.Join(setupErr...); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Cleanup(c.sidecars[name].Stop)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range names {
			t.Logf("%s's log tail:\n%s", name, readTail(c.sidecars[name].LogPath()))
		}
		t.Logf("node log tail:\n%s", readTail(filepath.Join(c.node.Home, "node.log")))
	})
	return c
}

// startSidecars starts the named sidecars in parallel.
func (c *cluster) startSidecars(ctx context.Context, t testing.TB, names ...string) {
	t.Helper()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.sidecars[name].Start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// since is the time since the cluster started, for the test's log lines.
func (c *cluster) since() time.Duration { return time.Since(c.start).Round(100 * time.Millisecond) }

// waitFor polls cond every half second until it holds, failing the test after timeout.
func (c *cluster) waitFor(ctx context.Context, t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%s at %s", what, c.since())
}
