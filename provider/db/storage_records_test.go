package db

import (
	"reflect"
	"strings"
	"testing"
)

func TestStorageReplicasPersistAndStartEmpty(t *testing.T) {
	s, path := openTemp(t)
	// A state file without the bucket (every file written before the storage
	// role existed) reads as empty, even in a read-only transaction.
	err := s.View(func(tx *Tx) error {
		if _, ok, err := tx.StorageReplica(1); err != nil || ok {
			t.Fatalf("fresh store: replica ok=%v err=%v", ok, err)
		}
		all, err := tx.StorageReplicas()
		if err != nil || len(all) != 0 {
			t.Fatalf("fresh store: replicas %v err=%v", all, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	recs := []StorageReplicaRecord{
		{ReplicaID: 300, DatasetID: "corpus", Shard: 1, Piece: 2, Status: StorageReplicaFaulted, FaultDeclared: true, Problem: "piece file missing", Slashed: "1000udepin"},
		{ReplicaID: 7, DatasetID: "corpus", Shard: 0, Piece: 1, Status: StorageReplicaActive, ClaimedHeight: 40, ClaimTx: "AB", Repaired: true},
	}
	err = s.Update(func(tx *Tx) error {
		for _, r := range recs {
			if err := tx.PutStorageReplica(r); err != nil {
				return err
			}
		}
		return nil
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
		all, err := tx.StorageReplicas()
		if err != nil {
			return err
		}
		if want := []StorageReplicaRecord{recs[1], recs[0]}; !reflect.DeepEqual(all, want) {
			t.Fatalf("replicas in id order:\n got %+v\nwant %+v", all, want)
		}
		got, ok, err := tx.StorageReplica(300)
		if err != nil || !ok || !reflect.DeepEqual(got, recs[0]) {
			t.Fatalf("replica 300: %+v ok=%v err=%v", got, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	err = s.Update(func(tx *Tx) error {
		return tx.PutStorageReplica(StorageReplicaRecord{ReplicaID: 1, Status: "lost"})
	})
	if err == nil || !strings.Contains(err.Error(), `unknown status "lost"`) {
		t.Fatalf("unknown status: %v", err)
	}
}

func TestStorageReplicaCountsEachPeriodOnce(t *testing.T) {
	var r StorageReplicaRecord
	// The claim proves period 0 and is not an answer.
	if !r.NoteProof(0, true) || r.Answered != 0 || !r.Proven || r.LastProvenPeriod != 0 {
		t.Fatalf("after the claim: %+v", r)
	}
	if r.NoteProof(0, false) {
		t.Fatal("period 0 counted twice")
	}
	for _, p := range []uint64{1, 2, 2, 1, 3} {
		r.NoteProof(p, false)
	}
	if r.Answered != 3 || r.LastProvenPeriod != 3 {
		t.Fatalf("answers for periods 1, 2, 3 (with replays): %+v", r)
	}
	for _, p := range []uint64{0, 0, 4, 4, 5} {
		r.NoteMiss(p)
	}
	if r.Missed != 3 || r.LastMissedPeriod != 5 {
		t.Fatalf("misses for periods 0, 4, 5 (with replays): %+v", r)
	}
}
