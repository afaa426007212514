package db

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func openTemp(t *testing.T) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func TestStatePersistsAcrossReopen(t *testing.T) {
	s, path := openTemp(t)
	if _, ok, err := s.Cursor(); err != nil || ok {
		t.Fatalf("fresh store: cursor ok=%v err=%v, want none", ok, err)
	}

	job := JobRecord{JobID: 7, SeenHeight: 10, BiddingDeadline: 70, Decision: "bid"}
	bid := BidRecord{JobID: 7, Price: "1500000udepin", Height: 11, TxHash: "ABCD", Status: BidPlaced, GPUs: []string{"GPU-1", "GPU-2"}}
	leases := []LeaseRecord{
		{LeaseID: 3, JobID: 7, Worker: 0, Status: LeaseActive, Dir: "/work/lease-3", LastCheckpointStep: 200, UpdatedHeight: 80},
		{LeaseID: 300, JobID: 9, Worker: 1, Status: LeaseClosed, CloseReason: "LEASE_CLOSE_REASON_COMPLETED", UpdatedHeight: 90},
	}
	checkpoints := []CheckpointRecord{
		{LeaseID: 3, Index: 0, StartStep: 0, EndStep: 100, StateRoot: []byte{1}, TraceRoot: []byte{2}, FinalHash: []byte{3}, TxHash: "EF01", Height: 85, Status: CheckpointFinalized},
		{LeaseID: 3, Index: 1, StartStep: 100, EndStep: 200, StateRoot: []byte{4}, TraceRoot: []byte{5}, FinalHash: []byte{6}, TxHash: "EF02", Height: 95, Status: CheckpointSubmitted},
		// Lease 4's checkpoint must not show up among lease 3's.
		{LeaseID: 4, Index: 0, EndStep: 50, TxHash: "EF03", Height: 96, Status: CheckpointRejected},
	}
	err := s.Update(func(tx *Tx) error {
		if err := tx.SetCursor(100); err != nil {
			return err
		}
		if err := tx.PutJob(job); err != nil {
			return err
		}
		if err := tx.PutBid(bid); err != nil {
			return err
		}
		for _, l := range leases {
			if err := tx.PutLease(l); err != nil {
				return err
			}
		}
		for _, c := range checkpoints {
			if err := tx.PutCheckpoint(c); err != nil {
				return err
			}
		}
		_, err := tx.MarkHandled("100/0/2", 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(func(tx *Tx) error {
		if h, ok := tx.Cursor(); !ok || h != 100 {
			t.Errorf("cursor after reopen = %d (ok=%v), want 100", h, ok)
		}
		if got, ok, err := tx.Job(7); err != nil || !ok || got != job {
			t.Errorf("job = %+v ok=%v err=%v", got, ok, err)
		}
		if got, ok, err := tx.Bid(7); err != nil || !ok || !reflect.DeepEqual(got, bid) {
			t.Errorf("bid = %+v ok=%v err=%v", got, ok, err)
		}
		if got, err := tx.Leases(); err != nil || !reflect.DeepEqual(got, leases) {
			t.Errorf("leases = %+v err=%v", got, err)
		}
		if got, err := tx.Checkpoints(3); err != nil || !reflect.DeepEqual(got, checkpoints[:2]) {
			t.Errorf("checkpoints of lease 3 = %+v err=%v", got, err)
		}
		if got, ok, err := tx.Checkpoint(4, 0); err != nil || !ok || !reflect.DeepEqual(got, checkpoints[2]) {
			t.Errorf("checkpoint 4/0 = %+v ok=%v err=%v", got, ok, err)
		}
		if _, ok, err := tx.Lease(4); err != nil || ok {
			t.Errorf("absent lease: ok=%v err=%v", ok, err)
		}
		if !tx.Handled("100/0/2") || tx.Handled("100/0/3") {
			t.Error("handled set not persisted as written")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenOfTheSameFileFails(t *testing.T) {
	s, path := openTemp(t)
	defer s.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second open: want a lock error, got %v", err)
	}
}

func TestFailedUpdateCommitsNothing(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	if err := s.Update(func(tx *Tx) error { return tx.SetCursor(41) }); err != nil {
		t.Fatal(err)
	}

	handlerErr := errors.New("broadcast failed")
	err := s.Update(func(tx *Tx) error {
		if _, err := tx.MarkHandled("42/0/0", 42); err != nil {
			return err
		}
		if err := tx.PutLease(LeaseRecord{LeaseID: 1, Status: LeaseActive}); err != nil {
			return err
		}
		if err := tx.AdvanceCursor(42); err != nil {
			return err
		}
		return handlerErr
	})
	if !errors.Is(err, handlerErr) {
		t.Fatalf("Update returned %v, want the handler's error", err)
	}
	err = s.View(func(tx *Tx) error {
		if h, _ := tx.Cursor(); h != 41 {
			t.Errorf("cursor advanced to %d by a failed update", h)
		}
		if tx.Handled("42/0/0") {
			t.Error("handled mark of a failed update persisted")
		}
		if _, ok, _ := tx.Lease(1); ok {
			t.Error("lease of a failed update persisted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAdvanceCursorNeverSkips(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	if err := s.Update(func(tx *Tx) error { return tx.AdvanceCursor(1) }); !errors.Is(err, ErrCursorGap) {
		t.Fatalf("advance without a cursor: %v", err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.SetCursor(9) }); err != nil {
		t.Fatal(err)
	}
	for _, h := range []int64{9, 11, 8} {
		if err := s.Update(func(tx *Tx) error { return tx.AdvanceCursor(h) }); !errors.Is(err, ErrCursorGap) {
			t.Errorf("advance 9 → %d: got %v, want ErrCursorGap", h, err)
		}
	}
	if err := s.Update(func(tx *Tx) error { return tx.AdvanceCursor(10) }); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := s.Cursor(); h != 10 {
		t.Fatalf("cursor = %d, want 10", h)
	}
}

func TestMarkHandledIsIdempotentAndPrunable(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	err := s.Update(func(tx *Tx) error {
		for h := int64(1); h <= 5; h++ {
			first, err := tx.MarkHandled(fmt.Sprintf("%d/0/0", h), h)
			if err != nil || !first {
				return fmt.Errorf("first mark of height %d: first=%v err=%v", h, first, err)
			}
		}
		if first, err := tx.MarkHandled("3/0/0", 9); err != nil || first {
			return fmt.Errorf("second mark: first=%v err=%v", first, err)
		}
		removed, err := tx.PruneHandled(4)
		if err != nil {
			return err
		}
		if removed != 3 {
			return fmt.Errorf("pruned %d keys, want 3", removed)
		}
		for h := int64(1); h <= 5; h++ {
			if got, want := tx.Handled(fmt.Sprintf("%d/0/0", h)), h >= 4; got != want {
				return fmt.Errorf("height %d handled=%v after prune, want %v", h, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRecordsWithUnknownStatusAreRejected(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	for name, put := range map[string]func(*Tx) error{
		"bid":        func(tx *Tx) error { return tx.PutBid(BidRecord{JobID: 1, Status: "pending"}) },
		"lease":      func(tx *Tx) error { return tx.PutLease(LeaseRecord{LeaseID: 1}) },
		"checkpoint": func(tx *Tx) error { return tx.PutCheckpoint(CheckpointRecord{LeaseID: 1, Status: "ok"}) },
	} {
		if err := s.Update(put); err == nil || !strings.Contains(err.Error(), "unknown status") {
			t.Errorf("%s with a bad status: %v", name, err)
		}
	}
}

// Readers running alongside a writer always see a cursor and the lease written
// in the same transaction together: never one without the other.
func TestConcurrentReadersSeeWholeTransactions(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	if err := s.Update(func(tx *Tx) error { return tx.SetCursor(0) }); err != nil {
		t.Fatal(err)
	}
	const heights = 100
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	done := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				err := s.View(func(tx *Tx) error {
					h, _ := tx.Cursor()
					if h == 0 {
						return nil
					}
					l, ok, err := tx.Lease(uint64(h))
					if err != nil {
						return err
					}
					if !ok || l.UpdatedHeight != h {
						return fmt.Errorf("cursor %d visible without its lease", h)
					}
					if _, ahead, _ := tx.Lease(uint64(h + 1)); ahead {
						return fmt.Errorf("lease %d visible before its cursor", h+1)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for h := int64(1); h <= heights; h++ {
		err := s.Update(func(tx *Tx) error {
			if err := tx.PutLease(LeaseRecord{LeaseID: uint64(h), Status: LeaseActive, UpdatedHeight: h}); err != nil {
				return err
			}
			return tx.AdvanceCursor(h)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if h, _, _ := s.Cursor(); h != heights {
		t.Fatalf("cursor = %d, want %d", h, heights)
	}
}
