package db

import (
	"errors"
	"maps"
	"testing"
)

// A GPU is taken by an active lease (named) or an open bid (0); closed
// leases and spent bids free theirs.
func TestTakenGPUs(t *testing.T) {
	s, _ := openTemp(t)
	err := s.Update(func(tx *Tx) error {
		return errors.Join(
			tx.PutBid(BidRecord{JobID: 1, Price: "1udepin", Status: BidPlaced, GPUs: []string{"g0"}}),
			tx.PutBid(BidRecord{JobID: 2, Price: "1udepin", Status: BidLost, GPUs: []string{"g1"}}),
			tx.PutLease(LeaseRecord{LeaseID: 7, JobID: 3, Status: LeaseActive, GPUs: []string{"g2", "g3"}}),
			tx.PutLease(LeaseRecord{LeaseID: 8, JobID: 4, Status: LeaseClosed, GPUs: []string{"g4"}}),
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	var taken map[string]uint64
	if err := s.View(func(tx *Tx) (err error) { taken, err = tx.TakenGPUs(); return err }); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"g0": 0, "g2": 7, "g3": 7}
	if !maps.Equal(taken, want) {
		t.Fatalf("taken %v, want %v", taken, want)
	}
	if got := (LeaseRecord{Dir: "/w/lease-7"}).OutputDir(); got != "/w/lease-7/output" {
		t.Fatalf("OutputDir %q", got)
	}
}
