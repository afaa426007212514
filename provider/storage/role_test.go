package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmath "cosmossdk.io/math"
	sdk "github.com/cosmos/cosmos-sdk/types"
	"github.com/cosmos/cosmos-sdk/x/authz"

	"github.com/depinchain/depinchain/pkg/chainparams"
	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/provider/chain"
	"github.com/depinchain/depinchain/provider/db"
	"github.com/depinchain/depinchain/provider/storage"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

const datasetID = "role-corpus"

// holder is one storage provider driven by a Role in this process.
type holder struct {
	name      string
	operator  string
	piecesDir string
	role      *storage.Role
	done      chan error
}

// TestStorageRoleAgainstARealChain runs four storage roles against a real
// single-node chain with short challenge periods. A Reed-Solomon 2+1 dataset
// of two shards is held by three providers, one piece of each shard each,
// claimed from their local files (one provider signs with an authz hot key).
// They answer every storage challenge for two periods. Then one piece file is
// deleted: its holder declares the fault (slashed declared_fault_slash_fraction
// of the collateral, the slot reopens), and a fourth provider with Repair on,
// holding nothing, rebuilds the piece from the two other pieces it downloads
// from their holders' piece servers, claims the slot and answers the repaired
// replica's next challenge. Last, a provider with Repair on finds one of its
// pieces corrupt and rebuilds it in place from its shard's other holders
// rather than declaring a fault. The roles learn of events from a real
// Follower.
func TestStorageRoleAgainstARealChain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node")
	}
	chainparams.SetAddressPrefixes()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// The dataset: 2 shards, Reed-Solomon 2+1, 1 KiB chunks.
	corpus := filepath.Join(dir, "corpus")
	must(t, os.MkdirAll(corpus, 0o755))
	for i := range 8 {
		must(t, os.WriteFile(filepath.Join(corpus, fmt.Sprintf("doc-%02d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("storage role document %d. ", i), 120+i*7)), 0o644))
	}
	built := filepath.Join(dir, "built")
	m, err := manifest.Build(corpus, built, manifest.Options{
		ShardSize: 16 << 10, ChunkSize: 1024, ID: datasetID,
		Encoding: types.Encoding{Kind: types.ENCODING_KIND_REED_SOLOMON, DataPieces: 2, ParityPieces: 1},
	})
	must(t, err)
	if len(m.Shards) != 2 {
		t.Fatalf("the corpus made %d shards, want 2", len(m.Shards))
	}

	node, err := localnet.Start(ctx, localnet.Options{
		Home:      filepath.Join(dir, "node"),
		BlockTime: 400 * time.Millisecond,
		Accounts: map[string]int64{
			"owner": 1_000_000_000_000, "h1": 1_000_000_000_000, "h2": 1_000_000_000_000, "h2hot": 1_000_000_000_000,
			"h3": 1_000_000_000_000, "h4": 1_000_000_000_000,
		},
		// Periods of 16 blocks (6.4 s), each replica's deadline at least 8 blocks
		// after its seed block.
		Genesis: func(state map[string]any) error {
			params := state["shardregistry"].(map[string]any)["params"].(map[string]any)
			params["period_blocks"] = "16"
			params["proof_window_blocks"] = "8"
			return nil
		},
	})
	must(t, err)
	defer node.Stop()
	defer func() {
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(node.Home, "node.log")); err == nil {
				lines := strings.Split(string(log), "\n")
				t.Logf("node log tail:\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	}()

	enc := chain.NewEncodingConfig()
	conn, err := chain.DialGRPC(node.GRPC, enc.InterfaceRegistry)
	must(t, err)
	defer conn.Close()
	kr, err := chain.OpenKeyring("test", node.Home, enc.Codec, nil)
	must(t, err)
	submitter := func(key, operator string) *chain.Submitter {
		s, err := chain.NewSubmitter(conn, kr, enc, chain.SubmitterConfig{
			ChainID: node.ChainID, HotKey: key, Operator: operator, GasPrices: "0udepin", GasAdjustment: 1.5,
			InclusionPoll: 100 * time.Millisecond,
		})
		must(t, err)
		return s
	}
	addr := func(key string) string {
		a, err := node.Address(ctx, key)
		must(t, err)
		return a
	}
	send := func(s *chain.Submitter, msg sdk.Msg) *chain.TxResult {
		t.Helper()
		res, err := s.Submit(ctx, msg)
		if err != nil {
			t.Fatalf("%s: %v", sdk.MsgTypeURL(msg), err)
		}
		return res
	}

	// Four bonded storage providers (no GPUs). h2 and h3 serve their pieces
	// at the endpoints they register; h2 signs with a hot key through authz.
	holders := map[string]*holder{}
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		h := &holder{name: name, operator: addr(name), piecesDir: filepath.Join(dir, name, "pieces"), done: make(chan error, 1)}
		must(t, os.MkdirAll(h.piecesDir, 0o755))
		srv := httptest.NewServer(storage.NewPieceHandler(h.piecesDir))
		defer srv.Close()
		send(submitter(name, ""), &stakingexttypes.MsgRegisterProvider{
			Operator: h.operator, Moniker: name, Endpoint: srv.URL, Region: "local", Bond: sdk.NewInt64Coin("udepin", 10_000_000),
		})
		holders[name] = h
	}
	h2hot := addr("h2hot")
	for _, url := range storage.RequiredGrants {
		grant, err := authz.NewMsgGrant(sdk.MustAccAddressFromBech32(holders["h2"].operator), sdk.MustAccAddressFromBech32(h2hot),
			authz.NewGenericAuthorization(url), nil)
		must(t, err)
		send(submitter("h2", ""), grant)
	}
	reg, err := m.RegisterMsg(addr("owner"), "", "")
	must(t, err)
	send(submitter("owner", ""), reg)

	// Each of h1..h3 gets one piece of each shard: h1 the first data pieces, h2
	// the second, h3 the parity pieces. h4 gets nothing.
	for i, name := range []string{"h1", "h2", "h3"} {
		for shard := range 2 {
			copyFile(t, filepath.Join(built, manifest.PieceFile(uint32(shard), uint32(i))),
				storage.PiecePath(holders[name].piecesDir, datasetID, uint32(shard), uint32(i)))
		}
	}

	runCtx, stopRoles := context.WithCancel(ctx)
	defer stopRoles()
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		h := holders[name]
		submit := submitter(name, "")
		if name == "h2" {
			submit = submitter("h2hot", h.operator)
		}
		st, err := db.Open(filepath.Join(dir, name, "state.db"))
		must(t, err)
		defer st.Close()
		h.role, err = storage.New(storage.Options{
			Operator: h.operator, Submit: func(ctx context.Context, msg sdk.Msg) (*chain.TxResult, error) { return submit.Submit(ctx, msg) },
			Conn: conn, PiecesDir: h.piecesDir, DB: st,
			ClaimLocal: name != "h4", Repair: name == "h2" || name == "h4",
			CheckInterval: time.Second, PollInterval: 300 * time.Millisecond,
			Logger: testLogger(t, name),
		})
		must(t, err)
		if name != "h4" {
			go func() { h.done <- h.role.Run(runCtx) }()
		}
	}
	defer func() {
		stopRoles()
		for _, h := range holders {
			select {
			case err := <-h.done:
				if err != nil {
					t.Errorf("%s: Run: %v", h.name, err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("%s: Run did not return after its context ended", h.name)
			}
		}
	}()

	// One follower feeds every role the chain's events, as the daemon does.
	height, err := node.Height(ctx)
	must(t, err)
	followerStore, err := db.Open(filepath.Join(dir, "follower.db"))
	must(t, err)
	defer followerStore.Close()
	follower, err := chain.NewFollower(chain.FollowerConfig{RPC: node.RPC, StartHeight: height, PollInterval: 200 * time.Millisecond},
		followerStore, func(ctx context.Context, height int64, events []chain.Event) error {
			for _, ev := range events {
				for _, h := range holders {
					if _, err := h.role.HandleEvent(ctx, nil, ev); err != nil {
						return err
					}
				}
			}
			return nil
		})
	must(t, err)
	go follower.Run(runCtx) //nolint:errcheck // ends with runCtx
	t.Logf("set up in %s", time.Since(start).Round(time.Millisecond))

	q := types.NewQueryClient(conn)
	heldBy := func(name string) []types.Replica {
		res, err := q.Replicas(ctx, &types.QueryReplicasRequest{Holder: holders[name].operator, ActiveOnly: true})
		must(t, err)
		return res.Replicas
	}

	// Claims: h1..h3 claim their two local pieces each.
	eventually(t, 30*time.Second, "h1..h3 claim their local pieces", func() bool {
		return len(heldBy("h1")) == 2 && len(heldBy("h2")) == 2 && len(heldBy("h3")) == 2
	})
	t.Logf("claimed at %s", time.Since(start).Round(time.Millisecond))
	// The repairer starts once the pieces are held: started earlier, it could
	// rebuild a piece from the other two before its own holder claimed it,
	// which the chain allows but this test does not want.
	go func() { holders["h4"].done <- holders["h4"].role.Run(runCtx) }()

	// Two periods of challenges, every one answered: each replica has the claim
	// and two accepted proofs, and no miss.
	eventually(t, 40*time.Second, "every replica proves two periods", func() bool {
		for _, name := range []string{"h1", "h2", "h3"} {
			for _, rep := range heldBy(name) {
				if rep.ProofsAccepted < 3 {
					return false
				}
			}
			// The role counts an answer once its transaction returns.
			if holders[name].role.Status().Counters.ChallengesAnswered < 4 {
				return false
			}
		}
		return true
	})
	for _, name := range []string{"h1", "h2", "h3"} {
		for _, rep := range heldBy(name) {
			if rep.TotalMisses != 0 {
				t.Fatalf("%s's replica %d missed %d deadlines", name, rep.Id, rep.TotalMisses)
			}
		}
		st := holders[name].role.Status()
		if st.Counters.PiecesHeld != 2 || st.Counters.ChallengesAnswered < 4 || st.Counters.ChallengesMissed != 0 || st.Counters.Claims != 2 {
			t.Fatalf("%s's status after two periods: %+v", name, st.Counters)
		}
	}
	t.Logf("two periods answered at %s", time.Since(start).Round(time.Millisecond))

	// h1 loses shard 0's first data piece. Its role finds out (the next full
	// check or challenge) and declares the fault.
	var lost types.Replica
	for _, rep := range heldBy("h1") {
		if rep.Shard == 0 {
			lost = rep
		}
	}
	providers := stakingexttypes.NewQueryClient(conn)
	bond := func(name string) sdkmath.Int {
		res, err := providers.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: holders[name].operator})
		must(t, err)
		return res.Provider.Bond.Amount
	}
	params, err := q.Params(ctx, &types.QueryParamsRequest{})
	must(t, err)
	bondBefore := bond("h1")
	lostPath := storage.PiecePath(holders["h1"].piecesDir, datasetID, 0, 0)
	lostBytes, err := os.ReadFile(lostPath)
	must(t, err)
	must(t, os.Remove(lostPath))
	eventually(t, 20*time.Second, "h1 declares the fault", func() bool {
		return holders["h1"].role.Status().Counters.FaultsDeclared == 1
	})
	rep, err := q.Replica(ctx, &types.QueryReplicaRequest{ReplicaId: lost.Id})
	must(t, err)
	if rep.Replica.Status != types.REPLICA_STATUS_TERMINATED || rep.Replica.TerminationReason != types.TERMINATION_REASON_DECLARED_FAULT {
		t.Fatalf("lost replica after the fault: %s %s", rep.Replica.Status, rep.Replica.TerminationReason)
	}
	slash := params.Params.DeclaredFaultSlashFraction.MulInt(lost.Collateral.Amount).TruncateInt()
	if got := bondBefore.Sub(bond("h1")); !got.Equal(slash) {
		t.Fatalf("h1's bond fell by %s, want the declared-fault slash %s (%s of %s)", got, slash, params.Params.DeclaredFaultSlashFraction, lost.Collateral)
	}
	st1 := holders["h1"].role.Status()
	if want := sdk.NewCoin("udepin", slash).String(); st1.Counters.Slashed != want || st1.Counters.PiecesHeld != 1 {
		t.Fatalf("h1's status after the fault: %+v, want slashed %s and one piece held", st1.Counters, want)
	}
	t.Logf("fault declared at %s: slashed %s", time.Since(start).Round(time.Millisecond), slash)

	// h4 repairs the slot: it holds nothing locally, downloads shard 0's other
	// two pieces from h2 and h3, rebuilds the lost one and claims it. h2 (Repair
	// on too) holds a piece of shard 0 already, so it may not.
	var repaired types.Replica
	eventually(t, 30*time.Second, "h4 claims the repair slot", func() bool {
		reps := heldBy("h4")
		if len(reps) == 1 {
			repaired = reps[0]
		}
		return len(reps) == 1
	})
	if repaired.Shard != 0 || repaired.Piece != 0 {
		t.Fatalf("h4 holds shard %d piece %d, want shard 0 piece 0", repaired.Shard, repaired.Piece)
	}
	rebuilt, err := os.ReadFile(storage.PiecePath(holders["h4"].piecesDir, datasetID, 0, 0))
	must(t, err)
	if !bytes.Equal(rebuilt, lostBytes) {
		t.Fatal("h4's rebuilt piece differs from the lost one")
	}
	// The role counts the repair when its claim's event comes back through
	// the follower, which may be a block after the chain has the replica.
	var h4 storage.Status
	eventually(t, 30*time.Second, "h4's status to show the repair", func() bool {
		h4 = holders["h4"].role.Status()
		return h4.Counters.Repairs == 1 && len(h4.Pieces) == 1 && h4.Pieces[0].Repaired
	})
	if h4.Counters.Claims != 1 {
		t.Fatalf("h4's status after the repair: %+v", h4)
	}
	if st := holders["h2"].role.Status(); st.Counters.Claims != 2 || st.Counters.Repairs != 0 {
		t.Fatalf("h2 (already a holder of shard 0) claimed more: %+v", st.Counters)
	}
	t.Logf("repaired at %s", time.Since(start).Round(time.Millisecond))

	// h2 (Repair on) finds one of its pieces corrupt: it rebuilds it in place
	// from h1's and h3's pieces of the shard instead of declaring a fault.
	corruptPath := storage.PiecePath(holders["h2"].piecesDir, datasetID, 1, 1)
	good, err := os.ReadFile(corruptPath)
	must(t, err)
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0x55
	must(t, os.WriteFile(corruptPath, bad, 0o644))
	eventually(t, 20*time.Second, "h2 rebuilds its corrupt piece", func() bool {
		return holders["h2"].role.Status().Counters.Restores == 1
	})
	restored, err := os.ReadFile(corruptPath)
	must(t, err)
	if !bytes.Equal(restored, good) {
		t.Fatal("h2's restored piece differs from the original")
	}
	if st := holders["h2"].role.Status(); st.Counters.FaultsDeclared != 0 || st.Counters.PiecesHeld != 2 {
		t.Fatalf("h2 after restoring its piece: %+v", st.Counters)
	}
	t.Logf("restored at %s", time.Since(start).Round(time.Millisecond))

	// The repaired replica answers its next challenge, and h1 keeps answering
	// for the piece it still has.
	eventually(t, 30*time.Second, "h4 answers the repaired replica's next challenge", func() bool {
		res, err := q.Replica(ctx, &types.QueryReplicaRequest{ReplicaId: repaired.Id})
		must(t, err)
		return res.Replica.ProofsAccepted >= 2 && holders["h4"].role.Status().Counters.ChallengesAnswered >= 1
	})
	for _, name := range []string{"h1", "h2", "h3", "h4"} {
		for _, rep := range heldBy(name) {
			if rep.TotalMisses != 0 {
				t.Fatalf("%s's replica %d missed %d deadlines", name, rep.Id, rep.TotalMisses)
			}
		}
		st := holders[name].role.Status()
		js, _ := json.Marshal(st.Counters)
		t.Logf("%s: %s", name, js)
		if st.LastCheck.IsZero() {
			t.Errorf("%s never checked its pieces", name)
		}
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	must(t, err)
	must(t, os.MkdirAll(filepath.Dir(to), 0o755))
	must(t, os.WriteFile(to, data, 0o644))
}

// eventually polls cond every 200ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testLogger writes a role's logs to the test log, tagged with its name.
func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("holder", name)
}

type testWriter struct {
	mu sync.Mutex
	t  *testing.T
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
