// Package deadline holds the one walk every module's EndBlocker does over its
// deadline-ordered index: take the entries that are due, in order, up to the block's cap.
// The index key starts with the deadline, so a block's work depends only on what falls
// due in it, never on how many entries the index holds.
package deadline

import (
	"context"

	"cosmossdk.io/collections"
)

// Due returns up to limit keys of set, in key order, that are at or before upTo.
func Due[K any](ctx context.Context, set collections.KeySet[K], upTo K, limit int) ([]K, error) {
	if limit <= 0 {
		return nil, nil
	}
	iter, err := set.Iterate(ctx, new(collections.Range[K]).EndInclusive(upTo))
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var due []K
	for ; iter.Valid() && len(due) < limit; iter.Next() {
		key, err := iter.Key()
		if err != nil {
			return nil, err
		}
		due = append(due, key)
	}
	return due, nil
}
