package shardregistry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sdkmath "cosmossdk.io/math"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/testutil/localnet"
)

// num decodes a JSON integer whether it is printed as a number (32-bit proto fields) or
// as a string (64-bit proto fields), as the CLI and REST do.
type num int64

func (n *num) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	*n = num(v)
	return err
}

type e2eReplica struct {
	ID                num    `json:"id"`
	Shard             num    `json:"shard"`
	Piece             num    `json:"piece"`
	Holder            string `json:"holder"`
	Status            string `json:"status"`
	ConsecutiveMisses num    `json:"consecutive_misses"`
	TotalMisses       num    `json:"total_misses"`
	ProofsAccepted    num    `json:"proofs_accepted"`
	LastProvenPeriod  num    `json:"last_proven_period"`
	NextDeadline      num    `json:"next_deadline"`
	TerminationReason string `json:"termination_reason"`
	TerminatedHeight  num    `json:"terminated_height"`
	Collateral        struct {
		Denom  string `json:"denom"`
		Amount string `json:"amount"`
	} `json:"collateral"`
}

type e2eChallenge struct {
	Period     num  `json:"period"`
	SeedHeight num  `json:"seed_height"`
	Deadline   num  `json:"deadline"`
	Open       bool `json:"open"`
}

// heldReplica is a replica the test answers challenges for, as its holder would.
type heldReplica struct {
	id, holder, pieceFile string
	proofs                int // proofs submitted by the test
}

