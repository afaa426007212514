// Package pieces is how a sidecar gets dataset pieces from the providers that
// hold them: the URL of a piece on a holder's public server, the HTTP
// download, the check of what was served against the piece's registered
// Merkle root, and the Reed–Solomon rebuild of a piece from any k intact
// pieces of its shard. The storage role uses it to repair pieces; the
// datasets fetcher to assemble a worker's training data. Nothing a holder
// serves is trusted before it matched its root.
package pieces

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/depinchain/depinchain/pkg/manifest"
	"github.com/depinchain/depinchain/pkg/merkle"
	"github.com/depinchain/depinchain/x/shardregistry/types"
	stakingexttypes "github.com/depinchain/depinchain/x/staking_ext/types"
)

// Shard is what the chain registered about a shard, with what its pieces
// need to be checked and rebuilt; datasets are immutable, so it can be read
// once and kept.
type Shard struct {
	DatasetID string
	Encoding  types.Encoding
	ChunkSize uint32
	Shard     types.Shard
	// Custody is set for a checkpoint state's custody object (pkg/custody layout).
	Custody *types.CustodyInfo
}

// ShardOf builds a Shard from a dataset and one shard of it as the
// x/shardregistry queries return them.
func ShardOf(ds types.Dataset, v types.ShardView) *Shard {
	s := &Shard{DatasetID: ds.Id, Encoding: ds.Encoding, ChunkSize: ds.ChunkSize, Custody: ds.Custody, Shard: types.Shard{
		DatasetId: ds.Id, Index: v.Index, SampleStart: v.SampleStart, SampleEnd: v.SampleEnd, SizeBytes: v.SizeBytes,
	}}
	for _, p := range v.Pieces {
		s.Shard.Pieces = append(s.Shard.Pieces, p.Piece)
	}
	return s
}

// ErrRootMismatch means bytes are not the piece they claim to be: the wrong
// size, or a Merkle root that is not the registered one.
var ErrRootMismatch = errors.New("the bytes do not match the piece's registered root")

// Check reports whether data is piece `piece` of the shard: its size and
// its Merkle root over the dataset's chunk size are the registered ones.
func (s *Shard) Check(piece uint32, data []byte) error {
	if int(piece) >= len(s.Shard.Pieces) {
		return fmt.Errorf("shard %d has pieces 0..%d, not %d", s.Shard.Index, len(s.Shard.Pieces)-1, piece)
	}
	p := s.Shard.Pieces[piece]
	if uint64(len(data)) != p.SizeBytes {
		return fmt.Errorf("%w: %d bytes, the piece is %d", ErrRootMismatch, len(data), p.SizeBytes)
	}
	if root := merkle.RootOfBytes(data, int(s.ChunkSize)); !bytes.Equal(root[:], p.Root) {
		return fmt.Errorf("%w: root %x, registered %x", ErrRootMismatch, root[:], p.Root)
	}
	return nil
}

// RebuildPiece returns piece target of the shard, rebuilt from the other
// pieces in have (have[i] is piece i, nil when missing): manifest.Rebuild
// checks each against its root and reconstructs the shard's bytes from any
// k intact ones, which are then encoded again and cut to the wanted piece.
// The result is checked against its registered root. Too few intact pieces
// is manifest.ErrNotEnoughPieces.
func (s *Shard) RebuildPiece(have [][]byte, target uint32) ([]byte, error) {
	if int(target) >= len(s.Shard.Pieces) {
		return nil, fmt.Errorf("shard %d has pieces 0..%d, not %d", s.Shard.Index, len(s.Shard.Pieces)-1, target)
	}
	m := &manifest.Manifest{
		Version: manifest.FormatVersion, ID: s.DatasetID, ChunkSize: s.ChunkSize,
		Encoding: manifest.EncodingToJSON(s.Encoding),
		// Rebuild reads only the shard it rebuilds; the ones before it stay empty.
		Shards: make([]manifest.Shard, s.Shard.Index+1),
	}
	ms := manifest.Shard{Index: s.Shard.Index, SampleStart: s.Shard.SampleStart, SampleEnd: s.Shard.SampleEnd, Size: s.Shard.SizeBytes}
	for _, p := range s.Shard.Pieces {
		ms.Pieces = append(ms.Pieces, manifest.Piece{Index: p.Index, Root: hex.EncodeToString(p.Root), Size: p.SizeBytes, Chunks: p.ChunkCount})
	}
	m.Shards[s.Shard.Index] = ms
	data, err := m.Rebuild(s.Shard.Index, have)
	if err != nil {
		return nil, err
	}
	encoded, err := manifest.EncodePieces(s.Encoding, data)
	if err != nil {
		return nil, err
	}
	piece := encoded[target]
	if err := s.Check(target, piece); err != nil {
		return nil, fmt.Errorf("rebuilt piece %d: %w", target, err)
	}
	return piece, nil
}

