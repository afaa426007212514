package rounds

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/depinchain/depinchain/pkg/diloco"
	"github.com/depinchain/depinchain/provider/chain"
	markettypes "github.com/depinchain/depinchain/x/market/types"
)

// Five rounds whose globals are final two rounds after they are committed: once round 4
// is served, rounds 0–2 are final and 3–4 still in their challenge windows. Each worker's
// folder then holds only what a later move can read: the latest final global G_3 and the
// later ones, rounds 3–4's pseudo-gradients (with top_k, also each other worker's latest
// of a final round, whose error_out the next check opens), its own error buffers from the
// carry of the last round a redo could train again (round 4's: round 3), the end states
// and rebuilt error buffers the checker keeps, its carry; its round data is gone. The
// globals are still diloco.Simulate's. A proof against round 3's global, in its window,
// still finds its files; and once the job is closed the folder goes.
func TestRoundFilesArePruned(t *testing.T) {
	for _, topK := range []int{0, 32} {
		t.Run("top_k="+strconv.Itoa(topK), func(t *testing.T) { testRoundFilesArePruned(t, topK) })
	}
}

func testRoundFilesArePruned(t *testing.T, topK int) {
	spec := diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9, TopK: topK}
	const rounds = 5
	c := newFakeChain(t, spec, 3, rounds)
	c.finalLag = 2
	var ws []*worker
	for slot := range uint32(3) {
		ws = append(ws, c.newWorker(t, 100+uint64(slot), slot))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	requireServed(t, ctx, ws)
	c.mu.Lock()
	c.requireSimulated(t, spec, rounds, nil)
	for q := range uint64(rounds) {
		want := markettypes.ROUND_STATE_FINAL
		if q >= 3 {
			want = markettypes.ROUND_STATE_CHALLENGE
		}
		if c.rounds[q].State != want {
			t.Fatalf("round %d is %s, want %s", q, c.rounds[q].State, want)
		}
	}
	c.mu.Unlock()

	for _, w := range ws {
		j, err := w.role.jobOf(w.lease)
		if err != nil {
			t.Fatal(err)
		}
		own := w.lease.Worker
		want := []string{"global-3", "global-4", "global-5"}
		for k := range uint32(3) {
			want = append(want, fmt.Sprintf("pg-3-%d", k), fmt.Sprintf("pg-4-%d", k))
			if k == own {
				continue
			}
			want = append(want, fmt.Sprintf("end-3-%d", k), fmt.Sprintf("end-4-%d", k))
			if topK != 0 {
				want = append(want, fmt.Sprintf("pg-2-%d", k),
					fmt.Sprintf("checked-errbuf-w%d-l%d-r3", k, 100+k), fmt.Sprintf("checked-errbuf-w%d-l%d-r4", k, 100+k))
			}
		}
		if topK != 0 {
			want = append(want, fmt.Sprintf("errbuf-3-%d", own), fmt.Sprintf("errbuf-4-%d", own))
		}
		if got := names(t, j.Dir); !sameSet(got, want) {
			t.Errorf("worker %d keeps %v, want %v", own, got, want)
		}
		if got := names(t, w.lease.DataDir); len(got) != 0 {
			t.Errorf("worker %d keeps round data %v", own, got)
		}
	}

	// Round 3's committed global turns out wrong (a lying aggregator's, say) while its
	// window lasts: worker 1 proves it from the files it kept.
	j, err := ws[1].role.jobOf(ws[1].lease)
	if err != nil {
		t.Fatal(err)
	}
	g, err := j.Global(4)
	if err != nil {
		t.Fatal(err)
	}
	g.Weights[0]++
	lying := filepath.Join(t.TempDir(), "lying-global-4")
	if err := os.WriteFile(lying, g.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := WritePieces(ws[0].custody, markettypes.GlobalCustodyID(c.job.Id, 4), lying, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	c.net.register(ws[0].custody, p)
	root := g.Root()
	c.mu.Lock()
	c.rounds[3].NextGlobalRoot = root[:]
	entered := slices.Clone(c.rounds[3].Entered)
	c.mu.Unlock()
	proven, err := ws[1].role.proveAggregation(ctx, j, 3, entered, root[:])
	if err != nil || !proven {
		t.Fatalf("a proof against round 3's global in its window: proven %v, %v", proven, err)
	}

	// The job ends: every worker's round folder goes.
	for _, w := range ws {
		act, err := w.role.HandleEvent(ctx, nil, chain.Event{Message: &markettypes.EventJobClosed{JobId: c.job.Id, State: markettypes.JOB_STATE_COMPLETED}})
		if err != nil || act == nil {
			t.Fatalf("job closed: %v", err)
		}
		act()
		if _, err := os.Stat(filepath.Join(w.role.opts.WorkDir, "rounds", "job-7")); !os.IsNotExist(err) {
			t.Errorf("worker %d's round folder outlives the job: %v", w.lease.Worker, err)
		}
	}
}

// names lists a folder's entries (none when it does not exist).
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A worker that missed rounds keeps the error buffer of the carry it trained its last
// round with, even from a final round: a redo of that round (its start global is not
// final) compresses with it again. Other slots' buffers (a lease it served before), its
// older own ones and the other workers' older pseudo-gradients go.
func TestPruneKeepsTheCarriesErrorBuffer(t *testing.T) {
	dir := t.TempDir()
	carry := uint64(4)
	w := Worker{Job: Job{Dir: filepath.Join(dir, "job"), DataDir: filepath.Join(dir, "data"), Sync: diloco.Sync{Every: 2, TopK: 32}}, Index: 2, Carry: &carry}
	files := []string{"errbuf-0-2", "errbuf-1-2", "errbuf-2-2", "errbuf-4-2", "errbuf-1-0", "pg-0-0", "pg-1-0", "pg-1-2", "pg-3-0", "global-2", "global-3"}
	for _, f := range append(slices.Clone(files), "checked-errbuf-w0-l100-r1", "end-1-0") {
		if err := os.MkdirAll(w.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.Dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []uint64{2, 3} {
		if err := os.MkdirAll(w.RoundDataDir(q), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Round 2 is the latest final one; the worker trained round 4 with the carry of round
	// 1 (it missed rounds 2 and 3), and round 3 with that of round 0.
	one, zero := uint64(1), uint64(0)
	floor := carryFloor(&w, 2, map[uint64]*uint64{3: &zero, 4: &one})
	if floor != 1 {
		t.Fatalf("carry floor %d, want 1", floor)
	}
	if err := w.prune(2, floor); err != nil {
		t.Fatal(err)
	}
	want := []string{"errbuf-1-2", "errbuf-2-2", "errbuf-4-2", "pg-1-0", "pg-3-0", "global-3", "checked-errbuf-w0-l100-r1", "end-1-0"}
	if got := names(t, w.Dir); !sameSet(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if got := names(t, w.DataDir); !sameSet(got, []string{"round-3"}) {
		t.Fatalf("kept round data %v, want round-3's", got)
	}
}

// A job that closed while the sidecar was stopped never sends it EventJobClosed: at start
// the role removes the round folder of every job closed on chain that no lease served
// here trains, and keeps those of running jobs, of a served lease's job (until its run
// returns) and of a job it cannot read.
func TestStartRemovesTheRoundFoldersOfJobsThatEndedMeanwhile(t *testing.T) {
	c := newFakeChain(t, diloco.SyncSpec{Every: 2, OuterLR: 0.7, OuterMomentum: 0.9}, 1, 1)
	c.job.State = markettypes.JOB_STATE_LEASED
	c.otherJobs = map[uint64]markettypes.Job{
		8:  {Id: 8, State: markettypes.JOB_STATE_COMPLETED},
		9:  {Id: 9, State: markettypes.JOB_STATE_FAILED},
		10: {Id: 10, State: markettypes.JOB_STATE_OPEN},
	}
	r := c.newWorker(t, 100, 0).role
	roundsDir := filepath.Join(r.opts.WorkDir, "rounds")
	// job-11 is on no chain (a read error); job-8.tmp is no job's folder.
	for _, name := range []string{"job-7", "job-8", "job-9", "job-10", "job-11", "job-8.tmp"} {
		if err := os.MkdirAll(filepath.Join(roundsDir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A lease of job 9 is being served.
	r.wake[200], r.status[200] = make(chan struct{}, 1), JobStatus{JobID: 9, LeaseID: 200}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	want := []string{"job-10", "job-11", "job-7", "job-8.tmp", "job-9"}
	deadline := time.Now().Add(5 * time.Second)
	for !sameSet(names(t, roundsDir), want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := names(t, roundsDir); !sameSet(got, want) {
		t.Fatalf("round folders after start: %v, want %v (job 8 closed, no lease of it served)", got, want)
	}
	r.mu.Lock()
	ended := r.ended[9]
	r.mu.Unlock()
	if !ended {
		t.Fatal("job 9 closed while its lease is served: its folder should go when the run returns")
	}
}