// TestEndToEnd drives the real binary through the whole life of a dataset: build it
// offline, register it, let bonded storage providers claim pieces and answer storage
// challenges over several periods, let one replica miss its deadlines until it is
// slashed and terminated, find the repair slot over REST, rebuild the lost piece from
// the others and have another provider claim it. It runs only when DEPINCHAIND_BINARY
// names a built depinchaind (as `make test-e2e` sets it), so that `go test
// ./x/shardregistry/...` stays fast.
func TestEndToEnd(t *testing.T) {
	if os.Getenv("DEPINCHAIND_BINARY") == "" {
		t.Skip("set DEPINCHAIND_BINARY to a built depinchaind to run the end-to-end test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	node, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(dir, "home"),
		// Blocks slow enough that a CLI round trip (query, sign, broadcast, wait) fits in
		// a proof window of a few blocks.
		BlockTime: 500 * time.Millisecond,
		Accounts: map[string]int64{
			"owner": 1_000_000_000, "storage1": 1_000_000_000, "storage2": 1_000_000_000, "storage3": 1_000_000_000,
		},
		Genesis: func(state map[string]any) error {
			params := state["shardregistry"].(map[string]any)["params"].(map[string]any)
			params["period_blocks"] = "20"
			params["proof_window_blocks"] = "10"
			if _, isNumber := params["max_consecutive_misses"].(json.Number); isNumber {
				params["max_consecutive_misses"] = json.Number("2")
			} else {
				params["max_consecutive_misses"] = "2"
			}
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
	rest := func(out any, path string) {
		t.Helper()
		body, err := node.REST(ctx, path)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(body, out), string(body))
	}
	addr := map[string]string{}
	for _, p := range []string{"storage1", "storage2", "storage3"} {
		tx(p, "stakingext", "register-provider", p, "https://"+p+".example.com:8443", "eu-west", "8000000udepin")
		addr[p], err = node.Address(ctx, p)
		require.NoError(t, err)
	}
	bond := func(holder string) sdkmath.Int {
		t.Helper()
		var res struct {
			Provider struct {
				Bond struct {
					Amount string `json:"amount"`
				} `json:"bond"`
			} `json:"provider"`
		}
		rest(&res, "/depinchain/stakingext/v1/providers/"+addr[holder])
		amount, ok := sdkmath.NewIntFromString(res.Provider.Bond.Amount)
		require.True(t, ok, "bond %q", res.Provider.Bond.Amount)
		return amount
	}
	replica := func(id string) e2eReplica {
		t.Helper()
		var res struct {
			Replica e2eReplica `json:"replica"`
		}
		require.NoError(t, node.Query(ctx, &res, "shardregistry", "replica", id))
		return res.Replica
	}

	// Build the dataset offline: Reed-Solomon 1+1, so every shard has a data piece (the
	// shard's bytes) and a parity piece, held by two different providers.
	corpus := filepath.Join(dir, "corpus")
	require.NoError(t, os.MkdirAll(corpus, 0o755))
	for i := 0; i < 12; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(corpus, fmt.Sprintf("doc-%02d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("document %d ", i), 400+i*50)), 0o644))
	}
	out := filepath.Join(dir, "pieces")
	summary, err := node.Exec(ctx, "dataset", "build", corpus, "--out", out, "--shard-size", "64KiB", "--rs", "1+1", "--id", "e2e-corpus")
	require.NoError(t, err)
	require.Contains(t, summary, "bafkrei")
	manifestPath := filepath.Join(out, manifest.ManifestFile)
	m, err := manifest.Load(manifestPath)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(m.Shards), 2)
	pieceFile := func(shard, piece int) string { return filepath.Join(out, m.Shards[shard].Pieces[piece].File) }

	tx("owner", "shardregistry", "register-dataset", "--manifest", manifestPath)
	type datasetView struct {
		Dataset struct {
			ShardCount int `json:"shard_count"`
		} `json:"dataset"`
		UnderReplicated int `json:"under_replicated_shards"`
		OpenSlots       int `json:"open_slots"`
	}
	dataset := func() datasetView {
		t.Helper()
		var ds datasetView
		require.NoError(t, node.Query(ctx, &ds, "shardregistry", "dataset", "e2e-corpus"))
		return ds
	}
	ds := dataset()
	require.Equal(t, len(m.Shards), ds.Dataset.ShardCount)
	require.Equal(t, 2*len(m.Shards), ds.OpenSlots)
	require.Equal(t, len(m.Shards), ds.UnderReplicated)

	// One bad input: a piece file whose bytes are not the piece's (same size, every
	// byte flipped) is refused with a clear message and changes nothing.
	good, err := os.ReadFile(pieceFile(1, 1))
	require.NoError(t, err)
	bad := make([]byte, len(good))
	for i, b := range good {
		bad[i] = ^b
	}
	badFile := filepath.Join(dir, "wrong.piece")
	require.NoError(t, os.WriteFile(badFile, bad, 0o644))
	before, bondBefore := dataset(), bond("storage3")
	badRes, err := node.Tx(ctx, "storage3", "shardregistry", "claim-replica", "e2e-corpus", "1", "1", "--piece-file", badFile)
	if err == nil {
		require.NotZero(t, badRes.Code, "a claim with the wrong bytes was accepted")
		require.Contains(t, badRes.RawLog, "invalid storage proof")
	} else {
		require.Contains(t, err.Error(), "invalid storage proof")
	}
	require.Equal(t, before, dataset())
	require.True(t, bondBefore.Equal(bond("storage3")))
	var holderReplicas struct {
		Replicas []e2eReplica `json:"replicas"`
	}
	require.NoError(t, node.Query(ctx, &holderReplicas, "shardregistry", "replicas", "--holder", addr["storage3"]))
	require.Empty(t, holderReplicas.Replicas)

	// Claims prove the current period: retry if the period turned meanwhile.
	claim := func(from string, shard, piece int, file string) localnet.TxResult {
		t.Helper()
		var res localnet.TxResult
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if res, err = node.Tx(ctx, from, "shardregistry", "claim-replica", "e2e-corpus", strconv.Itoa(shard), strconv.Itoa(piece), "--piece-file", file); err == nil && res.Code == 0 {
				break
			}
		}
		require.NoError(t, err)
		require.Zero(t, res.Code, res.RawLog)
		return res
	}
	replicaID := func(res localnet.TxResult) string {
		t.Helper()
		id, ok := res.Attr("depinchain.shardregistry.v1.EventReplicaClaimed", "replica_id")
		require.True(t, ok)
		return strings.Trim(id, `"`)
	}
	// storage1 holds shard 0's data piece (and will lose it), storage3 its parity piece,
	// storage2 shard 1's data piece.
	lost := &heldReplica{id: replicaID(claim("storage1", 0, 0, pieceFile(0, 0))), holder: "storage1", pieceFile: pieceFile(0, 0)}
	parity := &heldReplica{id: replicaID(claim("storage3", 0, 1, pieceFile(0, 1))), holder: "storage3", pieceFile: pieceFile(0, 1)}
	other := &heldReplica{id: replicaID(claim("storage2", 1, 0, pieceFile(1, 0))), holder: "storage2", pieceFile: pieceFile(1, 0)}

	// answer has every held replica answer the challenge it owes now, as its holder
	// would: query the replica's challenge schedule, wait for the seed block, prove it
	// from the piece file and check that the proof landed by the deadline. The holders
	// sign independently, so they answer concurrently (one CLI round trip takes a few
	// blocks).
	answer := func(held []*heldReplica) {
		t.Helper()
		errs := make([]error, len(held))
		var wg sync.WaitGroup
		for i, r := range held {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = func() error {
					var sched struct {
						Challenge e2eChallenge `json:"challenge"`
					}
					if err := node.Query(ctx, &sched, "shardregistry", "challenge", r.id); err != nil {
						return err
					}
					c := sched.Challenge
					if err := node.WaitHeight(ctx, int64(c.SeedHeight)+1); err != nil {
						return err
					}
					res, err := node.Tx(ctx, r.holder, "shardregistry", "submit-proof", r.id, "--piece-file", r.pieceFile)
					if err != nil {
						return err
					}
					if res.Code != 0 {
						return fmt.Errorf("replica %s: proof for period %d refused: %s", r.id, c.Period, res.RawLog)
					}
					if res.Height > int64(c.Deadline) {
						return fmt.Errorf("replica %s: proof for period %d included at %d, after its deadline %d", r.id, c.Period, res.Height, c.Deadline)
					}
					if period, ok := res.Attr("depinchain.shardregistry.v1.EventStorageProofAccepted", "period"); !ok || strings.Trim(period, `"`) != fmt.Sprint(int64(c.Period)) {
						return fmt.Errorf("replica %s: accepted period %q, want %d", r.id, period, c.Period)
					}
					r.proofs++
					return nil
				}()
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	}

	// Several periods of storage challenges, every holder answering each one.
	all := []*heldReplica{lost, parity, other}
	for period := 0; period < 3; period++ {
		answer(all)
	}
	for _, r := range all {
		rep := replica(r.id)
		require.Equal(t, "REPLICA_STATUS_ACTIVE", rep.Status)
		require.EqualValues(t, 1+r.proofs, rep.ProofsAccepted) // the claim counts as the first proof
		require.Zero(t, rep.TotalMisses)
	}

	// storage1 loses its piece and stops answering. The others keep answering until it
	// has missed max_consecutive_misses deadlines in a row: each miss slashes
	// miss_slash_fraction of the replica's collateral from its bond, the last one
	// terminates the replica.
	var params struct {
		Params struct {
			MissSlashFraction    string `json:"miss_slash_fraction"`
			MaxConsecutiveMisses num    `json:"max_consecutive_misses"`
		} `json:"params"`
	}
	require.NoError(t, node.Query(ctx, &params, "shardregistry", "params"))
	require.EqualValues(t, 2, params.Params.MaxConsecutiveMisses)
	lostRep := replica(lost.id)
	collateral, ok := sdkmath.NewIntFromString(lostRep.Collateral.Amount)
	require.True(t, ok)
	slash := sdkmath.LegacyMustNewDecFromStr(params.Params.MissSlashFraction).MulInt(collateral).TruncateInt()
	require.True(t, slash.IsPositive())
	bond0 := bond("storage1")
	lostPiece, err := os.ReadFile(lost.pieceFile)
	require.NoError(t, err)
	require.NoError(t, os.Remove(lost.pieceFile))

	sawFirstMiss := false
	// Every round is one challenge period, and the replica misses each: it is
	// terminated after max_consecutive_misses (2) of them, so six rounds leave
	// room to spare and a seventh means termination never came.
	for round := 1; ; round++ {
		if round > 6 {
			t.Fatalf("replica %s still not terminated after %d periods without answers: %+v", lost.id, round-1, replica(lost.id))
		}
		answer([]*heldReplica{parity, other})
		rep := replica(lost.id)
		if rep.Status == "REPLICA_STATUS_TERMINATED" {
			break
		}
		require.Equal(t, "REPLICA_STATUS_ACTIVE", rep.Status)
		if rep.TotalMisses == 1 {
			sawFirstMiss = true
			require.EqualValues(t, 1, rep.ConsecutiveMisses)
			require.True(t, bond0.Sub(slash).Equal(bond("storage1")), "bond %s after one miss, want %s - %s", bond("storage1"), bond0, slash)
		}
	}
	for _, r := range []*heldReplica{parity, other} {
		require.Zero(t, replica(r.id).TotalMisses, "replica %s, still answered, missed a deadline", r.id)
	}
	lostRep = replica(lost.id)
	require.Equal(t, "TERMINATION_REASON_MISSED_DEADLINES", lostRep.TerminationReason)
	require.EqualValues(t, 2, lostRep.TotalMisses)
	require.Positive(t, int64(lostRep.TerminatedHeight))
	got := bond("storage1")
	require.True(t, bond0.Sub(slash.MulRaw(2)).Equal(got), "bond %s after two misses, want %s - 2×%s", got, bond0, slash)
	t.Logf("replica %s terminated at height %d after 2 misses; storage1's bond %s -> %s (saw the first miss: %v)",
		lost.id, lostRep.TerminatedHeight, bond0, got, sawFirstMiss)
	// The collateral is unlocked after the slash: storage1 has no lock left.
	var locks struct {
		Locks []json.RawMessage `json:"locks"`
	}
	rest(&locks, "/depinchain/stakingext/v1/providers/"+addr["storage1"]+"/locks")
	require.Empty(t, locks.Locks)

	// Over REST: shard 0 is under-replicated (one of two pieces live, still recoverable)
	// and its data piece is a repair slot.
	type health struct {
		DatasetID   string `json:"dataset_id"`
		Shard       num    `json:"shard"`
		Live        num    `json:"live"`
		Target      num    `json:"target"`
		MinLive     num    `json:"min_live"`
		Recoverable bool   `json:"recoverable"`
	}
	underReplicated := func() map[int64]health {
		var res struct {
			Shards []health `json:"shards"`
		}
		rest(&res, "/depinchain/shardregistry/v1/under_replicated_shards?dataset_id=e2e-corpus")
		byShard := map[int64]health{}
		for _, h := range res.Shards {
			byShard[int64(h.Shard)] = h
		}
		return byShard
	}
	type slot struct {
		DatasetID string `json:"dataset_id"`
		Shard     num    `json:"shard"`
		Piece     struct {
			Piece struct {
				Index num `json:"index"`
			} `json:"piece"`
			Cid             string `json:"cid"`
			LiveHolders     num    `json:"live_holders"`
			RequiredHolders num    `json:"required_holders"`
		} `json:"piece"`
	}
	repairSlots := func() map[[2]int64]slot {
		var res struct {
			Slots []slot `json:"slots"`
		}
		rest(&res, "/depinchain/shardregistry/v1/repair_slots?dataset_id=e2e-corpus")
		byPiece := map[[2]int64]slot{}
		for _, s := range res.Slots {
			byPiece[[2]int64{int64(s.Shard), int64(s.Piece.Piece.Index)}] = s
		}
		return byPiece
	}
	h, ok := underReplicated()[0]
	require.True(t, ok, "shard 0 is not listed as under-replicated")
	require.Equal(t, health{DatasetID: "e2e-corpus", Shard: 0, Live: 1, Target: 2, MinLive: 1, Recoverable: true}, h)
	s, ok := repairSlots()[[2]int64{0, 0}]
	require.True(t, ok, "shard 0 piece 0 is not listed as a repair slot")
	require.Equal(t, m.Shards[0].Pieces[0].CID, s.Piece.Cid)
	require.EqualValues(t, 0, s.Piece.LiveHolders)
	require.EqualValues(t, 1, s.Piece.RequiredHolders)
	_, ok = repairSlots()[[2]int64{0, 1}]
	require.False(t, ok, "shard 0's parity piece is held")

	// storage2 repairs it: it rebuilds shard 0 from the pieces left (the parity piece)
	// with `depinchaind dataset rebuild`, which under 1+1 is exactly the data piece, and
	// claims the open slot with it.
	rebuilt := filepath.Join(dir, "s000000-p000.rebuilt")
	msg, err := node.Exec(ctx, "dataset", "rebuild", "--manifest", manifestPath, "--shard", "0", "--out", rebuilt)
	require.NoError(t, err)
	require.Contains(t, msg, "rebuilt shard 0")
	rebuiltBytes, err := os.ReadFile(rebuilt)
	require.NoError(t, err)
	require.True(t, bytes.Equal(lostPiece, rebuiltBytes), "the rebuilt shard is not the lost data piece")
	repairRes := claim("storage2", 0, 0, rebuilt)
	_, ok = repairRes.Attr("depinchain.shardregistry.v1.EventShardFullyReplicated", "dataset_id")
	require.True(t, ok, "the repair did not make shard 0 fully replicated")
	repaired := &heldReplica{id: replicaID(repairRes), holder: "storage2", pieceFile: rebuilt}
	require.Equal(t, "REPLICA_STATUS_ACTIVE", replica(repaired.id).Status)

	_, ok = underReplicated()[0]
	require.False(t, ok, "shard 0 is still under-replicated after the repair")
	_, ok = repairSlots()[[2]int64{0, 0}]
	require.False(t, ok, "shard 0 piece 0 is still a repair slot after the repair")
	var shard struct {
		Shard struct {
			Pieces []struct {
				Cid         string `json:"cid"`
				LiveHolders num    `json:"live_holders"`
			} `json:"pieces"`
			Live   num `json:"live"`
			Target num `json:"target"`
		} `json:"shard"`
	}
	rest(&shard, "/depinchain/shardregistry/v1/datasets/e2e-corpus/shards/0")
	require.Len(t, shard.Shard.Pieces, 2)
	require.Equal(t, m.Shards[0].Pieces[0].CID, shard.Shard.Pieces[0].Cid)
	require.EqualValues(t, 1, shard.Shard.Pieces[0].LiveHolders)
	require.EqualValues(t, 2, shard.Shard.Live)
	require.EqualValues(t, 2, shard.Shard.Target)

	// The repaired replica owes the next period's challenge like any other.
	answer([]*heldReplica{repaired})
	require.EqualValues(t, 2, replica(repaired.id).ProofsAccepted)
}