// Route is the pattern of the holders' piece server (storage.NewPieceHandler);
// URL builds its URLs.
const Route = "/pieces/{dataset}/{shard}/{piece}"

// URL is where the provider whose registered endpoint is endpoint serves a
// piece.
func URL(endpoint, datasetID string, shard, piece uint32) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("endpoint %q is not an http(s) URL", endpoint)
	}
	return u.JoinPath("pieces", datasetID, strconv.FormatUint(uint64(shard), 10), strconv.FormatUint(uint64(piece), 10)).String(), nil
}

// Fetcher downloads a piece of size bytes from the provider whose
// registered endpoint is endpoint. What it returns is checked against the
// piece's root before use, so it need not be trusted.
type Fetcher func(ctx context.Context, endpoint, datasetID string, shard, piece uint32, size uint64) ([]byte, error)

// DefaultFetchTimeout bounds one piece download.
const DefaultFetchTimeout = 2 * time.Minute

// HTTPFetcher fetches pieces from holders' piece servers with client
// (http.DefaultClient when nil), each download bounded by timeout.
func HTTPFetcher(client *http.Client, timeout time.Duration) Fetcher {
	return SignedHTTPFetcher(client, timeout, nil)
}

// SignedHTTPFetcher is HTTPFetcher with every request signed by authorize
// (pkg/reqauth), which holders require for the pieces of checkpoint states.
func SignedHTTPFetcher(client *http.Client, timeout time.Duration, authorize func(*http.Request) error) Fetcher {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, endpoint, datasetID string, shard, piece uint32, size uint64) ([]byte, error) {
		u, err := URL(endpoint, datasetID, shard, piece)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if authorize != nil {
			if err := authorize(req); err != nil {
				return nil, err
			}
		}
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", u, res.Status)
		}
		// Never read more than the piece can be: a holder cannot make us
		// buffer an endless body.
		data, err := io.ReadAll(io.LimitReader(res.Body, int64(size)+1))
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", u, err)
		}
		if uint64(len(data)) != size {
			return nil, fmt.Errorf("GET %s: %d bytes, the piece is %d", u, len(data), size)
		}
		return data, nil
	}
}

// ProviderQuerier reads a provider's registration (its public endpoint);
// stakingexttypes.QueryClient satisfies it.
type ProviderQuerier interface {
	Provider(ctx context.Context, in *stakingexttypes.QueryProviderRequest, opts ...grpc.CallOption) (*stakingexttypes.QueryProviderResponse, error)
}

// endpointTTL is how long a provider's registered endpoint is cached.
const endpointTTL = 10 * time.Minute

// Endpoints looks up holders' registered endpoints, caching each for a
// while. Create it with NewEndpoints; it is safe for concurrent use.
type Endpoints struct {
	query ProviderQuerier
	mu    sync.Mutex
	cache map[string]endpoint
}

type endpoint struct {
	url  string
	read time.Time
}

// NewEndpoints returns an endpoint cache reading from q.
func NewEndpoints(q ProviderQuerier) *Endpoints {
	return &Endpoints{query: q, cache: map[string]endpoint{}}
}

