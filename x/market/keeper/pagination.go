package keeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"cosmossdk.io/collections/indexes"

	"github.com/cosmos/cosmos-sdk/types/query"
)

// defaultPageLimit matches the SDK's default page size.
const defaultPageLimit = 100

// errInvalidPageRequest marks page requests that are the caller's mistake, so queries
// answer them with codes.InvalidArgument rather than codes.Internal.
var errInvalidPageRequest = errors.New("invalid page request")

// checkPageRequest rejects what no pagination accepts: a key together with an offset.
func checkPageRequest(req *query.PageRequest) error {
	if req != nil && len(req.Key) > 0 && req.Offset > 0 {
		return fmt.Errorf("%w: use either key or offset, not both", errInvalidPageRequest)
	}
	return nil
}

// paginateIDs pages through ascending ids taken from a secondary index (the SDK's
// collection pagination needs raw iteration, which index types do not offer). next_key is
// the big-endian id to resume from; offset and count_total behave as in the SDK.
// keep filters ids and load fetches the object; only kept ids count towards the page.
func paginateIDs[V any](ids []uint64, req *query.PageRequest, keep func(uint64) (V, bool, error)) ([]V, *query.PageResponse, error) {
	if req == nil {
		req = &query.PageRequest{}
	}
	if err := checkPageRequest(req); err != nil {
		return nil, nil, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = defaultPageLimit
	}
	start := uint64(0)
	if len(req.Key) > 0 {
		if len(req.Key) != 8 {
			return nil, nil, fmt.Errorf("%w: key must be 8 bytes, got %d", errInvalidPageRequest, len(req.Key))
		}
		start = binary.BigEndian.Uint64(req.Key)
	}
	var (
		out     []V
		skipped uint64
		total   uint64
		nextKey []byte
	)
	for _, id := range ids {
		if id < start {
			continue
		}
		v, ok, err := keep(id)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		total++
		if skipped < req.Offset {
			skipped++
			continue
		}
		if uint64(len(out)) == limit {
			if nextKey == nil {
				nextKey = binary.BigEndian.AppendUint64(nil, id)
			}
			if !req.CountTotal {
				break
			}
			continue
		}
		out = append(out, v)
	}
	res := &query.PageResponse{NextKey: nextKey}
	if req.CountTotal {
		res.Total = total
	}
	return out, res, nil
}

// paginateIndex pages through the ids a Multi index holds for one reference key.
func paginateIndex[R any, V any, T any](ctx context.Context, index *indexes.Multi[R, uint64, T], ref R, req *query.PageRequest, load func(uint64) (V, bool, error)) ([]V, *query.PageResponse, error) {
	iter, err := index.MatchExact(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	ids, err := iter.PrimaryKeys()
	if err != nil {
		return nil, nil, err
	}
	return paginateIDs(ids, req, load)
}
