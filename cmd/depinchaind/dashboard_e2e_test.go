package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmath "cosmossdk.io/math"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depinchain/depinchain/cmd/depinchaind/jobview"
	"github.com/depinchain/depinchain/provider/daemon"
	"github.com/depinchain/depinchain/provider/trainer"
	"github.com/depinchain/depinchain/testutil/browser"
	"github.com/depinchain/depinchain/testutil/localnet"
	"github.com/depinchain/depinchain/testutil/localnet/sidecar"
	markettypes "github.com/depinchain/depinchain/x/market/types"
	verifytypes "github.com/depinchain/depinchain/x/verify/types"
)

// dashboardJobYAML is the reference workload (the exact transformer): 48
// steps, a checkpoint every 16.
const dashboardJobYAML = `name: dashboard-lm
gpu:
  models: [H100-SXM5-80GB]
  min_vram_gib: 80
  per_worker: 1
workload:
  kind: reference
total_steps: 48
checkpoint_every: 16
max_price_per_gpu_hour: 3000000udepin
max_duration: 2h
bidding_window_blocks: 4
`

// TestDashboardInABrowser: a real node, a real sidecar, the real
// `depinchaind dashboard` and headless Chromium. The empty job list; a
// transformer job whose page gains checkpoints and dispute moves without a
// reload and ends with the right steps, money and one verified loss point
// per checkpoint; a dispute in progress on it (another account challenges
// its first checkpoint); a job that fails, whose page, open before the job
// exists, shows the sidecar's bid while its auction is open and then the bid
// that won its lease, without a reload; the provider and network pages;
// `job status` as JSON and as a table. Screenshots of each page go to the
// artifact dir.
//
// Nothing waits on timing: the sidecar stops right before it submits its
// second checkpoint (a test hook) and is restarted from there, so the page
// holds exactly one checkpoint before the restart and must gain the others
// live; the challenge goes in while that checkpoint is pending.
func TestDashboardInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node, sidecar, dashboard and browser")
	}
	chrome := browser.Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	node, err := localnet.Start(ctx, localnet.Options{
		Home:     filepath.Join(t.TempDir(), "chain"),
		Accounts: map[string]int64{"owner": 1_000_000_000_000, "operator": 1_000_000_000_000, "hot": 1_000_000_000, "stranger": 1_000_000_000},
		Genesis: func(app map[string]any) error {
			params := app["verify"].(map[string]any)["params"].(map[string]any)
			// Wide enough that the test can challenge checkpoint 1 from the
			// moment the sidecar pauses; a dispute move waits 20 blocks.
			params["challenge_window"] = "40"
			params["move_timeout"] = "20"
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	prov, err := sidecar.Setup(ctx, node, sidecar.Options{Home: filepath.Join(t.TempDir(), "provider"),
		Operator: "operator", HotKey: "hot", Bond: "100000000000udepin", Prices: map[string]uint64{"H100-SXM5-80GB": 2_000_000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prov.Stop)
	conn, err := grpc.NewClient(node.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	market, verify := markettypes.NewQueryClient(conn), verifytypes.NewQueryClient(conn)

	// The dashboard, as an owner runs it.
	ports, err := localnet.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	dash := exec.CommandContext(ctx, node.Binary, "dashboard", "--listen", listen, "--grpc-addr", node.GRPC,
		"--rest-addr", node.API, "--poll", "500ms")
	stdout, err := dash.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dash.Stderr = os.Stderr
	if err := dash.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dash.Process.Kill(); _ = dash.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, "dashboard on http://"+listen) {
		t.Fatalf("dashboard said %q: %v", line, err)
	}
	base := "http://" + listen + "/"

	// The browser.
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	shots := browser.ArtifactDir(t)
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	// route moves the page to another of its routes, as a click on a link
	// does: the page is not reloaded.
	route := func(hash string) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.hash = `+strconv.Quote(hash))); err != nil {
			t.Fatal(err)
		}
	}
	// waitFor evaluates a JS expression until it is true.
	waitFor := func(what, expr string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](expr)); err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("#view")))
				where, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href + " mark " + window.loadMark + " " + document.getElementById('live').textContent`))
				t.Fatalf("%s: not within %s; the page at %s:\n%s", what, within, where, html)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	// 1. No jobs yet.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/jobs")); err != nil {
		t.Fatal(err)
	}
	if s := text("#jobs"); !strings.Contains(s, "No jobs yet.") {
		t.Fatalf("empty list says %q", s)
	}
	shot("01-no-jobs")

	// 2. A job trains; its page, opened before the first checkpoint, gains
	// checkpoints without a reload. The sidecar pauses before its second.
	jobID := submitJob(t, ctx, node, dashboardJobYAML, "500000000udepin")
	if err := prov.StartWith(ctx, "--pause-before-checkpoint", "2"); err != nil {
		t.Fatal(err)
	}
	route(fmt.Sprintf("#/job/%d", jobID))
	mark, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.loadMark = Math.random()`))
	if err != nil {
		t.Fatal(err)
	}
	// The owner follows the trainer's log from the terminal meanwhile.
	follow := exec.CommandContext(ctx, node.Binary, "job", "logs", fmt.Sprint(jobID), "--from", "owner", "--keyring-backend", "test",
		"--grpc-addr", node.GRPC, "--home", node.Home, "--follow", "--interval", "300ms")
	var followed, followErr syncBuffer
	follow.Stdout, follow.Stderr = &followed, &followErr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followDone := make(chan error, 1)
	go func() { followDone <- follow.Wait() }()
	if err := prov.WaitLog(ctx, daemon.PausedLogMsg); err != nil {
		t.Fatalf("waiting for the sidecar to pause before its second checkpoint: %v", err)
	}
	leases, err := market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases: %v %v", leases, err)
	}
	lease := leases.Leases[0]
	before, err := verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: lease.Id})
	if err != nil || len(before.Checkpoints) != 1 {
		t.Fatalf("checkpoints on chain when the sidecar paused before its second: %v %v, want 1", before, err)
	}
	waitFor("the first checkpoint row", `document.querySelectorAll('#checkpoints tbody tr').length === 1`, 30*time.Second)
	shot("02-job-training")
	// The follower has printed the trainer's lines up to that checkpoint.
	cp1 := before.Checkpoints[0]
	for !strings.Contains(followed.String(), fmt.Sprintf(" step %d/48 ", cp1.EndStep)) {
		if time.Now().After(start.Add(3 * time.Minute)) {
			t.Fatalf("job logs --follow printed no step %d: %q %s", cp1.EndStep, followed.String(), followErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// 3. A dispute: another account challenges checkpoint 1 with a trace of
	// its own while the checkpoint is pending.
	if h, err := node.Height(ctx); err != nil || h+5 >= cp1.ChallengeDeadline {
		t.Fatalf("at height %d (%v) checkpoint 1 is challengeable until %d only: widen challenge_window", h, err, cp1.ChallengeDeadline)
	}
	var made []string
	for step := cp1.StartStep; step <= cp1.EndStep; step++ {
		made = append(made, fmt.Sprintf("%064x", 0xd15c0000+step))
	}
	tracePath := filepath.Join(t.TempDir(), "challenger.trace")
	if err := os.WriteFile(tracePath, []byte(strings.Join(made, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := node.Tx(ctx, "stranger", "verify", "challenge", fmt.Sprint(lease.Id), fmt.Sprint(cp1.Index), "--trace", tracePath)
	if err != nil || res.Code != 0 {
		t.Fatalf("challenge: %v %s", err, res.RawLog)
	}
	idAttr, ok := res.Attr("depinchain.verify.v1.EventChallengeOpened", "challenge_id")
	if !ok {
		t.Fatalf("no EventChallengeOpened in %+v", res.Events)
	}
	challengeID, err := strconv.ParseUint(strings.Trim(idAttr, `"`), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The page shows the game as the chain has it: the phase, whose move
	// it waits for, the rounds played and the range of steps still in dispute.
	disputeRow := fmt.Sprintf(`#disputes tr[data-dispute="%d"]`, challengeID)
	short := func(a string) string { return a[:12] + "…" + a[len(a)-6:] }
	pageMatchesChain := func() (verifytypes.Challenge, bool) {
		ch, err := verify.Challenge(ctx, &verifytypes.QueryChallengeRequest{ChallengeId: challengeID})
		if err != nil {
			t.Fatal(err)
		}
		c := ch.Challenge
		phase, toMove := strings.TrimPrefix(c.Turn.String(), "GAME_TURN_"), "-"
		switch c.Turn {
		case verifytypes.GAME_TURN_PROVIDER:
			toMove = "provider " + short(c.Provider)
		case verifytypes.GAME_TURN_CHALLENGER, verifytypes.GAME_TURN_ONE_STEP:
			toMove = "challenger " + short(c.Challenger)
		}
		if c.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED {
			phase, toMove = strings.TrimPrefix(c.Outcome.String(), "CHALLENGE_OUTCOME_"), "-"
		}
		want := fmt.Sprintf(`%d|%d/%d|%s|%s|%d|%d–%d`, c.Id, c.LeaseId, c.CheckpointIndex, phase, toMove, c.Rounds, c.Lo, c.Hi)
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[...(document.querySelector('`+disputeRow+`')?.children ?? [])].slice(0, 6).map(td => td.textContent).join('|')`))
		return c, err == nil && got == want
	}
	waitForDispute := func(what string, cond func(verifytypes.Challenge) bool) verifytypes.Challenge {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if c, ok := pageMatchesChain(); ok && cond(c) {
				return c
			}
			if time.Now().After(deadline) {
				html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("#view")))
				t.Fatalf("%s: the page never showed it:\n%s", what, html)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	opened := waitForDispute("the challenge, open", func(c verifytypes.Challenge) bool { return c.Outcome == verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED })
	t.Logf("challenge %d open: turn %s, steps %d–%d, %d rounds", challengeID, opened.Turn, opened.Lo, opened.Hi, opened.Rounds)
	shot("07-dispute-open")

	// The sidecar restarts under the follower, which has lines already. Its
	// checkpoints after the first, never submitted, are lost with it (as
	// with a scratch disk), so the restarted sidecar resumes from the
	// chain's checkpoint 1 and its trainer writes more lines to the same
	// log: the follower must print them after the restart, and no line
	// twice. The restarted sidecar submits the checkpoints the chain lacks
	// (new rows without a reload) and keeps defending checkpoint 1; the
	// challenger never answers and loses by timeout, which the page shows.
	prov.Stop()
	outputDir := filepath.Join(prov.Home, "work", fmt.Sprintf("lease-%d", lease.Id), "output")
	for step := cp1.EndStep + 16; step <= 48; step += 16 {
		if err := os.RemoveAll(trainer.CheckpointDir(outputDir, step)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(outputDir, trainer.DoneMarkerName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	printedBefore := followed.String()
	if err := prov.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("a second checkpoint without reload", `document.querySelectorAll('#checkpoints tbody tr').length >= 2`, 60*time.Second)
	ended := waitForDispute("the challenger's timeout", func(c verifytypes.Challenge) bool { return c.Outcome != verifytypes.CHALLENGE_OUTCOME_UNSPECIFIED })
	t.Logf("challenge %d ended: %s (%s)", challengeID, ended.Outcome, ended.OutcomeReason)
	shot("08-dispute-decided")
	if same, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.loadMark`)); err != nil || same != mark {
		t.Fatalf("the page was reloaded (mark %v, now %v, %v)", mark, same, err)
	}
	waitFor("the job completed and every checkpoint final",
		`document.getElementById('job-state')?.textContent === 'COMPLETED' && [...document.querySelectorAll('#checkpoints tbody tr')].every(r => r.children[3].textContent === 'FINAL') && document.querySelector('[data-money="pending"] b').textContent.startsWith('0 ')`, 90*time.Second)

	// What the chain says, and what the page says.
	leases, err = market.Leases(ctx, &markettypes.QueryLeasesRequest{JobId: jobID})
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases: %v %v", leases, err)
	}
	cps, err := verify.Checkpoints(ctx, &verifytypes.QueryCheckpointsRequest{LeaseId: leases.Leases[0].Id})
	if err != nil || len(cps.Checkpoints) != 3 {
		t.Fatalf("checkpoints: %v %v", cps, err)
	}
	claimed := sdkmath.ZeroInt()
	for _, cp := range cps.Checkpoints {
		claimed = claimed.Add(cp.Claim.Amount)
	}
	esc, err := market.Escrow(ctx, &markettypes.QueryEscrowRequest{JobId: jobID})
	if err != nil {
		t.Fatal(err)
	}
	if s := text(`#workers tr[data-worker="0"] .steps`); s != "48/48" {
		t.Fatalf("worker 0 steps %q, want 48/48", s)
	}
	paid := esc.Withdrawable.Amount.Add(esc.Withdrawn.Amount)
	if !paid.Equal(claimed) || !paid.IsPositive() {
		t.Fatalf("chain: paid %s, claimed %s", paid, claimed)
	}
	if s := text(`[data-money="paid"] b`); s != paid.String()+" udepin" {
		t.Fatalf("page says paid %q, chain %s", s, paid)
	}
	if s := text(`[data-money="deposited"] b`); s != "500000000 udepin" {
		t.Fatalf("page says deposited %q", s)
	}
	if s := text(`[data-money="refunded"] b`); s != esc.Deposited.Amount.Sub(paid).Sub(esc.AuditFees.Amount).String()+" udepin" {
		t.Fatalf("page says refunded %q", s)
	}
	points, err := chromedp.Run(bctx, chromedp.Evaluate[int](`Chart.getChart('loss').data.datasets.reduce((a, d) => a + d.data.length, 0)`))
	if err != nil {
		t.Fatal(err)
	}
	verified, err := chromedp.Run(bctx, chromedp.Evaluate[int](`Chart.getChart('loss').data.datasets.reduce((a, d) => a + d.data.filter(p => p.source === 'verified').length, 0)`))
	if err != nil {
		t.Fatal(err)
	}
	if points != 3 || verified != 3 {
		t.Fatalf("the loss curve has %d points, %d verified; want one verified point per checkpoint (3)", points, verified)
	}
	shot("03-job-completed")

	// The follower stopped by itself when the job completed, having printed
	// every byte of the log once, across the restart.
	select {
	case err := <-followDone:
		if err != nil {
			t.Fatalf("job logs --follow: %v\n%s", err, followErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("job logs --follow did not end with the job")
	}
	onDisk := readLeaseLog(t, prov.Home, leases.Leases[0].Id)
	prefix := fmt.Sprintf("[lease %d worker 0] ", leases.Leases[0].Id)
	if got := strings.ReplaceAll(followed.String(), prefix, ""); got != onDisk {
		t.Fatalf("job logs --follow printed\n%s\nthe log on the provider is\n%s", got, onDisk)
	}
	// It printed up to checkpoint 1's step before the restart (checked
	// above) and the second run's lines after it.
	if !strings.HasPrefix(followed.String(), printedBefore) {
		t.Fatalf("what job logs --follow printed before the restart is not where its output starts:\n%s", printedBefore)
	}
	runs := strings.Count(onDisk, "reference trainer: lease")
	if runsBefore := strings.Count(printedBefore, "reference trainer: lease"); runs != 2 || runsBefore != 1 || !strings.Contains(onDisk, fmt.Sprintf("steps %d..48", cp1.EndStep)) || !strings.Contains(onDisk, " step 48/48 loss ") {
		t.Fatalf("the trainer's log, %d runs (%d printed before the restart); want the second resuming at step %d:\n%s", runs, runsBefore, cp1.EndStep, onDisk)
	}
	t.Logf("job logs --follow printed %d lines (%d trainer runs) across the sidecar's restart; warnings: %q", strings.Count(onDisk, "\n"), runs, followErr.String())
	// Another account is refused, saying why.
	if out, err := node.Exec(ctx, "job", "logs", fmt.Sprint(jobID), "--from", "stranger", "--keyring-backend", "test", "--grpc-addr", node.GRPC); err == nil ||
		!strings.Contains(err.Error(), "403 Forbidden") || !strings.Contains(err.Error(), "neither the owner nor an auditor") {
		t.Fatalf("a stranger's job logs: %v\n%s", err, out)
	}

	// The same view from the terminal, as JSON and as a table.
	out, err := node.Exec(ctx, "job", "status", fmt.Sprint(jobID), "--grpc-addr", node.GRPC, "-o", "json")
	if err != nil {
		t.Fatalf("job status -o json: %v\n%s", err, out)
	}
	var v jobview.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("job status JSON: %v\n%s", err, out)
	}
	if v.State != "JOB_STATE_COMPLETED" || len(v.Workers) != 1 || v.Workers[0].Step != 48 || len(v.Loss) != 3 || v.Money.Paid != paid.String() {
		t.Fatalf("job status JSON: %+v", v)
	}
	// Its auction is long over: the bid that won its lease, at the lease's committed rate.
	if len(v.Bids) != 1 || v.Bids[0].Status != jobview.BidWon || v.Bids[0].LeaseID != leases.Leases[0].Id ||
		v.Bids[0].StepsPerHour != leases.Leases[0].StepsPerHour || v.Bids[0].StepsPerHour == 0 {
		t.Fatalf("job status JSON bids: %+v, lease %+v", v.Bids, leases.Leases[0])
	}
	for i, p := range v.Loss {
		if p.Source != jobview.LossVerified || p.Step != uint64(16*(i+1)) || p.Nats <= 0 {
			t.Fatalf("loss point %d: %+v", i, p)
		}
	}
	if v.Loss[2].Nats >= v.Loss[0].Nats {
		t.Logf("note: loss did not fall (%v → %v) in 48 steps", v.Loss[0].Nats, v.Loss[2].Nats)
	}
	table, err := node.Exec(ctx, "job", "status", fmt.Sprint(jobID), "--grpc-addr", node.GRPC)
	if err != nil {
		t.Fatalf("job status: %v\n%s", err, table)
	}
	for _, want := range []string{"JOB_STATE_COMPLETED", "48/48", "paid " + paid.String(), "(verified)", "FINAL", "COMPLETED", fmt.Sprintf("won: lease %d (worker 0)", leases.Leases[0].Id)} {
		if !strings.Contains(table, want) {
			t.Fatalf("job status table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("job status:\n%s", table)

	// 4. A job whose escrow cannot pay its lease's first checkpoint fails: 48 steps on 8
	// GPUs at the table's 2000000 per GPU-hour cost 48 × 8 × 2000000 ÷ the committed rate,
	// well over 1000udepin at any rate this host's Go trainer commits (under 700000 an hour).
	// Its auction stays open 40 blocks, so the sidecar's bid is on chain (x/market
	// deletes a job's bids when its auction closes) while the page, open on the job
	// from before it existed, must show it without a reload; afterwards the page
	// shows the bid that won the lease.
	underfunded := strings.NewReplacer("dashboard-lm", "underfunded", "per_worker: 1", "per_worker: 8",
		"checkpoint_every: 16", "checkpoint_every: 48", "bidding_window_blocks: 4", "bidding_window_blocks: 40").Replace(dashboardJobYAML)
	route(fmt.Sprintf("#/job/%d", jobID+1))
	mark, err = chromedp.Run(bctx, chromedp.Evaluate[float64](`window.loadMark = Math.random()`))
	if err != nil {
		t.Fatal(err)
	}
	failed := submitJob(t, ctx, node, underfunded, "1000udepin")
	if failed != jobID+1 {
		t.Fatalf("the second job is %d, want %d", failed, jobID+1)
	}
	// The page's bid row, cell by cell, against the bid the chain holds.
	bidDeadline := time.Now().Add(60 * time.Second)
	var onChain markettypes.Bid
	for {
		bids, err := market.Bids(ctx, &markettypes.QueryBidsRequest{JobId: failed})
		if err != nil {
			t.Fatal(err)
		}
		if len(bids.Bids) == 1 {
			b := bids.Bids[0]
			runtime := b.Runtime
			if runtime == "" {
				runtime = "-"
			}
			want := fmt.Sprintf("open:%s|%s|%s|8|%d steps/h|%sudepin|%s|height %d|open", b.Provider, short(b.Provider), b.PricePerGpuHour,
				b.StepsPerHour, strings.TrimRight(strings.TrimRight(markettypes.PricePerStep(b.PricePerGpuHour.Amount, 8, b.StepsPerHour).String(), "0"), "."),
				runtime, b.CreatedHeight)
			got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(r => r ? [r.dataset.bid, ...[...r.children].map(td => td.textContent)].join('|') : '')(document.querySelector('#bids tr.bid-open'))`))
			if err == nil && got == want && b.StepsPerHour > 0 {
				onChain = b
				break
			}
			if time.Now().After(bidDeadline) {
				t.Fatalf("the open bid: the page shows %q, the chain has %q", got, want)
			}
		} else if time.Now().After(bidDeadline) {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("#view")))
			t.Fatalf("job %d has %d bids on chain; the page:\n%s", failed, len(bids.Bids), html)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if s := text("#auction"); !strings.Contains(s, "auction open") {
		t.Fatalf("the open auction says %q", s)
	}
	t.Logf("bid on job %d: %s per GPU-hour at %d steps/h, shown live", failed, onChain.PricePerGpuHour, onChain.StepsPerHour)
	shot("09-job-bids-open")
	waitFor("the underfunded job failed", `document.getElementById('job-state')?.textContent === 'FAILED'`, 90*time.Second)
	if s := text("#close-reason"); s == "" {
		t.Fatal("a failed job shows no reason")
	}
	// The auction is over: no open bid, and the bid that won its lease.
	waitFor("the winning bid", `!document.querySelector('#bids tr.bid-open') && document.querySelectorAll('#bids tr.bid-won').length === 1 && document.querySelector('#bids tr.bid-won .bid-rate').textContent === '`+fmt.Sprint(onChain.StepsPerHour)+` steps/h'`, 10*time.Second)
	if same, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.loadMark`)); err != nil || same != mark {
		t.Fatalf("the page was reloaded (mark %v, now %v, %v)", mark, same, err)
	}
	shot("04-job-failed")

	// 5. The provider page and the network page.
	route("#/provider/" + prov.Operator)
	waitFor("the provider page", `!!document.getElementById('gpus')`, 10*time.Second)
	if s := text("#gpus"); !strings.Contains(s, "H100-SXM5-80GB") || !strings.Contains(s, "8") {
		t.Fatalf("provider GPUs: %q", s)
	}
	if s := text(`[data-provider="bond"] b`); s != "100000000000udepin" {
		t.Fatalf("provider bond: %q", s)
	}
	if s := text(`[data-provider="reputation"] b`); !strings.Contains(s, "completed") {
		t.Fatalf("provider reputation: %q", s)
	}
	shot("05-provider")
	route("#/network")
	waitFor("the network page", `!!document.querySelector('[data-network="gpus"]')`, 10*time.Second)
	if s := text("#gpus-by-model"); !strings.Contains(s, "H100-SXM5-80GB") {
		t.Fatalf("network GPUs: %q", s)
	}
	shot("06-network")

	// The jobs list, filtered by state.
	route("#/jobs?state=JOB_STATE_FAILED")
	waitFor("the failed filter", `document.querySelectorAll('#jobs tbody tr').length === 1 && document.querySelector('#jobs tbody tr').dataset.job === '`+fmt.Sprint(failed)+`'`, 10*time.Second)
	t.Logf("screenshots in %s; %s in all", shots, time.Since(start).Round(time.Second))
}

// syncBuffer is a bytes.Buffer a process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// readLeaseLog returns the trainer's stdout log of lease under a sidecar's home.
func readLeaseLog(t *testing.T, home string, lease uint64) string {
	t.Helper()
	var found string
	want := filepath.Join(fmt.Sprintf("lease-%d", lease), "logs", "trainer.stdout.log")
	_ = filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, want) {
			found = path
		}
		return nil
	})
	b, err := os.ReadFile(found)
	if err != nil {
		t.Fatalf("lease %d's log under %s: %v", lease, home, err)
	}
	return string(b)
}

func submitJob(t *testing.T, ctx context.Context, n *localnet.Node, yaml, deposit string) uint64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := n.Tx(ctx, "owner", "market", "submit-job", "--spec", path, "--deposit", deposit)
	if err != nil || res.Code != 0 {
		t.Fatalf("submit-job: %v %s", err, res.RawLog)
	}
	id, ok := res.Attr("depinchain.market.v1.EventJobCreated", "job_id")
	if !ok {
		t.Fatalf("no EventJobCreated in %+v", res.Events)
	}
	var jobID uint64
	fmt.Sscan(strings.Trim(id, `"`), &jobID)
	return jobID
}