// Of returns the endpoint holder registered.
func (e *Endpoints) Of(ctx context.Context, holder string) (string, error) {
	e.mu.Lock()
	c, ok := e.cache[holder]
	e.mu.Unlock()
	if ok && time.Since(c.read) < endpointTTL {
		return c.url, nil
	}
	res, err := e.query.Provider(ctx, &stakingexttypes.QueryProviderRequest{Operator: holder})
	if err != nil {
		return "", fmt.Errorf("reading provider %s: %w", holder, err)
	}
	e.mu.Lock()
	e.cache[holder] = endpoint{url: res.Provider.Endpoint, read: time.Now()}
	e.mu.Unlock()
	return res.Provider.Endpoint, nil
}

// ActiveHolders lists, by piece index, the holders of the shard's active
// replicas, in the order given, leaving out exclude (the operator itself).
func ActiveHolders(replicas []types.Replica, exclude string) map[uint32][]string {
	holders := map[uint32][]string{}
	for _, rep := range replicas {
		if rep.Status == types.REPLICA_STATUS_ACTIVE && rep.Holder != exclude {
			holders[rep.Piece] = append(holders[rep.Piece], rep.Holder)
		}
	}
	return holders
}

// FetchError is one failed attempt to get a piece from a holder. Refused
// says the holder served bytes that do not match the piece's root (as
// opposed to being unreachable or not having it).
type FetchError struct {
	Piece   uint32
	Holder  string
	Refused bool
	Err     error
}

func (e *FetchError) Error() string {
	if e.Refused {
		return fmt.Sprintf("piece %d from %s refused: %v", e.Piece, e.Holder, e.Err)
	}
	return fmt.Sprintf("piece %d from %s: %v", e.Piece, e.Holder, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// Downloader downloads pieces from their holders and checks each.
type Downloader struct {
	Endpoints *Endpoints
	Fetch     Fetcher
}

// Download fetches piece `piece` of the shard from holder and checks it
// against its registered root. Bytes that do not match are a *FetchError
// with Refused set.
func (d Downloader) Download(ctx context.Context, s *Shard, holder string, piece uint32) ([]byte, error) {
	if int(piece) >= len(s.Shard.Pieces) {
		return nil, fmt.Errorf("shard %d has pieces 0..%d, not %d", s.Shard.Index, len(s.Shard.Pieces)-1, piece)
	}
	u, err := d.Endpoints.Of(ctx, holder)
	if err != nil {
		return nil, &FetchError{Piece: piece, Holder: holder, Err: err}
	}
	data, err := d.Fetch(ctx, u, s.DatasetID, s.Shard.Index, piece, s.Shard.Pieces[piece].SizeBytes)
	if err != nil {
		return nil, &FetchError{Piece: piece, Holder: holder, Err: err}
	}
	if err := s.Check(piece, data); err != nil {
		return nil, &FetchError{Piece: piece, Holder: holder, Refused: true, Err: err}
	}
	return data, nil
}

// Gather downloads pieces of the shard into have (have[i] is piece i; the
// ones already there count) until need of them are in hand, trying the
// pieces in sources in order and, for each, its holders in order until one
// serves bytes that match the piece's root. It returns how many pieces are
// in hand and every failed attempt (each a *FetchError).
func (d Downloader) Gather(ctx context.Context, s *Shard, have [][]byte, sources []uint32, holders map[uint32][]string, need int) (n int, failures []error) {
	for _, i := range sources {
		if have[i] != nil {
			n++
		}
	}
	for _, i := range sources {
		if n >= need || ctx.Err() != nil {
			break
		}
		if have[i] != nil {
			continue
		}
		for _, holder := range holders[i] {
			data, err := d.Download(ctx, s, holder, i)
			if err != nil {
				failures = append(failures, err)
				continue
			}
			have[i] = data
			n++
			break
		}
	}
	return n, failures
}
