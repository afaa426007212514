package chain

import (
	"slices"
	"strconv"
	"testing"
	"time"

	markettypes "github.com/depinchain/depinchain/x/market/types"
)

func TestReconcileListsOpenJobsAndActiveLeases(t *testing.T) {
	ctx := needChain(t)
	leaser := mustAddr(t, ctx, keyLeaser)
	ensureProvider(t, ctx, keyLeaser)

	// One job the leaser wins (its auction closes in a few blocks) and two
	// that stay open.
	_, won := submitJob(t, ctx, 8)
	mustTx(t, ctx, keyLeaser, "market", "place-bid", uintStr(won), "1500000udepin", "--steps-per-hour", "1000")
	_, open1 := submitJob(t, ctx, 600)
	_, open2 := submitJob(t, ctx, 600)

	market := markettypes.NewQueryClient(conn)
	eventually(t, 30*time.Second, "the leaser to win its job", func() bool {
		resp, err := market.Job(ctx, &markettypes.QueryJobRequest{JobId: won})
		return err == nil && resp.Job.State == markettypes.JOB_STATE_LEASED
	})

	q := NewQuerier(conn, enc.InterfaceRegistry)
	q.pageSize = 1 // every item on its own page: exercises paging at a pinned height
	snap, err := q.Reconcile(ctx, leaser)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Height <= 0 {
		t.Errorf("snapshot height %d", snap.Height)
	}
	var openIDs []uint64
	for _, j := range snap.OpenJobs {
		if j.State != markettypes.JOB_STATE_OPEN {
			t.Errorf("job %d listed as open is %s", j.Id, j.State)
		}
		openIDs = append(openIDs, j.Id)
	}
	if !slices.Contains(openIDs, open1) || !slices.Contains(openIDs, open2) || slices.Contains(openIDs, won) {
		t.Errorf("open jobs %v: want %d and %d, not the leased %d", openIDs, open1, open2, won)
	}
	if !slices.IsSorted(openIDs) {
		t.Errorf("open jobs not in id order: %v", openIDs)
	}
	if len(snap.ActiveLeases) != 1 {
		t.Fatalf("active leases of %s: %+v, want the one on job %d", leaser, snap.ActiveLeases, won)
	}
	if l := snap.ActiveLeases[0]; l.JobId != won || l.Provider != leaser || l.State != markettypes.LEASE_STATE_ACTIVE {
		t.Errorf("lease %+v", l)
	}

	// Someone with no leases gets an empty list, not an error.
	snap, err = NewQuerier(conn, enc.InterfaceRegistry).Reconcile(ctx, mustAddr(t, ctx, keyUngranted))
	if err != nil || len(snap.ActiveLeases) != 0 {
		t.Errorf("reconcile for a stranger: %v, %d leases", err, len(snap.ActiveLeases))
	}
}

func uintStr(v uint64) string {
	return strconv.FormatUint(v, 10)
}
