package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	sdkmath "cosmossdk.io/math"
	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/testutil/localnet"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	shardtypes "github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// attackJobYAML is custodyJobYAML with one checkpoint (16 steps) and a checkpoint
// deadline of 200 blocks, past the window and custody grace of attackNet's chain, so a
// checkpoint nobody holds is WITHHELD before the lease could miss a deadline.
var attackJobYAML = strings.NewReplacer("total_steps: 64", "total_steps: 16",
	"checkpoint_deadline_blocks: 40", "checkpoint_deadline_blocks: 200").Replace(custodyJobYAML)

// attackNet is a custodyNet whose t1 cheats, with job attackJobYAML submitted and leased
// by t1 (first), t2 started.
type attackNet struct {
	*custodyNet
	jobID uint64
	first markettypes.Lease
}

// newAttackNet starts a custodyNet whose t1 runs with the test hook cheat, x/verify's
// challenge window challengeWindow blocks and a custody grace of 40 blocks: 20 s for an
// honest trainer's holders to claim (they take 1–2 s), not longer, as a withheld
// checkpoint is punished only then. It submits attackJobYAML and waits for t1's lease.
func newAttackNet(t *testing.T, challengeWindow, cheat string) *attackNet {
	n := newCustodyNet(t, 8*time.Minute, custodyNetConfig{
		t1Args: []string{cheat},
		genesis: func(state map[string]any) {
			v := state["verify"].(map[string]any)["params"].(map[string]any)
			v["challenge_window"], v["custody_grace_blocks"] = challengeWindow, "40"
		},
	})
	a := &attackNet{custodyNet: n, jobID: n.submitJob(attackJobYAML, "500000000udepin")}
	a.first = n.firstLease(a.jobID)
	return a
}

// checkFirstLeaseClosed checks that t1's lease was closed for reason.
func (n *attackNet) checkFirstLeaseClosed(reason markettypes.LeaseCloseReason) {
	n.tb.Helper()
	res, err := n.market.Lease(n.ctx, &markettypes.QueryLeaseRequest{LeaseId: n.first.Id})
	if err != nil {
		n.tb.Fatal(err)
	}
	if res.Lease.CloseReason != reason {
		n.tb.Fatalf("t1's lease closed %s, want %s", res.Lease.CloseReason, reason)
	}
}

// honestProviderCompletes waits until t2 leases the reopened job from step 0 and the
// job completes, its one checkpoint final with its state in custody, and checks that
// nobody but t1 lost bond since before.
func (n *attackNet) honestProviderCompletes(before map[string]sdkmath.Int) markettypes.Lease {
	second := n.secondLease(n.jobID, n.first.Id, 3*time.Minute)
	if second.Provider != n.sidecars["t2"].Operator || second.ResumeStep != 0 {
		n.tb.Fatalf("second lease %+v, want t2's from step 0 (no checkpoint of t1 was final)", second)
	}
	n.waitFor("the job completes", 4*time.Minute, func() bool {
		j, err := n.market.Job(n.ctx, &markettypes.QueryJobRequest{JobId: n.jobID})
		if err != nil {
			n.tb.Fatal(err)
		}
		return j.Job.State == markettypes.JOB_STATE_COMPLETED
	})
	cps := n.checkpoints(second.Id)
	if last := cps[len(cps)-1]; last.EndStep != 16 || last.Status != verifytypes.CHECKPOINT_STATUS_FINAL || last.CustodyId == "" {
		n.tb.Fatalf("t2's last checkpoint %+v", last)
	}
	after := n.bonds()
	for _, name := range custodyNetNames[1:] {
		if !after[name].Equal(before[name]) {
			n.tb.Errorf("%s is innocent, its bond went from %s to %s", name, before[name], after[name])
		}
	}
	return second
}

