package main_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	banktypes "github.com/cosmos/cosmos-sdk/x/bank/types"

	"github.com/depinchain/depinchain/provider/checkpoint"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/trainer"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// The attacks of issue 14 with real processes: a real depinchaind, the attacking
// provider's real sidecar, and an honest auditor that is a real sidecar in audit mode.

// auditedJobYAML is the reference job of the other tests with one auditor per checkpoint.
const auditedJobYAML = referenceJobYAML + "audit: {auditors: 1}\n"

// auditorConfig makes a sidecar an auditor with no GPUs that does not sample.
func auditorConfig(registerBond string) map[string]string {
	return map[string]string{
		"audits.enabled": "true", "audits.register_bond": strconv.Quote(registerBond), "gpus.source": `"none"`,
	}
}

// adversaryNet is a chain with a misbehaving provider and an honest auditor, each a
// real depinprovider process, and accounts the attacker controls.
type adversaryNet struct {
	*world
	attacker, auditor *sidecar.Provider
	providers         stakingexttypes.QueryClient
	bank              banktypes.QueryClient
}

func newAdversaryNet(t *testing.T, timeout time.Duration, verifyParams map[string]string, attackerArgs []string, shams int) *adversaryNet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real node and two real sidecars")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	accounts := map[string]int64{
		"owner": 1_000_000_000_000, "attacker": 1_000_000_000_000, "attacker-hot": 1_000_000_000,
		"auditor": 1_000_000_000_000, "auditor-hot": 1_000_000_000,
	}
	for i := 0; i < shams; i++ {
		accounts[fmt.Sprintf("sham-%d", i)] = 100_000_000
	}
	node, err := localnet.Start(ctx, localnet.Options{
		Home: filepath.Join(t.TempDir(), "chain"), Accounts: accounts,
		Genesis: func(app map[string]any) error {
			params := app["verify"].(map[string]any)["params"].(map[string]any)
			for k, v := range verifyParams {
				params[k] = v
			}
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
	n := &adversaryNet{
		world:     &world{t: t, ctx: ctx, node: node, market: markettypes.NewQueryClient(conn), verify: verifytypes.NewQueryClient(conn)},
		providers: stakingexttypes.NewQueryClient(conn), bank: banktypes.NewQueryClient(conn),
	}
	setup := func(name string, opts sidecar.Options) *sidecar.Provider {
		opts.Home, opts.Operator, opts.HotKey = filepath.Join(t.TempDir(), name), name, name+"-hot"
		if testing.Verbose() {
			opts.Log = prefixWriter{os.Stderr, "    " + name + "| "}
		}
		p, err := sidecar.Setup(ctx, node, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	n.attacker = setup("attacker", sidecar.Options{Bond: "100000000000udepin", Prices: map[string]uint64{"H100-SXM5-80GB": 1_000_000},
		StartArgs: attackerArgs})
	n.auditor = setup("auditor", sidecar.Options{Prices: map[string]uint64{}, Set: auditorConfig("100000000udepin")})
	n.provider = n.attacker
	return n
}

func (n *adversaryNet) balance(addr string) int64 {
	n.t.Helper()
	res, err := n.bank.Balance(n.ctx, &banktypes.QueryBalanceRequest{Address: addr, Denom: "udepin"})
	if err != nil {
		n.t.Fatal(err)
	}
	return res.Balance.Amount.Int64()
}

func (n *adversaryNet) checkpoint(leaseID, index uint64) (verifytypes.Checkpoint, bool) {
	res, err := n.verify.Checkpoint(n.ctx, &verifytypes.QueryCheckpointRequest{LeaseId: leaseID, Index: index})
	if err != nil {
		return verifytypes.Checkpoint{}, false
	}
	return res.Checkpoint, true
}

// committedTrace reads the trace the attacker's sidecar committed for a checkpoint
// ending at endStep: what its sham challengers agree with.
func (n *adversaryNet) committedTrace(endStep uint64) []string {
	n.t.Helper()
	var found string
	_ = filepath.WalkDir(n.attacker.Home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == checkpoint.CommittedTraceFileName &&
			filepath.Base(filepath.Dir(path)) == trainer.CheckpointDirPrefix+strconv.FormatUint(endStep, 10) {
			found = path
		}
		return nil
	})
	if found == "" {
		n.t.Fatalf("no %s for step %d under %s", checkpoint.CommittedTraceFileName, endStep, n.attacker.Home)
	}
	raw, err := os.ReadFile(found)
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.Fields(string(raw))
}

func (n *adversaryNet) tx(from string, args ...string) localnet.TxResult {
	n.t.Helper()
	res, err := n.node.Tx(n.ctx, from, args...)
	if err != nil || res.Code != 0 {
		n.t.Fatalf("tx %v from %s: %v %s", args, from, err, res.RawLog)
	}
	return res
}

// The squatting attack: a cheating provider fabricates its third checkpoint and eight
// accounts of its own challenge it first, each with the cheater's own trace (they
// disagree only on the final hash, so every bisection lands on steps the cheater
// committed). Then the honest auditor x/verify drew for the checkpoint (a real sidecar
// in audit mode, started only now) re-executes it, challenges — accepted though eight
// games are open — and convicts the cheater. The sham games end moot (claimed at once:
// their checkpoint is rejected) and return their bonds: the shams end where they
// started, the cheater loses half its bond, tombstoned; the auditor is paid its fee and
// the reward; the owner gets its pay back and the compensation.
func TestSquattingAttackWithRealSidecars(t *testing.T) {
	const shams = 8
	n := newAdversaryNet(t, 9*time.Minute, map[string]string{"challenge_window": "120", "move_timeout": "400"},
		[]string{"--cheat-fabricate-from-step", "40"}, shams)
	ctx := n.ctx
	shamAddrs := make([]string, shams)
	shamBefore := map[string]int64{}
	for i := range shamAddrs {
		a, err := n.node.Address(ctx, fmt.Sprintf("sham-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		shamAddrs[i] = a
		shamBefore[shamAddrs[i]] = n.balance(shamAddrs[i])
	}
	// The auditor joins the audit set now; its sidecar starts later.
	n.tx("auditor", "stakingext", "register-verifier", "100000000udepin")
	if err := n.attacker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	jobID := n.submitJob(auditedJobYAML, "500000000udepin")
	var lease markettypes.Lease
	n.eventually("the attacker's lease", 3*time.Minute, func() bool {
		ls := n.leasesOf(jobID)
		if len(ls) == 0 {
			return false
		}
		lease = ls[0]
		return true
	})
	var cp verifytypes.Checkpoint
	n.eventually("the fabricated checkpoint (steps 32..48) to be committed and audited", 3*time.Minute, func() bool {
		c, ok := n.checkpoint(lease.Id, 2)
		cp = c
		return ok && c.AuditDrawn
	})
	if cp.Auditors != 1 {
		t.Fatalf("checkpoint 2 drew %d auditors, want the one registered verifier", cp.Auditors)
	}
	audits, err := n.verify.Audits(ctx, &verifytypes.QueryAuditsRequest{LeaseId: lease.Id, CheckpointIndex: 2})
	if err != nil || len(audits.Audits) != 1 || audits.Audits[0].Auditor != n.auditor.Operator {
		t.Fatalf("audits of checkpoint 2: %+v (%v)", audits, err)
	}
	attackerBond := n.provider0Bond()

	// The squatters: the cheater's own trace with a different final hash.
	hashes := n.committedTrace(cp.EndStep)
	if len(hashes) != int(cp.EndStep-cp.StartStep+1) {
		t.Fatalf("committed trace of %d hashes for steps %d..%d", len(hashes), cp.StartStep, cp.EndStep)
	}
	last := []byte(hashes[len(hashes)-1])
	if last[0] == '0' {
		last[0] = '1'
	} else {
		last[0] = '0'
	}
	sham := append(append([]string{}, hashes[:len(hashes)-1]...), string(last))
	shamTrace := filepath.Join(t.TempDir(), "sham.txt")
	if err := os.WriteFile(shamTrace, []byte(strings.Join(sham, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var shamIDs []string
	for i := 0; i < shams; i++ {
		res := n.tx(fmt.Sprintf("sham-%d", i), "verify", "challenge", fmt.Sprint(lease.Id), "2", "--trace", shamTrace)
		id, ok := res.Attr("depinchain.verify.v1.EventChallengeOpened", "challenge_id")
		if !ok {
			t.Fatalf("no EventChallengeOpened in %+v", res.Events)
		}
		shamIDs = append(shamIDs, strings.Trim(id, `"`))
	}
	open, err := n.verify.Challenges(ctx, &verifytypes.QueryChallengesRequest{LeaseId: lease.Id, CheckpointIndex: 2, OpenOnly: true})
	if err != nil || len(open.Challenges) != shams {
		t.Fatalf("open challenges before the honest auditor: %d (%v), want %d", len(open.Challenges), err, shams)
	}
	if h, _ := n.node.Height(ctx); h > cp.ChallengeDeadline {
		t.Fatalf("the shams took the whole window (height %d, deadline %d): widen it", h, cp.ChallengeDeadline)
	}

	// The honest auditor comes ninth.
	auditorBefore := n.balance(n.auditor.Operator)
	if err := n.auditor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var honest verifytypes.Challenge
	n.eventually("the auditor's challenge to be decided", 3*time.Minute, func() bool {
		res, err := n.verify.Challenges(ctx, &verifytypes.QueryChallengesRequest{LeaseId: lease.Id, CheckpointIndex: 2})
		if err != nil {
			return false
		}
		for _, ch := range res.Challenges {
			if ch.Challenger == n.auditor.Operator {
				honest = ch
				return ch.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED
			}
		}
		return false
	})
	if honest.Outcome != verifytypes.CHALLENGE_OUTCOME_CHALLENGER_WON || honest.Lo != cheatStep-1 {
		t.Fatalf("the auditor's game: %+v", honest)
	}
	if c, _ := n.checkpoint(lease.Id, 2); c.Status != verifytypes.CHECKPOINT_STATUS_REJECTED {
		t.Fatalf("checkpoint 2 is %s", c.Status)
	}
	prov, err := n.providers.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: n.attacker.Operator})
	if err != nil {
		t.Fatal(err)
	}
	if prov.Provider.Status != stakingexttypes.PROVIDER_STATUS_TOMBSTONED || prov.Provider.Bond.Amount.Int64() > attackerBond/2+1 {
		t.Fatalf("the cheater after conviction: %s with bond %s (was %d)", prov.Provider.Status, prov.Provider.Bond, attackerBond)
	}

	// The sham games end moot now (anyone may claim it: their checkpoint is rejected),
	// and each sham gets its bond back, no more.
	for _, id := range shamIDs {
		res := n.tx("owner", "verify", "claim-timeout", id)
		if outcome, _ := res.Attr("depinchain.verify.v1.EventChallengeResolved", "outcome"); !strings.Contains(outcome, "MOOT") {
			t.Fatalf("sham game %s ended %s", id, outcome)
		}
	}
	for _, a := range shamAddrs {
		if got := n.balance(a); got != shamBefore[a] {
			t.Errorf("sham %s: balance %d, started with %d: a sham must not profit (nor, once moot, lose)", a, got, shamBefore[a])
		}
	}
	// The auditor: its bond back, the whistleblower reward, and its audit fee.
	n.eventually("the auditor's fee to be settled", 3*time.Minute, func() bool {
		res, err := n.verify.Audits(ctx, &verifytypes.QueryAuditsRequest{LeaseId: lease.Id, CheckpointIndex: 2})
		return err == nil && len(res.Audits) == 1 && res.Audits[0].Settled
	})
	if after := n.balance(n.auditor.Operator); after <= auditorBefore {
		t.Fatalf("auditor balance %d → %d: want its bond back plus the reward and the fee", auditorBefore, after)
	}
	job := n.job(jobID)
	if !job.Compensation.IsPositive() {
		t.Fatalf("the owner was not compensated: %+v", job.Compensation)
	}

	// The auditor's status API shows what it did.
	var st struct {
		Enabled    bool   `json:"enabled"`
		Challenged string `json:"challenged"`
		Earned     string `json:"earned"`
		Audits     []struct {
			Index   string `json:"index"`
			Status  string `json:"status"`
			Settled bool   `json:"settled"`
		} `json:"audits"`
	}
	if err := n.auditor.REST(ctx, "/v1/audits", &st); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, a := range st.Audits {
		statuses[a.Index] = a.Status
	}
	if !st.Enabled || statuses["2"] != "challenged" || statuses["0"] != "attested" || statuses["1"] != "attested" || st.Earned == "" {
		t.Errorf("/v1/audits: %+v", st)
	}
	var metrics string
	if err := n.auditor.REST(ctx, "/metrics", &metrics); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `depinprovider_audit_answers_total{answer="attested"}`) {
		t.Errorf("auditor metrics lack depinprovider_audit_answers_total{answer=\"attested\"}")
	}
	// The fabricated checkpoint's challenge, and perhaps one of checkpoint 3,
	// which starts from the cheater's made-up state on chain (moot once the
	// first game closes the lease).
	if !strings.Contains(metrics, `depinprovider_audit_answers_total{answer="challenged"} 1`) &&
		!strings.Contains(metrics, `depinprovider_audit_answers_total{answer="challenged"} 2`) {
		t.Errorf("auditor metrics: want 1 or 2 challenged answers:\n%s", metrics)
	}
}

func (n *adversaryNet) provider0Bond() int64 {
	n.t.Helper()
	res, err := n.providers.Provider(n.ctx, &stakingexttypes.QueryProviderRequest{Operator: n.attacker.Operator})
	if err != nil {
		n.t.Fatal(err)
	}
	return res.Provider.Bond.Amount.Int64()
}

// A provider that withholds the states its checkpoints start from: its real sidecar
// trains and commits, but its checkpoint server refuses state downloads. The honest
// auditor (a real sidecar, registering itself as a verifier at start) attests to the
// lease's first checkpoint (it starts from the initial model). It is restarted before
// the second, so it no longer has the state it computed itself (an auditor that was
// not drawn for the previous checkpoint is in the same place) and must fetch it from
// the provider: it reports it unavailable. At the end of the window the second
// checkpoint is WITHHELD, and the lease is closed for non-performance: the provider
// slashed and jailed, its pending pay back in the escrow.
func TestWithholdingProviderIsReportedByItsAuditor(t *testing.T) {
	n := newAdversaryNet(t, 8*time.Minute, map[string]string{"challenge_window": "30", "move_timeout": "20"},
		[]string{"--cheat-withhold-state"}, 0)
	ctx := n.ctx
	if err := n.auditor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n.eventually("the auditor to register as a verifier", 3*time.Minute, func() bool {
		res, err := n.providers.Verifier(ctx, &stakingexttypes.QueryVerifierRequest{Operator: n.auditor.Operator})
		return err == nil && res.Verifier.Status == stakingexttypes.VERIFIER_STATUS_ACTIVE
	})
	if err := n.attacker.StartWith(ctx, "--pause-before-checkpoint", "2"); err != nil {
		t.Fatal(err)
	}
	bond := n.provider0Bond()
	jobID := n.submitJob(auditedJobYAML, "500000000udepin")
	if err := n.attacker.WaitLog(ctx, daemon.PausedLogMsg); err != nil {
		t.Fatalf("waiting for the provider to pause before its second checkpoint: %v", err)
	}
	lease := n.leasesOf(jobID)[0]
	n.eventually("the auditor to attest to checkpoint 0", 3*time.Minute, func() bool {
		res, err := n.verify.Audits(ctx, &verifytypes.QueryAuditsRequest{LeaseId: lease.Id, CheckpointIndex: 0})
		return err == nil && len(res.Audits) == 1 && res.Audits[0].Status == verifytypes.AUDIT_STATUS_ATTESTED
	})
	n.auditor.Stop()
	if err := n.auditor.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n.attacker.Kill()
	if err := n.attacker.Start(ctx); err != nil {
		t.Fatal(err)
	}

	n.eventually("the lease to close", 3*time.Minute, func() bool {
		lease = n.leasesOf(jobID)[0]
		return lease.State == markettypes.LEASE_STATE_CLOSED
	})
	if lease.CloseReason != markettypes.LEASE_CLOSE_REASON_NON_PERFORMANCE {
		t.Fatalf("the lease closed %s, want non-performance", lease.CloseReason)
	}
	cp0, _ := n.checkpoint(lease.Id, 0)
	cp1, _ := n.checkpoint(lease.Id, 1)
	if cp0.Status != verifytypes.CHECKPOINT_STATUS_FINAL || cp1.Status != verifytypes.CHECKPOINT_STATUS_WITHHELD || cp1.UnavailableReports != 1 {
		t.Fatalf("checkpoints: 0 %s, 1 %s with %d reports", cp0.Status, cp1.Status, cp1.UnavailableReports)
	}
	prov, err := n.providers.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: n.attacker.Operator})
	if err != nil {
		t.Fatal(err)
	}
	if prov.Provider.Status != stakingexttypes.PROVIDER_STATUS_JAILED || prov.Provider.Bond.Amount.Int64() >= bond {
		t.Fatalf("the withholder: %s, bond %s (was %d)", prov.Provider.Status, prov.Provider.Bond, bond)
	}
	if paid := lease.Withdrawable.Add(lease.Withdrawn); !lease.Pending.IsZero() || !paid.IsPositive() {
		t.Fatalf("lease pay: pending %s (want it refunded), released %s (want checkpoint 0's pay)", lease.Pending, paid)
	}
	var st struct {
		Audits []struct {
			Index  string `json:"index"`
			Status string `json:"status"`
		} `json:"audits"`
		Reported string `json:"reported"`
	}
	if err := n.auditor.REST(ctx, "/v1/audits", &st); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, a := range st.Audits {
		statuses[a.Index] = a.Status
	}
	if statuses["0"] != "attested" || statuses["1"] != "reported" {
		t.Errorf("/v1/audits: %+v", st)
	}
}
