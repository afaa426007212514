package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/depinchain/depinchain/provider/checkpoint"
)

// retained adds a checkpoint of job over steps [start, end] with an
// existing folder to c.
func retained(t *testing.T, c *checkpoint.Catalog, lease, index, job, start, end uint64) checkpoint.Ref {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "step")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ref := checkpoint.Ref{LeaseID: lease, Index: index}
	e := checkpoint.Entry{Ref: ref, JobID: job, Dir: dir, Commitment: checkpoint.Commitment{StartStep: start, EndStep: end}}
	if err := c.Add(e); err != nil {
		t.Fatal(err)
	}
	return ref
}

func mustPrune(t *testing.T, c *checkpoint.Catalog, now time.Time, want ...checkpoint.Ref) {
	t.Helper()
	pruned, err := c.Prune(now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pruned, want) {
		t.Fatalf("Prune(%s) = %v, want %v", now.Format(time.TimeOnly), pruned, want)
	}
	for _, ref := range want {
		if _, ok := c.Lookup(ref); ok {
			t.Fatalf("%s still retained after pruning", ref)
		}
	}
}

func TestRetention(t *testing.T) {
	const retention = time.Hour
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := checkpoint.NewCatalog(retention)
	// Job 1: lease 1 trained steps 0..30 in three checkpoints.
	a := retained(t, c, 1, 0, 1, 0, 10)
	b := retained(t, c, 1, 1, 1, 10, 20)
	cc := retained(t, c, 1, 2, 1, 20, 30)
	entryA, _ := c.Lookup(a)

	mustPrune(t, c, t0.Add(100*time.Hour)) // nothing is final

	for _, ref := range []checkpoint.Ref{a, b} {
		if err := c.MarkFinal(ref, t0); err != nil {
			t.Fatal(err)
		}
	}
	mustPrune(t, c, t0.Add(retention-time.Second)) // within retention

	// c is challenged: b holds the state its disputed steps start from.
	if err := c.MarkDisputed(cc, 77); err != nil {
		t.Fatal(err)
	}
	mustPrune(t, c, t0.Add(retention), a)
	if _, err := os.Stat(entryA.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pruned folder still there: %v", err)
	}
	if err := c.Discard(cc); !errors.Is(err, checkpoint.ErrNeededByDispute) {
		t.Fatalf("discarding a disputed checkpoint: %v", err)
	}

	// The challenge is resolved and c becomes final: b is free, but c is
	// the job's newest final checkpoint, kept until the job is released.
	if err := c.MarkResolved(cc, 77); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkFinal(cc, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustPrune(t, c, t0.Add(2*time.Hour), b)
	mustPrune(t, c, t0.Add(10*time.Hour))
	c.ReleaseJob(1)
	mustPrune(t, c, t0.Add(10*time.Hour), cc)

	if err := c.MarkFinal(a, t0); !errors.Is(err, checkpoint.ErrUnknownCheckpoint) {
		t.Fatalf("marking a pruned checkpoint: %v", err)
	}
}

// A dispute on a resumed lease's first checkpoint needs the checkpoint of
// the earlier lease it resumed from.
func TestRetentionKeepsResumeSourceOfDisputedCheckpoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := checkpoint.NewCatalog(time.Minute)
	old := retained(t, c, 1, 4, 5, 40, 50)
	older := retained(t, c, 1, 3, 5, 30, 40)
	resumed := retained(t, c, 2, 0, 5, 50, 60)
	other := retained(t, c, 3, 0, 6, 50, 60) // another job at the same steps
	for _, ref := range []checkpoint.Ref{older, old, other} {
		if err := c.MarkFinal(ref, t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkDisputed(resumed, 1); err != nil {
		t.Fatal(err)
	}
	c.ReleaseJob(6)
	mustPrune(t, c, t0.Add(time.Hour), older, other)
	if err := c.Discard(old); !errors.Is(err, checkpoint.ErrNeededByDispute) {
		t.Fatalf("discarding the resume source of a disputed checkpoint: %v", err)
	}
	if err := c.MarkResolved(resumed, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Discard(resumed); err != nil {
		t.Fatal(err)
	}
	// old is now the job's newest final checkpoint.
	mustPrune(t, c, t0.Add(time.Hour))
}

func TestCatalogAdd(t *testing.T) {
	c := checkpoint.NewCatalog(time.Hour)
	ref := retained(t, c, 1, 0, 1, 0, 10)
	e, ok := c.Lookup(ref)
	if !ok {
		t.Fatal("not retained")
	}
	if err := c.Add(e); err != nil {
		t.Fatalf("re-adding the same entry: %v", err)
	}
	e.Commitment.EndStep = 11
	if err := c.Add(e); err == nil {
		t.Fatal("re-adding with different contents succeeded")
	}
}