// TestTrainerWithholdingCustodyPiecesIsSlashed: t1 trains and commits its checkpoint
// with the roots of its custody pieces but serves none of them (its public server
// refuses its custody folder). No holder can claim a piece, so the checkpoint never
// becomes final; at its custody deadline it is WITHHELD, t1's lease is closed for
// non-performance, its bond slashed by exactly non_performance_slash_fraction and it is
// jailed. The job reopens from scratch, honest t2 trains it with its states held and
// completes it; nobody else lost bond. t2's own checkpoint server then serves its state
// only to signed requests of the parties the chain names: unsigned 401, an unbonded
// key 403, the owner the state that verifies against the chain.
func TestTrainerWithholdingCustodyPiecesIsSlashed(t *testing.T) {
	n := newAttackNet(t, "10", "--cheat-withhold-custody-pieces")
	before := n.bonds()
	mp, err := n.market.Params(n.ctx, &markettypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var cp0 verifytypes.Checkpoint
	n.waitFor("t1's checkpoint is withheld", 3*time.Minute, func() bool {
		cps := n.checkpoints(n.first.Id)
		if len(cps) > 0 {
			cp0 = cps[0]
			if cp0.Status == verifytypes.CHECKPOINT_STATUS_FINAL {
				t.Fatal("a checkpoint whose pieces nobody could get became final")
			}
		}
		return len(cps) > 0 && cp0.Status == verifytypes.CHECKPOINT_STATUS_WITHHELD
	})
	sh, err := n.shards.Shard(n.ctx, &shardtypes.QueryShardRequest{DatasetId: cp0.CustodyId, Index: 0})
	if err == nil && sh.Shard.Live != 0 {
		t.Fatalf("%d pieces of a state its trainer never served are held", sh.Shard.Live)
	}
	n.checkFirstLeaseClosed(markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE)
	t1 := n.provider("t1")
	slash := mp.Params.NonPerformanceSlashFraction.MulInt(before["t1"]).TruncateInt()
	if !slash.IsPositive() || !t1.Bond.Amount.Equal(before["t1"].Sub(slash)) {
		t.Fatalf("t1's bond %s → %s, want %s less (non_performance_slash_fraction %s)", before["t1"], t1.Bond.Amount, slash, mp.Params.NonPerformanceSlashFraction)
	}
	if t1.Status != stakingexttypes.PROVIDER_STATUS_JAILED {
		t.Fatalf("t1 is %s, want jailed", t1.Status)
	}

	second := n.honestProviderCompletes(before)

	// The honest trainer's checkpoint server: its state only to signed readers.
	cp := n.checkpoints(second.Id)[0]
	base, ref, err := checkpoint.ParseURI(cp.Uri)
	if err != nil {
		t.Fatal(err)
	}
	stateURL := checkpoint.URI(base, ref) + "/state"
	if code, body := signedGet(t, n.ctx, stateURL, nil); code != http.StatusUnauthorized || !strings.Contains(body, "not signed") {
		t.Fatalf("an unsigned request for a checkpoint state: %d %s", code, body)
	}
	if code, body := signedGet(t, n.ctx, stateURL, strangerSigner(n.node.ChainID)); code != http.StatusForbidden || !strings.Contains(body, "neither the job's owner nor bonded") {
		t.Fatalf("a checkpoint state requested by an unbonded key: %d %s", code, body)
	}
	asOwner, err := n.node.RequestSigner("owner")
	if err != nil {
		t.Fatal(err)
	}
	c := checkpoint.Client{BaseURL: base, Authorize: asOwner}
	com, err := c.DownloadState(n.ctx, ref, merkle.Hash(cp.StateRoot), filepath.Join(t.TempDir(), "state"), 64<<20)
	if err != nil {
		t.Fatalf("the owner's signed download of the state: %v", err)
	}
	t.Logf("the owner downloaded t2's state (%d bytes, root verified); t1's bond %s → %s", com.Size, before["t1"], t1.Bond.Amount)
}

// TestTrainerGarbageParityIsConvicted: t1 commits its checkpoint with custody roots whose
// parity piece is garbage (not the Reed-Solomon parity of its state) and serves that
// garbage, which matches its root. The holder that takes the parity piece checks it
// against the state the data pieces rebuild, finds it wrong and proves it
// (MsgProveParityFault) while the checkpoint is pending: the checkpoint is REJECTED,
// t1's lease closed for fraud, t1 tombstoned and its bond slashed by exactly
// fraud_slash_fraction, the prover paid exactly whistleblower_share of the slash (its
// balance over that block: the reward less its fees). The job reopens from scratch and
// honest t2 completes it; nobody else lost bond.
func TestTrainerGarbageParityIsConvicted(t *testing.T) {
	// A 40-block window: the parity holder proves the fault seconds after the
	// checkpoint is registered, long before the window would let it become final.
	n := newAttackNet(t, "40", "--cheat-garbage-parity")
	before := n.bonds()
	vp, err := n.verify.Params(n.ctx, &verifytypes.QueryParamsRequest{})
	if err != nil {
		t.Fatal(err)
	}

	var proof txSearchResult
	n.waitFor("a holder proves t1's parity fault", 3*time.Minute, func() bool {
		var ok bool
		proof, ok = acceptedTx(n.ctx, n.node, "/depinchain.verify.v1.MsgProveParityFault")
		return ok
	})
	ev := proof.event(t, "depinchain.verify.v1.EventParityFaultProven")
	cps := n.checkpoints(n.first.Id)
	if len(cps) != 1 || cps[0].Status != verifytypes.CHECKPOINT_STATUS_REJECTED || !cps[0].ParityFaultProven {
		t.Fatalf("t1's checkpoints after the proof: %+v", cps)
	}
	if ev["trainer"] != n.sidecars["t1"].Operator || ev["was_final"] == "true" || ev["lease_id"] != fmt.Sprint(n.first.Id) {
		t.Fatalf("EventParityFaultProven %v", ev)
	}
	prover := ""
	for _, h := range []string{"h1", "h2", "h3"} {
		if n.sidecars[h].Operator == ev["prover"] {
			prover = h
		}
	}
	if prover == "" {
		t.Fatalf("the prover %s is not a holder", ev["prover"])
	}
	n.checkFirstLeaseClosed(markettypes.LEASE_CLOSE_REASON_FRAUD)

	// Exact money: t1's bond, the event's slash and reward, the prover's balance.
	t1 := n.provider("t1")
	slash := vp.Params.FraudSlashFraction.MulInt(before["t1"]).TruncateInt()
	if t1.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED || !t1.Bond.Amount.Equal(before["t1"].Sub(slash)) {
		t.Fatalf("t1 %s with bond %s → %s, want tombstoned and %s less", t1.Status, before["t1"], t1.Bond.Amount, slash)
	}
	reward := vp.Params.WhistleblowerShare.MulInt(slash).TruncateInt()
	if got := coinAmount(t, ev["slashed"]); !got.Equal(slash) {
		t.Fatalf("the event's slash %s, want %s", got, slash)
	}
	if got := coinAmount(t, ev["reward"]); !reward.IsPositive() || !got.Equal(reward) {
		t.Fatalf("the event's reward %s, want %s", got, reward)
	}
	balanceAt := func(addr string, height int64) sdkmath.Int {
		ctx := metadata.AppendToOutgoingContext(n.ctx, "x-cosmos-block-height", fmt.Sprint(height))
		res, err := n.bank.Balance(ctx, &banktypes.QueryBalanceRequest{Address: addr, Denom: "udepin"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Balance.Amount
	}
	proverAddr := n.sidecars[prover].Operator
	fees := sdkmath.ZeroInt()
	var inBlock struct {
		Txs []txSearchResult `json:"txs"`
	}
	if err := n.node.Query(n.ctx, &inBlock, "txs", "--query", fmt.Sprintf("tx.height=%d AND message.sender='%s'", proof.height(t), proverAddr), "--node", n.node.RPC); err != nil {
		t.Fatal(err)
	}
	for _, tx := range inBlock.Txs {
		fees = fees.Add(coinAmount(t, tx.event(t, "tx")["fee"]))
	}
	h := proof.height(t)
	if delta := balanceAt(proverAddr, h).Sub(balanceAt(proverAddr, h-1)); !delta.Equal(reward.Sub(fees)) {
		t.Fatalf("the prover's balance changed by %s in block %d, want the reward %s less its fees %s", delta, h, reward, fees)
	}

	n.honestProviderCompletes(before)
	t.Logf("t1's bond %s → %s; %s paid %s for the proof", before["t1"], t1.Bond.Amount, prover, reward)
}

// txSearchResult is one transaction of `depinchaind query txs`.
type txSearchResult struct {
	Height string           `json:"height"`
	Code   uint32           `json:"code"`
	Events []localnet.Event `json:"events"`
}

// acceptedTx returns the first transaction the chain accepted with a message of action
// (a Msg type URL); false if there is none yet or the node did not answer.
func acceptedTx(ctx context.Context, node *localnet.Node, action string) (txSearchResult, bool) {
	txs := acceptedTxs(ctx, node, action)
	if len(txs) == 0 {
		return txSearchResult{}, false
	}
	return txs[0], true
}

// acceptedTxs are the transactions with a message of type action that the chain
// executed without error (none when the search fails).
func acceptedTxs(ctx context.Context, node *localnet.Node, action string) []txSearchResult {
	var out struct {
		Txs []txSearchResult `json:"txs"`
	}
	if err := node.Query(ctx, &out, "txs", "--query", fmt.Sprintf("message.action='%s'", action), "--node", node.RPC); err != nil {
		return nil
	}
	var accepted []txSearchResult
	for _, tx := range out.Txs {
		if tx.Code == 0 {
			accepted = append(accepted, tx)
		}
	}
	return accepted
}

func (r txSearchResult) height(t *testing.T) int64 {
	var h int64
	if _, err := fmt.Sscan(r.Height, &h); err != nil {
		t.Fatalf("height %q: %v", r.Height, err)
	}
	return h
}

// event is the first event of type typ, its attributes unquoted.
func (r txSearchResult) event(t *testing.T, typ string) map[string]string {
	t.Helper()
	for _, e := range r.Events {
		if e.Type != typ {
			continue
		}
		out := map[string]string{}
		for _, a := range e.Attributes {
			var s string
			if json.Unmarshal([]byte(a.Value), &s) == nil {
				out[a.Key] = s
			} else {
				out[a.Key] = a.Value
			}
		}
		return out
	}
	t.Fatalf("no %s event in %+v", typ, r.Events)
	return nil
}

// coinAmount reads the udepin amount of a coin as events print it: a JSON coin
// ({"denom":…,"amount":…}) or text like 123udepin ("" is zero).
func coinAmount(t *testing.T, s string) sdkmath.Int {
	t.Helper()
	var c struct {
		Denom  string `json:"denom"`
		Amount string `json:"amount"`
	}
	if json.Unmarshal([]byte(s), &c) == nil {
		s = c.Amount + c.Denom
	}
	if s == "" {
		return sdkmath.ZeroInt()
	}
	amount, ok := sdkmath.NewIntFromString(strings.TrimSuffix(s, "udepin"))
	if !ok {
		t.Fatalf("coin %q", s)
	}
	return amount
}
