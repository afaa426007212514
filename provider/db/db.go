// Package db is the provider sidecar's database, its durable state: how far it has
// processed the chain, which jobs it has seen, the bids it placed, its leases
// and the checkpoints it submitted, plus a set of handled-event keys that
// makes event handlers idempotent.
//
// Everything lives in one bbolt file. Each Update is one bbolt transaction, so
// a handler's writes and the cursor advance it justifies can commit together
// or not at all.
package db

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// schemaVersion is bumped when the layout changes incompatibly; Open refuses
// files written by a newer layout instead of misreading them.
const schemaVersion = 1

var (
	bucketMeta        = []byte("meta")
	bucketHandled     = []byte("handled")
	bucketJobs        = []byte("jobs")
	bucketBids        = []byte("bids")
	bucketLeases      = []byte("leases")
	bucketCheckpoints = []byte("checkpoints")
	// bucketVerifications holds the verifier's results.
	bucketVerifications = []byte("verifications")
	// bucketAudits holds the audit assignments of the operator (provider/audits).
	bucketAudits = []byte("audits")

	keySchema = []byte("schema")
	keyCursor = []byte("cursor")
)

// ErrCursorGap is returned by AdvanceCursor when the new height does not
// directly follow the stored one: advancing past an unprocessed height would
// silently drop its events.
var ErrCursorGap = errors.New("cursor must advance one height at a time")

// DB is an open state file. It is safe for concurrent use: any number of
// View calls run in parallel with at most one Update.
type DB struct {
	bolt *bbolt.DB
}

// Open opens (creating if needed) the state file at path. A file another
// process holds open is an error after a short wait, so two sidecars can never
// share one state.
func Open(path string) (*DB, error) {
	bdb, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("opening %s: locked by another process", path)
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	err = bdb.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketHandled, bucketJobs, bucketBids, bucketLeases, bucketCheckpoints, bucketVerifications, bucketAudits} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if raw := meta.Get(keySchema); raw != nil {
			if v := binary.BigEndian.Uint64(raw); v != schemaVersion {
				return fmt.Errorf("state schema version %d, this build reads version %d", v, schemaVersion)
			}
			return nil
		}
		return meta.Put(keySchema, u64(schemaVersion))
	})
	if err != nil {
		bdb.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return &DB{bolt: bdb}, nil
}

// Close releases the file.
func (d *DB) Close() error { return d.bolt.Close() }

// Update runs fn in one read-write transaction: everything fn wrote commits
// when it returns nil and nothing does when it returns an error. fn must not
// do slow I/O (network calls): it blocks every other writer while it runs.
func (d *DB) Update(fn func(*Tx) error) error {
	return d.bolt.Update(func(btx *bbolt.Tx) error { return fn(&Tx{btx: btx}) })
}

// View runs fn in a read-only transaction that sees one consistent snapshot.
// Writing through its Tx returns an error.
func (d *DB) View(fn func(*Tx) error) error {
	return d.bolt.View(func(btx *bbolt.Tx) error { return fn(&Tx{btx: btx}) })
}

// Cursor returns the last fully processed height; ok is false before the
// first height was recorded.
func (d *DB) Cursor() (height int64, ok bool, err error) {
	err = d.View(func(tx *Tx) error {
		height, ok = tx.Cursor()
		return nil
	})
	return height, ok, err
}

// Tx is one transaction. It is only valid inside the Update or View call that
// produced it.
type Tx struct {
	btx *bbolt.Tx
}

// Cursor returns the last fully processed height; ok is false before the
// first height was recorded.
func (t *Tx) Cursor() (height int64, ok bool) {
	raw := t.btx.Bucket(bucketMeta).Get(keyCursor)
	if raw == nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(raw)), true
}

// SetCursor records height as processed, whatever was stored before. It is
// for the first start (nothing stored yet) and for deliberate rewinds;
// following the chain uses AdvanceCursor.
func (t *Tx) SetCursor(height int64) error {
	if height < 0 {
		return fmt.Errorf("cursor height %d is negative", height)
	}
	return t.btx.Bucket(bucketMeta).Put(keyCursor, u64(uint64(height)))
}

// AdvanceCursor records height as processed; it must be exactly one above the
// stored cursor.
func (t *Tx) AdvanceCursor(height int64) error {
	cur, ok := t.Cursor()
	if !ok {
		return fmt.Errorf("%w: no cursor stored yet, cannot advance to %d", ErrCursorGap, height)
	}
	if height != cur+1 {
		return fmt.Errorf("%w: stored %d, asked for %d", ErrCursorGap, cur, height)
	}
	return t.SetCursor(height)
}

// MarkHandled records key (e.g. an Event's key, or a semantic one like
// "bid/17") as handled at height. It reports false when the key was already
// handled, in which case nothing is written and the caller should not act
// again.
func (t *Tx) MarkHandled(key string, height int64) (first bool, err error) {
	b := t.btx.Bucket(bucketHandled)
	if b.Get([]byte(key)) != nil {
		return false, nil
	}
	if err := b.Put([]byte(key), u64(uint64(height))); err != nil {
		return false, fmt.Errorf("marking %q handled: %w", key, err)
	}
	return true, nil
}

// Handled reports whether key was marked handled.
func (t *Tx) Handled(key string) bool {
	return t.btx.Bucket(bucketHandled).Get([]byte(key)) != nil
}

// PruneHandled forgets handled keys marked below height: once the cursor is
// far past a height its events cannot be replayed, so their keys only take
// space. It returns how many keys it removed.
func (t *Tx) PruneHandled(below int64) (int, error) {
	b := t.btx.Bucket(bucketHandled)
	// Collect first: deleting under a bbolt cursor makes Next skip an item.
	var stale [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if int64(binary.BigEndian.Uint64(v)) < below {
			stale = append(stale, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range stale {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// getJSON decodes the value at key of bucket into v; ok is false when there is none.
func (t *Tx) getJSON(bucket, key []byte, v any) (ok bool, err error) {
	raw := t.btx.Bucket(bucket).Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decoding %s/%x: %w", bucket, key, err)
	}
	return true, nil
}

// putJSON stores v as JSON at key of bucket.
func (t *Tx) putJSON(bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s/%x: %w", bucket, key, err)
	}
	return t.btx.Bucket(bucket).Put(key, raw)
}

// listJSON decodes every value of bucket whose key starts with prefix (all of
// them for a nil prefix), in key order.
func listJSON[T any](t *Tx, bucket, prefix []byte) ([]T, error) {
	var out []T
	c := t.btx.Bucket(bucket).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			return nil, fmt.Errorf("decoding %s/%x: %w", bucket, k, err)
		}
		out = append(out, rec)
	}
	return out, nil
}
